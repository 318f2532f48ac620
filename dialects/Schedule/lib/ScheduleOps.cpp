//===- ScheduleOps.cpp - Ops of the schedule dialect ----------------------===//
//
// Besides the per-op checks, the kernel's region verifier proves the schedule
// race-free at the granularity of tasks: every pair of conflicting accesses to
// a buffer (write then read, read then write, write then write) is ordered by
// a grid barrier or by a chain of counters whose producers come first.
//
//===----------------------------------------------------------------------===//

#include "mk/Dialect/Schedule/ScheduleOps.h"
#include "mk/Dialect/Schedule/TaskCuts.h"
#include "mk/Dialect/Schedule/TaskKinds.h"

#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mk::schedule;

int64_t mk::schedule::dtypeSize(StringRef dtype) {
  return llvm::StringSwitch<int64_t>(dtype)
      .Case("u8", 1)
      .Case("bf16", 2)
      .Case("f32", 4)
      .Case("i32", 4)
      .Default(0);
}

//===----------------------------------------------------------------------===//
// KernelOp
//===----------------------------------------------------------------------===//

void KernelOp::build(OpBuilder &b, OperationState &state, StringRef name,
                     int64_t threads) {
  state.addAttribute(getSymNameAttrName(state.name), b.getStringAttr(name));
  state.addAttribute(getThreadsAttrName(state.name),
                     b.getI64IntegerAttr(threads));
  Region *body = state.addRegion();
  body->push_back(new Block());
}

int64_t KernelOp::getNumPhases() {
  return llvm::range_size(getBodyBlock().getOps<PhaseOp>());
}
int64_t KernelOp::getNumBarriers() {
  return llvm::range_size(getBodyBlock().getOps<BarrierOp>());
}
int64_t KernelOp::getNumCounterWords() {
  int64_t n = 0;
  for (CounterOp c : getBodyBlock().getOps<CounterOp>())
    n += c.getSize();
  return n;
}

LogicalResult KernelOp::verify() {
  int64_t t = getThreads();
  if (t <= 0 || t % 32 || t > 1024)
    return emitOpError("threads must be a positive multiple of 32 up to 1024, got ")
           << t;
  // I64Attr's getters return uint64_t: read the values as signed, so that a
  // negative one is refused as what it is.
  if (const auto sms = static_cast<int64_t>(getTargetSms()); sms <= 0)
    return emitOpError("target_sms must be positive, got ") << sms;
  const auto ahead = static_cast<int64_t>(getTileStagesAhead());
  if (ahead < 0 || ahead == 1)
    return emitOpError("tile_stages_ahead must be 0 (the whole ring) or at least 2, got ")
           << ahead;
  if (!llvm::is_contained({"exact", "scaled", "folded"}, getPackedArithmetic()))
    return emitOpError("packed_arithmetic must be \"exact\", \"scaled\" or \"folded\", got \"")
           << getPackedArithmetic() << "\"";
  // A W4A16 weight's parts are stored alike.
  llvm::StringMap<std::pair<WeightOp, int64_t>> tiles; // prefix -> first part, tile
  for (WeightOp w : getBodyBlock().getOps<WeightOp>()) {
    if (w.getGroup() == 0)
      continue;
    auto [it, fresh] = tiles.try_emplace(w.getSymName().rsplit('.').first, w, w.getTile());
    if (!fresh && it->second.second != w.getTile())
      return w.emitOpError("tile ")
             << w.getTile() << " differs from " << it->second.first.getSymName()
             << "'s " << it->second.second << " (a W4A16 weight's parts are stored alike)";
  }
  // The whole model: its embedding (a bf16 weight [vocab, hidden] the
  // token's row of which is @hidden_in), the logits (a bf16 workspace
  // buffer [vocab]) and the io buffer @next_token (i32 [1]), all together.
  if (getEmbedding().has_value() != getLogits().has_value())
    return emitOpError("takes embedding and logits together (a whole model)");
  if (std::optional<StringRef> e = getEmbedding()) {
    auto w = lookupSymbol<WeightOp>(*e);
    auto in = lookupSymbol<BufferOp>("hidden_in");
    if (!w || w.getDtype() != "bf16" || w.getShape().size() != 2)
      return emitOpError("embedding '") << *e << "' must be a bf16 schedule.weight [vocab, hidden]";
    if (!in || in.getShape().size() != 1 || in.getShape()[0] != w.getShape()[1])
      return emitOpError("embedding '")
             << *e << "' rows must be as wide as @hidden_in (" << w.getShape()[1] << ")";
    auto l = lookupSymbol<BufferOp>(*getLogits());
    if (!l || !l.isWorkspace() || l.getDtype() != "bf16" || l.getShape().size() != 1)
      return emitOpError("logits @") << *getLogits() << " must be a bf16 workspace buffer [vocab]";
    auto next = lookupSymbol<BufferOp>("next_token");
    if (!next || next.getSpace() != "io" || next.getDtype() != "i32")
      return emitOpError("a whole model needs the io buffer @next_token (i32 [1])");
  }
  return success();
}

namespace {
/// One task in program order, with where it sits.
struct TaskInfo {
  TaskOpInterface op;
  int64_t segment; // number of barriers before it
  int64_t phase;
  TaskAccesses accesses; // taskAccesses(op), computed once
};

/// `reader` polls buffer `buf` (a routed expert task's `logits` with
/// `poll_logits`) that `writer` stores for polling (a bf16_rows task's
/// `polled_output` output): schedule-poll-router-logits.
bool pollsAfter(TaskOpInterface writer, TaskOpInterface reader, StringRef buf) {
  return writer->hasAttr("polled_output") && isa<Bf16RowsOp>(writer.getOperation()) &&
         writer.getStrArg("output") == buf && reader->hasAttr("poll_logits") &&
         reader.getStrArg("logits") == buf;
}
} // namespace

