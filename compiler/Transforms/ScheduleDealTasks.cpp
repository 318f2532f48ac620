//===- ScheduleDealTasks.cpp - Deal task instances across phases -----------===//
//
// Sets each phase's `deal_offset`: the grid task instances of the kernel's
// earlier phases, so that the round-robin deal of instances to blocks goes on
// where the previous phase stopped instead of at block 0. With claim=true,
// sparse phases of waiting tasks claim their instances from a counter
// instead (the phase's `claim`).
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringSet.h"

namespace mk::schedule {
#define GEN_PASS_DEF_SCHEDULEDEALTASKS
#include "Transforms/Passes.h.inc"
} // namespace mk::schedule

using namespace mlir;
using namespace mk::schedule;

namespace {

struct ScheduleDealTasksPass
    : mk::schedule::impl::ScheduleDealTasksBase<ScheduleDealTasksPass> {
  using Base::Base;
  void runOnOperation() override;
};

/// The largest offset the emitted code carries (an unsigned 32-bit count).
constexpr int64_t kMaxDealOffset = (int64_t(1) << 31) - 1;

/// Whether `phase` claims its instances under claim=true: it fills at most
/// 90% of the grid's `blocks` (so some blocks have none, and which ones
/// matters), has no every-block task, no early stream or L2 request of a
/// first instance, and every grid task waits on a counter (so a block's
/// earlier work, not the phase's entry, decides when it can start one).
bool claims(PhaseOp phase, int64_t blocks) {
  if (phase.getEarlyWeightStreams() || phase.getL2FirstTasks())
    return false;
  llvm::StringSet<> waiting;
  for (WaitOp w : phase.getBodyBlock().getOps<WaitOp>())
    waiting.insert(w.getTask());
  int64_t count = 0;
  for (TaskOpInterface t : phase.getBodyBlock().getOps<TaskOpInterface>()) {
    if (t.isEveryBlock() || !waiting.contains(t.getName()))
      return false;
    count += t.getCount();
  }
  return count > 0 && count * 10 <= blocks * 9;
}

void ScheduleDealTasksPass::runOnOperation() {
  getOperation().walk([&](KernelOp kernel) {
    int64_t dealt = 0;
    const bool streamsEverywhere = kernel.getEarlyWeightStreams();
    llvm::StringSet<> symbols;
    for (Operation &op : kernel.getBodyBlock())
      if (auto name = op.getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName()))
        symbols.insert(name.getValue());
    auto phases = llvm::to_vector(kernel.getBodyBlock().getOps<PhaseOp>());
    for (PhaseOp phase : phases) {
      if (claim && !streamsEverywhere && claims(phase, kernel.getTargetSms())) {
        std::string name = phase.getName().str() + ".claim";
        for (int i = 1; symbols.contains(name); ++i)
          name = phase.getName().str() + ".claim." + std::to_string(i);
        symbols.insert(name);
        // Counters sit after the buffers, before the first phase.
        OpBuilder b(phases.front());
        auto counter = b.create<CounterOp>(phase.getLoc(), b.getStringAttr(name),
                                           b.getI64IntegerAttr(1), b.getI64IntegerAttr(-1));
        phase.setClaimAttr(FlatSymbolRefAttr::get(counter.getSymNameAttr()));
      }
      if (continueDeal && dealt > kMaxDealOffset) {
        phase.emitOpError("more than ") << kMaxDealOffset
                                        << " task instances before this phase";
        return signalPassFailure();
      }
      phase.setDealOffset(continueDeal ? dealt : 0);
      for (TaskOpInterface t : phase.getBodyBlock().getOps<TaskOpInterface>())
        if (!t.isEveryBlock())
          dealt += t.getCount();
    }
  });
}

} // namespace
