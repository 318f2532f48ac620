//===- SchedulePartitionWork.cpp - Tasks balanced by bytes streamed -------===//
//
// Decode is bandwidth-bound: a task's time is the bytes it streams plus a
// fixed latency, and a phase lasts as long as its busiest SM. A W4A16 tile
// reads tn contiguous bytes per row pair of w_q ([K/2, N]); with
// `full-segment-bytes` set, rows read in shorter pieces cost twice as much
// per byte (an experiment: it moved the KDA projections to 128-wide tiles on
// half the blocks, 2% slower end to end; docs/perf-notes.md). For every task
// the legal cuts are enumerated (tile widths the template accepts, split-K
// slices aligned with the units the producer publishes, state column
// chunks) and choosePartition (Planning.h) picks the cheapest.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"
#include "Transforms/Planning.h"

#include "llvm/ADT/StringMap.h"

#include <limits>

namespace mk::schedule {
#define GEN_PASS_DEF_SCHEDULEPARTITIONWORK
#include "Transforms/Passes.h.inc"
} // namespace mk::schedule

using namespace mlir;
using namespace mk;
using namespace mk::schedule;
using planning::PartitionOption;

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Bytes of a W4A16 tile: K x TN nibbles plus its scales and zeros.
int64_t w4Bytes(int64_t k, int64_t tn, int64_t group) {
  return k * tn / 2 + 2 * ceilDiv(k, group) * tn * 2;
}

struct SchedulePartitionWorkPass
    : schedule::impl::SchedulePartitionWorkBase<SchedulePartitionWorkPass> {
  using Base::Base;
  void runOnOperation() override;

  LogicalResult partition(TaskOp t, KernelOp kernel);
  void set(TaskOp t, StringRef k, int64_t v) {
    NamedAttrList args(t.getArgs());
    args.set(k, IntegerAttr::get(IntegerType::get(t.getContext(), 64), v));
    t.setArgsAttr(args.getDictionary(t.getContext()));
  }
  void setStr(TaskOp t, StringRef k, StringRef v) {
    NamedAttrList args(t.getArgs());
    args.set(k, StringAttr::get(t.getContext(), v));
    t.setArgsAttr(args.getDictionary(t.getContext()));
  }
  int pick(const std::vector<PartitionOption> &opts) {
    return planning::choosePartition(opts, targetSms,
                                     {overheadBytes, fullSegmentBytes});
  }
  void finish(TaskOp t, int64_t count, int64_t bytesPerTask, StringRef how) {
    t.setCount(count);
    t.setBytes(count * bytesPerTask);
    if (t.getPartition().empty())
      t.setPartition(how);
  }
  llvm::StringMap<TaskOp> producer; // buffer -> (last) writing task
};

// Widest first: on equal estimates the wider tile (fewer tasks, longer
// contiguous pieces) wins. At most 128: the tensor-core tile's width.
static const int64_t kTiles[] = {128, 64, 32, 16};

