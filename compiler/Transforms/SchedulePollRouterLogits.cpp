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
// a grid barrier between the kernel's first phase and the router's. Runs
// after schedule-barriers-to-counters (whose waits it removes). On by
// default since session 35 (perf notes #167); `enabled=false` keeps the
// router's counter.
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

struct SchedulePollRouterLogitsPass
    : mk::schedule::impl::SchedulePollRouterLogitsBase<SchedulePollRouterLogitsPass> {
  using Base::Base;
  void runOnOperation() override {
    if (!enabled)
      return;
    for (KernelOp k : getOperation().getOps<KernelOp>())
      pollRouters(k);
  }

  /// A grid barrier between phase `from` and the later phase `to`.
  static bool barrierBetween(PhaseOp from, PhaseOp to) {
    for (Operation *o = from->getNextNode(); o && o != to.getOperation(); o = o->getNextNode())
      if (isa<BarrierOp>(o))
        return true;
    return false;
  }

  void pollRouters(KernelOp kernel) {
    llvm::StringMap<BufferOp> buffers;
    PhaseOp first;
    for (Operation &o : kernel.getBodyBlock()) {
      if (auto b = dyn_cast<BufferOp>(o))
        buffers[b.getSymName()] = b;
      else if (auto p = dyn_cast<PhaseOp>(o); p && !first)
        first = p;
    }
    if (!first)
      return;
    // Every task's accesses, in program order.
    SmallVector<std::pair<TaskOpInterface, TaskAccesses>> tasks;
    kernel.walk([&](TaskOpInterface t) { tasks.push_back({t, taskAccesses(t)}); });
    SmallVector<Bf16RowsOp> routers;
    for (auto &[t, a] : tasks)
      if (auto r = dyn_cast<Bf16RowsOp>(t.getOperation()); r && !r.getPolledOutput())
        routers.push_back(r);
    for (Bf16RowsOp router : routers) {
      const StringRef logits = router.getOutput();
      BufferOp buf = buffers.lookup(logits);
      if (!buf || !buf.isWorkspace() || buf.getSizeInBytes() % 4)
        continue;
      // Its readers: routed expert tasks alone; its writer: the router alone.
      SmallVector<TaskOpInterface> readers;
      bool other = false;
      for (auto &[t, a] : tasks) {
        const bool reads = llvm::is_contained(a.reads, logits),
                   writes = llvm::is_contained(a.writes, logits) ||
                            llvm::is_contained(a.accumulates, logits);
        if (t.getOperation() == router.getOperation())
          continue;
        if (writes || (reads && !isa<MoeGateUpOp, MoeDownOp>(t.getOperation())) ||
            (reads && t.getStrArg("logits") != logits))
          other = true;
        else if (reads)
          readers.push_back(t);
      }
      // Every reader polls values the router stores (else it would wait
      // forever: the verifier refuses it).
      if (other || readers.empty() || llvm::any_of(readers, [&](TaskOpInterface r) {
            return r.getIntArg("experts") > int64_t(router.getRows());
          }))
        continue;
      // A grid barrier between the clearing (the first phase) and the router.
      if (!barrierBetween(first, cast<PhaseOp>(router->getParentOp())))
        continue;
      rewrite(kernel, first, router, buf, readers);
    }
  }

  void rewrite(KernelOp kernel, PhaseOp first, Bf16RowsOp router, BufferOp buf,
               ArrayRef<TaskOpInterface> readers) {
    OpBuilder b(kernel.getContext());
    const StringRef routerName = router.getName();
    // The counters only the router signals.
    llvm::SmallSetVector<StringRef, 2> routerCounters;
    llvm::StringSet<> otherSignalled;
    kernel.walk([&](SignalOp s) {
      if (s.getTask() == routerName)
        routerCounters.insert(s.getCounter());
      else
        otherSignalled.insert(s.getCounter());
    });
    llvm::StringSet<> readerNames;
    for (TaskOpInterface r : readers) {
      readerNames.insert(r.getName());
      r->setAttr("poll_logits", b.getUnitAttr());
    }
    router.setPolledOutput(true);
    SmallVector<WaitOp> dropped;
    kernel.walk([&](WaitOp w) {
      if (readerNames.contains(w.getTask()) && routerCounters.contains(w.getCounter()) &&
          !otherSignalled.contains(w.getCounter()))
        dropped.push_back(w);
    });
    for (WaitOp w : dropped)
      w.erase();
    // A counter nothing waits on any more goes, with its signals.
    for (StringRef c : routerCounters) {
      if (otherSignalled.contains(c))
        continue;
      bool waited = false;
      kernel.walk([&](WaitOp w) { waited |= w.getCounter() == c; });
      if (waited)
        continue;
      SmallVector<Operation *> dead;
      kernel.walk([&](SignalOp s) {
        if (s.getCounter() == c)
          dead.push_back(s);
      });
      kernel.walk([&](CounterOp k) {
        if (k.getSymName() == c)
          dead.push_back(k);
      });
      for (Operation *o : dead)
        o->erase();
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
    llvm::StringSet<> names;
    kernel.walk([&](TaskOpInterface t) { names.insert(t.getName()); });
    std::string name = (routerName + ".clear").str();
    for (int i = 1; names.contains(name); ++i)
      name = (routerName + ".clear." + Twine(i)).str();
    TaskOpInterface zero =
        createTaskOp(b, router.getLoc(), TaskKind::ZeroF32, name, "", Partition::Slices,
                     args.getDictionary(kernel.getContext()));
    zero.setCount(1);
    zero.setBytes(4 * words);
  }
};

} // namespace
