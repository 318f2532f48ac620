//===- ScheduleFuseKdaGatedNorm.cpp - The gated norm into the staging -----===//
//
// A released KDA layer's gated output norm (`kda_gated_norm`, one task per
// head) sits between the gated delta rule's output o and the output
// projection, a split-K W4A16 GEMV whose instances each stage a k-slice of
// the norm's output z. Where each slice is whole heads, the GEMV can
// compute them itself while it stages: this pass gives the GEMV the norm's
// gate, weight, epsilon and head size (`gated_norm_*`), makes o its input,
// and erases the norm task, a phase it leaves empty (with the barrier in
// front of it) and the z buffer. The pass runs before
// schedule-barriers-to-counters, which then places the GEMV's waits on the
// gated delta's and the gate's producers: one signal, poll and L2 round
// trip less on the layer's critical path. The bits staged are the norm
// task's (kda_gated_norm_stage, templates/kda.cuh). Opt-in (`enabled=true`).
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"
#include "Transforms/TaskRewrites.h"

namespace mk::schedule {
#define GEN_PASS_DEF_SCHEDULEFUSEKDAGATEDNORM
#include "Transforms/Passes.h.inc"
} // namespace mk::schedule

using namespace mlir;
using namespace mk::schedule;

namespace {

struct ScheduleFuseKdaGatedNormPass
    : mk::schedule::impl::ScheduleFuseKdaGatedNormBase<ScheduleFuseKdaGatedNormPass> {
  using Base::Base;
  void runOnOperation() override;
};

/// The buffer of `kernel` named `name` (null if none).
BufferOp bufferNamed(KernelOp kernel, StringRef name) {
  for (BufferOp b : kernel.getBodyBlock().getOps<BufferOp>())
    if (b.getSymName() == name)
      return b;
  return {};
}

/// The tasks of `kernel` that read, write or accumulate into buffer `b`.
SmallVector<TaskOpInterface> usersOf(KernelOp kernel, StringRef b) {
  SmallVector<TaskOpInterface> out;
  kernel.walk([&](TaskOpInterface t) {
    const TaskAccesses a = taskAccesses(t);
    if (llvm::is_contained(a.reads, b) || llvm::is_contained(a.writes, b) ||
        llvm::is_contained(a.accumulates, b))
      out.push_back(t);
  });
  return out;
}

/// schedule.kda_gated_norm -> `gated_norm_*` on the one W4A16 GEMV that
/// stages its output; the norm, a phase it leaves empty and its output
/// buffer go.
struct FoldGatedNormIntoStaging : OpRewritePattern<KdaGatedNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(KdaGatedNormOp norm, PatternRewriter &rewriter) const override {
    auto kernel = norm->getParentOfType<KernelOp>();
    if (!kernel)
      return rewriter.notifyMatchFailure(norm, "not inside a schedule.kernel");
    const StringRef z = norm.getOutput();
    // z's users: the norm that writes it and one GEMV that stages it.
    W4A16GemvOp gemv;
    for (TaskOpInterface t : usersOf(kernel, z))
      if (t.getOperation() != norm.getOperation()) {
        auto g = dyn_cast<W4A16GemvOp>(t.getOperation());
        gemv = gemv || !g ? W4A16GemvOp() : g;
        if (!gemv)
          break;
      }
    if (!gemv || gemv.getInput() != z || gemv.getGatedNormGateAttr())
      return rewriter.notifyMatchFailure(norm, "its output is not one GEMV's input alone");
    // The partition's k-slices (ksplit set: schedule-partition-work ran)
    // are whole heads; a head is whole lane steps (kda_gated_norm_stage).
    const int64_t dk = int64_t(norm.getHeadDim()), k = int64_t(gemv.getK());
    if (!gemv.getKsplit())
      return rewriter.notifyMatchFailure(norm, "the GEMV is not partitioned yet");
    const int64_t slice = k / int64_t(*gemv.getKsplit());
    if (gemv.getWeights().size() != 1 || gemv.getInputOffset().value_or(0) != 0 ||
        k != int64_t(norm.getHeads()) * dk || k % slice || slice % dk || dk % 32)
      return rewriter.notifyMatchFailure(norm, "the GEMV's k-slices are not whole heads (of a "
                                               "multiple of 32) of one weight from offset 0");
    BufferOp in = bufferNamed(kernel, norm.getInput()),
             gate = bufferNamed(kernel, norm.getGate());
    if (!in || !gate || in.getSpace() == "shared" || gate.getSpace() == "shared" ||
        in.getDtype() != "bf16" || gate.getDtype() != "bf16")
      return rewriter.notifyMatchFailure(norm, "o and the gate are not bf16 in global memory");
    TaskOpInterface normTask = norm;
    if (hasCounters(kernel, normTask.getName()) ||
        hasCounters(kernel, TaskOpInterface(gemv).getName()))
      return rewriter.notifyMatchFailure(norm, "counters are placed");
    Builder &b = rewriter;
    rewriter.modifyOpInPlace(gemv, [&] {
      gemv.setInputAttr(norm.getInputAttr());
      gemv.setGatedNormGateAttr(norm.getGateAttr());
      gemv.setGatedNormWeightAttr(norm.getWeightAttr());
      gemv.setGatedNormEpsAttr(norm.getEpsAttr());
      gemv.setGatedNormHeadDimAttr(b.getI64IntegerAttr(dk));
      // Each slice reads the gate beside o.
      TaskOpInterface(gemv).setBytes(TaskOpInterface(gemv).getBytes() + 2 * k);
      // z, gone, from its listed reads (its arguments name o and the gate).
      ArrayAttr listed = TaskOpInterface(gemv).getReads();
      SmallVector<Attribute> reads;
      for (Attribute r : listed)
        if (cast<SymbolRefAttr>(r).getRootReference().getValue() != z)
          reads.push_back(r);
      if (reads.size() != listed.size())
        gemv->setAttr("reads", b.getArrayAttr(reads));
    });
    eraseTaskAndEmptiedPhase(rewriter, norm);
    if (BufferOp zb = bufferNamed(kernel, z))
      rewriter.eraseOp(zb);
    return success();
  }
};

void ScheduleFuseKdaGatedNormPass::runOnOperation() {
  if (!enabled)
    return;
  RewritePatternSet patterns(&getContext());
  patterns.add<FoldGatedNormIntoStaging>(&getContext());
  if (failed(applyTaskRewrites(getOperation(), std::move(patterns))))
    signalPassFailure();
}

} // namespace
