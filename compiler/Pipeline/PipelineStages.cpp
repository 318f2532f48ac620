//===- PipelineStages.cpp - Named stages of the compiler pipeline ---------===//

#include "Pipeline/PipelineStages.h"

#include <vector>

using namespace mk;

/// Stages live in a function-local static: hooks may run before main().
static std::vector<PipelineStage> &stageList() {
  static std::vector<PipelineStage> stages;
  return stages;
}

void mk::registerPipelineStage(PipelineStage stage) {
  if (lookupPipelineStage(stage.name))
    return;
  stageList().push_back(std::move(stage));
}

llvm::ArrayRef<PipelineStage> mk::getPipelineStages() { return stageList(); }

const PipelineStage *mk::lookupPipelineStage(llvm::StringRef name) {
  for (const PipelineStage &s : stageList())
    if (s.name == name)
      return &s;
  return nullptr;
}

int mk::getPipelineStageIndex(llvm::StringRef name) {
  const std::vector<PipelineStage> &stages = stageList();
  for (size_t i = 0; i < stages.size(); ++i)
    if (stages[i].name == name)
      return static_cast<int>(i);
  return -1;
}

bool mk::buildPipelineUpTo(mlir::OpPassManager &pm,
                           llvm::StringRef lastStage) {
  int last = getPipelineStageIndex(lastStage);
  if (last < 0)
    return false;
  for (int i = 0; i <= last; ++i)
    if (stageList()[i].addPasses)
      stageList()[i].addPasses(pm);
  return true;
}
