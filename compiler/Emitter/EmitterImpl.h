//===- EmitterImpl.h - The CUDA emitter's internals ------------*- C++ -*-===//
//
// Private to compiler/Emitter: the Emitter class, whose members live in
// CudaEmitter.cpp (phases, the kernel, entry points), TaskLowering.cpp (one
// task instance -> template calls), DebugCaptures.cpp (--debug-capture) and
// ManifestWriter.cpp (the manifest JSON).
//
//===----------------------------------------------------------------------===//

#ifndef MK_EMITTER_EMITTERIMPL_H
#define MK_EMITTER_EMITTERIMPL_H

#include "Emitter/CudaEmitter.h"
#include "Emitter/TaskLoweringInterface.h"

#include "mk/Dialect/Schedule/TaskCuts.h"
#include "mk/Dialect/Schedule/TaskKinds.h"
#include "mk/PackedLayout.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace mk::emitter::detail {

using namespace mlir;
using namespace mk::schedule;
using mk::emitter::EmittedKernel;

/// A C identifier for a tensor name ("blocks.0.attn.q_proj.w_q" ->
/// "blocks_0_attn_q_proj_w_q").
inline std::string ident(StringRef name) {
  std::string s;
  for (char c : name)
    s += (isalnum((unsigned char)c) ? c : '_');
  return s;
}

/// The C type of a schedule dtype ("u8", "bf16", "f32", "i32").
inline const char *ctypeOf(StringRef dtype) {
  return llvm::StringSwitch<const char *>(dtype)
      .Case("bf16", "mk::bf16")
      .Case("f32", "float")
      .Case("i32", "int")
      .Default("uint8_t");
}

/// The capture names of docs/kernel-abi.md, in the order the oracle computes
/// them within a layer (mk-diff reports the first capture that disagrees, so
/// the manifest lists them in dataflow order).
constexpr const char *kCaptureOrder[] = {
    "attn_in", "q",      "k",      "v",      "g",        "beta_logits", "gate",
    "q_conv",  "k_conv", "v_conv", "kda_o",  "mla_q",    "mla_kv",      "mla_o",
    "attn_out", "h",     "moe_in", "router_logits", "topk_idx", "topk_w", "moe_out",
    "out"};


/// mk::kMaxGrid (grid_sync.cuh): the most blocks the grid barrier supports.
constexpr int64_t kMaxGrid = 1024;

inline std::string fmtFloat(double v) {
  std::string s = llvm::formatv("{0:e9}", v).str();
  return s + "f";
}

