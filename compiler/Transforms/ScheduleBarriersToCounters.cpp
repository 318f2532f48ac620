//===- ScheduleBarriersToCounters.cpp - Barriers -> dependency counters ---===//
//
// A grid barrier makes every block wait for the slowest one. Where the tasks
// after it need only some producers' work (a KDA head its own projection
// tiles, an expert's down projection its own gate/up tiles, routed experts
// the router's logits), counters let each consumer start as soon as its
// inputs are ready. A barrier stays where an every-block task (an RMSNorm
// recomputed per block) depends on work before it: that is a whole-grid wait
// anyway.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace mk::schedule {
#define GEN_PASS_DEF_SCHEDULEBARRIERSTOCOUNTERS
#include "Transforms/Passes.h.inc"
} // namespace mk::schedule

using namespace mlir;
using namespace mk;
using namespace mk::schedule;

namespace {

/// True if `c` must be ordered after `p` (a conflicting access to a buffer
/// that is not per-block shared memory; `sharedBufs` names those).
bool conflicts(TaskOp p, TaskOp c, const llvm::StringSet<> &sharedBufs) {
  auto names = [](ArrayAttr a) {
    llvm::StringSet<> s;
    for (Attribute x : a)
      s.insert(cast<SymbolRefAttr>(x).getRootReference());
    return s;
  };
  auto pr = names(p.getReads()), pw = names(p.getWrites()),
       pa = names(p.getAccumulates());
  auto cr = names(c.getReads()), cw = names(c.getWrites()),
       ca = names(c.getAccumulates());
  auto shared = [&](StringRef b) { return sharedBufs.contains(b); };
  auto any = [&](const llvm::StringSet<> &a, const llvm::StringSet<> &b) {
    for (auto &e : a)
      if (b.contains(e.getKey()) && !shared(e.getKey()))
        return true;
    return false;
  };
  return any(pw, cr) || any(pw, cw) || any(pa, cr) || any(pa, cw) ||
         any(pr, cw) || any(pr, ca) || any(pw, ca);
}

struct ScheduleBarriersToCountersPass
    : schedule::impl::ScheduleBarriersToCountersBase<
          ScheduleBarriersToCountersPass> {
  void runOnOperation() override {
    for (KernelOp k : getOperation().getOps<KernelOp>())
      if (failed(convert(k)))
        return signalPassFailure();
  }

  // Per kernel, looked up once (symbol lookups in the body are linear).
  llvm::StringSet<> sharedBufs;
  llvm::StringMap<CounterOp> counters;
  Operation *firstPhase = nullptr;

  LogicalResult convert(KernelOp kernel) {
    Block &body = kernel.getBodyBlock();
    sharedBufs.clear();
    counters.clear();
    firstPhase = nullptr;
    for (Operation &o : body) {
      if (auto buf = dyn_cast<BufferOp>(o); buf && buf.getSpace() == "shared")
        sharedBufs.insert(buf.getSymName());
      else if (auto c = dyn_cast<CounterOp>(o))
        counters[c.getSymName()] = c;
      else if (!firstPhase && isa<PhaseOp>(o))
        firstPhase = &o;
    }
    // Phases before the barrier being considered, since the previous kept one.
    SmallVector<PhaseOp> segment;
    OpBuilder b(kernel.getContext());
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (auto p = dyn_cast<PhaseOp>(op)) {
        segment.push_back(p);
        continue;
      }
      auto barrier = dyn_cast<BarrierOp>(op);
      if (!barrier)
        continue;
      // Tasks after the barrier up to the next one.
      SmallVector<PhaseOp> next;
      for (Operation *o = barrier->getNextNode(); o && !isa<BarrierOp>(o);
           o = o->getNextNode())
        if (auto p = dyn_cast<PhaseOp>(o))
          next.push_back(p);
      SmallVector<std::pair<TaskOp, TaskOp>> deps;
      bool keep = false;
      for (PhaseOp np : next)
        for (TaskOp c : np.getBodyBlock().getOps<TaskOp>())
          for (PhaseOp pp : segment)
            for (TaskOp p : pp.getBodyBlock().getOps<TaskOp>())
              if (conflicts(p, c, sharedBufs)) {
                if (c.isEveryBlock() || p.isEveryBlock())
                  keep = true;
                deps.push_back({p, c});
              }
      if (keep) {
        segment.clear();
        continue;
      }
      for (auto [p, c] : deps)
        link(kernel, p, c);
      barrier.erase();
    }
    return success();
  }

  /// Orders consumer `c` after producer `p` with a counter.
  void link(KernelOp kernel, TaskOp p, TaskOp c) {
    OpBuilder b(kernel.getContext());
    StringRef pg = p.getStrArg("grain"), cg = c.getStrArg("grain");
    bool perUnit = !pg.empty() && pg == cg;
    std::string name =
        (p.getName() + (perUnit ? ".ready" : ".done")).str();
    CounterOp counter = counters.lookup(name);
    auto pPhase = cast<PhaseOp>(p->getParentOp());
    auto cPhase = cast<PhaseOp>(c->getParentOp());
    if (!counter) {
      // Counters sit after the buffers, before the first phase.
      b.setInsertionPoint(firstPhase);
      int64_t per = perUnit ? p.getIntArg("grain_per", 1) : p.getCount();
      counter = b.create<CounterOp>(p.getLoc(), b.getStringAttr(name),
                                    b.getI64IntegerAttr(p.getCount() / per),
                                    b.getI64IntegerAttr(-1));
      counters[name] = counter;
      b.setInsertionPointToEnd(&pPhase.getBodyBlock());
      b.create<SignalOp>(p.getLoc(), FlatSymbolRefAttr::get(counter),
                         p.getNameAttr(), b.getI64IntegerAttr(per));
    }
    // One wait per (counter, consumer).
    for (WaitOp w : cPhase.getBodyBlock().getOps<WaitOp>())
      if (w.getCounter() == name && w.getTask() == c.getName())
        return;
    b.setInsertionPointToEnd(&cPhase.getBodyBlock());
    int64_t pPer = perUnit ? p.getIntArg("grain_per", 1) : p.getCount();
    int64_t cPer = perUnit ? c.getIntArg("grain_per", 1) : c.getCount();
    int64_t span = perUnit ? c.getIntArg("grain_span", 1) : 1;
    b.create<WaitOp>(c.getLoc(), FlatSymbolRefAttr::get(counter),
                     c.getNameAttr(), b.getI64IntegerAttr(cPer),
                     b.getI64IntegerAttr(span), b.getI64IntegerAttr(pPer));
  }
};

} // namespace
