//===- SchedulePrologueWaits.cpp - Waits after the weight copies start ----===//
//
// A task instance that waits for a counter before it starts also starts its
// weight stream only after the wait, although its weights depend on nothing
// the counter guards. An MoE down task waits for its expert's gate and up
// sums (the slowest of the expert's gate/up tiles), which it needs only to
// stage silu(gate) * up in its tile's prologue, after the tile has asked
// for its weights. This pass marks such a wait `in_prologue`: the emitted
// task requests its weight copies, then waits, then stages its input, so
// that the stream's start (the scales' and the first chunk's round trips)
// runs under the wait. A wait qualifies when its task is a `moe_down` and
// every task that signals its counter writes, of what the down task reads,
// only its `sums` (the router's counter, where schedule-poll-router-logits
// left one, decides the expert and so the weights: it stays before the
// task).
//
// With `attention` (on by default) the same for an MLA attention chunk's wait for the
// absorbed queries (`q_abs`): its first cache rows, written by earlier
// steps or (the new row) by the rope/append task whose wait stays before
// the task, are asked for before it. With `gemv` (on by default) for a W4A16 GEMV's
// wait for its input where the input is in global memory (the tile stages
// it: the output projections after the KDA heads and the MLA combine): its
// first weights are asked for before it. With `absorb=true` for an MLA
// query absorption's wait for the projected queries (`q`): its first rows
// of W_kv_b are loaded before it (opt-in: measured no faster, #155). With
// `combine=true` for an MLA combine's wait for the attention chunks'
// partials: its first W_v weights are asked for before it (opt-in: measured
// slower, #158).
// Each kind's getPrologueGuardedBuffers (TaskOpInterface) says which
// buffers its waits may guard there; the options say which kinds' waits
// move. A task gets one prologue wait per buffer it stages, two at most: a
// GEMV staging a gated norm of its input (schedule-fuse-kda-gated-norm)
// waits there for the gated delta's o and for the gate; the emitter runs
// the two as one (mk::BothWaits).
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace mk::schedule {
#define GEN_PASS_DEF_SCHEDULEPROLOGUEWAITS
#include "Transforms/Passes.h.inc"
} // namespace mk::schedule

using namespace mlir;
using namespace mk::schedule;

namespace {

struct SchedulePrologueWaitsPass
    : mk::schedule::impl::SchedulePrologueWaitsBase<SchedulePrologueWaitsPass> {
  using Base::Base;
  void runOnOperation() override;
};

/// Whether `producer` writes or accumulates into one of `staged` (what
/// `consumer` stages after its prologue wait) and nothing else `consumer`
/// reads.
bool writesOnlyStaged(TaskOpInterface producer, TaskOpInterface consumer,
                      ArrayRef<StringRef> staged) {
  const TaskAccesses p = taskAccesses(producer);
  return llvm::any_of(staged,
                      [&](StringRef b) {
                        return llvm::is_contained(p.writes, b) ||
                               llvm::is_contained(p.accumulates, b);
                      }) &&
         guardedBesides(producer, consumer, staged).empty();
}

void SchedulePrologueWaitsPass::runOnOperation() {
  if (!enabled)
    return;
  for (KernelOp kernel : getOperation().getOps<KernelOp>()) {
    llvm::StringMap<TaskOpInterface> tasks;
    llvm::StringSet<> sharedBufs; // a GEMV of a shared input has no staging to wait before
    for (BufferOp b : kernel.getBodyBlock().getOps<BufferOp>())
      if (b.getSpace() == "shared")
        sharedBufs.insert(b.getSymName());
    llvm::StringMap<SmallVector<StringRef>> signallers; // counter -> tasks
    kernel.walk([&](Operation *op) {
      if (auto t = dyn_cast<TaskOpInterface>(op))
        tasks[t.getName()] = t;
      else if (auto s = dyn_cast<SignalOp>(op))
        signallers[s.getCounter()].push_back(s.getTask());
    });
    for (PhaseOp phase : kernel.getBodyBlock().getOps<PhaseOp>()) {
      // Up to maxPrologueWaits per task (those the input already has
      // count), each covering a staged buffer no earlier one covers: a
      // gated norm GEMV's two go to o and to the gate.
      llvm::StringMap<unsigned> marked;
      llvm::StringMap<llvm::StringSet<>> covered;
      auto coveredBy = [&](WaitOp w, TaskOpInterface t) {
        SmallVector<StringRef> bufs;
        auto it = signallers.find(w.getCounter());
        if (it == signallers.end())
          return bufs;
        for (StringRef b : t.getPrologueGuardedBuffers())
          for (StringRef p : it->second)
            if (TaskOpInterface producer = tasks.lookup(p)) {
              const TaskAccesses a = taskAccesses(producer);
              if (llvm::is_contained(a.writes, b) || llvm::is_contained(a.accumulates, b)) {
                bufs.push_back(b);
                break;
              }
            }
        return bufs;
      };
      for (WaitOp w : phase.getBodyBlock().getOps<WaitOp>())
        if (w.getInPrologue()) {
          ++marked[w.getTask()];
          if (TaskOpInterface t = tasks.lookup(w.getTask()))
            for (StringRef b : coveredBy(w, t))
              covered[w.getTask()].insert(b);
        }
      for (WaitOp w : phase.getBodyBlock().getOps<WaitOp>()) {
        TaskOpInterface t = tasks.lookup(w.getTask());
        if (!t || w.getInPrologue() || marked.lookup(w.getTask()) >= maxPrologueWaits(t) ||
            (isa<MlaAttentionChunkOp>(t.getOperation()) && !attention) ||
            (isa<MlaQAbsorbOp>(t.getOperation()) && !absorb) ||
            (isa<MlaCombineWvOp>(t.getOperation()) && !combine) ||
            (isa<W4A16GemvOp>(t.getOperation()) &&
             (!gemv || sharedBufs.contains(t.getStrArg("input")))))
          continue;
        const SmallVector<StringRef> staged = t.getPrologueGuardedBuffers();
        auto it = signallers.find(w.getCounter());
        if (staged.empty() || it == signallers.end() ||
            !llvm::all_of(it->second, [&](StringRef p) {
              TaskOpInterface producer = tasks.lookup(p);
              return producer && writesOnlyStaged(producer, t, staged);
            }))
          continue;
        const SmallVector<StringRef> bufs = coveredBy(w, t);
        llvm::StringSet<> &done = covered[w.getTask()];
        if (llvm::all_of(bufs, [&](StringRef b) { return done.contains(b); }))
          continue; // what it guards is waited for in the prologue already
        w.setInPrologue(true);
        ++marked[w.getTask()];
        for (StringRef b : bufs)
          done.insert(b);
      }
    }
  }
}

} // namespace