class Emitter {
public:
  /// The templates' weight ring (MK_W4A16_STAGES in w4a16_gemv.cuh).
  static constexpr int64_t kDefaultRingStages = 3;
  Emitter(KernelOp kernel, int64_t ringStages = kDefaultRingStages, bool lendInput = false,
          bool residentResidual = true)
      : kernel(kernel), T(kernel.getThreads()), ringStages(ringStages), lendInput(lendInput),
        residentResidual(residentResidual && !lendInput) {}
  LogicalResult run(EmittedKernel &out);
  /// Whether run() failed only because the kernel needs more shared memory
  /// than the target has.
  bool overSharedLimit() const { return overShared; }

private:
  KernelOp kernel;
  int64_t T;
  /// Stages of the GEMV tiles' weight ring; below the default, the source
  /// defines MK_W4A16_STAGES.
  int64_t ringStages;
  /// The phases in which the input vector (xs) is dead (no task of theirs,
  /// nor of a later phase before the next every-block norm, reads it) give
  /// their tasks a work area that starts at xs: the kernel then needs the
  /// larger of (xs + scratch + the other phases' work) and their work. Off
  /// unless the kernel does not fit otherwise (emitKernel).
  bool lendInput;
  /// Every-block norms keep their residual x in shared memory (`resid`, D
  /// bf16 beside xs) for the next norm, whose base it is, so that norm
  /// loads only its GEMV sums and weight after its grid barrier. On unless
  /// the kernel does not fit otherwise (emitKernel), never with lendInput
  /// (a lent work area would overwrite it).
  bool residentResidual;
  /// Some norm reads its base from `resid` (the prologue then reserves it).
  bool residRead = false;
  /// Some every-block norm adds a second sum (acc2): every norm of the
  /// kernel then calls the two-sum form (one out-of-line copy of the norm's
  /// code, not two; with one copy of it and of the down tasks the FFN
  /// rounding cost 7.1 us per token instead of 10.3, perf notes #146-#147).
  bool twoSumNorms = false;
  /// The buffer whose values `resid` holds (the last norm's residual), if
  /// any.
  std::string residHolds;
  bool overShared = false;
  /// Phases whose tasks' work area starts at xs (lendInput), and the work
  /// they need.
  llvm::DenseSet<Operation *> inputLentPhases;
  bool inLentPhase = false;
  int64_t lentWorkFloats = 0;
  TaskOpInterface lentWorkOwner;
  void planInputLending();
  llvm::StringMap<BufferOp> buffers;
  /// The kernel's parameters (schedule.weight) in signature order, and by
  /// name; its decode state (the `state` buffers) in signature order.
  SmallVector<WeightOp> weights;
  llvm::StringMap<WeightOp> weightByName;
  SmallVector<BufferOp> stateBuffers;
  /// Elements of the block's hidden vector (the `hidden_in` buffer).
  int64_t hidden = 0;
  /// The largest router top-k of the kernel's tasks (0: no router).
  int64_t topK = 0;
  llvm::StringMap<CounterOp> counters;
  std::string body;
  llvm::raw_string_ostream os{body};
  std::set<std::string> asserts;
  /// How an attention task splits the context: its `max_chunks` (the
  /// partials' size) and the chunk count's C++ expression at run time,
  /// which its combine evaluates too (both from the context and the grid).
  struct AttentionChunks {
    int64_t maxChunks = 0;
    std::string count;
  };
  static AttentionChunks attentionChunks(TaskOpInterface at) {
    const int64_t maxc = at.getIntArg("max_chunks");
    if (isa<GqaAttentionChunkOp>(at.getOperation()))
      return {maxc, llvm::formatv("mk::gqa_num_chunks(ctx_len + 1, gridDim.x, {0}, {1})",
                                  at.getIntArg("kv_heads"), maxc)
                        .str()};
    // The rows per chunk only where not the template's default (16).
    const int64_t rows = at.getIntArg("chunk_rows", kMlaTemplateChunkRows);
    const std::string rowsArg =
        rows != kMlaTemplateChunkRows ? ", " + std::to_string(rows) : std::string();
    return {maxc, llvm::formatv("mk::mla_num_chunks(ctx_len + 1, gridDim.x, {0}{1})", maxc,
                                rowsArg)
                      .str()};
  }
  /// Each attention's (MLA or GQA) chunks by its part_m buffer, gathered by
  /// one walk at the first combine: a walk per combine made the emission
  /// quadratic in the depth.
  std::optional<llvm::StringMap<AttentionChunks>> attentionByPartials;
  /// The chunks of the attention task that writes the partials `partM`
  /// (maxChunks 0 if none does).
  AttentionChunks attentionChunksOf(StringRef partM) {
    if (!attentionByPartials) {
      attentionByPartials.emplace();
      kernel.walk([&](Operation *op) {
        if (isa<MlaAttentionChunkOp, GqaAttentionChunkOp>(op)) {
          TaskOpInterface at = cast<TaskOpInterface>(op);
          (*attentionByPartials)[at.getStrArg("part_m")] = attentionChunks(at);
        }
      });
    }
    return attentionByPartials->lookup(partM);
  }
  int64_t workFloats = 0;
  /// The task being lowered, and the one whose work area is the largest.
  TaskOpInterface workTask, workOwner;
  int64_t numCounters = 0;
  int64_t phaseIndex = 0;
  int routedKey = 0;
  llvm::StringMap<int> topkKey;

  /// One intermediate written into the debug arena (debug_capture kernels).
  struct Capture {
    std::string name, dtype;
    SmallVector<int64_t> shape;
    int64_t layer = 0, rank = 0, offset = 0;
    /// The end-of-step copy (`dst`: the capture's byte address); null for
    /// values written where they are computed (shared memory, registers).
    std::function<void(llvm::raw_ostream &, const std::string &dst)> fill;
  };
  bool debug = false;
  /// One more grid barrier before the counters' reset (a wait follows the
  /// schedule's last barrier).
  bool resetBarrier = false;
  std::vector<Capture> captures;
  llvm::StringMap<size_t> captureIndex;
  llvm::StringMap<std::string> smemCapture; // every-block norm -> capture
  llvm::StringMap<int64_t> convCapture;     // kda task -> layer
  llvm::StringMap<int64_t> topkCapture;     // router logits buffer -> layer
  int64_t debugBytes = 0;
  LogicalResult planCaptures();
  /// `(T *)(debug + offset)` of capture layer<layer>.<what>.
  std::string capturePtr(int64_t layer, StringRef what) {
    const Capture &c = captures[captureIndex.lookup(
        ("layer" + std::to_string(layer) + "." + what).str())];
    return llvm::formatv("reinterpret_cast<{0} *>(debug + {1})",
                         ctypeOf(c.dtype), c.offset)
        .str();
  }

