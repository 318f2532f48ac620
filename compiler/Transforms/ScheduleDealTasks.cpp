//===- ScheduleDealTasks.cpp - Deal task instances across phases -----------===//
//
// Sets each phase's `deal_offset`: the grid task instances of the kernel's
// earlier phases, so that the round-robin deal of instances to blocks goes on
// where the previous phase stopped instead of at block 0.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"

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

void ScheduleDealTasksPass::runOnOperation() {
  getOperation().walk([&](KernelOp kernel) {
    int64_t dealt = 0;
    for (PhaseOp phase : kernel.getBodyBlock().getOps<PhaseOp>()) {
      if (continueDeal && dealt > kMaxDealOffset) {
        phase.emitOpError("more than ") << kMaxDealOffset
                                        << " task instances before this phase";
        return signalPassFailure();
      }
      phase.setDealOffset(continueDeal ? dealt : 0);
      dealt += phase.getNumGridInstances();
    }
  });
}

} // namespace
