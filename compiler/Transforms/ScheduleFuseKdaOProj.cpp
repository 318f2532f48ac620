//===- ScheduleFuseKdaOProj.cpp - Fold the KDA output projection in -------===//
//
// A KDA layer's output projection `attn = bf16(o) @ W_o` is a split-K GEMV
// over o [heads * head_dim]. Each gated-delta task (`kda_head_chunk`) makes
// `chunk` consecutive values of o, which are the same rows of W_o: the task
// can multiply them with those rows itself and add the partial products to
// the projection's fp32 sums, so the projection needs no phase of its own,
// no wait for every head, and no second task ramp on the critical path.
// This pass moves such a GEMV into its producer: the `kda_head_chunk` task
// gets `o_weight`, `o_acc` and `o_n` and accumulates into the sums; the
// GEMV task goes, and with it a phase it leaves empty. A GEMV qualifies when
// it reads exactly the task's o (whole, from offset 0) with the
// `atomic_f32` epilogue into one output, and the task's chunks are whole
// 16-row steps of 128-wide tiles (the row-slice product,
// templates/w4a16_gemv.cuh: `chunk` % 16 == 0, N % 128 == 0, group % 16 ==
// 0), and the staged rows fit the kernel's shared memory (`max_shared_bytes`).
// Opt-in (`enabled=true`): measured no faster on the H200
// (docs/perf-notes.md, #60-#62).
// Runs after schedule-partition-work (which sets `chunk`) and before
// schedule-barriers-to-counters. The fold is a rewrite pattern on the GEMV
// (FoldOProjIntoKdaTask), applied by the greedy driver: a task folded once
// has `o_weight` and takes no second projection.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"
#include "Transforms/TaskRewrites.h"
#include "mk/PackedLayout.h"

namespace mk::schedule {
#define GEN_PASS_DEF_SCHEDULEFUSEKDAOPROJ
#include "Transforms/Passes.h.inc"
} // namespace mk::schedule

using namespace mlir;
using namespace mk::schedule;

namespace {

struct ScheduleFuseKdaOProjPass
    : mk::schedule::impl::ScheduleFuseKdaOProjBase<ScheduleFuseKdaOProjPass> {
  using Base::Base;
  void runOnOperation() override;
};

/// Whether GEMV `g` is the whole output projection of KDA task `kda`'s o in
/// a form the row-slice product computes, with the task's shared memory
/// (its own and the staged rows of W_o) inside the kernel's budget.
bool isFusable(KernelOp kernel, TaskOpInterface kda, TaskOpInterface g) {
  // A GEMV that stages a gated norm of its input (schedule-fuse-kda-gated-
  // norm) multiplies the norm's values, not o's.
  if (g.getStrArg("epilogue") != "atomic_f32" || g.getIntArg("input_offset") != 0 ||
      g.getArg("gated_norm_gate"))
    return false;
  SmallVector<std::string> weights = g.getStrArrayArg("weights"),
                           outputs = g.getStrArrayArg("outputs");
  SmallVector<int64_t> ns = g.getIntArrayArg("n");
  if (weights.size() != 1 || outputs.size() != 1 || ns.size() != 1)
    return false;
  const int64_t c = kda.getIntArg("heads") * kda.getIntArg("head_dim");
  const int64_t chunk = kda.getIntArg("chunk"), group = g.getIntArg("group");
  const TaskAccesses gAcc = taskAccesses(g);
  if (g.getIntArg("k") != c || chunk <= 0 || chunk % 16 || ns[0] % 128 || group <= 0 ||
      group % 16 || gAcc.accumulates.size() != 1 || gAcc.accumulates[0] != outputs[0])
    return false;
  // 1 KB of the budget stays for the kernel's static shared memory.
  const int64_t budget = kernel.getMaxSharedBytes();
  return !budget || 4 * mk::kdaOProjSmemFloats(kernel.getThreads(), kda.getIntArg("head_dim"),
                                               chunk, ns[0]) <=
                        budget - 1024;
}

/// The KDA task of `kernel` that writes buffer `o` and has no projection
/// folded in yet (null if none).
TaskOpInterface unfoldedProducer(KernelOp kernel, StringRef o) {
  TaskOpInterface found;
  kernel.walk([&](KdaHeadChunkOp k) {
    TaskOpInterface t = k;
    if (!found && t.getStrArg("o") == o && t.getStrArg("o_weight").empty())
      found = t;
  });
  return found;
}

/// schedule.w4a16_gemv (a KDA layer's output projection) -> `o_weight`,
/// `o_acc` and `o_n` on the kda_head_chunk task producing its input; the
/// GEMV goes, and a phase it leaves without tasks goes with the barrier in
/// front of it.
struct FoldOProjIntoKdaTask : OpRewritePattern<W4A16GemvOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(W4A16GemvOp op, PatternRewriter &rewriter) const override {
    TaskOpInterface g = op;
    auto kernel = op->getParentOfType<KernelOp>();
    if (!kernel)
      return rewriter.notifyMatchFailure(op, "not inside a schedule.kernel");
    TaskOpInterface kda = unfoldedProducer(kernel, g.getStrArg("input"));
    if (!kda)
      return rewriter.notifyMatchFailure(op, "its input is no unfolded KDA task's o");
    if (!isFusable(kernel, kda, g) || hasCounters(kernel, g.getName()))
      return rewriter.notifyMatchFailure(op, "not a projection the row-slice product folds");
    Builder &b = rewriter;
    auto kdaOp = cast<KdaHeadChunkOp>(kda.getOperation());
    rewriter.modifyOpInPlace(kda, [&] {
      kdaOp.setOWeightAttr(b.getStringAttr(g.getStrArrayArg("weights")[0]));
      kdaOp.setOAccAttr(FlatSymbolRefAttr::get(b.getContext(), g.getStrArrayArg("outputs")[0]));
      kdaOp.setONAttr(b.getI64IntegerAttr(g.getIntArrayArg("n")[0]));
      // `o_acc` says that the task now accumulates into the sums; its
      // instances stream the projection's weights too (`bytes` counts all
      // instances together, as the projection's does).
      kda.setBytes(kda.getBytes() + g.getBytes());
    });
    eraseTaskAndEmptiedPhase(rewriter, op);
    return success();
  }
};

void ScheduleFuseKdaOProjPass::runOnOperation() {
  if (!enabled)
    return;
  RewritePatternSet patterns(&getContext());
  patterns.add<FoldOProjIntoKdaTask>(&getContext());
  // Program order: a task's projection is the first GEMV reading its o.
  if (failed(applyTaskRewrites(getOperation(), std::move(patterns))))
    signalPassFailure();
}

} // namespace
