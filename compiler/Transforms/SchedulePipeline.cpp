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
  pm.addPass(createScheduleFuseKdaGatedNorm());
  pm.addPass(createScheduleFuseArgmax());
  pm.addPass(createScheduleTileWeights());
  pm.addPass(createSchedulePrefetchWeights());
  pm.addPass(createScheduleBarriersToCounters());
  pm.addPass(createSchedulePollRouterLogits());
  pm.addPass(createSchedulePrologueWaits());
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
  // The summary heads the stage's IR wherever it is written (--emit,
  // --dump-dir): the phases, their tasks and bytes at a glance.
  s.header = mk::schedule::scheduleSummary;
  registerPipelineStage(std::move(s));
}
