//===- CudaEmitter.cpp - schedule.kernel -> CUDA + manifest ---------------===//
//
// The kernel body follows the schedule op by op: a phase is a loop over its
// task instances (instance t runs on block t % gridDim.x, so any co-resident
// grid size works), each instance waiting on its counters, calling its
// template and signalling; a schedule.barrier is mk::grid_barrier. Counters
// are reset after the last barrier. Shared memory: the normalized input of
// the current segment (xs), a reduction scratch, and one work area sized for
// the hungriest task; the sizes are mirrored from the templates' constexpr
// helpers and checked against them with static_asserts in the emitted code.
//
//===----------------------------------------------------------------------===//

#include "Emitter/CudaEmitter.h"

#include "mk/BlockConfig.h"
#include "mk/BlockSpec.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <functional>
#include <set>

using namespace mlir;
using namespace mk;
using namespace mk::schedule;
using mk::emitter::EmittedKernel;

namespace {

/// A C identifier for a tensor name ("blocks.0.attn.q_proj.w_q" ->
/// "blocks_0_attn_q_proj_w_q").
std::string ident(StringRef name) {
  std::string s;
  for (char c : name)
    s += (isalnum((unsigned char)c) ? c : '_');
  return s;
}

const char *ctype(DType t) {
  switch (t) {
  case DType::U8:
    return "uint8_t";
  case DType::BF16:
    return "mk::bf16";
  case DType::F32:
    return "float";
  case DType::I32:
    return "int";
  }
  return "uint8_t";
}

const char *ctypeOf(StringRef dtype) {
  DType t;
  if (!parseDType(dtype.str(), t))
    return "uint8_t";
  return ctype(t);
}

/// The capture names of docs/kernel-abi.md, in the order the oracle computes
/// them within a layer (mk-diff reports the first capture that disagrees, so
/// the manifest lists them in dataflow order).
constexpr const char *kCaptureOrder[] = {
    "attn_in", "q",      "k",      "v",     "g",        "beta_logits",
    "q_conv",  "k_conv", "v_conv", "kda_o", "mla_q",    "mla_kv",
    "mla_o",   "attn_out", "h",    "moe_in", "router_logits", "topk_idx",
    "topk_w",  "moe_out", "out"};

/// The layer of a weight or state tensor ("blocks.3.attn.kv_b",
/// "state.3.c_kv" -> 3), or -1.
int64_t layerOf(StringRef name) {
  static const llvm::Regex re("^(blocks|state)\\.([0-9]+)\\.");
  SmallVector<StringRef> m;
  int64_t layer;
  if (!re.match(name, &m) || m[2].getAsInteger(10, layer))
    return -1;
  return layer;
}

/// mk::kMaxGrid (grid_sync.cuh): the most blocks the grid barrier supports.
constexpr int64_t kMaxGrid = 1024;

std::string fmtFloat(double v) {
  std::string s = llvm::formatv("{0:e9}", v).str();
  return s + "f";
}

class Emitter {
public:
  Emitter(KernelOp kernel, const BlockConfig &cfg)
      : kernel(kernel), cfg(cfg), T(kernel.getThreads()) {}
  LogicalResult run(EmittedKernel &out);

private:
  KernelOp kernel;
  const BlockConfig &cfg;
  int64_t T;
  llvm::StringMap<BufferOp> buffers;
  llvm::StringMap<CounterOp> counters;
  std::string body;
  llvm::raw_string_ostream os{body};
  std::set<std::string> asserts;
  int64_t workFloats = 0;
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