  /// Static shared memory a template the kernel calls declares, by a key
  /// naming the instantiation (a template's arrays exist once per
  /// instantiation however often it is called); run() adds them to the
  /// static bound it checks the target's limit with.
  void needStaticShared(std::string key, int64_t bytes) {
    staticShared.try_emplace(std::move(key), bytes);
  }
  llvm::StringMap<int64_t> staticShared;

  /// Grows the per-task work area to `floats`, remembering the task that
  /// needs the most (named when the kernel does not fit the target).
  void needWork(int64_t floats) {
    if (inLentPhase) {
      if (floats > lentWorkFloats) {
        lentWorkFloats = floats;
        lentWorkOwner = workTask;
      }
      return;
    }
    if (floats > workFloats) {
      workFloats = floats;
      workOwner = workTask;
    }
  }
  int64_t w4Red(int64_t tn) { return (T / 32) * tn + ringStages * 6 * T * 4; }
  std::string w4RedCheck(int64_t tn) {
    return llvm::formatv("mk::w4a16_red_floats<{0}, {1}>() == {2}", T, tn,
                         w4Red(tn))
        .str();
  }

  /// The MLA templates' trailing partial-sums type argument for the
  /// partials buffer `name`: ", mk::bf16" for a bf16 buffer, else none
  /// (float, the templates' default).
  std::string partialsTypeArg(StringRef name) {
    auto it = buffers.find(name);
    return it != buffers.end() && it->second.getDtype() == "bf16" ? ", mk::bf16" : "";
  }
  /// A pointer expression for buffer `name`; `write` selects the state_out
  /// side of decode state.
  std::string ptr(StringRef name, bool write = false) {
    auto it = buffers.find(name);
    assert(it != buffers.end() && "unknown buffer");
    BufferOp b = it->second;
    StringRef space = b.getSpace();
    if (space == "io")
      return name.str();
    if (space == "state")
      return ident(name) + (write ? "_out" : "_in");
    if (space == "shared")
      return "xs";
    return llvm::formatv("reinterpret_cast<{0} *>(wsp + {1})",
                         ctypeOf(b.getDtype()), b.getOffset())
        .str();
  }
  /// The parameter tensors of weight `w`: the tensor of that name, or a
  /// W4A16 weight's w_q, scales and zeros.
  SmallVector<WeightOp> weightTensors(StringRef w) {
    SmallVector<WeightOp> out;
    for (WeightOp d : weights) {
      StringRef n = d.getSymName();
      if (n == w || (n.starts_with(w) && n.size() > w.size() && n[w.size()] == '.' &&
                     llvm::is_contained({"w_q", "scales", "zeros"}, n.drop_front(w.size() + 1))))
        out.push_back(d);
    }
    return out;
  }
  /// The layer a weight (a parameter, or a W4A16 weight by its prefix) or a
  /// state buffer belongs to, as its symbol declares; -1 where none does.
  int64_t layerOf(StringRef name) {
    std::optional<uint64_t> layer;
    if (WeightOp w = weightByName.lookup(name))
      layer = w.getLayer();
    else if (WeightOp q = weightByName.lookup((name + ".w_q").str()))
      layer = q.getLayer();
    else if (BufferOp b = buffers.lookup(name))
      layer = b.getLayer();
    return layer ? int64_t(*layer) : -1;
  }
  /// The quantization group of W4A16 weight `w` (its w_q's), or 0 when `w`
  /// is no W4A16 weight of the kernel.
  int64_t weightGroup(StringRef w) {
    WeightOp q = weightByName.lookup((w + ".w_q").str());
    return q ? q.getGroup() : 0;
  }
  /// The one quantization group of the W4A16 weights task `t` reads (its
  /// weight arguments, taskWeights), 0 if it reads none; a located error
  /// if they differ (its tiles take one group).
  FailureOr<int64_t> taskGroup(TaskOpInterface t) {
    int64_t g = 0;
    std::string first;
    auto visit = [&](StringRef w) -> LogicalResult {
      const int64_t wg = weightGroup(w);
      if (!wg)
        return success();
      if (g && wg != g)
        return t.emitOpError("reads W4A16 weights of different groups: '")
               << first << "' (" << g << ") and '" << w << "' (" << wg << ")";
      if (!g)
        first = w.str();
      g = wg;
      return success();
    };
    for (const std::string &w : mk::schedule::taskWeights(t))
      if (failed(visit(w)))
        return failure();
    return g;
  }
  std::string wq(StringRef w) { return ident(w) + "_w_q"; }
  std::string ws_(StringRef w) { return ident(w) + "_scales"; }
  std::string wz(StringRef w) { return ident(w) + "_zeros"; }
  /// The tile width W4A16 weight `w` (the prefix of its parts) is stored
  /// tile-contiguous with (its w_q's `tile`), or 0 for the spec's row-major
  /// storage.
  int64_t tileOf(StringRef w) {
    WeightOp q = weightByName.lookup((w + ".w_q").str());
    return q ? q.getTile() : 0;
  }
  /// Whether weight `w`'s tiles are in a packed tile's lane order (its
  /// w_q's `order`).
  bool isPacked(StringRef w) { return orderOf(w) != mk::PackedOrder::None; }
  /// Whether weight `w` is packed tile by tile at width `tn`: a tile's
  /// k-slice of whole groups is then one contiguous range of its w_q and one
  /// of its scales and zero points (what the early streams and L2 requests
  /// address).
  bool isTilePacked(StringRef w, int64_t tn) { return isPacked(w) && tileOf(w) == tn; }
  /// The order of weight `w`'s payload (mk::PackedOrder::None: row-major
  /// or tile-contiguous).
  mk::PackedOrder orderOf(StringRef w) {
    WeightOp q = weightByName.lookup((w + ".w_q").str());
    if (!q || q.getOrder().empty())
      return mk::PackedOrder::None;
    return q.getOrder() == "int8" ? mk::PackedOrder::Int8 : mk::PackedOrder::Mma;
  }
  /// The template's WeightOrder of weight `w`: its storage, and for the
  /// `mma` order the kernel's `packed_arithmetic` (kOrderMmaScaled /
  /// kOrderMmaFolded: the scales / also the zero points applied per group),
  /// where `w`'s groups hold whole steps (a multiple of 16 rows at 128
  /// wide, 32 at 64: the grouped tile's steps lie in one group); else the
  /// exact tile, which takes groups of 16k rows.
  std::string orderName(StringRef w) {
    switch (orderOf(w)) {
    case mk::PackedOrder::None:
      return "mk::kOrderRowMajor";
    case mk::PackedOrder::Int8:
      return "mk::kOrderInt8";
    default: {
      const int64_t rows = mk::stepRows(mk::PackedOrder::Mma, tileOf(w));
      const bool whole = rows > 0 && weightGroup(w) % rows == 0;
      if (whole && kernel.getPackedArithmetic() == "scaled")
        return "mk::kOrderMmaScaled";
      if (whole && kernel.getPackedArithmetic() == "folded")
        return "mk::kOrderMmaFolded";
      return "mk::kOrderMma";
    }
    }
  }
  /// The template arguments after a tile's epilogue type that select `w`'s
  /// WeightOrder (none for the row-major default); `fp32x` first, "false",
  /// where the template takes it.
  std::string orderArgs(StringRef w, bool fp32x) {
    if (orderOf(w) == mk::PackedOrder::None)
      return "";
    return std::string(fp32x ? ", false" : "") + ", " + orderName(w);
  }
  /// A packed weight must be read by `tn`-wide tiles of its own width in
  /// k-slices of whole steps of its order (mma: 1 KB, 16 rows at 128 wide, 32
  /// at 64; int8: 32 rows, at most mk::kInt8MaxSliceRows, groups of at most
  /// 128 rows, multiples of 32), which is all the packed tiles can stream;
  /// else a located error.
  LogicalResult checkPackedRead(TaskOpInterface t, StringRef w, int64_t tn, int64_t kslice) {
    const mk::PackedOrder order = orderOf(w);
    if (order == mk::PackedOrder::None)
      return success();
    const int64_t stepRows = mk::stepRows(order, tn);
    if (tileOf(w) != tn || !stepRows || kslice % stepRows)
      return t.emitOpError("reads packed weight '")
             << w << "' with " << tn << "-wide tiles in k-slices of " << kslice
             << " rows; a packed weight needs tiles of its own width (" << tileOf(w)
             << ") and k-slices of whole steps ("
             << (order == mk::PackedOrder::Int8 ? "32 rows" : "16 rows at 128 wide, 32 at 64")
             << ")";
    if (order == mk::PackedOrder::Int8 &&
        (kslice > mk::kInt8MaxSliceRows || weightGroup(w) % 32 || weightGroup(w) > 128))
      return t.emitOpError("reads int8-order weight '")
             << w << "' in k-slices of " << kslice << " rows with groups of " << weightGroup(w)
             << "; the integer tile takes at most " << mk::kInt8MaxSliceRows
             << " rows and groups of at most 128 rows, a multiple of 32";
    return success();
  }
  /// The arguments (wq, scales, zeros, N, n0) that point a W4A16 tile at
  /// columns [n0, n0 + tn) of a [rows, n] weight (`rows` = K/2 byte rows)
  /// whose w_q, scales and zeros are the expressions `q`, `s`, `z`, after an
  /// expert offset `expert` (a variable name, or empty): row-major, the
  /// matrix and n0; tile-contiguous (`tiled`), the tile's own [rows, tn]
  /// block and 0 (the epilogue then adds n0 back). `n0` is an expression;
  /// `g` the weight's quantization group.
  /// The five tile arguments apart: the weight's w_q, scales and zeros
  /// pointers, its width N and the tile's first column n0.
  struct TileArgParts {
    std::string q, s, z, n, n0;
    std::string joined() const { return q + ", " + s + ", " + z + ", " + n + ", " + n0; }
  };
  TileArgParts tileArgParts(const std::string &q, const std::string &s, const std::string &z,
                            bool tiled, int64_t k, int64_t n, int64_t tn,
                            const std::string &expert, const std::string &n0, int64_t g) {
    std::string ew = expert.empty() ? "" : " + (size_t)" + expert + " * " +
                                               std::to_string(k / 2 * n);
    std::string es = expert.empty() ? "" : " + (size_t)" + expert + " * " +
                                               std::to_string(k / g * n);
    if (!tiled)
      return {q + ew, s + es, z + es, std::to_string(n), n0};
    std::string t = "(size_t)((" + n0 + ") / " + std::to_string(tn) + ")";
    std::string tw = " + " + t + " * " + std::to_string(k / 2 * tn);
    std::string ts = " + " + t + " * " + std::to_string(k / g * tn);
    return {q + ew + tw, s + es + ts, z + es + ts, std::to_string(tn), "0"};
  }
  std::string tileArgs(const std::string &q, const std::string &s, const std::string &z,
                       bool tiled, int64_t k, int64_t n, int64_t tn,
                       const std::string &expert, const std::string &n0, int64_t g) {
    return tileArgParts(q, s, z, tiled, k, n, tn, expert, n0, g).joined();
  }
  TileArgParts tileArgParts(StringRef w, int64_t k, int64_t n, int64_t tn,
                            const std::string &expert, const std::string &n0) {
    return tileArgParts(wq(w), ws_(w), wz(w), tileOf(w) != 0, k, n, tn, expert, n0,
                        weightGroup(w));
  }
  /// The same for weight `w` by name.
  std::string tileArgs(StringRef w, int64_t k, int64_t n, int64_t tn,
                       const std::string &expert, const std::string &n0) {
    return tileArgs(wq(w), ws_(w), wz(w), tileOf(w) != 0, k, n, tn, expert, n0,
                    weightGroup(w));
  }

