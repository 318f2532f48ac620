//===- SchedulePlanWorkspace.cpp - Workspace offsets by liveness ----------===//
//
// One arena holds every workspace buffer. A buffer is live from the first to
// the last barrier interval (segment) whose tasks touch it; two buffers live
// in disjoint segments are a barrier apart and may share memory
// (planWorkspace in Planning.h). Counters get their word indices here too.
//
// A debug_capture kernel copies its intermediates out at the end of the step,
// so there every buffer is live for the whole kernel: no two share memory.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"
#include "Transforms/Planning.h"

#include "llvm/ADT/StringMap.h"

namespace mk::schedule {
#define GEN_PASS_DEF_SCHEDULEPLANWORKSPACE
#include "Transforms/Passes.h.inc"
} // namespace mk::schedule

using namespace mlir;
using namespace mk;
using namespace mk::schedule;

namespace {
struct SchedulePlanWorkspacePass
    : schedule::impl::SchedulePlanWorkspaceBase<SchedulePlanWorkspacePass> {
  void runOnOperation() override {
    for (KernelOp kernel : getOperation().getOps<KernelOp>()) {
      llvm::StringMap<std::pair<int, int>> live;
      int segment = 0;
      for (Operation &op : kernel.getBodyBlock()) {
        if (isa<BarrierOp>(op))
          ++segment;
        if (auto p = dyn_cast<PhaseOp>(op))
          for (TaskOpInterface t : p.getBodyBlock().getOps<TaskOpInterface>()) {
            const TaskAccesses acc = taskAccesses(t);
            for (const SmallVector<StringRef> *l : {&acc.reads, &acc.writes, &acc.accumulates})
              for (StringRef n : *l) {
                auto [it, fresh] = live.try_emplace(n, segment, segment);
                if (!fresh)
                  it->second.second = segment;
              }
          }
      }
      // The whole model's logits are read after the step (the manifest
      // publishes them): live to the last segment.
      if (std::optional<StringRef> l = kernel.getLogits())
        if (auto it = live.find(*l); it != live.end())
          it->second.second = segment;
      SmallVector<BufferOp> bufs;
      std::vector<planning::WorkspaceBuffer> specs;
      const bool noReuse = kernel.getDebugCapture();
      for (BufferOp b : kernel.getBodyBlock().getOps<BufferOp>()) {
        if (!b.isWorkspace())
          continue;
        auto it = live.find(b.getSymName());
        if (it == live.end()) {
          b.emitOpError("workspace buffer is never used");
          return signalPassFailure();
        }
        bufs.push_back(b);
        if (noReuse)
          specs.push_back({b.getSizeInBytes(), 0, segment});
        else
          specs.push_back({b.getSizeInBytes(), it->second.first,
                           it->second.second});
      }
      std::vector<int64_t> offsets;
      int64_t size = planning::planWorkspace(specs, offsets, 256);
      for (auto [b, off] : llvm::zip(bufs, offsets))
        b.setOffset(off);
      kernel.setWorkspaceBytes(std::max<int64_t>(size, 256));
      int64_t base = 0;
      for (CounterOp c : kernel.getBodyBlock().getOps<CounterOp>()) {
        c.setBase(base);
        base += c.getSize();
      }
    }
  }
};
} // namespace
