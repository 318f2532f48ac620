//===- PipelineStages.cpp - Named stages of the compiler pipeline ---------===//

#include "Pipeline/PipelineStages.h"

#include "mlir/Pass/Pass.h"

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

bool mk::addPassOption(llvm::StringRef spec, PassOptionMap &options,
                       std::string &error) {
  auto [pass, opts] = spec.split('=');
  if (pass.empty() || opts.empty()) {
    error = "--pass-option expects PASS=OPTIONS (e.g. "
            "schedule-form-phases=threads=512), got '" + spec.str() + "'";
    return false;
  }
  std::string &s = options[pass.str()];
  s += (s.empty() ? "" : " ") + opts.str();
  return true;
}

mlir::LogicalResult mk::applyPassOptions(mlir::OpPassManager &pm,
                                         const PassOptionMap &options,
                                         std::set<std::string> &applied,
                                         std::string &error) {
  for (mlir::Pass &pass : pm.getPasses()) {
    auto it = options.find(pass.getArgument().str());
    if (it == options.end())
      continue;
    if (mlir::failed(pass.initializeOptions(it->second, [&](const llvm::Twine &msg) {
          // Empty when llvm::cl printed the reason itself (a bad value).
          if (std::string why = llvm::StringRef(msg.str()).trim().str(); !why.empty())
            error = "pass '" + it->first + "': " + why;
          return mlir::failure();
        }))) {
      if (error.empty())
        error = "pass '" + it->first + "' does not accept '" + it->second + "'";
      return mlir::failure();
    }
    applied.insert(it->first);
  }
  return mlir::success();
}
