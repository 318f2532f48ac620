//===- SchedulePrefetchWeights.cpp - L2 prefetch of later phases' weights -===//
//
// A phase's tasks start streaming their weights only once their inputs are
// ready (after a grid barrier or their counters) and their block has
// finished its previous task, so at every phase boundary the memory system
// idles while blocks synchronize and stage activations. Weights do not
// depend on any phase: each phase names (`l2_prefetch`) the data-independent
// weights of the phase `distance` later, and the emitter has every block
// prefetch its share of them into L2 as it enters the phase. Inside a
// task, `tile-stages-ahead` says how much of a packed tile's weight ring is
// asked for before its first step (tile_stages_ahead on the kernel). Routed
// experts' weights are known only once the router has chosen: with
// `routed-tasks-l2` a block asks L2 for its routed down tile as soon as it
// has computed the top-k (l2_routed_tasks on the down phases).
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"

#include "llvm/ADT/SetVector.h"

#include <set>
#include <string>
#include <vector>

namespace mk::schedule {
#define GEN_PASS_DEF_SCHEDULEPREFETCHWEIGHTS
#include "Transforms/Passes.h.inc"
} // namespace mk::schedule

using namespace mlir;
using namespace mk::schedule;

namespace {

/// Weight names in first-use order, each once.
using NameSet = llvm::SetVector<std::string, std::vector<std::string>, std::set<std::string>>;

struct SchedulePrefetchWeightsPass
    : mk::schedule::impl::SchedulePrefetchWeightsBase<SchedulePrefetchWeightsPass> {
  using Base::Base;
  void runOnOperation() override;
};

/// The weights task `t` reads that do not depend on run-time data: every
/// weight its kind's arguments name (the dialect's registry), unless a
/// router picks them at run time (routed experts; shared ones are static).
void staticWeights(TaskOpInterface t, NameSet &out) {
  if (mk::schedule::readsRoutedWeights(t))
    return;
  for (const std::string &w : mk::schedule::taskWeights(t))
    out.insert(w);
}

void SchedulePrefetchWeightsPass::runOnOperation() {
  if (distance < 0) {
    mlir::emitError(getOperation().getLoc(), "schedule-prefetch-weights: distance must be >= 0, got ")
        << static_cast<int64_t>(distance);
    return signalPassFailure();
  }
  // One stage ahead is refused: ptxas 13.0 miscompiles the tile's first
  // copies so (templates/w4a16_gemv.cuh, kGemvAheadStages).
  if (tileStagesAhead < 0 || tileStagesAhead == 1) {
    mlir::emitError(getOperation().getLoc(),
                    "schedule-prefetch-weights: tile-stages-ahead must be 0 (the whole ring) "
                    "or at least 2, got ")
        << static_cast<int64_t>(tileStagesAhead);
    return signalPassFailure();
  }
  for (KernelOp kernel : getOperation().getOps<KernelOp>()) {
    if (streams)
      kernel.setEarlyWeightStreams(true);
    kernel.setTileStagesAhead(tileStagesAhead);
    for (PhaseOp phase : kernel.getBodyBlock().getOps<PhaseOp>()) {
      const bool normed = llvm::any_of(phase.getBodyBlock().getOps<TaskOpInterface>(),
                                       [](TaskOpInterface t) { return t.isEveryBlock(); });
      if ((normFreeStreams && !normed) || (normStreams && normed))
        phase.setEarlyWeightStreams(true);
      if (l2FirstTasks && normed)
        phase.setL2FirstTasks(true);
      if (kdaStateL2 && llvm::any_of(phase.getBodyBlock().getOps<TaskOpInterface>(), [](TaskOpInterface t) {
            return isa<KdaHeadChunkOp>(t.getOperation());
          }))
        phase.setL2FirstTasks(true);
      if (routedTasksL2 && phase.hasRoutedMoeDown())
        phase.setL2RoutedTasks(true);
    }
  }
  if (distance == 0)
    return;
  for (KernelOp kernel : getOperation().getOps<KernelOp>()) {
    SmallVector<PhaseOp> phases(kernel.getBodyBlock().getOps<PhaseOp>());
    for (size_t p = 0; p + size_t(distance) < phases.size(); ++p) {
      NameSet ws;
      // The first phase also asks for its own and the next phases' weights:
      // nothing earlier did.
      for (size_t q = p == 0 ? 0 : p + size_t(distance); q <= p + size_t(distance); ++q)
        for (TaskOpInterface t : phases[q].getBodyBlock().getOps<TaskOpInterface>())
          staticWeights(t, ws);
      ws.remove("");
      if (ws.empty())
        continue;
      SmallVector<StringRef> names(ws.begin(), ws.end());
      phases[p].setL2PrefetchAttr(Builder(&getContext()).getStrArrayAttr(names));
    }
  }
}

} // namespace