  void needWork(int64_t floats) { workFloats = std::max(workFloats, floats); }
  int64_t w4Red(int64_t tn) { return (T / 32) * tn + 3 * 6 * T * 4; }
  std::string w4RedCheck(int64_t tn) {
    return llvm::formatv("mk::w4a16_red_floats<{0}, {1}>() == {2}", T, tn,
                         w4Red(tn))
        .str();
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
  std::string wq(StringRef w) { return ident(w) + "_w_q"; }
  std::string ws_(StringRef w) { return ident(w) + "_scales"; }
  std::string wz(StringRef w) { return ident(w) + "_zeros"; }

  LogicalResult emitPhase(PhaseOp phase);
  LogicalResult emitInstance(TaskOp t, llvm::raw_ostream &o);
  std::string manifest(int64_t dynSmem, int64_t syncBytes);
};

LogicalResult Emitter::emitInstance(TaskOp t, llvm::raw_ostream &o) {
  StringRef kind = t.getKind();
  auto i64 = [&](StringRef n) { return t.getIntArg(n); };
  auto str = [&](StringRef n) { return t.getStrArg(n); };
  auto strs = [&](StringRef n) {
    SmallVector<std::string> v;
    if (auto a = dyn_cast_or_null<ArrayAttr>(t.getArgs().get(n)))
      for (Attribute x : a)
        v.push_back(cast<StringAttr>(x).getValue().str());
    return v;
  };
  auto ints = [&](StringRef n) {
    SmallVector<int64_t> v;
    if (auto a = dyn_cast_or_null<ArrayAttr>(t.getArgs().get(n)))
      for (Attribute x : a)
        v.push_back(cast<IntegerAttr>(x).getInt());
    return v;
  };
  int64_t G = cfg.group;

  if (kind == "w4a16_gemv") {
    auto weights = strs("weights"), outputs = strs("outputs");
    auto ns = ints("n");
    int64_t k = i64("k"), tn = i64("tn"), ks = i64("ksplit"),
            tiles = i64("tiles"), unitCols = i64("unit_cols");
    bool atomic = str("epilogue") == "atomic_f32";
    BufferOp in = buffers.lookup(str("input"));
    bool shared = in.getSpace() == "shared";
    int64_t kslice = k / ks;
    o << "      const int k0 = " << (ks > 1 ? "(i / " + std::to_string(tiles) +
                                               ") * " + std::to_string(kslice)
                                         : std::string("0"))
      << ", k1 = k0 + " << kslice << ";\n";
    if (unitCols) {
      int64_t tpu = unitCols / tn, per = (int64_t)weights.size() * tpu;
      o << "      const int u = i / " << per << ", r = i % " << per
        << ", seg = r / " << tpu << ";\n"
        << "      const int n0 = u * " << unitCols << " + (r % " << tpu
        << ") * " << tn << ", nvalid = " << tn << ";\n";
    } else {
      o << "      const int tile = i % " << tiles << ";\n"
        << "      int seg = 0, n0 = tile * " << tn << ";\n";
      int64_t acc = 0;
      for (size_t s = 0; s + 1 < ns.size(); ++s) {
        acc += (ns[s] + tn - 1) / tn;
        o << "      if (tile >= " << acc << ") { seg = " << s + 1
          << "; n0 = (tile - " << acc << ") * " << tn << "; }\n";
      }
      o << "      const int nseg = ";
      for (size_t s = 0; s + 1 < ns.size(); ++s)
        o << "seg == " << s << " ? " << ns[s] << " : ";
      o << ns.back() << ";\n      const int nvalid = min(" << tn
        << ", nseg - n0);\n";
    }
    std::string xin = "xs";
    if (!shared) {
      std::string src = ptr(in.getSymName());
      o << "      for (int j = k0 + threadIdx.x; j < k1; j += " << T
        << ") work[j] = mk::bf2f(__ldcg(" << src << " + "
        << i64("input_offset") << " + j));\n      __syncthreads();\n";
      xin = "work";
      needWork(k + w4Red(tn));
      o << "      float *red = work + " << k << ";\n";
    } else {
      needWork(w4Red(tn));
      o << "      float *red = work;\n";
    }
    asserts.insert(w4RedCheck(tn));
    o << "      switch (seg) {\n";
    for (size_t s = 0; s < weights.size(); ++s) {
      std::string epiType = atomic ? "mk::EpiAtomicAddF32" : "mk::EpiStoreBf16";
      std::string epi =
          atomic ? "mk::EpiAtomicAddF32{" + ptr(outputs[s]) + ", 1.f, 0}"
                 : "mk::EpiStoreBf16{" + ptr(outputs[s], true) + ", 0}";
      o << "      case " << s << ": mkgen::call<&mk::w4a16_gemv_tile<" << T
        << ", " << tn << ", " << G << ", " << epiType << ">>(" << xin << ", " << wq(weights[s]) << ", "
        << ws_(weights[s]) << ", " << wz(weights[s]) << ", " << ns[s]
        << ", n0, nvalid, k0, k1, red, " << epi << ", false); break;\n";
    }
    o << "      }\n";
    return success();
  }
  if (kind == "bf16_rows") {
    int64_t rpt = i64("rows_per_task"), rows = i64("rows");
    o << "      const int row0 = i * " << rpt << ";\n"
      << "      mk::bf16_rows_gemv<" << T << ">(xs, " << ident(str("weight"))
      << ", " << i64("k") << ", row0, min(" << rpt << ", " << rows
      << " - row0), " << ptr(str("output"), true) << ");\n";
    return success();
  }
  if (kind == "kda_head_chunk") {
    int64_t dk = i64("head_dim"), chunk = i64("chunk"), conv = i64("conv");
    int64_t c = i64("heads") * dk;
    needWork(3 * dk + chunk + 2 * (T / chunk) * chunk + 32);
    asserts.insert(llvm::formatv("mk::kda_smem_floats<{0}, {1}, {2}>() == {3}",
                                 T, dk, chunk,
                                 3 * dk + chunk + 2 * (T / chunk) * chunk + 32)
                       .str());
    o << "      mk::kda_head_chunk_task<" << T << ", " << dk << ", " << chunk
      << ", " << conv << ">(i, " << c << ", " << ptr(str("q")) << ", "
      << ptr(str("k")) << ", " << ptr(str("v")) << ", " << ptr(str("g"))
      << ", " << ptr(str("beta")) << ", " << ident(str("conv_w")) << ", "
      << ptr(str("cq")) << ", " << ptr(str("ck")) << ", " << ptr(str("cv"))
      << ", " << ptr(str("S")) << ", " << ptr(str("S"), true) << ", "
      << ptr(str("o"), true) << ", work);\n";
    auto cap = convCapture.find(t.getName());
    if (debug && cap != convCapture.end()) {
      // The instance's CHUNK channels of each conv output (all instances
      // together cover every channel), before conv_commit shifts the windows.
      int64_t nch = dk / chunk;
      o << "      { // debug capture: the short conv outputs\n"
        << "      const int c0 = (i / " << nch << ") * " << dk << " + (i % "
        << nch << ") * " << chunk << ";\n";
      const char *what[3] = {"q_conv", "k_conv", "v_conv"};
      const char *raw[3] = {"q", "k", "v"}, *win[3] = {"cq", "ck", "cv"};
      for (int j = 0; j < 3; ++j)
        o << "      mk::debug_short_conv<" << conv << ">(c0, " << chunk << ", "
          << c << ", " << ptr(str(raw[j])) << ", " << ptr(str(win[j])) << ", "
          << ident(str("conv_w")) << " + " << j * c * conv << ", "
          << capturePtr(cap->second, what[j]) << ");\n";
      o << "      }\n";
    }
    return success();
  }
  if (kind == "conv_commit") {
    int64_t c = i64("channels"), n = t.getCount();
    int64_t per = (c + n - 1) / n;
    o << "      const mk::bf16 *const nr[3] = {" << ptr(str("q")) << ", "
      << ptr(str("k")) << ", " << ptr(str("v")) << "};\n"
      << "      const mk::bf16 *const wi[3] = {" << ptr(str("cq")) << ", "
      << ptr(str("ck")) << ", " << ptr(str("cv")) << "};\n"
      << "      mk::bf16 *const wo[3] = {" << ptr(str("cq"), true) << ", "
      << ptr(str("ck"), true) << ", " << ptr(str("cv"), true) << "};\n"
      << "      mk::conv_window_commit<" << i64("conv") << ">(i * " << per
      << ", min(" << c << ", (i + 1) * " << per << "), " << c
      << ", nr, wi, wo);\n";
    return success();
  }
  if (kind == "zero_f32") {
    int64_t n = i64("n"), per = (n + t.getCount() - 1) / t.getCount();
    o << "      float *p = " << ptr(str("buffer"), true) << ";\n"
      << "      for (int j = i * " << per << " + threadIdx.x; j < min(" << n
      << ", (i + 1) * " << per << "); j += " << T << ") p[j] = 0.f;\n";
    return success();
  }
  if (kind == "final_residual") {
    int64_t n = i64("dim"), per = (n + t.getCount() - 1) / t.getCount();
    o << "      const mk::bf16 *base = " << ptr(str("base")) << ";\n"
      << "      const float *acc = " << ptr(str("acc")) << ";\n"
      << "      for (int j = i * " << per << " + threadIdx.x; j < min(" << n
      << ", (i + 1) * " << per << "); j += " << T << ")\n"
      << "        " << ptr(str("out"), true)
      << "[j] = mk::f2bf(mk::round_bf16(mk::bf2f(__ldcg(base + j)) + "
         "mk::round_bf16(__ldcg(acc + j))));\n";
    return success();
  }
  int64_t hm = i64("heads"), nope = i64("nope"), rope = i64("rope"),
          vh = i64("v_head"), lora = i64("lora");
  if (kind == "mla_rope_append") {
    o << "      mk::mla_rope_append<" << T << ", " << hm << ", " << nope << ", "
      << rope << ", " << lora << ">(i, " << t.getCount() << ", ctx_len, "
      << fmtFloat(t.getArgs().getAs<FloatAttr>("theta").getValueAsDouble())
      << ", " << ptr(str("q")) << ", " << ptr(str("kv")) << ", "
      << ptr(str("q_rope"), true) << ", " << ptr(str("c_kv")) << ", "
      << ptr(str("k_rope")) << ", " << ptr(str("c_kv"), true) << ", "
      << ptr(str("k_rope"), true) << ");\n";
    return success();
  }
  if (kind == "mla_q_absorb") {
    needWork(nope);
    std::string w = str("kv_b").str();
    o << "      mk::mla_q_absorb_task<" << T << ", " << hm << ", " << nope
      << ", " << rope << ", " << vh << ", " << lora << ", " << G << ">(i, "
      << ptr(str("q")) << ", " << wq(w) << ", " << ws_(w) << ", " << wz(w)
      << ", " << ptr(str("q_abs"), true) << ", work);\n";
    return success();
  }
  if (kind == "mla_attention_chunk") {
    constexpr int64_t sub = 32; // cache rows staged per sub-chunk
    const int64_t hg = i64("head_group");
    int64_t f = (hg * lora + hg * rope + hg * sub + 3 * hg + 3) / 4 * 4 +
                (sub * lora + sub * rope) / 2;
    needWork(f);
    asserts.insert(
        llvm::formatv("mk::mla_attention_smem_floats<{0}, {1}, {2}, {3}>() == {4}",
                      hg, lora, rope, sub, f)
            .str());
    o << "      const int nch = mk::mla_num_chunks(ctx_len + 1, gridDim.x, "
      << i64("max_chunks") << ");\n"
      << "      if (i < nch * " << hm / hg << ")\n"
      << "        mk::mla_attention_chunk_task<" << T << ", " << hm << ", " << hg
      << ", " << lora << ", " << rope << ", " << sub << ">(i, nch, ctx_len + 1, "
      << fmtFloat(t.getArgs().getAs<FloatAttr>("scale").getValueAsDouble())
      << ", " << ptr(str("q_abs")) << ", " << ptr(str("q_rope")) << ", "
      << ptr(str("c_kv"), true) << ", " << ptr(str("k_rope"), true) << ", "
      << ptr(str("part_m"), true) << ", " << ptr(str("part_l"), true) << ", "
      << ptr(str("part_acc"), true) << ", work);\n";
    return success();
  }
  if (kind == "mla_combine_wv") {
    int64_t maxc = 0;
    kernel.walk([&](TaskOp a) {
      if (a.getKind() == "mla_attention_chunk" &&
          a.getStrArg("part_m") == str("part_m"))
        maxc = a.getIntArg("max_chunks");
    });
    needWork(lora + w4Red(vh));
    asserts.insert(w4RedCheck(vh));
    std::string w = str("kv_b").str();
    o << "      const int nch = mk::mla_num_chunks(ctx_len + 1, gridDim.x, "
      << maxc << ");\n"
      << "      mk::mla_combine_wv_task<" << T << ", " << hm << ", " << nope
      << ", " << vh << ", " << lora << ", " << G << ">(i, nch, "
      << ptr(str("part_m")) << ", " << ptr(str("part_l")) << ", "
      << ptr(str("part_acc")) << ", " << wq(w) << ", " << ws_(w) << ", "
      << wz(w) << ", " << ptr(str("o"), true) << ", work);\n";
    return success();
  }
  if (kind == "moe_gate_up" || kind == "moe_down") {
    bool down = kind == "moe_down";
    bool routed = !str("logits").empty();
    int64_t d = i64("hidden"), m = i64("inter"), tn = i64("tn"),
            ks = i64("ksplit"), tiles = i64("tiles");
    int64_t per = tiles * ks;
    o << "      const int slot = i / " << per << ", r = i % " << per << ";\n";
    if (routed) {
      auto [it, fresh] = topkKey.try_emplace(str("logits"), topkKey.size());
      o << "      if (tk_key != " << it->second << ") {\n"
        << "        mk::moe_topk<" << i64("experts") << ", " << i64("top_k")
        << ">(" << ptr(str("logits")) << ", "
        << fmtFloat(t.getArgs().getAs<FloatAttr>("scaling").getValueAsDouble())
        << ", tk_w, tk_idx);\n        tk_key = " << it->second << ";\n";
      auto cap = topkCapture.find(str("logits"));
      if (debug && cap != topkCapture.end())
        o << "        if (threadIdx.x < " << i64("top_k")
          << ") { // debug capture: this block's top-k\n"
          << "          " << capturePtr(cap->second, "topk_idx")
          << "[threadIdx.x] = tk_idx[threadIdx.x];\n"
          << "          " << capturePtr(cap->second, "topk_w")
          << "[threadIdx.x] = tk_w[threadIdx.x];\n        }\n";
      o << "      }\n"
        << "      const int e = tk_idx[slot];\n";
    } else {
      o << "      const int e = slot;\n";
    }
    std::string hmid = ptr(str("hmid"), true);
    if (!down) {
      std::string g = str("gate").str(), u = str("up").str();
      int64_t wqs = d / 2 * m, sz = d / G * m;
      needWork(2 * tn + w4Red(tn));
      asserts.insert(llvm::formatv("mk::moe_gate_up_smem_floats<{0}, {1}>() == {2}",
                                   T, tn, 2 * tn + w4Red(tn))
                         .str());
      o << "      const int n0 = r * " << tn << ";\n"
        << "      mk::moe_gate_up_task<" << T << ", " << tn << ", " << G
        << ">(xs, " << d << ", " << wq(g) << " + (size_t)e * " << wqs << ", "
        << ws_(g) << " + (size_t)e * " << sz << ", " << wz(g)
        << " + (size_t)e * " << sz << ", " << wq(u) << " + (size_t)e * " << wqs
        << ", " << ws_(u) << " + (size_t)e * " << sz << ", " << wz(u)
        << " + (size_t)e * " << sz << ", " << m << ", n0, min(" << tn << ", "
        << m << " - n0), " << hmid << " + slot * " << m << ", work);\n";
    } else {
      std::string w = str("down").str();
      int64_t wqs = m / 2 * d, sz = m / G * d, kslice = m / ks;
      needWork(m + w4Red(tn));
      asserts.insert(llvm::formatv("mk::moe_down_smem_floats<{0}, {1}>({2}) == {3}",
                                   T, tn, m, m + w4Red(tn))
                         .str());
      o << "      const int k0 = (r / " << tiles << ") * " << kslice
        << ", n0 = (r % " << tiles << ") * " << tn << ";\n"
        << "      mk::moe_down_task<" << T << ", " << tn << ", " << G << ">("
        << hmid << " + slot * " << m << ", " << m << ", " << wq(w)
        << " + (size_t)e * " << wqs << ", " << ws_(w) << " + (size_t)e * "
        << sz << ", " << wz(w) << " + (size_t)e * " << sz << ", " << d
        << ", n0, min(" << tn << ", " << d << " - n0), k0, k0 + " << kslice
        << ", " << (routed ? "tk_w[slot]" : "1.f") << ", "
        << ptr(str("acc"), true) << ", work);\n";
    }
    return success();
  }
  return t.emitOpError("the CUDA emitter has no lowering for kind '")
         << kind << "'";
}

/// Calls of the register-hungry templates go through a __noinline__
/// trampoline: inlined into the one kernel body, their live ranges would add
/// up with everything else's and spill.
static std::string outlineHeavyCalls(const std::string &text) {
  static const llvm::Regex call(
      "mk::(kda_head_chunk_task|mla_attention_chunk_task|mla_q_absorb_task|"
      "mla_rope_append|mla_combine_wv_task|conv_window_commit|moe_topk|"
      "moe_gate_up_task|moe_down_task|bf16_rows_gemv|block_rmsnorm|"
      "block_residual)"
      "<([^<>]*)>\\(");
  std::string out, rest = text;
  SmallVector<StringRef> m;
  while (call.match(rest, &m)) {
    size_t at = m[0].data() - rest.data();
    out += rest.substr(0, at);
    out += "mkgen::call<&mk::" + m[1].str() + "<" + m[2].str() + ">>(";
    rest = rest.substr(at + m[0].size());
  }
  return out + rest;
}

/// Which debug captures the kernel provides and how (docs/kernel-abi.md).
/// Derived from the tasks: a capture is named after the weight (by its
/// state-dict name) or the task kind that produces it. Offsets follow the
/// oracle's order: layer by layer, kCaptureOrder within a layer.
LogicalResult Emitter::planCaptures() {
  const int64_t last = (int64_t)cfg.pattern.size() - 1;
  auto numel = [](ArrayRef<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  };
  auto add = [&](int64_t layer, StringRef what, StringRef dtype,
                 ArrayRef<int64_t> shape, decltype(Capture::fill) fill) {
    if (layer < 0)
      return;
    std::string name = "layer" + std::to_string(layer) + "." + what.str();
    if (captureIndex.count(name))
      return;
    Capture c;
    c.name = name;
    c.dtype = dtype.str();
    c.shape.assign(shape.begin(), shape.end());
    c.layer = layer;
    c.rank = llvm::find(kCaptureOrder, what) - std::begin(kCaptureOrder);
    c.fill = std::move(fill);
    captureIndex[name] = captures.size();
    captures.push_back(std::move(c));
  };
  // A grid-strided copy of `n` values of `src` (converted to the capture's
  // dtype), after the final barrier.
  auto copy = [&](std::string src, int64_t n, StringRef dtype) {
    std::string dt = ctypeOf(dtype);
    return [src, n, dt](llvm::raw_ostream &o, const std::string &dst) {
      o << "    mk::debug_copy(" << src << ", " << n << ", reinterpret_cast<"
        << dt << " *>(" << dst << "));\n";
    };
  };
  auto numelOf = [&](StringRef buffer) {
    return numel(buffers.lookup(buffer).getShape());
  };
  auto endsWith = [](StringRef s, StringRef suffix) {
    return s.ends_with(suffix);
  };
  kernel.walk([&](TaskOp t) {
    StringRef kind = t.getKind();
    auto str = [&](StringRef n) { return t.getStrArg(n); };
    auto strs = [&](StringRef n) {
      SmallVector<std::string> v;
      if (auto a = dyn_cast_or_null<ArrayAttr>(t.getArgs().get(n)))
        for (Attribute x : a)
          v.push_back(cast<StringAttr>(x).getValue().str());
      return v;
    };
    if (kind == "residual_rmsnorm") {
      StringRef w = str("weight"), acc = str("acc"), out = str("out");
      int64_t L = layerOf(w), d = t.getIntArg("dim");
      bool attn = endsWith(w, ".attn_norm");
      if (!attn && !endsWith(w, ".moe_norm"))
        return;
      // xs lives in shared memory: block 0 writes it after the norm.
      add(L, attn ? "attn_in" : "moe_in", "bf16", {d}, nullptr);
      smemCapture[t.getName()] =
          "layer" + std::to_string(L) + (attn ? ".attn_in" : ".moe_in");
      // The fp32 sum the residual rounds to bf16, and the residual itself.
      if (!acc.empty())
        add(attn ? L - 1 : L, attn ? "moe_out" : "attn_out", "bf16", {d},
            copy(ptr(acc), d, "bf16"));
      if (!out.empty())
        add(attn ? L - 1 : L, attn ? "out" : "h", "bf16", {d},
            copy(ptr(out, true), d, "bf16"));
    } else if (kind == "final_residual") {
      int64_t d = t.getIntArg("dim");
      add(last, "moe_out", "bf16", {d}, copy(ptr(str("acc")), d, "bf16"));
      add(last, "out", "bf16", {d}, copy(ptr(str("out"), true), d, "bf16"));
    } else if (kind == "w4a16_gemv") {
      if (str("epilogue") == "atomic_f32")
        return; // an accumulator: captured where the residual reads it
      auto weights = strs("weights"), outputs = strs("outputs");
      for (auto [w, out] : llvm::zip(weights, outputs)) {
        StringRef what;
        for (StringRef p : {"q", "k", "v", "g"})
          if (endsWith(w, (".attn." + p + "_proj").str()))
            what = p;
        if (!what.empty())
          add(layerOf(w), what, "bf16", {numelOf(out)},
              copy(ptr(out, true), numelOf(out), "bf16"));
      }
    } else if (kind == "bf16_rows") {
      StringRef w = str("weight"), out = str("output");
      StringRef what = endsWith(w, ".attn.beta_proj.weight") ? "beta_logits"
                       : endsWith(w, ".moe.router.weight")   ? "router_logits"
                                                             : "";
      if (!what.empty())
        add(layerOf(w), what, "bf16", {numelOf(out)},
            copy(ptr(out, true), numelOf(out), "bf16"));
    } else if (kind == "kda_head_chunk") {
      int64_t L = layerOf(str("conv_w"));
      int64_t c = t.getIntArg("heads") * t.getIntArg("head_dim");
      // The conv outputs live in the task's shared memory: each instance
      // writes its channels (recomputed by the same function).
      for (StringRef what : {"q_conv", "k_conv", "v_conv"})
        add(L, what, "bf16", {c}, nullptr);
      convCapture[t.getName()] = L;
      add(L, "kda_o", "bf16", {c}, copy(ptr(str("o"), true), c, "bf16"));
    } else if (kind == "mla_rope_append") {
      int64_t L = layerOf(str("c_kv"));
      int64_t hm = t.getIntArg("heads"), nope = t.getIntArg("nope"),
              rope = t.getIntArg("rope"), lora = t.getIntArg("lora");
      std::string q = ptr(str("q")), qr = ptr(str("q_rope"), true);
      // q after RoPE: the nope parts of the projection, the rotated parts.
      add(L, "mla_q", "bf16", {hm * (nope + rope)},
          [=](llvm::raw_ostream &o, const std::string &dst) {
            o << "    mk::debug_mla_q<" << hm << ", " << nope << ", " << rope
              << ">(" << q << ", " << qr << ", reinterpret_cast<mk::bf16 *>("
              << dst << "));\n";
          });
      // The latent row and the rotated k_rope: the rows appended at ctx_len.
      std::string ckv = ptr(str("c_kv"), true), kr = ptr(str("k_rope"), true);
      add(L, "mla_kv", "bf16", {lora + rope},
          [=](llvm::raw_ostream &o, const std::string &dst) {
            o << "    mk::debug_copy(" << ckv << " + (size_t)ctx_len * " << lora
              << ", " << lora << ", reinterpret_cast<mk::bf16 *>(" << dst
              << "));\n"
              << "    mk::debug_copy(" << kr << " + (size_t)ctx_len * " << rope
              << ", " << rope << ", reinterpret_cast<mk::bf16 *>(" << dst
              << ") + " << lora << ");\n";
          });
    } else if (kind == "mla_combine_wv") {
      int64_t n = numelOf(str("o"));
      add(layerOf(str("kv_b")), "mla_o", "bf16", {n},
          copy(ptr(str("o"), true), n, "bf16"));
    } else if ((kind == "moe_gate_up" || kind == "moe_down") &&
               !str("logits").empty()) {
      // The top-k lives in each block's shared memory: a block that
      // computes it writes it (every block computes the same values).
      int64_t L = layerOf(str(kind == "moe_down" ? "down" : "gate"));
      int64_t k = t.getIntArg("top_k");
      add(L, "topk_idx", "i32", {k}, nullptr);
      add(L, "topk_w", "f32", {k}, nullptr);
      topkCapture[str("logits")] = L;
    }
  });
  std::stable_sort(captures.begin(), captures.end(),
                   [](const Capture &a, const Capture &b) {
                     return std::tie(a.layer, a.rank) <
                            std::tie(b.layer, b.rank);
                   });
  int64_t at = 0;
  for (auto [i, c] : llvm::enumerate(captures)) {
    captureIndex[c.name] = i;
    c.offset = at;
    DType dt;
    parseDType(c.dtype, dt);
    at += (numel(c.shape) * dtypeBytes(dt) + 15) / 16 * 16;
  }
  debugBytes = std::max<int64_t>(at, 16);
  // Captured workspace values are copied at the end of the step: no buffer
  // may share memory with another (schedule-plan-workspace plans none).
  SmallVector<BufferOp> ws;
  for (auto &kv : buffers)
    if (kv.second.isWorkspace())
      ws.push_back(kv.second);
  for (BufferOp a : ws)
    for (BufferOp b : ws) {
      if (a == b)
        continue;
      int64_t a0 = a.getOffset(), b0 = b.getOffset();
      if (a0 <= b0 && b0 < a0 + (int64_t)a.getSizeInBytes())
        return b.emitOpError("shares workspace memory with @")
               << a.getSymName()
               << " in a debug_capture kernel (plan the workspace of a "
                  "debug_capture kernel with schedule-plan-workspace)";
    }
  return success();
}

LogicalResult Emitter::emitPhase(PhaseOp phase) {
  os << "  // ---- phase \"" << phase.getName() << "\"\n"
     << "  MK_PHASE_MARK(" << phaseIndex++ << ");\n  {\n"
     << "    uint8_t *const wsp = mkgen::opaque(ws);\n";
  SmallVector<TaskOp> grid;
  for (TaskOp t : phase.getBodyBlock().getOps<TaskOp>()) {
    if (!t.isEveryBlock()) {
      grid.push_back(t);
      continue;
    }
    if (t.getKind() != "residual_rmsnorm")
      return t.emitOpError("every_block tasks must be residual_rmsnorm");
    StringRef acc = t.getStrArg("acc"), out = t.getStrArg("out");
    os << "    // " << t.getName() << " (every block)\n"
       << "    __syncthreads();\n"
       << "    mk::block_residual<" << T << ">(" << ptr(t.getStrArg("base"))
       << ", " << (acc.empty() ? "nullptr" : ptr(acc)) << ", "
       << t.getIntArg("dim") << ", xs, "
       << (out.empty() ? "nullptr" : ptr(out, true)) << ");\n"
       << "    mk::block_rmsnorm<" << T << ">(xs, "
       << ident(t.getStrArg("weight")) << ", " << t.getIntArg("dim") << ", "
       << fmtFloat(t.getArgs().getAs<FloatAttr>("eps").getValueAsDouble())
       << ", xs, scratch);\n";
    auto cap = smemCapture.find(t.getName());
    if (debug && cap != smemCapture.end()) {
      const Capture &c = captures[captureIndex.lookup(cap->second)];
      os << "    if (blockIdx.x == 0) // debug capture " << c.name << "\n"
         << "      mk::debug_store_smem(xs, " << t.getIntArg("dim")
         << ", reinterpret_cast<mk::bf16 *>(debug + " << c.offset << "));\n";
    }
  }
  int64_t total = 0;
  for (TaskOp t : grid)
    total += t.getCount();
  if (total) {
    os << "    for (int t = blockIdx.x; t < " << total
       << "; t += gridDim.x) {\n";
    int64_t begin = 0;
    for (TaskOp t : grid) {
      int64_t end = begin + t.getCount();
      os << "      if (t < " << end << ") { // " << t.getName() << "\n"
         << "      const int i = t - " << begin << ";\n";
      for (WaitOp w : phase.getBodyBlock().getOps<WaitOp>()) {
        if (w.getTask() != t.getName())
          continue;
        CounterOp c = counters.lookup(w.getCounter());
        os << "      for (int q = 0; q < " << w.getSpan() << "; ++q)\n"
           << "        mk::counter_wait(sync, " << c.getBase() << " + (i / "
           << w.getDivisor() << ") * " << w.getSpan() << " + q, "
           << w.getTarget() << "u);\n";
      }
      std::string inst;
      llvm::raw_string_ostream is(inst);
      if (failed(emitInstance(t, is)))
        return failure();
      os << "      {\n" << outlineHeavyCalls(inst) << "      }\n";
      for (SignalOp s : phase.getBodyBlock().getOps<SignalOp>()) {
        if (s.getTask() != t.getName())
          continue;
        CounterOp c = counters.lookup(s.getCounter());
        os << "      mk::counter_signal(sync, " << c.getBase() << " + i / "
           << s.getDivisor() << ");\n";
      }
      os << "      __syncthreads();\n      continue;\n      }\n";
      begin = end;
    }
    os << "    }\n";
  }
  os << "  }\n";
  return success();
}

std::string Emitter::manifest(int64_t dynSmem, int64_t syncBytes) {
  std::string text;
  llvm::raw_string_ostream s(text);
  llvm::json::OStream j(s, 2);
  auto shape = [&](ArrayRef<int64_t> v) {
    j.array([&] {
      for (int64_t d : v)
        j.value(d);
    });
  };
  auto param = [&](StringRef name, StringRef role, StringRef dtype,
                   ArrayRef<int64_t> sh) {
    j.object([&] {
      j.attribute("name", name);
      j.attribute("role", role);
      j.attribute("dtype", dtype);
      j.attributeBegin("shape");
      shape(sh);
      j.attributeEnd();
    });
  };
  j.object([&] {
    j.attribute("format", "mk-manifest-1");
    j.attribute("kernel", kernel.getSymName());
    j.attribute("source", (kernel.getSymName() + ".cu").str());
    j.attribute("threads_per_block", T);
    j.attribute("dynamic_shared_bytes", dynSmem);
    j.attribute("workspace_bytes", (int64_t)kernel.getWorkspaceBytes());
    j.attribute("sync_bytes", syncBytes);
    j.attribute("max_blocks", kMaxGrid);
    j.attribute("phases", kernel.getNumPhases());
    j.attributeArray("phase_names", [&] {
      for (PhaseOp ph : kernel.getBodyBlock().getOps<PhaseOp>())
        j.value(ph.getName());
    });
    // A debug_capture kernel has one more: before its capture copies.
    j.attribute("grid_barriers", kernel.getNumBarriers() + (debug ? 1 : 0));
    j.attribute("counters", numCounters);
    j.attribute("debug_capture", debug);
    // The config as the full spec (an accepted form, kernel-abi.md).
    std::string err;
    auto parsed = llvm::json::parse(blockConfigToJson(cfg));
    if (parsed)
      j.attribute("config", std::move(*parsed));
    else
      llvm::consumeError(parsed.takeError());
    j.attributeBegin("params");
    j.array([&] {
      param("hidden_in", "input", "bf16", {cfg.hidden});
      param("hidden_out", "output", "bf16", {cfg.hidden});
      for (const TensorDesc &t : parameterTensors(cfg))
        param(t.name, "weight", dtypeName(t.dtype), t.shape);
      for (const TensorDesc &t : stateTensors(cfg, -1)) {
        param(t.name, "state_in", dtypeName(t.dtype), t.shape);
        param(t.name, "state_out", dtypeName(t.dtype), t.shape);
      }
      param("ctx_len", "scalar", "i32", {});
      param("cache_capacity", "scalar", "i32", {});
      param("workspace", "workspace", "u8", {(int64_t)kernel.getWorkspaceBytes()});
      param("sync", "sync", "u8", {syncBytes});
      if (debug)
        param("debug", "debug", "u8", {debugBytes});
    });
    j.attributeEnd();
    if (debug) {
      j.attributeBegin("captures");
      j.array([&] {
        for (const Capture &c : captures)
          j.object([&] {
            j.attribute("name", c.name);
            j.attribute("dtype", c.dtype);
            j.attributeBegin("shape");
            shape(c.shape);
            j.attributeEnd();
            j.attribute("offset", c.offset);
          });
      });
      j.attributeEnd();
    }
  });
  s << "\n";
  return text;
}

LogicalResult Emitter::run(EmittedKernel &out) {
  for (BufferOp b : kernel.getBodyBlock().getOps<BufferOp>()) {
    buffers[b.getSymName()] = b;
    if (b.isWorkspace() && (int64_t)b.getOffset() < 0)
      return b.emitOpError("has no workspace offset; run "
                           "schedule-plan-workspace first");
  }
  for (CounterOp c : kernel.getBodyBlock().getOps<CounterOp>()) {
    counters[c.getSymName()] = c;
    if ((int64_t)c.getBase() < 0)
      return c.emitOpError("has no base index; run schedule-plan-workspace");
    numCounters = std::max<int64_t>(numCounters, c.getBase() + c.getSize());
  }
  // Counters are reset after the last barrier: nothing may wait after it.
  bool afterLast = true;
  for (Operation &op : llvm::reverse(kernel.getBodyBlock())) {
    if (isa<BarrierOp>(op))
      break;
    if (auto p = dyn_cast<PhaseOp>(op))
      if (!p.getBodyBlock().getOps<WaitOp>().empty())
        afterLast = false;
  }
  if (numCounters && (!afterLast || kernel.getNumBarriers() == 0))
    return kernel.emitOpError("counters are waited on after the last grid "
                              "barrier; they could not be reset safely");
  debug = kernel.getDebugCapture();
  if (debug && failed(planCaptures()))
    return failure();
  // Only one shared-memory buffer (the normalized input) can be live at once:
  // a segment holds at most one every-block norm.
  for (Operation &op : kernel.getBodyBlock()) {
    if (auto p = dyn_cast<PhaseOp>(op)) {
      if (failed(emitPhase(p)))
        return failure();
    } else if (isa<BarrierOp>(op)) {
      os << "  mk::grid_barrier(sync);\n";
    }
  }
  if (numCounters)
    os << "  mk::counters_reset(sync, " << numCounters << ");\n";
  os << "  MK_PHASE_MARK(" << phaseIndex << ");\n";
  if (debug) {
    // Every value of the step is final once all blocks are here; workspace
    // buffers were planned without reuse, so each still holds its value.
    os << "  // ---- debug captures (debug_capture kernels only)\n"
       << "  mk::grid_barrier(sync);\n  {\n"
       << "    uint8_t *const wsp = mkgen::opaque(ws);\n";
    for (const Capture &c : captures)
      if (c.fill) {
        os << "    // " << c.name << "\n";
        c.fill(os, "debug + " + std::to_string(c.offset));
      }
    os << "  }\n";
  }

  int64_t d4 = (cfg.hidden + 3) / 4 * 4;
  int64_t smemFloats = d4 + 32 + (workFloats + 3) / 4 * 4;
  int64_t dynSmem = smemFloats * 4;
  // Mirrors mk::sync_bytes (grid_sync.cuh): barrier words, one arrival
  // flag per block (kMaxGrid of them), then the counters.
  int64_t syncBytes = (64 + kMaxGrid + 32 * std::max<int64_t>(numCounters, 1)) * 4;

  std::string src;
  llvm::raw_string_ostream k(src);
  k << "// Generated by mkc from the schedule of @" << kernel.getSymName()
    << ": " << kernel.getNumPhases() << " phases, "
    << kernel.getNumBarriers() << " grid barriers, " << numCounters
    << " counters. Do not edit.\n"
    << "// NVRTC has no <math.h>; the templates use INFINITY.\n"
    << "#ifndef INFINITY\n#define INFINITY __int_as_float(0x7f800000)\n"
    << "#endif\n"
    << "#include \"mk/megakernel.cuh\"\n"
    << (debug ? "#include \"mk/debug_capture.cuh\"\n" : "") << "\n"
    << "// Compiled with -DMK_PHASE_TIMING, block 0 records the global timer\n"
    << "// (ns) as it enters each phase, and at the end, in mk_phase_ns.\n"
    << "#ifdef MK_PHASE_TIMING\n"
    << "__device__ unsigned long long mk_phase_ns[" << kernel.getNumPhases() + 1
    << "];\n"
    << "#define MK_PHASE_MARK(i) mk::phase_mark(mk_phase_ns, i)\n"
    << "#else\n#define MK_PHASE_MARK(i) ((void)0)\n#endif\n\n"
    << "namespace mkgen {\n"
    << "/// Keeps a template's registers out of the kernel body's allocation.\n"
    << "template <auto F, class... A>\n"
    << "__device__ __noinline__ void call(A... a) { F(a...); }\n"
    << "/// The workspace base, re-read per phase: addresses derived from it\n"
    << "/// are not hoisted to the kernel's start (where they would all be live\n"
    << "/// at once and spill).\n"
    << "__device__ __forceinline__ uint8_t *opaque(uint8_t *p) {\n"
    << "  asm volatile(\"\" : \"+l\"(p));\n  return p;\n}\n"
    << "} // namespace mkgen\n\n";
  for (const std::string &a : asserts)
    k << "static_assert(" << a << ", \"shared-memory layout of a template "
      << "changed: the emitter's mirror is stale\");\n";
  k << "static_assert(mk::sync_bytes(" << numCounters << ") == " << syncBytes
    << ", \"sync layout changed\");\n\n";
  // Blocks per SM the shared memory allows (Hopper: 227 KB per SM, 1 KB
  // reserved per block), capped at 2 so each thread keeps >= 128 registers.
  // Telling ptxas the target occupancy lets it allocate for it instead of
  // spilling around the template calls.
  const int64_t minBlocks =
      std::clamp<int64_t>(232448 / (dynSmem + 1024), 1, 2);
  k << "extern \"C\" __global__ void __launch_bounds__(" << T << ", "
    << minBlocks << ") "
    << kernel.getSymName() << "(\n"
    << "    const mk::bf16 *__restrict__ hidden_in, mk::bf16 *hidden_out";
  for (const TensorDesc &t : parameterTensors(cfg))
    k << ",\n    const " << ctype(t.dtype) << " *__restrict__ "
      << ident(t.name);
  for (const TensorDesc &t : stateTensors(cfg, -1))
    k << ",\n    const " << ctype(t.dtype) << " *" << ident(t.name)
      << "_in, " << ctype(t.dtype) << " *" << ident(t.name) << "_out";
  k << ",\n    const int ctx_len, const int cache_capacity,\n"
    << "    uint8_t *__restrict__ ws, unsigned *sync";
  if (kernel.getDebugCapture())
    k << ", uint8_t *debug";
  k << ") {\n"
    << "  extern __shared__ __align__(16) float mk_smem[];\n"
    << "  float *const xs = mk_smem;            // normalized input ["
    << cfg.hidden << "]\n"
    << "  float *const scratch = xs + " << d4 << ";    // reductions [32]\n"
    << "  float *const work = scratch + 32;     // per-task [" << workFloats
    << "]\n"
    << "  __shared__ float tk_w[" << std::max<int64_t>(cfg.nActive, 1)
    << "];\n"
    << "  __shared__ int tk_idx[" << std::max<int64_t>(cfg.nActive, 1)
    << "];\n"
    << "  int tk_key = -1; // which router's top-k tk_* hold\n"
    << "  (void)cache_capacity; (void)tk_key; (void)work; (void)scratch;\n"
    << body << "}\n";
  out.name = kernel.getSymName().str();
  out.source = src;
  out.dynamicSharedBytes = dynSmem;
  out.manifest = manifest(dynSmem, syncBytes);
  return success();
}

} // namespace

LogicalResult mk::emitter::emitKernel(KernelOp kernel, EmittedKernel &out) {
  BlockConfig cfg;
  std::string error;
  if (!kernel.getConfig() ||
      !parseBlockSpec(kernel.getConfig()->str(), cfg, error))
    return kernel.emitOpError("needs a valid block config: ") << error;
  return Emitter(kernel, cfg).run(out);
}

LogicalResult mk::emitter::emitModule(ModuleOp module, EmittedKernel &out) {
  auto kernels = module.getOps<KernelOp>();
  if (llvm::range_size(kernels) != 1)
    return module.emitError("expected exactly one schedule.kernel, found ")
           << llvm::range_size(kernels);
  return emitKernel(*kernels.begin(), out);
}
