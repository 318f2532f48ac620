//===- TaskCuts.cpp - The legal cuts of each task kind --------------------===//
//
// TaskOpInterface::getLegalCuts for every task op: the cuts the kind's
// templates accept, each with its cost in bytes streamed and the arguments
// it sets (TaskCuts.h). schedule-partition-work picks one by its cost model.
//
//===----------------------------------------------------------------------===//

#include "mk/Dialect/Schedule/ScheduleOps.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mk::schedule;

namespace {

/// Bytes of a W4A16 tile: K x TN nibbles plus its scales and zeros.
int64_t w4Bytes(int64_t k, int64_t tn, int64_t group) {
  return k * tn / 2 + 2 * llvm::divideCeil(k, group) * tn * 2;
}

// Widest first: on equal estimates the wider tile (fewer tasks, longer
// contiguous pieces) wins. At most 128: the tensor-core tile's width.
const int64_t kTiles[] = {128, 64, 32, 16};

TaskCut cut(int64_t count, int64_t bytesPerTask, Partition partition, int64_t segment = 0) {
  TaskCut c;
  c.count = count;
  c.bytesPerTask = bytesPerTask;
  c.segmentBytes = segment;
  c.partition = partition;
  return c;
}

using Cuts = FailureOr<std::vector<TaskCut>>;

/// A W4A16 weight whose output dim `n` is no multiple of 16: the tiles read
/// 16-byte pieces of each w_q row (n bytes), so every other piece of such a
/// row would be off its alignment.
Cuts refuseUnalignedRows(TaskOpInterface t, int64_t n) {
  return t.emitOpError("output dim ")
         << n << " is not a multiple of 16: the W4A16 tiles read 16-column pieces of each row "
                 "(the spec's width behind it, e.g. kv_lora + qk_rope, moe_inter or vocab, "
                 "must be one; a vocabulary that is not can take lm_head \"bf16\")";
}

/// A kind whose work is never cut across blocks (every block runs it).
Cuts noCut(TaskOpInterface t) {
  return t.emitOpError("no partitioning rule for kind '")
         << taskKindName(t.getKind()) << "' outside every_block";
}

/// The expert kinds: gate/up tiles (gate and up separate, each split-K
/// accumulating fp32 sums) or down tiles (each weighted by the router).
Cuts expertCuts(TaskOpInterface t, const TaskCutContext &ctx, bool down) {
  int64_t d = t.getIntArg("hidden"), m = t.getIntArg("inter"), slots = t.getIntArg("slots"),
          g = t.getIntArg("group");
  int64_t k = down ? m : d, n = down ? d : m;
  if (n % 16)
    return refuseUnalignedRows(t, n);
  // A down task that rounds its expert's output before the weight needs
  // the whole sum: no split-K.
  const bool wholeK = down && t.getStrArg("bf16_steps") == "hidden_and_output";
  if (wholeK && k > kMoeDownMaxStagedRows)
    return t.emitOpError("rounds each expert's output (bf16_steps \"hidden_and_output\"), "
                         "which needs the whole intermediate of ")
           << k << " rows in one task; at most " << kMoeDownMaxStagedRows << " fit";
  std::vector<TaskCut> cuts;
  for (int64_t tn : kTiles) {
    if (tn > n || ctx.threads % (tn / 16))
      continue;
    // Both accumulate (gate and up sums, the MoE sum): any split-K whose
    // slices are whole tensor-core steps (16 rows) works; gate and up are
    // separate tasks.
    for (int64_t ks : {1, 2, 3, 4, 6, 8, 16}) {
      if (wholeK && ks > 1)
        break;
      // A down task stages at most kMoeDownMaxStagedRows rows of its input
      // (Mixtral's 14336 take 4 slices of 3584).
      if (k % ks || (k / ks) % 16 || (down && k / ks > kMoeDownMaxStagedRows))
        continue;
      int64_t tiles = llvm::divideCeil(n, tn);
      TaskCut c = cut(slots * (down ? 1 : 2) * tiles * ks, w4Bytes(k / ks, tn, g), Partition::Experts, tn);
      c.intArgs = {{"tn", tn},
                   {"ksplit", ks},
                   {"tiles", tiles},
                   {"grain_per", (down ? 1 : 2) * tiles * ks}};
      c.strArgs = {{"grain", t.getStrArg("unit").str()}};
      cuts.push_back(std::move(c));
    }
  }
  if (cuts.empty())
    return t.emitOpError("no legal expert tiling");
  return cuts;
}

} // namespace