LogicalResult KernelOp::verifyRegions() {
  Block &body = getBodyBlock();
  SmallVector<TaskInfo> tasks;
  llvm::StringMap<int64_t> taskIndex;
  llvm::StringMap<BufferOp> buffers;
  llvm::StringMap<CounterOp> counters;
  llvm::StringSet<> weights;
  for (Operation &op : body) {
    if (auto b = dyn_cast<BufferOp>(op))
      buffers[b.getSymName()] = b;
    else if (auto c = dyn_cast<CounterOp>(op))
      counters[c.getSymName()] = c;
    else if (auto w = dyn_cast<WeightOp>(op))
      weights.insert(w.getSymName());
  }
  // The buffers and weights a task's arguments name (TaskKinds.h) are the
  // kernel's: a weight by its schedule.weight name, or a W4A16 weight by
  // the prefix of its parts (`w` for `w.w_q`, `w.scales`, `w.zeros`).
  auto checkArgNames = [&](TaskOpInterface t) -> LogicalResult {
    for (const TaskArgSpec &a : taskArgSpecs(t)) {
      Attribute v = t.getArg(a.name);
      if (!v)
        continue;
      SmallVector<Attribute> names;
      if (auto arr = dyn_cast<ArrayAttr>(v))
        names.append(arr.begin(), arr.end());
      else
        names.push_back(v);
      for (Attribute n : names) {
        if (auto ref = dyn_cast<FlatSymbolRefAttr>(n)) {
          if (!buffers.count(ref.getValue()))
            return t.emitOpError("argument '") << a.name << "' must be a buffer of the kernel; "
                                               << "there is no buffer " << ref;
          continue;
        }
        auto s = dyn_cast<StringAttr>(n);
        if (!s || s.empty())
          continue;
        const bool isWeight = a.type == TaskArgType::Weight || a.type == TaskArgType::Weights;
        if (isWeight && !weights.contains(s.getValue()) &&
            !weights.contains((s.getValue() + ".w_q").str()))
          return t.emitOpError("argument '")
                 << a.name << "' names weight '" << s.getValue()
                 << "', which is no schedule.weight of the kernel";
      }
    }
    return success();
  };

  // The buffers a task stores for polling (schedule-poll-router-logits),
  // which a zero_f32 task may clear as words whatever their dtype.
  llvm::StringSet<> polledBuffers;
  body.walk([&](Bf16RowsOp r) {
    if (r.getPolledOutput())
      polledBuffers.insert(r.getOutput());
  });

  // Collect tasks; check names and buffer references.
  int64_t segment = 0, phase = 0;
  for (Operation &op : body) {
    if (isa<BarrierOp>(op)) {
      ++segment;
      continue;
    }
    auto p = dyn_cast<PhaseOp>(op);
    if (!p)
      continue;
    for (TaskOpInterface t : p.getBodyBlock().getOps<TaskOpInterface>()) {
      if (!taskIndex.try_emplace(t.getName(), tasks.size()).second)
        return t.emitOpError("task name '") << t.getName() << "' is not unique";
      if (failed(checkArgNames(t)))
        return failure();
      for (ArrayAttr list : {t.getReads(), t.getWrites(), t.getAccumulates()})
        for (Attribute a : list) {
          auto ref = cast<SymbolRefAttr>(a);
          if (!buffers.count(ref.getRootReference()))
            return t.emitOpError("refers to unknown buffer ") << ref;
        }
      // A registered kind's buffer arguments say how it accesses what they
      // name (TaskAccess); the access lists add buffers no argument names,
      // and where they repeat one, they must say what its argument says.
      const TaskAccesses byArgs = taskArgAccesses(t);
      auto named = [&](StringRef b) {
        return llvm::is_contained(byArgs.reads, b) || llvm::is_contained(byArgs.writes, b) ||
               llvm::is_contained(byArgs.accumulates, b);
      };
      auto verb = [](StringRef list) {
        return list == "reads" ? "read" : list == "writes" ? "write" : "accumulate into";
      };
      for (auto [list, derived, what] :
           {std::tuple{t.getReads(), &byArgs.reads, "reads"},
            std::tuple{t.getWrites(), &byArgs.writes, "writes"},
            std::tuple{t.getAccumulates(), &byArgs.accumulates, "accumulates"}})
        for (Attribute a : list) {
          StringRef b = cast<SymbolRefAttr>(a).getRootReference().getValue();
          if (named(b) && !llvm::is_contained(*derived, b))
            return t.emitOpError("lists @")
                   << b << " in " << what << ", but its " << taskKindName(t.getKind())
                   << " arguments do not " << verb(what) << " it";
        }
      // What an access asks of the buffer's type: the sums a task adds are
      // fp32; a GEMV writes one output of n[i] elements per `n`, bf16 by
      // its epilogue (an accumulated one is f32, as above).
      for (StringRef b : byArgs.accumulates)
        if (BufferOp buf = buffers.lookup(b); buf && buf.getDtype() != "f32")
          return t.emitOpError("accumulates into @")
                 << b << ", a " << buf.getDtype()
                 << " buffer: the sums it adds are fp32 (an f32 buffer)";
      // A zeroing task clears its whole buffer, in floats: an f32 buffer's
      // elements, or the words of a buffer a task stores for polling
      // (schedule-poll-router-logits: a bf16 router's logits).
      if (t.getTaskKind() == TaskKind::ZeroF32) {
        if (BufferOp buf = buffers.lookup(t.getStrArg("buffer"))) {
          const int64_t numel = buf.getNumElements(), n = t.getIntArg("n");
          if (buf.getDtype() != "f32" && !polledBuffers.contains(buf.getSymName()))
            return t.emitOpError("zeroes @")
                   << buf.getSymName() << ", a " << buf.getDtype()
                   << " buffer: only f32 buffers, and buffers a task stores for polling, are "
                      "cleared as floats";
          if (4 * n != buf.getSizeInBytes())
            return t.emitOpError("zeroes ")
                   << n << " floats (" << 4 * n << " bytes) of @" << buf.getSymName()
                   << ", which holds " << numel << " " << buf.getDtype() << " elements ("
                   << buf.getSizeInBytes() << " bytes)";
        }
      }
      if (t.getTaskKind() == TaskKind::W4A16Gemv) {
        SmallVector<int64_t> ns = t.getIntArrayArg("n");
        SmallVector<std::string> outs = t.getStrArrayArg("outputs");
        if (ns.size() != outs.size())
          return t.emitOpError("has ") << outs.size() << " outputs but " << ns.size()
                                       << " widths in 'n' (one per output)";
        for (auto [o, n] : llvm::zip(outs, ns)) {
          BufferOp buf = buffers.lookup(o);
          if (!buf)
            continue;
          const int64_t numel = buf.getNumElements();
          if (numel != n)
            return t.emitOpError("output @")
                   << o << " holds " << numel << " elements, but its width in 'n' is " << n;
          if (t.getStrArg("epilogue") != "atomic_f32" && buf.getDtype() != "bf16")
            return t.emitOpError("writes output @")
                   << o << " in bf16 (epilogue '" << t.getStrArg("epilogue")
                   << "'), but the buffer is " << buf.getDtype();
        }
      }
      // The MLA partials the combine merges: the maxima and sums fp32, the
      // partial sums fp32 or bf16 (the templates take either).
      if (t.getTaskKind() == TaskKind::MlaAttentionChunk ||
          t.getTaskKind() == TaskKind::MlaCombineWv)
        for (StringRef arg : {"part_m", "part_l", "part_acc"})
          if (BufferOp buf = buffers.lookup(t.getStrArg(arg));
              buf && buf.getDtype() != "f32" && (arg != "part_acc" || buf.getDtype() != "bf16"))
            return t.emitOpError("'")
                   << arg << "' is @" << buf.getSymName() << " of dtype " << buf.getDtype()
                   << ": the MLA partials' " << (arg == "part_acc" ? "sums are f32 or bf16"
                                                                   : "maxima and sums are f32");
      const TaskAccesses all = taskAccesses(t);
      llvm::SmallDenseSet<StringRef, 8> accessed;
      for (const SmallVector<StringRef> *list : {&all.reads, &all.writes, &all.accumulates})
        accessed.insert(list->begin(), list->end());
      // An opaque task's `args` entry names a buffer only through the access
      // lists, which must then list it (a registered kind's buffer arguments
      // carry their access: taskAccesses).
      for (NamedAttribute arg : t.getArgDictionary()) {
        auto check = [&](Attribute v) -> LogicalResult {
          StringRef name;
          if (auto s = dyn_cast<StringAttr>(v))
            name = s.getValue();
          else if (auto r = dyn_cast<FlatSymbolRefAttr>(v))
            name = r.getValue();
          if (name.empty() || !buffers.count(name) || accessed.contains(name))
            return success();
          return t.emitOpError("argument '")
                 << arg.getName().getValue() << "' names buffer @" << name
                 << ", which the task does not list in reads, writes or accumulates";
        };
        if (auto arr = dyn_cast<ArrayAttr>(arg.getValue())) {
          for (Attribute e : arr)
            if (failed(check(e)))
              return failure();
        } else if (failed(check(arg.getValue()))) {
          return failure();
        }
      }
      tasks.push_back({t, segment, phase, all});
    }
    ++phase;
  }

  // Counter edges: producer task -> consumer task, within a phase pair.
  llvm::StringMap<SmallVector<std::pair<int64_t, SignalOp>>> signalers;
  for (PhaseOp p : body.getOps<PhaseOp>())
    for (SignalOp s : p.getBodyBlock().getOps<SignalOp>()) {
      auto it = taskIndex.find(s.getTask());
      if (it == taskIndex.end() ||
          tasks[it->second].op->getParentOp() != p.getOperation())
        return s.emitOpError("names task '")
               << s.getTask() << "' which is not in this phase";
      auto c = counters.find(s.getCounter());
      if (c == counters.end())
        return s.emitOpError("refers to unknown counter @") << s.getCounter();
      // Read as signed: an I64Attr of -1 is not 2^64 - 1.
      const int64_t divisor = static_cast<int64_t>(s.getDivisor());
      if (divisor <= 0)
        return s.emitOpError("divisor must be positive, got ") << divisor;
      int64_t count = tasks[it->second].op.getCount();
      if (1 + (count - 1) / divisor > c->second.getSize())
        return s.emitOpError("signals counter index ")
               << (count - 1) / divisor << " but @" << s.getCounter()
               << " has only " << c->second.getSize() << " counters";
      signalers[s.getCounter()].push_back({it->second, s});
    }

  SmallVector<SmallVector<int64_t>> preds(tasks.size());
  for (PhaseOp p : body.getOps<PhaseOp>())
    for (WaitOp w : p.getBodyBlock().getOps<WaitOp>()) {
      auto it = taskIndex.find(w.getTask());
      if (it == taskIndex.end() ||
          tasks[it->second].op->getParentOp() != p.getOperation())
        return w.emitOpError("names task '")
               << w.getTask() << "' which is not in this phase";
      if (!counters.count(w.getCounter()))
        return w.emitOpError("refers to unknown counter @") << w.getCounter();
      const int64_t divisor = static_cast<int64_t>(w.getDivisor());
      if (divisor <= 0)
        return w.emitOpError("divisor must be positive, got ") << divisor;
      int64_t consumer = it->second;
      // Every index the consumer waits on must receive `target` signals.
      SmallVector<int64_t> received(counters[w.getCounter()].getSize(), 0);
      for (auto &[producer, s] : signalers[w.getCounter()]) {
        if (producer >= consumer)
          return w.emitOpError("waits on @")
                 << w.getCounter() << " signaled by task '"
                 << tasks[producer].op.getName()
                 << "' which does not come before task '" << w.getTask()
                 << "' (possible deadlock)";
        for (int64_t i = 0, e = tasks[producer].op.getCount(); i < e; ++i)
          ++received[i / static_cast<int64_t>(s.getDivisor())];
        preds[consumer].push_back(producer);
        // A wait in the prologue guards only what the prologue stages (a
        // moe_down's gate/up sums, an attention chunk's absorbed queries,
        // a combine's chunk partials): what the task asks for before it
        // (the down's weights, chosen through the router's logits; the
        // attention's cache rows) must not wait on it.
        if (w.getInPrologue()) {
          const SmallVector<StringRef> allowed = tasks[consumer].op.getPrologueGuardedBuffers();
          // A GEMV waits in its prologue only before staging an input from
          // global memory: one in shared memory has no staging to wait
          // before (the emitter's lowering refuses it too).
          if (isa<W4A16GemvOp>(tasks[consumer].op.getOperation()))
            if (BufferOp in = buffers.lookup(allowed.front());
                in && in.getSpace() == "shared")
              return w.emitOpError("in_prologue: task '")
                     << w.getTask() << "' reads its input @" << allowed.front()
                     << " from shared memory: no staging to wait before";
          const StringRef b = guardedBesides(tasks[producer].op, tasks[consumer].op, allowed);
          if (!b.empty())
            return w.emitOpError("in_prologue: task '")
                   << w.getTask() << "' reads @" << b << ", which its signaller '"
                   << tasks[producer].op.getName() << "' writes: only its staged @"
                   << llvm::join(allowed, ", @") << " may be waited for in its prologue";
        }
      }
      int64_t count = tasks[consumer].op.getCount();
      const int64_t span = w.getSpan();
      if (span <= 0)
        return w.emitOpError("span must be positive");
      // Instance j waits on k = (j / divisor) * span + q, q < span: every
      // such k in ascending order, each once (at most the counter's size,
      // plus the first one past it).
      const int64_t groups = 1 + (count - 1) / divisor;
      for (int64_t g = 0; g < groups; ++g)
        for (int64_t q = 0; q < span; ++q) {
          const int64_t k = g * span + q;
          if (k >= (int64_t)received.size() || received[k] < w.getTarget())
            return w.emitOpError("waits for ")
                   << w.getTarget() << " signals on @" << w.getCounter() << "["
                   << k << "] which receives only "
                   << (k < (int64_t)received.size() ? received[k] : 0);
        }
    }

  // ordered(a, b): a barrier separates them, or a chain of counter edges
  // inside b's segment leads from a to b.
  auto ordered = [&](int64_t a, int64_t b) {
    if (tasks[a].segment < tasks[b].segment)
      return true;
    SmallVector<int64_t> stack{b};
    llvm::DenseSet<int64_t> seen;
    while (!stack.empty()) {
      int64_t n = stack.pop_back_val();
      for (int64_t p : preds[n]) {
        if (p == a || tasks[a].segment < tasks[p].segment)
          return true;
        if (seen.insert(p).second)
          stack.push_back(p);
      }
    }
    return false;
  };

  // Access hazards, per buffer, over pairs in program order.
  enum Access { None = 0, Read = 1, Write = 2, Accum = 4 };
  auto accessOf = [](const TaskAccesses &acc, StringRef buf) {
    int a = None;
    auto has = [&](ArrayRef<StringRef> l) { return llvm::is_contained(l, buf); };
    if (has(acc.reads))
      a |= Read;
    if (has(acc.writes))
      a |= Write;
    if (has(acc.accumulates))
      a |= Accum;
    return a;
  };
  // Each buffer's uses in task order, from one pass over the tasks' lists
  // (linear in the IR, not buffers x tasks).
  llvm::StringMap<SmallVector<std::pair<int64_t, int>>> usesOf;
  for (int64_t i = 0, e = tasks.size(); i < e; ++i) {
    const TaskAccesses &acc = tasks[i].accesses;
    for (const SmallVector<StringRef> *list : {&acc.reads, &acc.writes, &acc.accumulates})
      for (StringRef buf : *list) {
        auto &uses = usesOf[buf];
        if (uses.empty() || uses.back().first != i)
          uses.push_back({i, accessOf(acc, buf)});
      }
  }
  // A buffer polled by its readers (schedule-poll-router-logits): one
  // polled store (a router's, covering every value its readers poll), each
  // other write a zero_f32 clearing of the whole buffer before it in task
  // order and ordered before it and before every polling read, and every
  // polling read after the store in task order. Then a polling read sees
  // zero until the store lands, and only this step's store.
  auto verifyPolledBuffer = [&](BufferOp buf,
                                ArrayRef<std::pair<int64_t, int>> uses) -> LogicalResult {
    const StringRef name = buf.getSymName();
    SmallVector<int64_t> stores, clears, polls;
    for (auto [t, a] : uses) {
      TaskOpInterface op = tasks[t].op;
      if (op->hasAttr("poll_logits") && op.getStrArg("logits") == name)
        polls.push_back(t);
      if (!(a & (Write | Accum)))
        continue;
      if (op->hasAttr("polled_output") && isa<Bf16RowsOp>(op.getOperation()))
        stores.push_back(t);
      else if (isa<ZeroF32Op>(op.getOperation()) && !(a & Accum))
        clears.push_back(t);
      else if (!stores.empty() || !polls.empty())
        return op.emitOpError("writes @")
               << name << ", which a task stores for polling: only its clearing (zero_f32) may";
      else
        clears.push_back(-1 - t); // a plain write: an error if the buffer is polled
    }
    if (stores.empty() && polls.empty())
      return success();
    if (stores.empty())
      return tasks[polls.front()].op.emitOpError("polls @")
             << name << ", which no task writes with a polled store";
    if (stores.size() > 1)
      return tasks[stores[1]].op.emitOpError("stores @")
             << name << " for polling, as '" << tasks[stores[0]].op.getName()
             << "' does: one polled store per buffer";
    for (int64_t c : clears)
      if (c < 0)
        return tasks[-1 - c].op.emitOpError("writes @")
               << name << ", which a task stores for polling: only its clearing (zero_f32) may";
    const int64_t store = stores.front();
    TaskOpInterface storeOp = tasks[store].op;
    if (clears.empty())
      return storeOp.emitOpError("stores @")
             << name << " for polling, but no zero_f32 task clears it before";
    for (int64_t c : clears)
      if (c > store || !ordered(c, store))
        return tasks[c].op.emitOpError("clears @")
               << name << ", which '" << storeOp.getName()
               << "' stores for polling: the clearing must be ordered before the store";
    const int64_t rows = storeOp.getIntArg("rows");
    for (int64_t p : polls) {
      TaskOpInterface r = tasks[p].op;
      if (p < store)
        return r.emitOpError("polls @") << name << " before '" << storeOp.getName()
                                        << "' stores it (possible deadlock)";
      for (int64_t c : clears)
        if (!ordered(c, p))
          return r.emitOpError("polls @")
                 << name << " without a barrier or counter after its clearing '"
                 << tasks[c].op.getName() << "'";
      const int64_t experts = r.getIntArg("experts");
      if (experts > rows || experts > buf.getNumElements())
        return r.emitOpError("polls ")
               << experts << " logits of @" << name << " but '" << storeOp.getName()
               << "' stores " << rows << " (it would wait forever)";
    }
    return success();
  };
  for (auto &entry : buffers) {
    BufferOp buf = entry.second;
    if (buf.getSpace() == "shared")
      continue;
    const SmallVector<std::pair<int64_t, int>> &uses = usesOf[buf.getSymName()];
    for (size_t j = 0; j < uses.size(); ++j) {
      auto [tj, aj] = uses[j];
      bool initialized = buf.getSpace() == "state" || buf.getSpace() == "io";
      for (size_t i = 0; i < j; ++i) {
        auto [ti, ai] = uses[i];
        if ((ai & Write) && ordered(ti, tj))
          initialized = true;
        bool conflict = ((ai & (Write | Accum)) && (aj & (Read | Write))) ||
                        ((ai & Read) && (aj & (Write | Accum))) ||
                        ((ai & Write) && (aj & Accum));
        // A polled read after a polled store needs no barrier or counter:
        // the reader polls each value until the store has landed.
        if (conflict && ai == Write && aj == Read &&
            pollsAfter(tasks[ti].op, tasks[tj].op, buf.getSymName()))
          continue;
        if (conflict && !ordered(ti, tj))
          return tasks[tj]
                     .op.emitOpError("accesses @")
                 << buf.getSymName() << " after task '"
                 << tasks[ti].op.getName()
                 << "' without a barrier or counter between them";
      }
      if ((aj & Accum) && !initialized)
        return tasks[tj].op.emitOpError("accumulates into @")
               << buf.getSymName()
               << " which no earlier, ordered task initializes";
      if ((aj & Read) && !(aj & Write) && !initialized &&
          !llvm::any_of(ArrayRef(uses).take_front(j),
                        [](auto u) { return u.second & Accum; }))
        return tasks[tj].op.emitOpError("reads @")
               << buf.getSymName() << " before any task writes it";
    }
    if (failed(verifyPolledBuffer(buf, uses)))
      return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// BufferOp, CounterOp, PhaseOp, TaskOpInterface
//===----------------------------------------------------------------------===//

int64_t BufferOp::getNumElements() {
  int64_t n = 1;
  for (int64_t d : getShape())
    n *= d;
  return n;
}
int64_t BufferOp::getSizeInBytes() {
  return getNumElements() * dtypeSize(getDtype());
}

LogicalResult BufferOp::verify() {
  if (!dtypeSize(getDtype()))
    return emitOpError("unknown dtype '") << getDtype() << "'";
  if (llvm::any_of(getShape(), [](int64_t d) { return d <= 0; }) &&
      getSpace() != "state" && getSpace() != "io")
    return emitOpError("shape must have positive dims");
  StringRef s = getSpace();
  if (s != "workspace" && s != "state" && s != "shared" && s != "io")
    return emitOpError("space must be workspace, state, shared or io, got '")
           << s << "'";
  // Sizes stay far from int64 overflow (the workspace planner adds and
  // rounds them): under 2^48 bytes, as for weights; dynamic (-1) cache rows
  // of state buffers count as one.
  {
    constexpr int64_t kMaxBytes = int64_t(1) << 48;
    int64_t bytes = dtypeSize(getDtype());
    for (int64_t d : getShape()) {
      const int64_t n = d > 0 ? d : 1;
      if (n > kMaxBytes / bytes)
        return emitOpError("size exceeds 2^48 bytes");
      bytes *= n;
    }
  }
  int64_t offset = getOffset();
  if (offset >= 0 && s != "workspace")
    return emitOpError("only workspace buffers have an offset");
  if (offset >= 0 && offset % 16)
    return emitOpError("offset ") << offset << " is not 16-byte aligned";
  return success();
}

int64_t WeightOp::getNumElements() {
  int64_t n = 1;
  for (int64_t d : getShape())
    n *= d;
  return n;
}
int64_t WeightOp::getSizeInBytes() { return getNumElements() * dtypeSize(getDtype()); }

LogicalResult WeightOp::verify() {
  const int64_t size = dtypeSize(getDtype());
  if (!size)
    return emitOpError("unknown dtype '") << getDtype() << "'";
  // Dimensions are positive, and the size stays far from overflowing the
  // byte offsets the runtime and the kernel compute.
  constexpr int64_t kMaxBytes = int64_t(1) << 48;
  int64_t bytes = size;
  for (int64_t d : getShape()) {
    if (d <= 0)
      return emitOpError("dimension ") << d << " is not positive";
    if (bytes > kMaxBytes / d)
      return emitOpError("is larger than 2^48 bytes");
    bytes *= d;
  }
  const int64_t group = getGroup();
  if (group < 0)
    return emitOpError("group must be non-negative, got ") << group;
  if (group > 0) {
    StringRef part = getSymName().rsplit('.').second;
    if (!llvm::is_contained({"w_q", "scales", "zeros"}, part))
      return emitOpError("only the w_q, scales and zeros of a W4A16 weight have a group");
    if (getShape().size() < 2)
      return emitOpError("a W4A16 part is at least [rows, cols]");
    if (group % 2)
      return emitOpError("group ") << group << " is odd (w_q packs two input rows per byte)";
    const int64_t rows = getShape()[getShape().size() - 2];
    if (part == "w_q" && (2 * rows) % group)
      return emitOpError("w_q's ") << 2 * rows << " input rows are not a whole number of groups of "
                                   << group;
  }
  const int64_t tile = getTile();
  if (tile != 0 && (group == 0 || tile % 16 || tile > 128 || tile < 0))
    return emitOpError("tile must be 0 (row-major) or, on a W4A16 part, a multiple of 16 up to "
                       "128 columns, got ")
           << tile;
  if (tile > 0 && getShape().back() % tile)
    return emitOpError("tile ") << tile << " does not divide its " << getShape().back()
                                << " columns";
  StringRef order = getOrder();
  if (!order.empty()) {
    if (order != "mma" && order != "int8")
      return emitOpError("order must be \"mma\" or \"int8\" (or absent), got \"") << order
                                                                                  << "\"";
    if (!getSymName().ends_with(".w_q") || (tile != 128 && tile != 64))
      return emitOpError("order '") << order
                                    << "' needs a .w_q part stored in 128- or 64-wide tiles, got tile "
                                    << tile;
  }
  return success();
}

LogicalResult CounterOp::verify() {
  // (Signed: I64Attr's getter is unsigned.)
  if (const auto size = static_cast<int64_t>(getSize()); size <= 0)
    return emitOpError("size must be positive, got ") << size;
  if (getSize() > kMaxCountersPerArray)
    return emitOpError("size ") << getSize() << " exceeds the " << kMaxCountersPerArray
                                << " counters one array may have";
  return success();
}

LogicalResult WaitOp::verify() {
  if (!getInPrologue())
    return success();
  // A prologue wait belongs to a task of its phase whose kind has a form
  // that waits in its prologue (one that names the buffers such a wait may
  // guard: getPrologueGuardedBuffers), and is its only one, or one of two
  // where the task stages two producers' outputs (maxPrologueWaits: a
  // GEMV's gated norm input).
  auto phase = (*this)->getParentOfType<PhaseOp>();
  Operation *task = nullptr;
  for (TaskOpInterface t : phase.getBodyBlock().getOps<TaskOpInterface>())
    if (t.getName() == getTask())
      task = t.getOperation();
  if (!task) // the kernel's verifier names the missing task
    return success();
  const unsigned limit = maxPrologueWaits(cast<TaskOpInterface>(task));
  if (limit == 0)
    return emitOpError("in_prologue: task '")
           << getTask() << "' is a " << task->getName().getStringRef()
           << ", which has no form that waits in its prologue: its waits stay before it";
  // The one past the limit is the one reported.
  unsigned before = 0;
  for (WaitOp w : phase.getBodyBlock().getOps<WaitOp>()) {
    if (w == *this)
      break;
    before += w.getInPrologue() && w.getTask() == getTask();
  }
  if (before >= limit)
    return emitOpError("in_prologue: task '")
           << getTask() << "' has " << (before == 1 ? "a second" : "a third")
           << " prologue wait (at most " << limit
           << (limit == 1 ? "" : ": a gated norm input's o and gate") << ")";
  return success();
}

void PhaseOp::build(OpBuilder &b, OperationState &state, StringRef name) {
  state.addAttribute(getNameAttrName(state.name), b.getStringAttr(name));
  Region *body = state.addRegion();
  body->push_back(new Block());
}

/// l2_routed_tasks marks a phase of routed MoE down tiles; on a phase
/// without one it could never ask for anything, so the mark is refused
/// there. (Where the down tiles' weights are not tile-packed the emitter
/// asks for nothing either; that is the weights' layout, not the mark.)
LogicalResult PhaseOp::verify() {
  if (getL2RoutedTasks() && !hasRoutedMoeDown())
    return emitOpError("l2_routed_tasks on a phase with no routed moe_down task (one that "
                       "names its router's logits)");
  return success();
}

bool PhaseOp::hasRoutedMoeDown() {
  return llvm::any_of(getBodyBlock().getOps<MoeDownOp>(),
                      [](MoeDownOp d) { return d.getLogits().has_value(); });
}

SmallVector<GridTask> PhaseOp::getGridTasks() {
  SmallVector<GridTask> grid;
  int64_t first = 0;
  for (TaskOpInterface t : getBodyBlock().getOps<TaskOpInterface>()) {
    if (t.isEveryBlock())
      continue;
    grid.push_back({t, first});
    first += t.getCount();
  }
  return grid;
}

int64_t PhaseOp::getNumGridInstances() {
  SmallVector<GridTask> grid = getGridTasks();
  return grid.empty() ? 0 : grid.back().first + grid.back().task.getCount();
}

int64_t PhaseOp::getTaskBytes() {
  int64_t bytes = 0;
  for (TaskOpInterface t : getBodyBlock().getOps<TaskOpInterface>())
    bytes += t.getBytes();
  return bytes;
}

LogicalResult mk::schedule::verifyTaskOp(TaskOpInterface t) {
  const int64_t count = t.getCount(), bytes = t.getBytes();
  if (count <= 0)
    return t.emitOpError("count must be positive, got ") << count;
  if (count > kMaxTaskInstances)
    return t.emitOpError("count ") << count << " exceeds the " << kMaxTaskInstances
                                   << " instances a task may have";
  if (t.isEveryBlock() && count != 1)
    return t.emitOpError("an every_block task has count 1");
  if (t.isEveryBlock() && t.getKind() != TaskKind::ResidualRmsnorm &&
      t.getKind() != TaskKind::Opaque)
    return t.emitOpError("partition every_block is a residual_rmsnorm's (the norm every "
                         "block recomputes), not a ")
           << taskKindName(t.getKind()) << "'s";
  if (bytes < 0)
    return t.emitOpError("bytes must be non-negative, got ") << bytes;
  if (t->hasAttr("poll_logits") && t.getStrArg("logits").empty())
    return t.emitOpError("poll_logits on a task without router logits");
  // A registered kind's arguments follow its specs (TaskKinds.h). An
  // `opaque` task: the analysis passes see only its accesses, counters and
  // barriers (their tests use such tasks), and the partition and the
  // emitter refuse it.
  if (!lookupTaskKind(t.getKind()))
    return success();
  // The kind's op declares its arguments: any other attribute without a
  // dialect prefix is a misspelt or misplaced one.
  for (NamedAttribute a : t->getDiscardableAttrs())
    if (!a.getName().getValue().contains('.'))
      return t.emitOpError("has no argument '")
             << a.getName().getValue() << "' (a " << taskKindName(t.getKind())
             << " task's arguments: " << describeTaskArgs(t.getKind()) << ")";
  if (auto g = dyn_cast<W4A16GemvOp>(t.getOperation()))
    if (failed(verifyGatedNormInput(g)) || failed(verifyArgmaxOfTiles(g)))
      return failure();
  if (isa<MlaAttentionChunkOp>(t.getOperation()) && failed(verifyMlaAttentionForm(t)))
    return failure();
  return verifyTaskArgs(t, TaskArgStage::Formed);
}

LogicalResult mk::schedule::verifyMlaAttentionForm(TaskOpInterface t) {
  const int64_t sub = t.getIntArg("sub_rows", kMlaTemplateSubRows),
                parts = t.getIntArg("query_parts", kMlaTemplateQueryParts),
                rows = t.getIntArg("chunk_rows", kMlaTemplateChunkRows),
                heads = t.getIntArg("heads", 0);
  const std::optional<int64_t> group =
      t.getArg("head_group") ? std::optional<int64_t>(t.getIntArg("head_group")) : std::nullopt;
  if (group && (*group < 1 || *group > 16 || (heads > 0 && heads % *group)))
    return t.emitOpError("head_group must divide the ") << heads << " heads and be at most 16 "
                                                           "(the mma's A rows), got "
                                                        << *group;
  if (sub != 16 && sub != 32)
    return t.emitOpError("sub_rows must be 16 or 32, got ") << sub;
  if (sub == 32 && group && *group > 8)
    return t.emitOpError("sub_rows = 32 needs at most 8 heads per task, got ") << *group;
  if (parts != 1 && parts != 2)
    return t.emitOpError("query_parts must be 1 or 2, got ") << parts;
  if (parts == 1 && !group)
    return t.emitOpError("query_parts = 1 needs a head_group (of 9 to 16 heads)");
  if (parts == 1 && *group < 9)
    return t.emitOpError("query_parts = 1 needs a head_group of 9 to 16 heads, got ") << *group;
  if (rows < 16 || rows > kMaxMlaChunkRows || rows % 16)
    return t.emitOpError("chunk_rows must be a multiple of 16 in 16..")
           << kMaxMlaChunkRows << ", got " << rows;
  return success();
}

LogicalResult mk::schedule::verifyGatedNormInput(W4A16GemvOp g) {
  const int present = int(bool(g.getGatedNormGateAttr())) + int(bool(g.getGatedNormWeightAttr())) +
                      int(bool(g.getGatedNormEpsAttr())) + int(bool(g.getGatedNormHeadDimAttr()));
  if (present == 0)
    return success();
  if (present != 4)
    return g.emitOpError("a gated norm input takes gated_norm_gate, gated_norm_weight, "
                         "gated_norm_eps and gated_norm_head_dim together");
  const int64_t dk = int64_t(*g.getGatedNormHeadDim()), k = int64_t(g.getK());
  if (g.getWeights().size() != 1)
    return g.emitOpError("a gated norm input is staged for one weight, not ")
           << g.getWeights().size();
  if (g.getInputOffset().value_or(0) != 0)
    return g.emitOpError("a gated norm input is read from offset 0 (whole heads), not ")
           << *g.getInputOffset();
  if (dk % 32)
    return g.emitOpError("a gated norm input's heads are staged 32 values per lane step: ")
           << dk << " is no multiple of 32";
  // Each instance stages its k-slice: whole heads of the norm.
  const int64_t slice = g.getKsplit() ? k / int64_t(*g.getKsplit()) : k;
  if (k % dk || slice % dk)
    return g.emitOpError("a gated norm input's k-slices must be whole heads of ")
           << dk << " values (k " << k << ", slice " << slice << ")";
  return success();
}

std::string mk::schedule::argmaxOfTilesRefusal(W4A16GemvOp g) {
  // Each instance is one whole tile of one weight's columns, stored as bf16.
  if (g.getWeights().size() != 1 || g.getN().size() != 1)
    return "an argmax of the tiles is over one weight's output, not " +
           std::to_string(g.getWeights().size()) + " weights and " +
           std::to_string(g.getN().size()) + " outputs";
  if (g.getEpilogue().value_or("") == "atomic_f32")
    return "an argmax of the tiles needs the stored (bf16) output, not the atomic_f32 sums";
  if (g.getKsplit() && *g.getKsplit() != 1)
    return "an argmax of the tiles needs whole tiles (ksplit 1), not ksplit " +
           std::to_string(*g.getKsplit());
  if (g.getUnitCols().value_or(0) != 0)
    return "an argmax of the tiles takes plain column tiles, not unit_cols";
  // Every instance is one tile and merges once: the last of `count` writes.
  TaskOpInterface t = g;
  if (g.getTiles() && int64_t(*g.getTiles()) != t.getCount())
    return "an argmax of the tiles needs one instance per tile: count " +
           std::to_string(t.getCount()) + ", tiles " + std::to_string(*g.getTiles());
  return "";
}

LogicalResult mk::schedule::verifyArgmaxOfTiles(W4A16GemvOp g) {
  if (!g.getArgmaxOutputAttr() && !g.getArgmaxScratchAttr())
    return success();
  if (!g.getArgmaxOutputAttr() || !g.getArgmaxScratchAttr())
    return g.emitOpError("an argmax of the tiles takes argmax_output and argmax_scratch together");
  if (std::string why = argmaxOfTilesRefusal(g); !why.empty())
    return g.emitOpError(why);
  return success();
}

TaskOpInterface mk::schedule::createTaskOp(OpBuilder &b, Location loc, TaskKind kind,
                                           StringRef name, StringRef op,
                                           std::optional<Partition> partition,
                                           DictionaryAttr args) {
  OperationState state(loc, ("schedule." + stringifyTaskKind(kind)).str());
  state.addAttribute("name", b.getStringAttr(name));
  if (!op.empty())
    state.addAttribute("op", b.getStringAttr(op));
  if (partition)
    state.addAttribute("partition", PartitionAttr::get(b.getContext(), *partition));
  for (NamedAttribute a : withBufferSymbols(b.getContext(), kind, args))
    state.addAttribute(a.getName(), a.getValue());
  return cast<TaskOpInterface>(b.create(state));
}

std::optional<TaskKind> TaskOpInterface::getTaskKind() {
  if (getKind() == TaskKind::Opaque)
    return std::nullopt;
  return getKind();
}

Attribute TaskOpInterface::getArg(StringRef name) { return getOperation()->getAttr(name); }

void TaskOpInterface::setArg(StringRef name, Attribute value) {
  if (value)
    getOperation()->setAttr(name, value);
  else
    getOperation()->removeAttr(name);
}

DictionaryAttr TaskOpInterface::getArgDictionary() {
  if (getKind() == TaskKind::Opaque) {
    if (auto args = getOperation()->getAttrOfType<DictionaryAttr>("args"))
      return args;
    return DictionaryAttr::get(getContext());
  }
  NamedAttrList args;
  if (const TaskKindInfo *info = lookupTaskKind(getKind()))
    for (ArrayRef<TaskArgSpec> list : {info->args, info->familyArgs})
      for (const TaskArgSpec &a : list)
        if (Attribute v = getArg(a.name))
          args.set(a.name, v);
  return args.getDictionary(getContext());
}

int64_t TaskOpInterface::getIntArg(StringRef name, int64_t dflt) {
  if (auto a = dyn_cast_or_null<IntegerAttr>(getArg(name)))
    return a.getInt();
  return dflt;
}
double TaskOpInterface::getFloatArg(StringRef name, double dflt) {
  if (auto a = dyn_cast_or_null<FloatAttr>(getArg(name)))
    return a.getValueAsDouble();
  return dflt;
}
StringRef TaskOpInterface::getStrArg(StringRef name) {
  Attribute v = getArg(name);
  if (auto a = dyn_cast_or_null<StringAttr>(v))
    return a.getValue();
  if (auto r = dyn_cast_or_null<FlatSymbolRefAttr>(v))
    return r.getValue();
  return "";
}
SmallVector<int64_t> mk::schedule::argInts(ArrayAttr a) {
  SmallVector<int64_t> v;
  if (a)
    for (Attribute x : a)
      if (auto i = dyn_cast<IntegerAttr>(x))
        v.push_back(i.getInt());
  return v;
}
SmallVector<std::string> mk::schedule::argNames(ArrayAttr a) {
  SmallVector<std::string> v;
  if (a)
    for (Attribute x : a)
      if (auto s = dyn_cast<StringAttr>(x))
        v.push_back(s.getValue().str());
      else if (auto r = dyn_cast<FlatSymbolRefAttr>(x))
        v.push_back(r.getValue().str());
  return v;
}
SmallVector<int64_t> TaskOpInterface::getIntArrayArg(StringRef name) {
  return argInts(dyn_cast_or_null<ArrayAttr>(getArg(name)));
}
SmallVector<std::string> TaskOpInterface::getStrArrayArg(StringRef name) {
  return argNames(dyn_cast_or_null<ArrayAttr>(getArg(name)));
}

#include "mk/Dialect/Schedule/ScheduleInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "mk/Dialect/Schedule/ScheduleOps.cpp.inc"
