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

/// A task's accesses as sets (computed once per task: the pass compares
/// every task of a segment with every task after its barrier).
struct AccessSets {
  llvm::StringSet<> reads, writes, accumulates;
};
AccessSets accessSets(TaskOpInterface t) {
  AccessSets s;
  const TaskAccesses a = taskAccesses(t);
  for (StringRef x : a.reads)
    s.reads.insert(x);
  for (StringRef x : a.writes)
    s.writes.insert(x);
  for (StringRef x : a.accumulates)
    s.accumulates.insert(x);
  return s;
}

/// True if a task with accesses `c` must be ordered after one with `p` (a
/// conflicting access to a buffer that is not per-block shared memory;
/// `sharedBufs` names those).
bool conflicts(const AccessSets &p, const AccessSets &c, const llvm::StringSet<> &sharedBufs) {
  auto shared = [&](StringRef b) { return sharedBufs.contains(b); };
  auto any = [&](const llvm::StringSet<> &a, const llvm::StringSet<> &b) {
    for (auto &e : a)
      if (b.contains(e.getKey()) && !shared(e.getKey()))
        return true;
    return false;
  };
  return any(p.writes, c.reads) || any(p.writes, c.writes) || any(p.accumulates, c.reads) ||
         any(p.accumulates, c.writes) || any(p.reads, c.writes) || any(p.reads, c.accumulates) ||
         any(p.writes, c.accumulates);
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
  llvm::StringSet<> symbols;             // every symbol the kernel has
  llvm::StringMap<CounterOp> counters;  // producer name + suffix -> ours
  Operation *firstPhase = nullptr;
  /// Each task's accesses, as sets.
  llvm::DenseMap<Operation *, AccessSets> accesses;
  const AccessSets &accessesOf(TaskOpInterface t) {
    auto it = accesses.find(t.getOperation());
    if (it == accesses.end())
      it = accesses.try_emplace(t.getOperation(), accessSets(t)).first;
    return it->second;
  }
  /// (counter, consumer task) pairs that have their wait, keyed
  /// "counter\0task" (a scan of the consumer's phase per edge was
  /// quadratic in the depth).
  llvm::StringSet<> waited;
  static std::string waitKey(StringRef counter, StringRef task) {
    return (counter + Twine('\0') + task).str();
  }

  LogicalResult convert(KernelOp kernel) {
    Block &body = kernel.getBodyBlock();
    sharedBufs.clear();
    symbols.clear();
    counters.clear();
    accesses.clear();
    waited.clear();
    kernel.walk([&](WaitOp w) { waited.insert(waitKey(w.getCounter(), w.getTask())); });
    firstPhase = nullptr;
    for (Operation &o : body) {
      if (auto sym = o.getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName()))
        symbols.insert(sym.getValue());
      if (auto buf = dyn_cast<BufferOp>(o); buf && buf.getSpace() == "shared")
        sharedBufs.insert(buf.getSymName());
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
      SmallVector<std::pair<TaskOpInterface, TaskOpInterface>> deps;
      bool keep = false;
      for (PhaseOp np : next)
        for (TaskOpInterface c : np.getBodyBlock().getOps<TaskOpInterface>())
          for (PhaseOp pp : segment)
            for (TaskOpInterface p : pp.getBodyBlock().getOps<TaskOpInterface>())
              if (conflicts(accessesOf(p), accessesOf(c), sharedBufs)) {
                if (c.isEveryBlock() || p.isEveryBlock())
                  keep = true;
                deps.push_back({p, c});
              }
      if (keep) {
        segment.clear();
        continue;
      }
      for (auto [p, c] : deps)
        if (failed(link(kernel, p, c)))
          return failure();
      barrier.erase();
    }
    return success();
  }

  /// Orders consumer `c` after producer `p` with a counter.
  LogicalResult link(KernelOp kernel, TaskOpInterface p, TaskOpInterface c) {
    OpBuilder b(kernel.getContext());
    StringRef pg = p.getStrArg("grain"), cg = c.getStrArg("grain");
    bool perUnit = !pg.empty() && pg == cg;
    const int64_t pCount = p.getCount(), cCount = c.getCount();
    int64_t pPer = perUnit ? p.getIntArg("grain_per", 1) : pCount;
    int64_t cPer = perUnit ? c.getIntArg("grain_per", 1) : cCount;
    int64_t span = perUnit ? c.getIntArg("grain_span", 1) : 1;
    if (perUnit) {
      // Producer instances [u*pPer, (u+1)*pPer) make unit u; consumer
      // instance j waits for units (j / cPer) * span + q, q < span.
      if (pPer < 1 || pCount % pPer)
        return p.emitOpError("grain_per ")
               << pPer << " must be positive and divide the count " << pCount;
      if (cPer < 1 || cCount % cPer || span < 1)
        return c.emitOpError("grain_per ")
               << cPer << " must be positive and divide the count " << cCount
               << ", grain_span " << span << " positive";
      if (cCount / cPer * span > pCount / pPer)
        return c.emitOpError("waits for ")
               << cCount / cPer * span << " units of grain '" << cg << "' but '"
               << p.getName() << "' makes " << pCount / pPer;
    }
    std::string key = (p.getName() + (perUnit ? ".ready" : ".done")).str();
    CounterOp counter = counters.lookup(key);
    auto pPhase = cast<PhaseOp>(p->getParentOp());
    auto cPhase = cast<PhaseOp>(c->getParentOp());
    if (!counter) {
      // A fresh symbol: the name, made unique if the kernel has it already.
      std::string name = key;
      for (int i = 1; symbols.contains(name); ++i)
        name = key + "." + std::to_string(i);
      symbols.insert(name);
      // Counters sit after the buffers, before the first phase.
      b.setInsertionPoint(firstPhase);
      counter = b.create<CounterOp>(p.getLoc(), b.getStringAttr(name),
                                    b.getI64IntegerAttr(pCount / pPer),
                                    b.getI64IntegerAttr(-1));
      counters[key] = counter;
      b.setInsertionPointToEnd(&pPhase.getBodyBlock());
      b.create<SignalOp>(p.getLoc(), FlatSymbolRefAttr::get(counter),
                         b.getStringAttr(p.getName()), b.getI64IntegerAttr(pPer));
    }
    // One wait per (counter, consumer).
    if (!waited.insert(waitKey(counter.getSymName(), c.getName())).second)
      return success();
    b.setInsertionPointToEnd(&cPhase.getBodyBlock());
    b.create<WaitOp>(c.getLoc(), FlatSymbolRefAttr::get(counter),
                     b.getStringAttr(c.getName()), b.getI64IntegerAttr(cPer),
                     b.getI64IntegerAttr(span), b.getI64IntegerAttr(pPer),
                     /*in_prologue=*/UnitAttr());
    return success();
  }
};

} // namespace
