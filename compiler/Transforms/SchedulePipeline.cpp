//===- SchedulePipeline.cpp - The "schedule" stage and pass registration --===//

#include "Pipeline/PipelineStages.h"
#include "Transforms/Passes.h"

using namespace mlir;

void mk::schedule::buildSchedulePipeline(OpPassManager &pm) {
  pm.addPass(createGraphFuseProjections());
  pm.addPass(createGraphAbsorbMla());
  pm.addPass(createScheduleFormPhases());
  pm.addPass(createSchedulePartitionWork());
  pm.addPass(createScheduleFuseKdaOProj());
  pm.addPass(createScheduleTileWeights());
  pm.addPass(createSchedulePrefetchWeights());
  pm.addPass(createScheduleBarriersToCounters());
  pm.addPass(createScheduleDealTasks());
  pm.addPass(createSchedulePlanWorkspace());
}

void mk::schedule::registerScheduleTransformsPasses() {
  registerSchedulePasses();
}

void mk::schedule::registerSchedulePipelineStages() {
  PipelineStage s;
  s.name = "schedule";
  s.summary = "phases, tasks, barriers, counters and workspace "
              "(schedule dialect)";
  s.addPasses = [](OpPassManager &pm) { buildSchedulePipeline(pm); };
  s.emit = [](ModuleOp module, const EmitOptions &options,
              std::string &error) -> LogicalResult {
    std::string text;
    llvm::raw_string_ostream os(text);
    std::string summary;
    llvm::raw_string_ostream ss(summary);
    printScheduleSummary(module, ss);
    SmallVector<StringRef> lines;
    StringRef(summary).rtrim('\n').split(lines, '\n');
    for (StringRef line : lines)
      os << "// " << line << "\n";
    module.print(os);
    if (options.outputPath == "-" || options.outputPath.empty()) {
      (options.stdoutStream ? *options.stdoutStream : llvm::outs()) << text;
      return success();
    }
    std::error_code ec;
    llvm::raw_fd_ostream out(options.outputPath, ec);
    if (ec) {
      error = "cannot write " + options.outputPath + ": " + ec.message();
      return failure();
    }
    out << text;
    return success();
  };
  registerPipelineStage(std::move(s));
}