Cuts ResidualRmsnormOp::getLegalCuts(const TaskCutContext &) {
  // Every block recomputes it (partition "every_block"); any other cut is
  // refused.
  return noCut(*this);
}

Cuts OpaqueTaskOp::getLegalCuts(const TaskCutContext &) { return noCut(*this); }

Cuts W4A16GemvOp::getLegalCuts(const TaskCutContext &ctx) {
  TaskOpInterface t = *this;
  SmallVector<int64_t> ns = t.getIntArrayArg("n");
  for (int64_t n : ns)
    if (n % 16)
      return refuseUnalignedRows(t, n);
  int64_t k = t.getIntArg("k"), g = t.getIntArg("group");
  int64_t unitCols = t.getIntArg("unit_cols");
  bool atomic = t.getStrArg("epilogue") == "atomic_f32";
  // Split-K only where the sum is accumulated; its slices follow the units
  // the input's producer publishes (one KDA / MLA head each).
  int64_t units = 1;
  std::string inputUnit;
  if (atomic && ctx.producerOf)
    if (TaskOpInterface p = ctx.producerOf(t.getStrArg("input")); p && !p.getStrArg("unit").empty()) {
      inputUnit = p.getStrArg("unit").str();
      units = p.getIntArg("heads", 1);
    }
  std::vector<TaskCut> cuts;
  for (int64_t tn : kTiles) {
    if (unitCols && unitCols % tn)
      continue;
    if (tn > 16 && llvm::any_of(ns, [&](int64_t n) { return n < tn; }))
      continue;
    if (ctx.threads % (tn / 16))
      continue;
    int64_t tiles = 0;
    for (int64_t n : ns)
      tiles += llvm::divideCeil(n, tn);
    for (int64_t ks = 1; ks <= (atomic ? 64 : 1); ks *= 2) {
      if (k % ks || (k / ks) % 2 || (units > 1 && units % ks) ||
          (units == 1 && ks > 1 && (k / ks) % g))
        continue;
      // A tile streams tn bytes of each row pair (w_q is [K/2, N]).
      TaskCut c = cut(tiles * ks, w4Bytes(k / ks, tn, g), ks > 1 ? Partition::SplitK : Partition::Cols, tn);
      c.intArgs = {{"tn", tn}, {"ksplit", ks}, {"tiles", tiles}};
      if (unitCols) {
        // Unit-major tile order: unit u's tiles of every segment are adjacent.
        c.strArgs.push_back({"grain", t.getStrArg("unit").str()});
        c.intArgs.push_back({"grain_per", (int64_t)ns.size() * unitCols / tn});
      } else if (!inputUnit.empty()) {
        c.strArgs.push_back({"grain", inputUnit});
        c.intArgs.push_back({"grain_per", tiles});
        c.intArgs.push_back({"grain_span", units / ks});
      }
      cuts.push_back(std::move(c));
    }
  }
  if (cuts.empty())
    return t.emitOpError("no legal GEMV tiling for these shapes");
  return cuts;
}

