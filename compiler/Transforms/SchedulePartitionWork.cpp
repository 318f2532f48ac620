//===- SchedulePartitionWork.cpp - Tasks balanced by bytes streamed -------===//
//
// Decode is bandwidth-bound: a task's time is the bytes it streams plus a
// fixed latency, and a phase lasts as long as its busiest SM. A W4A16 tile
// reads tn contiguous bytes per row pair of w_q ([K/2, N]); with
// `full-segment-bytes` set, rows read in shorter pieces cost twice as much
// per byte (an experiment: it moved the KDA projections to 128-wide tiles on
// half the blocks, 2% slower end to end; docs/perf-notes.md). For every task
// its kind gives the legal cuts (TaskOpInterface::getLegalCuts: tile widths
// the template accepts, split-K slices aligned with the units the producer
// publishes, state column chunks) and choosePartition (Planning.h) picks
// the cheapest.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"
#include "Transforms/Planning.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <limits>
#include <map>

namespace mk::schedule {
#define GEN_PASS_DEF_SCHEDULEPARTITIONWORK
#include "Transforms/Passes.h.inc"
} // namespace mk::schedule

using namespace mlir;
using namespace mk;
using namespace mk::schedule;
using planning::PartitionOption;
using planning::PhaseLoad;

namespace {

struct SchedulePartitionWorkPass
    : schedule::impl::SchedulePartitionWorkBase<SchedulePartitionWorkPass> {
  using Base::Base;
  void runOnOperation() override;

  LogicalResult partition(TaskOpInterface t, KernelOp kernel);
  int pick(const std::vector<PartitionOption> &opts) {
    return planning::choosePartition(opts, budget ? budget : current ? current : targetSms,
                                     {overheadBytes, fullSegmentBytes});
  }
  void finish(TaskOpInterface t, int64_t count, int64_t bytesPerTask, Partition how) {
    t.setCount(count);
    t.setBytes(count * bytesPerTask);
    t.setPartition(how);
  }
  llvm::StringMap<TaskOpInterface> producer; // buffer -> (last) writing task

  /// Moves tasks that have slack into later phases with idle blocks (below).
  void balancePhases(KernelOp kernel);
  /// `t` cut again as partition() does, for `blocks` blocks; the attributes
  /// it would get (t itself is left as it was).
  FailureOr<DictionaryAttr> recut(TaskOpInterface t, KernelOp kernel, int64_t blocks);
  /// Blocks the cut is balanced for; 0: the task's cut_blocks, else
  /// target-sms (`current`: the cut_blocks of the task being cut).
  int64_t budget = 0, current = 0;
  /// phase-budget's rule: the blocks a phase's earlier grid instances
  /// (`used`) leave a later task, at least a quarter of the grid.
  int64_t blocksLeft(int64_t used) const {
    return std::max<int64_t>(targetSms - used, (targetSms + 3) / 4);
  }
  /// Each task's attributes before it was cut, and the producers of what it
  /// reads as the first walk saw them (what partition() looks up).
  DenseMap<Operation *, DictionaryAttr> uncut;
  DenseMap<Operation *, SmallVector<std::pair<StringRef, TaskOpInterface>>> readProducers;
  /// The blocks each task was first cut for (phase-budget's, its
  /// cut_blocks, or target-sms): recut-overflowing-phases records them on a
  /// task it leaves as it was.
  DenseMap<Operation *, int64_t> firstBudget;
  /// recut()'s answers by (task, blocks).
  std::map<std::pair<Operation *, int64_t>, FailureOr<DictionaryAttr>> recuts;
  /// The kernel's buffers by name (a walk per resized buffer made the pass
  /// quadratic in the depth).
  llvm::StringMap<BufferOp> buffers;
};


LogicalResult SchedulePartitionWorkPass::partition(TaskOpInterface t, KernelOp kernel) {
  if (t.isEveryBlock()) {
    finish(t, 1, t.getIntArg("dim") * 2, Partition::EveryBlock);
    return success();
  }
  // The task's kind says how its work may be cut (TaskOpInterface), the
  // cost model which cut this kernel takes.
  TaskCutContext ctx;
  ctx.threads = kernel.getThreads();
  ctx.targetBlocks = targetSms;
  ctx.attentionChunks = attentionChunks;
  ctx.attentionHeadGroup = attentionHeadGroup;
  ctx.attentionSubRows = attentionSubRows;
  ctx.attentionQueryParts = attentionQueryParts;
  ctx.attentionChunkRows = attentionChunkRows;
  auto producerOf = [&](StringRef buffer) { return producer.lookup(buffer); };
  ctx.producerOf = producerOf; // (a function_ref: the lambda outlives the call)
  FailureOr<std::vector<TaskCut>> cuts = t.getLegalCuts(ctx);
  if (failed(cuts))
    return failure();
  int i = 0;
  if (cuts->size() > 1) {
    std::vector<PartitionOption> opts;
    for (const TaskCut &c : *cuts)
      opts.push_back({c.count, c.bytesPerTask, c.segmentBytes});
    i = pick(opts);
  }
  const TaskCut &c = (*cuts)[i];
  MLIRContext *mctx = t.getContext();
  for (const auto &[name, v] : c.intArgs)
    t.setArg(name, IntegerAttr::get(IntegerType::get(mctx, 64), v));
  for (const auto &[name, v] : c.strArgs)
    t.setArg(name, StringAttr::get(mctx, v));
  for (const auto &[name, shape] : c.bufferShapes)
    if (BufferOp b = buffers.lookup(name))
      b.setShape(shape);
  finish(t, c.count, c.bytesPerTask, c.partition);
  return success();
}

/// mk::kMaxGrid (grid_sync.cuh): the most blocks a kernel runs with, so the
/// most worth balancing for, and the most MLA attention chunks that run.
constexpr int64_t kMaxBlocks = 1024;


/// A task's accesses (TaskKinds.h: what its buffer arguments name, then
/// its access lists).
using Accesses = TaskAccesses;

/// Whether a task with accesses `later` (after `t` in program order) must
/// stay after it: it reads what t writes or accumulates, writes anything t
/// touches, or accumulates into what t reads or writes (accumulations
/// commute).
static bool mustFollow(const Accesses &t, const Accesses &later) {
  auto meets = [](ArrayRef<StringRef> a, std::initializer_list<ArrayRef<StringRef>> bs) {
    for (StringRef x : a)
      for (ArrayRef<StringRef> b : bs)
        if (llvm::is_contained(b, x))
          return true;
    return false;
  };
  return meets(later.reads, {t.writes, t.accumulates}) ||
         meets(later.writes, {t.reads, t.writes, t.accumulates}) ||
         meets(later.accumulates, {t.reads, t.writes});
}

/// Sets `t`'s attributes to `d` exactly: setAttrs leaves an inherent
/// attribute (a property: the cut's arguments, `count`, ...) that `d` lacks
/// as it was, so those are removed (back to absent or their default) first.
static void setAttrsExactly(TaskOpInterface t, DictionaryAttr d) {
  for (StringAttr name : t->getName().getAttributeNames())
    if (!d.get(name))
      t->removeAttr(name);
  t->setAttrs(d);
}

FailureOr<DictionaryAttr> SchedulePartitionWorkPass::recut(TaskOpInterface t, KernelOp kernel,
                                                           int64_t blocks) {
  auto [it, fresh] = recuts.try_emplace({t.getOperation(), blocks}, failure());
  if (!fresh)
    return it->second;
  producer.clear();
  for (auto &[name, p] : readProducers.lookup(t))
    producer[name] = p;
  DictionaryAttr cut = t->getAttrDictionary();
  setAttrsExactly(t, uncut.lookup(t));
  budget = blocks;
  LogicalResult ok = partition(t, kernel);
  budget = 0;
  t.setCutBlocks(blocks);
  DictionaryAttr out = t->getAttrDictionary();
  setAttrsExactly(t, cut);
  if (succeeded(ok))
    it->second = out;
  return it->second;
}

/// The most phases a task moves: what it could gain further on is spare
/// blocks it finds nearer too, and the pass stays linear in the depth.
constexpr int kBalanceWindow = 8;
/// The most grid tasks a move may leave a phase with: each is one more
/// branch of the phase's task loop, and ptxas spills the kernel body once
/// phases collect many (a 27-layer spec's zeroing tasks spread over its
/// first phases spilled 956 B on sm_90, 212 B with this limit; the unit's
/// phases hold at most 9). A limit on the phase, not on the moves, so that
/// the pass run again on its output moves nothing more.
constexpr int kMaxPhaseTasks = 9;

/// ASAP placement puts a task in the first phase its inputs allow, beside the
/// phase's main work, even when what consumes it runs phases later (a shared
/// expert's down projection next to the routed experts' gate/up, with the
/// routed down phase leaving ~half the blocks idle). Phases are visited last
/// to first, their tasks last to first; a task moves to the later phase
/// (before anything that must follow it, at most kBalanceWindow phases on)
/// where, cut again for that phase's
/// idle blocks, it lowers the sum of the two phases' busiest-block loads the
/// most, or, where none does and `balance-spread` is set (off by default:
/// measured slower on the unit, perf notes #72), spreads their loads most
/// evenly without raising it (sum of squared block loads; ties: the
/// earliest phase). It goes last in its new phase, so that its
/// instances are dealt to the blocks the phase left idle. In a phase with
/// more instances than blocks, a task may also be cut again in place for
/// the blocks the others leave idle, where that lowers the phase's busiest
/// block: which is also what makes the pass give the same cuts when it runs
/// again on its own output (a moved task is then the in-place case).
void SchedulePartitionWorkPass::balancePhases(KernelOp kernel) {
  // A kernel whose counters are placed (the pass run again on a finished
  // schedule) keeps its placement; its balanced tasks were cut again for
  // their cut_blocks above.
  if (!kernel.getBodyBlock().getOps<CounterOp>().empty())
    return;
  SmallVector<PhaseOp> phases(kernel.getBodyBlock().getOps<PhaseOp>());
  // Every task's accesses, gathered before any lookup (a lookup must not
  // insert: that would move the entries another lookup still refers to).
  DenseMap<Operation *, Accesses> accessMap;
  kernel.walk([&](TaskOpInterface t) {
    accessMap[t.getOperation()] = taskAccesses(t);
  });
  auto accesses = [&](TaskOpInterface t) -> const Accesses & {
    return accessMap.find(t.getOperation())->second;
  };
  llvm::StringSet<> shared; // every-block values in shared memory: stay put
  kernel.walk([&](BufferOp b) {
    if (b.getSpace() == "shared")
      shared.insert(b.getSymName());
  });
  // Whether t reads or writes an every-block value in shared memory (the
  // norm's output): such a task stays in its phase.
  auto touchesShared = [&](TaskOpInterface t) {
    const Accesses &acc = accesses(t);
    for (const SmallVector<StringRef> *list : {&acc.reads, &acc.writes, &acc.accumulates})
      for (StringRef n : *list)
        if (shared.contains(n))
          return true;
    return false;
  };
  auto costOf = [&](int64_t count, int64_t bytes) {
    return bytes / std::max<int64_t>(count, 1) + overheadBytes;
  };
  // The load of `ph` without task `out` and with a task cut as `inCut`.
  // The load of `ph` with task `out` left out, or, with `inCut`, cut as
  // `inCut` (in its place when it is ph's, else added last).
  auto load = [&](PhaseOp ph, TaskOpInterface out, DictionaryAttr inCut) {
    std::vector<std::pair<int64_t, int64_t>> v;
    auto cutOf = [&](DictionaryAttr c) -> std::pair<int64_t, int64_t> {
      int64_t n = c.getAs<IntegerAttr>("count").getInt();
      return {n, costOf(n, c.getAs<IntegerAttr>("bytes").getInt())};
    };
    bool placed = false;
    for (TaskOpInterface o : ph.getBodyBlock().getOps<TaskOpInterface>()) {
      if (o.isEveryBlock())
        continue;
      if (o == out) {
        if (inCut) {
          v.push_back(cutOf(inCut));
          placed = true;
        }
        continue;
      }
      v.push_back({o.getCount(), costOf(o.getCount(), o.getBytes())});
    }
    if (inCut && !placed)
      v.push_back(cutOf(inCut));
    return planning::phaseLoad(v, targetSms);
  };
  // What a change saves: busiest blocks first, then the spread.
  using Gain = std::pair<int64_t, double>;
  auto saved = [](std::initializer_list<PhaseLoad> before,
                  std::initializer_list<PhaseLoad> after) {
    Gain g{0, 0.0};
    for (const PhaseLoad &l : before)
      g = {g.first + l.busiest, g.second + l.squares};
    for (const PhaseLoad &l : after)
      g = {g.first - l.busiest, g.second - l.squares};
    return g;
  };
  for (int p = int(phases.size()) - 2; p >= 0; --p) {
    SmallVector<TaskOpInterface> tasks(phases[p].getBodyBlock().getOps<TaskOpInterface>());
    // Phase p's grid tasks in block order, as (task, count, cost): its load
    // without a task, or with one cut otherwise, comes from this list, and
    // whether a later task of the phase must follow a task from counts of
    // their accesses by buffer, not from a walk over the phase's ops per
    // task (phase 0 holds every layer's zeroing tasks: those walks made the
    // pass quadratic in the depth).
    struct Entry {
      Operation *op;
      int64_t count, cost;
      bool pinned = false; // reads or writes an every-block value in shared memory
    };
    std::vector<Entry> entries;
    int64_t used = 0; // instances of phase p's grid tasks
    for (TaskOpInterface o : tasks)
      if (!o.isEveryBlock()) {
        entries.push_back({o.getOperation(), o.getCount(), costOf(o.getCount(), o.getBytes()),
                           touchesShared(o)});
        used += o.getCount();
      }
    // Task `op` as the phase's balancing sees it, cut as `cut` (recut()'s).
    auto cutEntry = [&](Operation *op, DictionaryAttr cut) {
      const int64_t n = cut.getAs<IntegerAttr>("count").getInt();
      return Entry{op, n, costOf(n, cut.getAs<IntegerAttr>("bytes").getInt())};
    };
    // With `pinnedOnly`, the load of the tasks that must stay in the phase
    // alone (where the others go is the moves' business).
    auto entryLoad = [&](Operation *out, const Entry *in, bool pinnedOnly = false) {
      std::vector<std::pair<int64_t, int64_t>> v;
      v.reserve(entries.size());
      for (const Entry &e : entries) {
        if (pinnedOnly && !e.pinned)
          continue;
        if (e.op != out)
          v.push_back({e.count, e.cost});
        else if (in)
          v.push_back({in->count, in->cost});
      }
      return planning::phaseLoad(v, targetSms);
    };
    // The accesses of the phase's tasks after the one being decided (the
    // walk is in reverse: the ones decided before it that stayed).
    llvm::StringMap<int> laterReads, laterWrites, laterAccs;
    auto addLater = [&](TaskOpInterface o) {
      const Accesses &a = accesses(o);
      for (StringRef x : a.reads)
        ++laterReads[x];
      for (StringRef x : a.writes)
        ++laterWrites[x];
      for (StringRef x : a.accumulates)
        ++laterAccs[x];
    };
    auto anyIn = [](const llvm::StringMap<int> &m, ArrayRef<StringRef> xs) {
      return llvm::any_of(xs, [&](StringRef x) {
        auto it = m.find(x);
        return it != m.end() && it->second > 0;
      });
    };
    // mustFollow(t, o) for some later task o of the phase.
    auto laterMustFollow = [&](TaskOpInterface t) {
      const Accesses &a = accesses(t);
      return anyIn(laterReads, a.writes) || anyIn(laterReads, a.accumulates) ||
             anyIn(laterWrites, a.reads) || anyIn(laterWrites, a.writes) ||
             anyIn(laterWrites, a.accumulates) || anyIn(laterAccs, a.reads) ||
             anyIn(laterAccs, a.writes);
    };
    // Whether t may be cut again, in its phase or in a later one.
    auto recuttable = [&](TaskOpInterface t) {
      // Attention chunks size their partial buffers as they are cut.
      return !(t.isEveryBlock() ||
               isa<OpaqueTaskOp, MlaAttentionChunkOp, GqaAttentionChunkOp>(t.getOperation()) ||
               t.getCutBlocks()); // (cut_blocks: balanced already)
    };
    // Whether t may also move to a later phase.
    auto movable = [&](TaskOpInterface t) {
      // A phase is never left without grid work.
      return !touchesShared(t) && !laterMustFollow(t) && entries.size() > 1;
    };
    std::optional<PhaseLoad> hereCache;
    bool recutHere = false; // a task of phase p cut again in place
    for (TaskOpInterface t : llvm::reverse(tasks)) {
      // A task that reads or writes an every-block value in shared memory
      // stays in its phase; with recut-overflowing-phases it may still be
      // cut again there.
      const bool canMove = recuttable(t) && movable(t);
      const bool pinned = recuttable(t) && touchesShared(t);
      if (!canMove && !(recutOverflow && pinned)) {
        addLater(t);
        continue;
      }
      int last = p;
      for (int q = p + 1; canMove && q < int(phases.size()) && q <= p + kBalanceWindow; ++q) {
        if (llvm::any_of(phases[q].getBodyBlock().getOps<TaskOpInterface>(), [&](TaskOpInterface o) {
              return mustFollow(accesses(t), accesses(o));
            }))
          break;
        last = q;
      }
      if (!hereCache)
        hereCache = entryLoad(nullptr, nullptr);
      const PhaseLoad here = *hereCache;
      std::optional<PhaseLoad> without; // computed when a later phase is tried
      Gain bestGain{0, 0.0};
      int best = -1;
      DictionaryAttr bestCut;
      // Phase p itself first (t cut again for the blocks its phase mates
      // leave idle, where they are more than the grid), then the later ones.
      for (int q = p; q <= last; ++q) {
        int64_t usedQ = 0, grid = 0;
        if (q == p) {
          usedQ = used - t.getCount();
        } else {
          for (TaskOpInterface o : phases[q].getBodyBlock().getOps<TaskOpInterface>())
            grid += !o.isEveryBlock();
          if (grid >= kMaxPhaseTasks)
            continue;
          for (TaskOpInterface o : phases[q].getBodyBlock().getOps<TaskOpInterface>())
            if (!o.isEveryBlock() && o != t)
              usedQ += o.getCount();
        }
        int64_t idle = targetSms - usedQ;
        if (idle <= 0 || (q == p && usedQ + t.getCount() <= targetSms))
          continue;
        FailureOr<DictionaryAttr> cut = recut(t, kernel, idle);
        if (failed(cut) || cut->getAs<IntegerAttr>("count").getInt() > idle)
          continue;
        Gain gain;
        if (q == p) {
          const Entry in = cutEntry(t.getOperation(), *cut);
          // A pinned task is judged by the load of the pinned tasks: judged
          // with the zeroing tasks beside them, whose bytes the model
          // charges as weights', the unit's first phase would cut its
          // q/k/v/g tiles 128 wide on 128 blocks, the form #10-#11 and #21
          // measured slower.
          gain = canMove ? saved({here}, {entryLoad(t.getOperation(), &in)})
                         : saved({entryLoad(nullptr, nullptr, true)},
                                 {entryLoad(t.getOperation(), &in, true)});
        } else {
          if (!without)
            without = entryLoad(t.getOperation(), nullptr);
          gain = saved({here, load(phases[q], {}, {})}, {*without, load(phases[q], t, *cut)});
        }
        // Never a busier block; fewer busy bytes, or as many spread better.
        if (gain.first < 0 || (gain.first == 0 && (!balanceSpread || gain.second <= 0)))
          continue;
        if (best < 0 || gain > bestGain) {
          bestGain = gain;
          best = q;
          bestCut = *cut;
        }
      }
      if (best < 0) {
        addLater(t);
        continue;
      }
      const int64_t before = t.getCount();
      setAttrsExactly(t, bestCut);
      hereCache.reset();
      auto entry = llvm::find_if(entries, [&](const Entry &e) { return e.op == t.getOperation(); });
      if (best != p) {
        t->moveBefore(&phases[best].getBodyBlock(), phases[best].getBodyBlock().end());
        used -= before;
        entries.erase(entry);
      } else {
        used += t.getCount() - before;
        entry->count = t.getCount();
        entry->cost = costOf(t.getCount(), t.getBytes());
        addLater(t);
        recutHere |= !canMove;
      }
    }
    // With recut-overflowing-phases: after a pinned task of the phase was
    // cut again in place, every later task of the phase that phase-budget
    // cut for the blocks the earlier ones left is cut again for what those
    // leave now (the wide router cut again to 128 instances leaves 136
    // blocks, not 8, for the shared expert's gate/up), where that lowers
    // the phase's busiest block (all its tasks: they are all placed by
    // now). A task not cut again keeps its cut with the blocks phase-budget
    // gave it recorded (cut_blocks), so that the pass run again on its
    // output, whose earlier tasks now take fewer blocks, cuts each as here.
    if (recutOverflow && recutHere && phaseBudget) {
      int64_t before = 0; // instances of the phase's earlier grid tasks
      for (TaskOpInterface o : phases[p].getBodyBlock().getOps<TaskOpInterface>()) {
        if (o.isEveryBlock())
          continue;
        if (before > 0 && recuttable(o)) {
          FailureOr<DictionaryAttr> cut = recut(o, kernel, blocksLeft(before));
          auto entry =
              llvm::find_if(entries, [&](const Entry &e) { return e.op == o.getOperation(); });
          bool taken = false;
          if (succeeded(cut) && entry != entries.end()) {
            const Entry in = cutEntry(o.getOperation(), *cut);
            const Gain gain =
                saved({entryLoad(nullptr, nullptr)}, {entryLoad(o.getOperation(), &in)});
            if (gain.first > 0) {
              setAttrsExactly(o, *cut);
              used += o.getCount() - entry->count;
              entry->count = o.getCount();
              entry->cost = costOf(o.getCount(), o.getBytes());
              taken = true;
            }
          }
          if (!taken)
            o.setCutBlocks(firstBudget.lookup(o.getOperation()));
        }
        before += o.getCount();
      }
    }
  }
}

void SchedulePartitionWorkPass::runOnOperation() {
  auto bad = [&](StringRef option, const Twine &rule, int64_t value) {
    mlir::emitError(getOperation().getLoc(), "schedule-partition-work: ")
        << option << " must be " << rule << ", got " << value;
    signalPassFailure();
  };
  if (targetSms < 1 || targetSms > kMaxBlocks)
    return bad("target-sms",
               "in 1.." + Twine(kMaxBlocks) + " (blocks the grid runs at once)",
               targetSms);
  // The balancing sums phases' costs (bytes per task plus this) in int64:
  // 2^40 (a terabyte per task) keeps every sum of up to kMaxBlocks tasks
  // of any phase far from overflow.
  constexpr int64_t kMaxOverheadBytes = int64_t(1) << 40;
  if (overheadBytes < 0 || overheadBytes > kMaxOverheadBytes)
    return bad("task-overhead-bytes", "in 0.." + Twine(kMaxOverheadBytes), overheadBytes);
  if (attentionHeadGroup < 1 || attentionHeadGroup > 16)
    return bad("attention-head-group", "in 1..16 (the mma's A rows)", attentionHeadGroup);
  if (attentionSubRows != 16 && attentionSubRows != 32)
    return bad("attention-sub-rows", "16 or 32", attentionSubRows);
  if (attentionQueryParts != 1 && attentionQueryParts != 2)
    return bad("attention-query-parts", "1 or 2", attentionQueryParts);
  if (attentionChunkRows < 16 || attentionChunkRows > kMaxMlaChunkRows ||
      attentionChunkRows % 16)
    return bad("attention-chunk-rows",
               "a multiple of 16 in 16.." + Twine(kMaxMlaChunkRows), attentionChunkRows);
  if (attentionChunks < 0 || attentionChunks > kMaxBlocks)
    return bad("attention-chunks",
               "in 0.." + Twine(kMaxBlocks) + " (at most one per block; 0: the default)",
               attentionChunks);
  if (fullSegmentBytes < 0)
    return bad("full-segment-bytes", ">= 0 (0: no penalty)", fullSegmentBytes);
  for (KernelOp kernel : getOperation().getOps<KernelOp>()) {
    kernel.setTargetSms(targetSms);
    producer.clear();
    uncut.clear();
    firstBudget.clear();
    readProducers.clear();
    recuts.clear();
    buffers.clear();
    kernel.walk([&](BufferOp b) { buffers[b.getSymName()] = b; });
    // phase-budget: instances of each phase's tasks cut so far.
    DenseMap<Operation *, int64_t> phaseUsed;
    WalkResult r = kernel.walk([&](TaskOpInterface t) {
      uncut[t] = t->getAttrDictionary();
      current = t.getCutBlocks().value_or(0);
      int64_t &used = phaseUsed[t->getParentOp()];
      if (phaseBudget && !current && !t.isEveryBlock() && used > 0)
        current = blocksLeft(used);
      firstBudget[t] = current ? current : targetSms;
      const TaskAccesses acc = taskAccesses(t);
      for (StringRef n : acc.reads)
        if (TaskOpInterface p = producer.lookup(n))
          readProducers[t].push_back({n, p});
      LogicalResult cut = partition(t, kernel);
      current = 0;
      if (failed(cut))
        return WalkResult::interrupt();
      if (!t.isEveryBlock())
        used += t.getCount();
      for (const SmallVector<StringRef> *list : {&acc.writes, &acc.accumulates})
        for (StringRef n : *list)
          producer[n] = t;
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      return signalPassFailure();
    if (balance)
      balancePhases(kernel);
  }
}

} // namespace
