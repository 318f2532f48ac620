//===- SchedulePollRouterLogits.cpp - Router logits polled, not counted ---===//
//
// Every routed expert task needs the router's logits before it can choose
// its expert (and so its weights): after schedule-barriers-to-counters it
// waits for the router's counter (one release fence per router row, the
// signal's trip to L2, the poll that sees it) and then reads the logits (one
// more L2 round trip). This pass lets it poll the logits themselves
// instead: the router stores each logit for polling (`polled_output`:
// never the all-zero bits, in one relaxed store; a +0.0 is stored as -0.0,
// which every comparison and function of the top-k treats alike), the
// routed tasks read each logit once it is not zero (`poll_logits`), and a
// `zero_f32` task in the kernel's first phase clears the logits a grid
// barrier before the router writes them. The router's counter waits of
// those tasks go, and the counter with its signal where nothing else
// waits on it. The kernel verifier accepts a polled read after a polled
// store without a barrier or counter (ScheduleOps.cpp), and still orders
// the clearing before both.
//
// Applies to a router (a `bf16_rows` task whose output is some routed
// expert task's `logits`) whose output is a workspace buffer of whole
// 4-byte words that only it writes and only routed expert tasks read, with
// a grid barrier between the kernel's first phase and the router's, and at
// most `max-experts` (64) logit rows: wider routers keep their counters
// (the 48B's 256 measured slower polled, perf notes #171). Runs after
// schedule-barriers-to-counters (whose waits it removes). On by default
// since session 35 (perf notes #167); `enabled=false` keeps every router's
// counter.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace mk::schedule {
#define GEN_PASS_DEF_SCHEDULEPOLLROUTERLOGITS
#include "Transforms/Passes.h.inc"
} // namespace mk::schedule

using namespace mlir;
using namespace mk::schedule;

