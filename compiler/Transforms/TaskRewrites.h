//===- TaskRewrites.h - What the schedule's fold patterns share -*- C++ -*-===//
//
// The rewrite patterns that fold one task into another
// (schedule-fuse-kda-o-proj, schedule-fuse-kda-gated-norm) erase the task
// they fold away and the phase that leaves empty, check that no counters
// name a task yet, and run in program order.
//
//===----------------------------------------------------------------------===//

#ifndef MK_TRANSFORMS_TASKREWRITES_H
#define MK_TRANSFORMS_TASKREWRITES_H

#include "mk/Dialect/Schedule/ScheduleOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mk::schedule {

/// Erases task `task`, and its phase where that leaves the phase without
/// tasks (with the barrier in front of it).
inline void eraseTaskAndEmptiedPhase(mlir::PatternRewriter &rewriter, mlir::Operation *task) {
  auto phase = task->getParentOfType<PhaseOp>();
  rewriter.eraseOp(task);
  if (phase && phase.getBody().front().getOps<TaskOpInterface>().empty()) {
    if (auto barrier = llvm::dyn_cast_or_null<BarrierOp>(phase->getPrevNode()))
      rewriter.eraseOp(barrier);
    rewriter.eraseOp(phase);
  }
}

/// Whether a signal or wait of `kernel` names task `t` (none exist before
/// schedule-barriers-to-counters; a hand-written schedule may have them).
inline bool hasCounters(KernelOp kernel, llvm::StringRef t) {
  bool found = false;
  kernel.walk([&](mlir::Operation *op) {
    if (auto s = llvm::dyn_cast<SignalOp>(op))
      found |= s.getTask() == t;
    else if (auto w = llvm::dyn_cast<WaitOp>(op))
      found |= w.getTask() == t;
  });
  return found;
}

/// Applies `patterns` to `module` in program order and without region
/// simplification: the schedule's ops (which have no folders) are kept as
/// they are but for the rewrites.
inline mlir::LogicalResult applyTaskRewrites(mlir::ModuleOp module,
                                             mlir::RewritePatternSet &&patterns) {
  mlir::GreedyRewriteConfig config;
  config.useTopDownTraversal = true;
  config.enableRegionSimplification = mlir::GreedySimplifyRegionLevel::Disabled;
  return mlir::applyPatternsAndFoldGreedily(module, std::move(patterns), config);
}

} // namespace mk::schedule

#endif // MK_TRANSFORMS_TASKREWRITES_H