Cuts Bf16RowsOp::getLegalCuts(const TaskCutContext &) {
  TaskOpInterface t = *this;
  int64_t rows = t.getIntArg("rows"), k = t.getIntArg("k");
  if (!t.getStrArg("unit").empty()) {
    // One row per task, each a unit its consumers wait for.
    TaskCut c = cut(rows, k * 2, Partition::Rows);
    c.intArgs = {{"rows_per_task", 1}, {"grain_per", 1}};
    c.strArgs = {{"grain", t.getStrArg("unit").str()}};
    return std::vector<TaskCut>{std::move(c)};
  }
  std::vector<TaskCut> cuts;
  for (int64_t r = 1; r <= rows; r *= 2) {
    TaskCut c = cut(llvm::divideCeil(rows, r), r * k * 2, Partition::Rows);
    c.intArgs = {{"rows_per_task", r}};
    cuts.push_back(std::move(c));
  }
  return cuts;
}

Cuts KdaHeadChunkOp::getLegalCuts(const TaskCutContext &ctx) {
  TaskOpInterface t = *this;
  int64_t h = t.getIntArg("heads"), dk = t.getIntArg("head_dim");
  std::vector<TaskCut> cuts;
  for (int64_t c : {16, 32, 64, 128, 256}) {
    if (c > dk || dk % c || ctx.threads % c || dk % (ctx.threads / c))
      continue;
    TaskCut x = cut(h * dk / c, 2 * dk * c * 4 + 4 * dk * 2, Partition::Heads);
    x.intArgs = {{"chunk", c}, {"grain_per", dk / c}};
    x.strArgs = {{"grain", t.getStrArg("unit").str()}};
    cuts.push_back(std::move(x));
  }
  if (cuts.empty())
    return t.emitOpError("no state chunking fits ")
           << ctx.threads << " threads and head_dim " << dk;
  return cuts;
}

Cuts KdaGatedNormOp::getLegalCuts(const TaskCutContext &) {
  // One head per task: its output, gate and result, head_dim values each.
  TaskOpInterface t = *this;
  int64_t h = t.getIntArg("heads"), dk = t.getIntArg("head_dim");
  TaskCut c = cut(h, dk * 3 * 2, Partition::Heads);
  if (!t.getStrArg("unit").empty()) {
    // A head each: the unit its producer (the KDA task) and its consumer
    // (the output projection's split-K tiles) count in.
    c.intArgs = {{"grain_per", 1}};
    c.strArgs = {{"grain", t.getStrArg("unit").str()}};
  }
  return std::vector<TaskCut>{std::move(c)};
}

Cuts ArgmaxOp::getLegalCuts(const TaskCutContext &) {
  // Slices of 4096 values (8 KB of bf16 each).
  const int64_t n = TaskOpInterface(*this).getIntArg("n");
  const int64_t count = llvm::divideCeil(n, 4096);
  return std::vector<TaskCut>{cut(count, llvm::divideCeil(n, count) * 2, Partition::Slices)};
}

Cuts ConvCommitOp::getLegalCuts(const TaskCutContext &) {
  TaskOpInterface t = *this;
  int64_t c = t.getIntArg("channels");
  int64_t n = std::max<int64_t>(1, std::min<int64_t>(64, c / 512));
  return std::vector<TaskCut>{cut(n, llvm::divideCeil(c, n) * 3 * 2 * 2 * t.getIntArg("conv"), Partition::Channels)};
}

Cuts ZeroF32Op::getLegalCuts(const TaskCutContext &) {
  return std::vector<TaskCut>{cut(1, TaskOpInterface(*this).getIntArg("n") * 4, Partition::Slices)};
}

Cuts FinalResidualOp::getLegalCuts(const TaskCutContext &) {
  return std::vector<TaskCut>{cut(4, TaskOpInterface(*this).getIntArg("dim") * 8 / 4, Partition::Slices)};
}

Cuts MlaRopeAppendOp::getLegalCuts(const TaskCutContext &) {
  return std::vector<TaskCut>{cut(16, TaskOpInterface(*this).getIntArg("lora") * 4 / 16, Partition::Rows)};
}