namespace {

/// The list under `key` (empty if none), without copying it.
template <class T>
ArrayRef<T> listOf(const llvm::StringMap<SmallVector<T>> &map, StringRef key) {
  auto it = map.find(key);
  return it == map.end() ? ArrayRef<T>() : ArrayRef<T>(it->second);
}

struct SchedulePollRouterLogitsPass
    : mk::schedule::impl::SchedulePollRouterLogitsBase<SchedulePollRouterLogitsPass> {
  using Base::Base;
  void runOnOperation() override {
    if (maxExperts < 1) {
      mlir::emitError(getOperation().getLoc(), "schedule-poll-router-logits: max-experts must be "
                                               "at least 1, got ")
          << int64_t(maxExperts);
      return signalPassFailure();
    }
    if (!enabled)
      return;
    for (KernelOp k : getOperation().getOps<KernelOp>())
      pollRouters(k);
  }

  /// What the rewrites look up, gathered in one walk of the kernel (the
  /// pass stays linear in the kernel's size: one router per MoE layer).
  struct KernelIndex {
    llvm::StringMap<SmallVector<SignalOp>> signalsOf; // by counter
    llvm::StringMap<SmallVector<SignalOp>> signalsBy; // by task
    llvm::StringMap<SmallVector<WaitOp>> waitsOf;     // by counter
    llvm::StringMap<CounterOp> counters;
    llvm::StringSet<> taskNames;
    llvm::SmallPtrSet<Operation *, 16> erased; // erased at the end
  };

  void pollRouters(KernelOp kernel) {
    llvm::StringMap<BufferOp> buffers;
    PhaseOp first;
    // The first grid barrier after the first phase (the clearing's).
    Operation *firstBarrier = nullptr;
    for (Operation &o : kernel.getBodyBlock()) {
      if (auto b = dyn_cast<BufferOp>(o))
        buffers[b.getSymName()] = b;
      else if (auto p = dyn_cast<PhaseOp>(o); p && !first)
        first = p;
      else if (isa<BarrierOp>(o) && first && !firstBarrier)
        firstBarrier = &o;
    }
    if (!first)
      return;
    KernelIndex index;
    kernel.walk([&](Operation *o) {
      if (auto s = dyn_cast<SignalOp>(o)) {
        index.signalsOf[s.getCounter()].push_back(s);
        index.signalsBy[s.getTask()].push_back(s);
      }
      else if (auto w = dyn_cast<WaitOp>(o))
        index.waitsOf[w.getCounter()].push_back(w);
      else if (auto c = dyn_cast<CounterOp>(o))
        index.counters[c.getSymName()] = c;
    });
    // Every task's accesses, in program order, and each buffer's readers and
    // writers (task indices).
    SmallVector<std::pair<TaskOpInterface, TaskAccesses>> tasks;
    kernel.walk([&](TaskOpInterface t) {
      tasks.push_back({t, taskAccesses(t)});
      index.taskNames.insert(t.getName());
    });
    llvm::StringMap<SmallVector<unsigned>> readersOf, writersOf;
    auto note = [](SmallVector<unsigned> &list, unsigned i) {
      if (list.empty() || list.back() != i)
        list.push_back(i);
    };
    for (auto [i, ta] : llvm::enumerate(tasks)) {
      const TaskAccesses &a = ta.second;
      for (StringRef r : a.reads)
        note(readersOf[r], i);
      for (StringRef w : a.writes)
        note(writersOf[w], i);
      for (StringRef w : a.accumulates)
        note(writersOf[w], i);
    }
    for (auto &[t, a] : tasks) {
      auto router = dyn_cast<Bf16RowsOp>(t.getOperation());
      if (!router || router.getPolledOutput())
        continue;
      // A wide router keeps its counter (max-experts: the 48B's 256-expert
      // routers polled measured slower, perf notes #171).
      if (int64_t(router.getRows()) > maxExperts)
        continue;
      const StringRef logits = router.getOutput();
      BufferOp buf = buffers.lookup(logits);
      if (!buf || !buf.isWorkspace() || buf.getSizeInBytes() % 4)
        continue;
      // Its readers: routed expert tasks alone; its writer: the router alone.
      bool other = llvm::any_of(listOf(writersOf, logits), [&](unsigned i) {
        return tasks[i].first.getOperation() != router.getOperation();
      });
      SmallVector<TaskOpInterface> readers;
      for (unsigned i : listOf(readersOf, logits)) {
        TaskOpInterface r = tasks[i].first;
        if (r.getOperation() == router.getOperation())
          continue;
        if (!isa<MoeGateUpOp, MoeDownOp>(r.getOperation()) || r.getStrArg("logits") != logits)
          other = true;
        else
          readers.push_back(r);
      }
      // Every reader polls values the router stores (else it would wait
      // forever: the verifier refuses it).
      if (other || readers.empty() || llvm::any_of(readers, [&](TaskOpInterface r) {
            return r.getIntArg("experts") > int64_t(router.getRows());
          }))
        continue;
      // A grid barrier between the clearing (the first phase) and the router.
      if (!firstBarrier || router->getParentOp()->isBeforeInBlock(firstBarrier))
        continue;
      rewrite(kernel, index, first, router, buf, readers);
    }
    for (Operation *o : index.erased)
      o->erase();
  }

  void rewrite(KernelOp kernel, KernelIndex &index, PhaseOp first, Bf16RowsOp router,
               BufferOp buf, ArrayRef<TaskOpInterface> readers) {
    OpBuilder b(kernel.getContext());
    const StringRef routerName = router.getName();
    auto live = [&](Operation *o) { return !index.erased.contains(o); };
    // The counters only the router signals.
    llvm::SmallSetVector<StringRef, 2> routerCounters;
    for (SignalOp s : listOf(index.signalsBy, routerName))
      if (live(s))
        routerCounters.insert(s.getCounter());
    auto otherSignalled = [&](StringRef c) {
      return llvm::any_of(listOf(index.signalsOf, c), [&](SignalOp s) {
        return live(s) && s.getTask() != routerName;
      });
    };
    llvm::StringSet<> readerNames;
    for (TaskOpInterface r : readers) {
      readerNames.insert(r.getName());
      r->setAttr("poll_logits", b.getUnitAttr());
    }
    router.setPolledOutput(true);
    for (StringRef c : routerCounters) {
      if (otherSignalled(c))
        continue;
      // The readers' waits on it go; a counter nothing waits on any more
      // goes too, with its signals.
      bool waited = false;
      for (WaitOp w : listOf(index.waitsOf, c)) {
        if (!live(w))
          continue;
        if (readerNames.contains(w.getTask()))
          index.erased.insert(w);
        else
          waited = true;
      }
      if (waited)
        continue;
      for (SignalOp s : listOf(index.signalsOf, c))
        index.erased.insert(s);
      if (CounterOp k = index.counters.lookup(c))
        index.erased.insert(k);
    }
    // The clearing, in the kernel's first phase, after its tasks.
    const int64_t words = buf.getSizeInBytes() / 4;
    b.setInsertionPointToEnd(&first.getBodyBlock());
    for (Operation &o : first.getBodyBlock())
      if (!isa<TaskOpInterface>(o)) {
        b.setInsertionPoint(&o);
        break;
      }
    NamedAttrList args;
    args.append("buffer", b.getStringAttr(buf.getSymName()));
    args.append("n", b.getI64IntegerAttr(words));
    // A name no task of the kernel has.
    std::string name = (routerName + ".clear").str();
    for (int i = 1; index.taskNames.contains(name); ++i)
      name = (routerName + ".clear." + Twine(i)).str();
    index.taskNames.insert(name);
    TaskOpInterface zero =
        createTaskOp(b, router.getLoc(), TaskKind::ZeroF32, name, "", Partition::Slices,
                     args.getDictionary(kernel.getContext()));
    zero.setCount(1);
    zero.setBytes(4 * words);
  }
};

} // namespace