  LogicalResult emitPhase(PhaseOp phase);
  /// Instance `i` of task t, by its op's TaskCudaLowering (one of the
  /// lowerTask overloads below).
  LogicalResult emitInstance(TaskOpInterface t, llvm::raw_ostream &o);
  /// The expert kinds' lowering (MoeGateUpOp or MoeDownOp: their shared
  /// arguments, the router's top-k, then each kind's tile).
  template <class ExpertOp>
  LogicalResult lowerMoe(ExpertOp op, int64_t G, llvm::raw_ostream &o);

public:
  /// One task op's lowering (TaskLowering.cpp), called through the op's
  /// TaskCudaLowering model; `G` is the W4A16 weights' quantization group.
  LogicalResult lowerTask(W4A16GemvOp op, int64_t G, llvm::raw_ostream &o);
  LogicalResult lowerTask(Bf16RowsOp op, int64_t G, llvm::raw_ostream &o);
  LogicalResult lowerTask(KdaHeadChunkOp op, int64_t G, llvm::raw_ostream &o);
  LogicalResult lowerTask(KdaGatedNormOp op, int64_t G, llvm::raw_ostream &o);
  LogicalResult lowerTask(ArgmaxOp op, int64_t G, llvm::raw_ostream &o);
  LogicalResult lowerTask(ConvCommitOp op, int64_t G, llvm::raw_ostream &o);
  LogicalResult lowerTask(ZeroF32Op op, int64_t G, llvm::raw_ostream &o);
  LogicalResult lowerTask(FinalResidualOp op, int64_t G, llvm::raw_ostream &o);
  LogicalResult lowerTask(MlaRopeAppendOp op, int64_t G, llvm::raw_ostream &o);
  LogicalResult lowerTask(MlaQAbsorbOp op, int64_t G, llvm::raw_ostream &o);
  LogicalResult lowerTask(MlaAttentionChunkOp op, int64_t G, llvm::raw_ostream &o);
  LogicalResult lowerTask(MlaCombineWvOp op, int64_t G, llvm::raw_ostream &o);
  LogicalResult lowerTask(MoeGateUpOp op, int64_t G, llvm::raw_ostream &o);
  LogicalResult lowerTask(MoeDownOp op, int64_t G, llvm::raw_ostream &o);
  LogicalResult lowerTask(GqaRopeAppendOp op, int64_t G, llvm::raw_ostream &o);
  LogicalResult lowerTask(GqaAttentionChunkOp op, int64_t G, llvm::raw_ostream &o);
  LogicalResult lowerTask(GqaCombineOp op, int64_t G, llvm::raw_ostream &o);

private:
  /// The task's arguments hold what its kind's lowering reads, and the weights
  /// they name are the kernel's (TaskLowering.cpp).
  LogicalResult checkTaskArgs(TaskOpInterface t);
  void emitGemvSlice(TaskOpInterface t, llvm::raw_ostream &o);
  bool allPackedTiles(TaskOpInterface t);
  void emitFirstInstanceGuard(TaskOpInterface t, int64_t first, int64_t dealOffset, llvm::StringRef what);
  bool emitGemvBegin(TaskOpInterface t, int64_t first, int64_t dealOffset);
  /// L2 prefetch of the weights of a block's first instance of `t` (a
  /// packed GEMV or bf16-row task; l2_first_tasks on the phase).
  bool emitL2FirstTask(TaskOpInterface t, int64_t first, int64_t dealOffset);
  /// Right after a block computes the top-k of router `logits` (in the
  /// phase of `router`): for every later phase marked l2_routed_tasks, the
  /// block asks L2 for its first instance's weights there if that instance
  /// is a routed MoE down tile of the same router (its k-slice of w_q,
  /// scales and zero points, one bulk prefetch each).
  void emitRoutedL2Requests(Operation *router, StringRef logits, llvm::raw_ostream &o);
  /// The tasks of the phase being emitted whose instance on block b (when
  /// it is b's first of the phase) had its weight stream started at the
  /// phase's entry (emitGemvBegin).
  llvm::StringSet<> begunTasks;
  /// The task being emitted's wait marked `in_prologue`, as the argument
  /// its lowering passes on (mk::CounterWaits{...}); empty if none. A
  /// lowering that runs it takes it (takePrologueWait); the emitter refuses
  /// a task whose lowering left it (the wait would be dropped). A task
  /// that stages two producers' outputs may have two such waits (a GEMV
  /// with a gated norm input): they are passed on as one
  /// mk::BothWaits<...>{...}. `prologueWaitType` names the type, which the
  /// lowerings give their waiting templates as the Wait argument.
  std::string prologueWait;
  std::string prologueWaitType;
  /// The counter of that wait (for the emitter's error).
  std::string prologueWaitCounter;
  std::string takePrologueWait() { return std::exchange(prologueWait, std::string()); }
  /// Out-of-line helpers of the kernel body (namespace mkgen).
  std::string helpers;
  int beginCount = 0;
  std::string manifest(int64_t dynSmem, int64_t syncBytes);
};

} // namespace mk::emitter::detail

#endif // MK_EMITTER_EMITTERIMPL_H