Cuts MlaQAbsorbOp::getLegalCuts(const TaskCutContext &ctx) {
  TaskOpInterface t = *this;
  int64_t nope = t.getIntArg("nope"), lora = t.getIntArg("lora"), hm = t.getIntArg("heads");
  if (nope % 16 || 32 % (nope / 16))
    return t.emitOpError("qk_nope/16 must divide 32");
  int64_t rows = std::min(2 * (ctx.threads / 32) * (32 / (nope / 16)), lora);
  if (lora % rows)
    return t.emitOpError("kv_lora must be a multiple of ") << rows;
  return std::vector<TaskCut>{cut(hm * lora / rows, rows * nope / 2, Partition::Heads)};
}

Cuts MlaAttentionChunkOp::getLegalCuts(const TaskCutContext &ctx) {
  TaskOpInterface t = *this;
  int64_t hm = t.getIntArg("heads"), lora = t.getIntArg("lora");
  // Heads are split into groups of up to `attention-head-group` (the
  // tensor-core form takes at most 16: one mma's A rows) as well as rows
  // into chunks: one task per (chunk, head group), so short contexts still
  // fill the GPU; the groups of a chunk each read its rows.
  int64_t headGroup = hm;
  for (int64_t g = std::min<int64_t>(hm, ctx.attentionHeadGroup); g >= 1; --g)
    if (hm % g == 0) {
      headGroup = g;
      break;
    }
  // The chunks: `attention-chunks`, or where it is 0 (the default) as many
  // as fill the blocks once with the head groups' tasks, in a power of two
  // of at most kMaxAutoMlaChunks (the unit's 32 heads in 2 groups of 16 on
  // 264 blocks: 128 chunks, 256 tasks).
  const int64_t groups = hm / headGroup;
  int64_t chunks = ctx.attentionChunks;
  if (chunks == 0) {
    chunks = 1;
    while (2 * chunks <= kMaxAutoMlaChunks && 2 * chunks * groups <= ctx.targetBlocks)
      chunks *= 2;
  }
  TaskCut c = cut(chunks * groups, 0, Partition::Chunks);
  c.intArgs = {{"max_chunks", chunks}, {"head_group", headGroup}};
  // 32-row sub-chunks (an option; 16, the template's default, is left
  // unsaid, so the default kernel's IR and source do not change).
  if (ctx.attentionSubRows != 16) {
    if (headGroup > 8)
      return t.emitOpError("attention-sub-rows=")
             << ctx.attentionSubRows << " needs at most 8 heads per task, got " << headGroup
             << " (with attention-head-group=8)";
    c.intArgs.push_back({"sub_rows", ctx.attentionSubRows});
  }
  // One bf16 part for the queries and probabilities where 9-16 heads fill
  // the mma's A rows; tasks of up to 8 heads keep both parts (the lo parts
  // ride in the spare A rows at no cost). Both this and the rows per chunk
  // are left unsaid at the template's defaults (2, 16).
  if (ctx.attentionQueryParts == 1 && headGroup > 8)
    c.intArgs.push_back({"query_parts", int64_t(1)});
  if (ctx.attentionChunkRows != kMlaTemplateChunkRows)
    c.intArgs.push_back({"chunk_rows", ctx.attentionChunkRows});
  // The partials hold one row per chunk.
  c.bufferShapes = {{t.getStrArg("part_m").str(), {chunks * hm}},
                    {t.getStrArg("part_l").str(), {chunks * hm}},
                    {t.getStrArg("part_acc").str(), {chunks * hm * lora}}};
  return std::vector<TaskCut>{std::move(c)};
}