LogicalResult SchedulePartitionWorkPass::partition(TaskOp t, KernelOp kernel) {
  const std::optional<mk::schedule::TaskKind> kind = t.getTaskKind();
  int64_t threads = kernel.getThreads();
  auto arrayArg = [&](StringRef n) { return t.getIntArrayArg(n); };
  // The arguments each kind's cut computes with are present and in the
  // kernel's int range: the task's verifier holds them to its kind's specs
  // (mk/Dialect/Schedule/TaskKinds.h).
  if (t.isEveryBlock()) {
    finish(t, 1, t.getIntArg("dim") * 2, "every_block");
    return success();
  }
  if (!kind)
    return t.emitOpError("no partitioning rule for kind '") << t.getKind() << "'";
  // One case per kind of the registry: -Wswitch names a kind without one.
  switch (*kind) {
  case mk::schedule::TaskKind::W4A16Gemv: {
    SmallVector<int64_t> ns = arrayArg("n");
    int64_t k = t.getIntArg("k"), g = t.getIntArg("group");
    int64_t unitCols = t.getIntArg("unit_cols");
    bool atomic = t.getStrArg("epilogue") == "atomic_f32";
    std::vector<PartitionOption> opts;
    std::vector<std::pair<int64_t, int64_t>> cuts; // (tn, ksplit)
    // Split-K only where the sum is accumulated; its slices follow the
    // units the input's producer publishes (one KDA / MLA head each).
    int64_t units = 1;
    StringRef inputUnit;
    if (atomic) {
      auto it = producer.find(t.getStrArg("input"));
      if (it != producer.end() && !it->second.getStrArg("unit").empty()) {
        inputUnit = it->second.getStrArg("unit");
        units = it->second.getIntArg("heads", 1);
      }
    }
    for (int64_t tn : kTiles) {
      if (unitCols && unitCols % tn)
        continue;
      if (tn > 16 && llvm::any_of(ns, [&](int64_t n) { return n < tn; }))
        continue;
      if (threads % (tn / 16))
        continue;
      int64_t tiles = 0;
      for (int64_t n : ns)
        tiles += ceilDiv(n, tn);
      for (int64_t ks = 1; ks <= (atomic ? 64 : 1); ks *= 2) {
        if (k % ks || (k / ks) % 2 || (units > 1 && units % ks) ||
            (units == 1 && ks > 1 && (k / ks) % g))
          continue;
        // A tile streams tn bytes of each row pair (w_q is [K/2, N]).
        opts.push_back({tiles * ks, w4Bytes(k / ks, tn, g), tn});
        cuts.push_back({tn, ks});
      }
    }
    if (opts.empty())
      return t.emitOpError("no legal GEMV tiling for these shapes");
    auto [tn, ks] = cuts[pick(opts)];
    int64_t tiles = opts[pick(opts)].count / ks;
    set(t, "tn", tn);
    set(t, "ksplit", ks);
    set(t, "tiles", tiles);
    finish(t, tiles * ks, w4Bytes(k / ks, tn, g), ks > 1 ? "split_k" : "cols");
    if (unitCols) {
      // Unit-major tile order: unit u's tiles of every segment are adjacent.
      setStr(t, "grain", t.getStrArg("unit"));
      set(t, "grain_per", (int64_t)ns.size() * unitCols / tn);
    } else if (!inputUnit.empty()) {
      setStr(t, "grain", inputUnit);
      set(t, "grain_per", tiles);
      set(t, "grain_span", units / ks);
    }
    return success();
  }
  case mk::schedule::TaskKind::Bf16Rows: {
    int64_t rows = t.getIntArg("rows"), k = t.getIntArg("k");
    if (!t.getStrArg("unit").empty()) {
      set(t, "rows_per_task", 1);
      setStr(t, "grain", t.getStrArg("unit"));
      set(t, "grain_per", 1);
      finish(t, rows, k * 2, "rows");
      return success();
    }
    std::vector<PartitionOption> opts;
    SmallVector<int64_t> rpts;
    for (int64_t r = 1; r <= rows; r *= 2) {
      opts.push_back({ceilDiv(rows, r), r * k * 2});
      rpts.push_back(r);
    }
    int i = pick(opts);
    set(t, "rows_per_task", rpts[i]);
    finish(t, opts[i].count, opts[i].bytesPerTask, "rows");
    return success();
  }
  case mk::schedule::TaskKind::KdaHeadChunk: {
    int64_t h = t.getIntArg("heads"), dk = t.getIntArg("head_dim");
    std::vector<PartitionOption> opts;
    SmallVector<int64_t> chunks;
    for (int64_t c : {16, 32, 64, 128, 256}) {
      if (c > dk || dk % c || threads % c || dk % (threads / c))
        continue;
      opts.push_back({h * dk / c, 2 * dk * c * 4 + 4 * dk * 2});
      chunks.push_back(c);
    }
    if (opts.empty())
      return t.emitOpError("no state chunking fits ")
             << threads << " threads and head_dim " << dk;
    int i = pick(opts);
    set(t, "chunk", chunks[i]);
    setStr(t, "grain", t.getStrArg("unit"));
    set(t, "grain_per", dk / chunks[i]);
    finish(t, opts[i].count, opts[i].bytesPerTask, "heads");
    return success();
  }
  case mk::schedule::TaskKind::ConvCommit: {
    int64_t c = t.getIntArg("channels");
    int64_t n = std::max<int64_t>(1, std::min<int64_t>(64, c / 512));
    finish(t, n, ceilDiv(c, n) * 3 * 2 * 2 * t.getIntArg("conv"), "channels");
    return success();
  }
  case mk::schedule::TaskKind::ZeroF32: {
    finish(t, 1, t.getIntArg("n") * 4, "slices");
    return success();
  }
  case mk::schedule::TaskKind::FinalResidual: {
    finish(t, 4, t.getIntArg("dim") * 8 / 4, "slices");
    return success();
  }
  case mk::schedule::TaskKind::MlaRopeAppend: {
    finish(t, 16, t.getIntArg("lora") * 4 / 16, "rows");
    return success();
  }
  case mk::schedule::TaskKind::MlaQAbsorb: {
    int64_t nope = t.getIntArg("nope"), lora = t.getIntArg("lora"),
            hm = t.getIntArg("heads"), vh = t.getIntArg("v_head");
    if (nope % 16 || 32 % (nope / 16))
      return t.emitOpError("qk_nope/16 must divide 32");
    int64_t rows = std::min(2 * (threads / 32) * (32 / (nope / 16)), lora);
    if (lora % rows)
      return t.emitOpError("kv_lora must be a multiple of ") << rows;
    (void)vh;
    finish(t, hm * lora / rows, rows * nope / 2, "heads");
    return success();
  }
  case mk::schedule::TaskKind::MlaAttentionChunk: {
    int64_t hm = t.getIntArg("heads"), lora = t.getIntArg("lora");
    int64_t chunks = attentionChunks;
    set(t, "max_chunks", chunks);
    // Heads are split into groups of up to 8 as well as rows into chunks:
    // one task per (chunk, head group), so short contexts still fill the GPU.
    int64_t headGroup = hm;
    for (int64_t g = std::min<int64_t>(hm, 8); g >= 1; --g)
      if (hm % g == 0) {
        headGroup = g;
        break;
      }
    set(t, "head_group", headGroup);
    // The partials hold one row per chunk.
    kernel.walk([&](BufferOp b) {
      if (b.getSymName() == t.getStrArg("part_m") ||
          b.getSymName() == t.getStrArg("part_l"))
        b.setShape({chunks * hm});
      if (b.getSymName() == t.getStrArg("part_acc"))
        b.setShape({chunks * hm * lora});
    });
    finish(t, chunks * (hm / headGroup), 0, "chunks");
    return success();
  }
  case mk::schedule::TaskKind::MlaCombineWv: {
    // Each head's merge + W_v is cut into latent-dim slices (whole
    // tensor-core steps of 16 rows) whose fp32 sums add up: as many as fit
    // one wave, since the merge reads every chunk's partials.
    int64_t hm = t.getIntArg("heads"), lora = t.getIntArg("lora"),
            vh = t.getIntArg("v_head");
    int64_t slices = 1;
    for (int64_t s = 2; s <= 16; s *= 2)
      if (lora % s == 0 && (lora / s) % 16 == 0 && hm * s <= targetSms)
        slices = s;
    set(t, "slices", slices);
    setStr(t, "grain", t.getStrArg("unit"));
    set(t, "grain_per", slices);
    finish(t, hm * slices, w4Bytes(lora / slices, vh, t.getIntArg("group")),
           "heads");
    return success();
  }
  case mk::schedule::TaskKind::MoeGateUp:
  case mk::schedule::TaskKind::MoeDown: {
    bool down = kind == mk::schedule::TaskKind::MoeDown;
    int64_t d = t.getIntArg("hidden"), m = t.getIntArg("inter"),
            slots = t.getIntArg("slots"), g = t.getIntArg("group");
    int64_t k = down ? m : d, n = down ? d : m;
    std::vector<PartitionOption> opts;
    std::vector<std::pair<int64_t, int64_t>> cuts;
    for (int64_t tn : kTiles) {
      if (tn > n || threads % (tn / 16))
        continue;
      // Both accumulate (gate and up sums, the MoE sum): any split-K whose
      // slices are whole tensor-core steps (16 rows) works; gate and up are
      // separate tasks.
      for (int64_t ks : {1, 2, 3, 4, 6, 8}) {
        if (k % ks || (k / ks) % 16)
          continue;
        int64_t tiles = ceilDiv(n, tn);
        opts.push_back({slots * (down ? 1 : 2) * tiles * ks,
                        w4Bytes(k / ks, tn, g), tn});
        cuts.push_back({tn, ks});
      }
    }
    if (opts.empty())
      return t.emitOpError("no legal expert tiling");
    int i = pick(opts);
    auto [tn, ks] = cuts[i];
    set(t, "tn", tn);
    set(t, "ksplit", ks);
    set(t, "tiles", ceilDiv(n, tn));
    setStr(t, "grain", t.getStrArg("unit"));
    set(t, "grain_per", (down ? 1 : 2) * ceilDiv(n, tn) * ks);
    finish(t, opts[i].count, opts[i].bytesPerTask, "experts");
    return success();
  }
  case mk::schedule::TaskKind::ResidualRmsnorm:
    break; // every_block (above); a residual_rmsnorm cut otherwise is refused
  }
  return t.emitOpError("no partitioning rule for kind '") << t.getKind()
                                                            << "' outside every_block";
}

/// mk::kMaxGrid (grid_sync.cuh): the most blocks a kernel runs with, so the
/// most worth balancing for, and the most MLA attention chunks that run.
constexpr int64_t kMaxBlocks = 1024;

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
  if (overheadBytes < 0)
    return bad("task-overhead-bytes", ">= 0", overheadBytes);
  if (attentionChunks < 1 || attentionChunks > kMaxBlocks)
    return bad("attention-chunks",
               "in 1.." + Twine(kMaxBlocks) + " (at most one per block)",
               attentionChunks);
  if (fullSegmentBytes < 0)
    return bad("full-segment-bytes", ">= 0 (0: no penalty)", fullSegmentBytes);
  for (KernelOp kernel : getOperation().getOps<KernelOp>()) {
    kernel.setTargetSms(targetSms);
    producer.clear();
    WalkResult r = kernel.walk([&](TaskOp t) {
      if (failed(partition(t, kernel)))
        return WalkResult::interrupt();
      for (Attribute a : t.getWrites())
        producer[cast<SymbolRefAttr>(a).getRootReference()] = t;
      for (Attribute a : t.getAccumulates())
        producer[cast<SymbolRefAttr>(a).getRootReference()] = t;
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      return signalPassFailure();
  }
}

} // namespace
