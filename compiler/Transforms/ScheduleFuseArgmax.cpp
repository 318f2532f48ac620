//===- ScheduleFuseArgmax.cpp - The argmax into the LM head's tiles -------===//
//
// A whole model ends with the greedy argmax of the LM head's logits: the
// `argmax` task (40 slices) waits for every LM-head tile, reads the logits
// back and merges the slices' best through a scratch key. Each LM-head
// tile can merge the argmax of the columns it just stored instead (the
// same key, the same scratch, the last of the tiles writing the index):
// this pass gives the GEMV `argmax_output` and `argmax_scratch` and erases
// the argmax task and a phase it leaves empty (with the barrier in front of
// it): one dependent hop (signal, poll, the logits' round trip) less at the
// end of every token. The index is the argmax task's, bit for bit: both
// read the stored bf16 logits (templates/elementwise.cuh, argmax_of_tile).
// Runs after schedule-partition-work (which sets `ksplit`) and before
// schedule-barriers-to-counters. Opt-in (`enabled=true`).
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"
#include "Transforms/TaskRewrites.h"

namespace mk::schedule {
#define GEN_PASS_DEF_SCHEDULEFUSEARGMAX
#include "Transforms/Passes.h.inc"
} // namespace mk::schedule

using namespace mlir;
using namespace mk::schedule;

namespace {

struct ScheduleFuseArgmaxPass
    : mk::schedule::impl::ScheduleFuseArgmaxBase<ScheduleFuseArgmaxPass> {
  using Base::Base;
  void runOnOperation() override;
};

/// schedule.argmax -> `argmax_*` on the one W4A16 GEMV that writes its
/// input; the argmax task and a phase it leaves empty go.
struct FoldArgmaxIntoTiles : OpRewritePattern<ArgmaxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ArgmaxOp argmax, PatternRewriter &rewriter) const override {
    auto kernel = argmax->getParentOfType<KernelOp>();
    if (!kernel)
      return rewriter.notifyMatchFailure(argmax, "not inside a schedule.kernel");
    const StringRef logits = argmax.getInput();
    // The one task that writes the logits: a GEMV storing them whole.
    W4A16GemvOp gemv;
    int writers = 0;
    kernel.walk([&](TaskOpInterface t) {
      const TaskAccesses a = taskAccesses(t);
      if (llvm::is_contained(a.writes, logits) || llvm::is_contained(a.accumulates, logits)) {
        ++writers;
        gemv = dyn_cast<W4A16GemvOp>(t.getOperation());
      }
    });
    if (writers != 1 || !gemv)
      return rewriter.notifyMatchFailure(argmax, "its input is not one GEMV's output alone");
    if (gemv.getArgmaxOutputAttr())
      return rewriter.notifyMatchFailure(argmax, "the GEMV merges an argmax already");
    if (!gemv.getKsplit())
      return rewriter.notifyMatchFailure(argmax, "the GEMV is not partitioned yet");
    // The verifier's conditions on a GEMV that merges an argmax.
    if (std::string why = argmaxOfTilesRefusal(gemv); !why.empty())
      return rewriter.notifyMatchFailure(argmax, why);
    auto ns = argInts(gemv.getN());
    if (ns.front() != int64_t(argmax.getN()))
      return rewriter.notifyMatchFailure(argmax, "the GEMV's columns are not the argmax's n");
    // The GEMV's tiles now merge into the scratch and may write the token:
    // the GEMV must come before the argmax, and every other task touching
    // the scratch or the token (the scratch's zeroing) in an earlier phase,
    // which the barriers or counters then order before the tiles.
    llvm::DenseMap<Operation *, int> phaseIndex;
    int next = 0;
    for (PhaseOp p : kernel.getBodyBlock().getOps<PhaseOp>())
      phaseIndex[p.getOperation()] = next++;
    auto phaseOf = [&](Operation *t) { return phaseIndex.lookup(t->getParentOfType<PhaseOp>()); };
    const int gemvPhase = phaseOf(gemv);
    if (gemvPhase >= phaseOf(argmax))
      return rewriter.notifyMatchFailure(argmax, "the GEMV does not run before the argmax");
    const StringRef scratch = argmax.getScratch(), token = argmax.getOutput();
    bool ordered = true;
    kernel.walk([&](TaskOpInterface t) {
      if (t.getOperation() == gemv.getOperation() || t.getOperation() == argmax.getOperation())
        return;
      const TaskAccesses a = taskAccesses(t);
      for (const SmallVector<StringRef> *set : {&a.reads, &a.writes, &a.accumulates})
        if ((llvm::is_contained(*set, scratch) || llvm::is_contained(*set, token)) &&
            phaseOf(t) >= gemvPhase)
          ordered = false;
    });
    if (!ordered)
      return rewriter.notifyMatchFailure(argmax, "a task touching the scratch or the token "
                                                 "does not run before the GEMV's phase");
    TaskOpInterface argmaxTask = argmax;
    if (hasCounters(kernel, argmaxTask.getName()) ||
        hasCounters(kernel, TaskOpInterface(gemv).getName()))
      return rewriter.notifyMatchFailure(argmax, "counters are placed");
    rewriter.modifyOpInPlace(gemv, [&] {
      gemv.setArgmaxOutputAttr(argmax.getOutputAttr());
      gemv.setArgmaxScratchAttr(argmax.getScratchAttr());
    });
    eraseTaskAndEmptiedPhase(rewriter, argmax);
    return success();
  }
};

void ScheduleFuseArgmaxPass::runOnOperation() {
  if (!enabled)
    return;
  RewritePatternSet patterns(&getContext());
  patterns.add<FoldArgmaxIntoTiles>(&getContext());
  if (failed(applyTaskRewrites(getOperation(), std::move(patterns))))
    signalPassFailure();
}

} // namespace