Cuts MlaCombineWvOp::getLegalCuts(const TaskCutContext &ctx) {
  TaskOpInterface t = *this;
  // Each head's merge + W_v is cut into latent-dim slices (whole
  // tensor-core steps of 16 rows) whose fp32 sums add up: as many as fit
  // one wave, since the merge reads every chunk's partials.
  int64_t hm = t.getIntArg("heads"), lora = t.getIntArg("lora"), vh = t.getIntArg("v_head");
  int64_t slices = 1;
  for (int64_t s = 2; s <= 16; s *= 2)
    if (lora % s == 0 && (lora / s) % 16 == 0 && hm * s <= ctx.targetBlocks)
      slices = s;
  TaskCut c = cut(hm * slices, w4Bytes(lora / slices, vh, t.getIntArg("group")), Partition::Heads);
  c.intArgs = {{"slices", slices}, {"grain_per", slices}};
  c.strArgs = {{"grain", t.getStrArg("unit").str()}};
  return std::vector<TaskCut>{std::move(c)};
}

Cuts MoeGateUpOp::getLegalCuts(const TaskCutContext &ctx) {
  return expertCuts(*this, ctx, /*down=*/false);
}

Cuts MoeDownOp::getLegalCuts(const TaskCutContext &ctx) {
  return expertCuts(*this, ctx, /*down=*/true);
}

/// The GQA kinds (templates/gqa.cuh): one warp per q or kv head; one task
/// per (chunk, kv head), its REP query heads reading the chunk's rows once;
/// one combine task per query head, merging as many chunks as its
/// attention task has. The lane layouts need head_dim a
/// multiple of 64, at most 256.
static LogicalResult checkGqaHeadDim(TaskOpInterface t) {
  int64_t hd = t.getIntArg("head_dim");
  if (hd % 64 || hd > 256)
    return t.emitOpError("head_dim ") << hd
                                      << " has no GQA template: it must be a multiple of 64, "
                                         "at most 256 (a lane holds head_dim / 32 elements)";
  return success();
}

Cuts GqaRopeAppendOp::getLegalCuts(const TaskCutContext &ctx) {
  TaskOpInterface t = *this;
  if (failed(checkGqaHeadDim(t)))
    return failure();
  int64_t hq = t.getIntArg("heads"), hkv = t.getIntArg("kv_heads"), hd = t.getIntArg("head_dim");
  int64_t warps = ctx.threads / 32;
  int64_t n = llvm::divideCeil(hq + hkv, warps);
  return std::vector<TaskCut>{cut(n, warps * hd * 2 * 3, Partition::Heads)};
}

Cuts GqaAttentionChunkOp::getLegalCuts(const TaskCutContext &ctx) {
  TaskOpInterface t = *this;
  if (failed(checkGqaHeadDim(t)))
    return failure();
  int64_t hq = t.getIntArg("heads"), hkv = t.getIntArg("kv_heads"), hd = t.getIntArg("head_dim");
  if (hkv <= 0 || hq % hkv)
    return t.emitOpError("heads (") << hq << ") must be a multiple of kv_heads (" << hkv << ")";
  // `attention-chunks`, 0 (the default) meaning kDefaultGqaChunks.
  int64_t chunks = ctx.attentionChunks ? ctx.attentionChunks : kDefaultGqaChunks;
  // The rows a task reads depend on the context: no bytes for the cost model.
  TaskCut c = cut(chunks * hkv, 0, Partition::Chunks);
  c.intArgs = {{"max_chunks", chunks}};
  c.bufferShapes = {{t.getStrArg("part_m").str(), {chunks * hq}},
                    {t.getStrArg("part_l").str(), {chunks * hq}},
                    {t.getStrArg("part_acc").str(), {chunks * hq * hd}}};
  return std::vector<TaskCut>{std::move(c)};
}

Cuts GqaCombineOp::getLegalCuts(const TaskCutContext &ctx) {
  TaskOpInterface t = *this;
  int64_t hq = t.getIntArg("heads"), hd = t.getIntArg("head_dim");
  int64_t chunks = ctx.attentionChunks ? ctx.attentionChunks : kDefaultGqaChunks;
  // Its chunk count is the attention task's (the emitter reads it there).
  TaskCut c = cut(hq, chunks * (hd + 2) * 4, Partition::Heads);
  c.intArgs = {{"heads_per_task", 1}};
  return std::vector<TaskCut>{std::move(c)};
}
