//===- DebugCaptures.cpp - Intermediates for differential debugging -------===//
//
// --debug-capture kernels: which buffer or value each capture name of
// docs/kernel-abi.md comes from, its place in the debug arena, and how it is
// written (end-of-step copies, or where shared-memory values are computed).
//
//===----------------------------------------------------------------------===//

#include "Emitter/EmitterImpl.h"

using namespace mk::emitter::detail;

/// Which debug captures the kernel provides and how (docs/kernel-abi.md).
/// Derived from the tasks: a value the frontend named (the task's
/// `captures`, from graph.capture), or what a task kind computes (the KDA
/// convolutions and output, MLA's queries, latent row and output, the
/// top-k). Its layer is the one its weight or state declares. Offsets
/// follow the oracle's order: layer by layer, kCaptureOrder within a layer.
LogicalResult Emitter::planCaptures() {
  const int64_t last = kernel.getNumLayers() - 1;
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
  // An FFN's output from its sums: one, or two rounded apart (acc2).
  auto copyFfn = [&](StringRef acc, StringRef acc2, int64_t n)
      -> decltype(Capture::fill) {
    if (acc2.empty())
      return copy(ptr(acc), n, "bf16");
    std::string a = ptr(acc), b = ptr(acc2);
    return [a, b, n](llvm::raw_ostream &o, const std::string &dst) {
      o << "    mk::debug_copy_sum(" << a << ", " << b << ", " << n
        << ", reinterpret_cast<mk::bf16 *>(" << dst << "));\n";
    };
  };
  auto numelOf = [&](StringRef buffer) {
    return numel(buffers.lookup(buffer).getShape());
  };
  // The names the frontend gave a task's values, one per output.
  LogicalResult bad = success();
  auto captureNames = [&](TaskOpInterface t, size_t outputs) {
    SmallVector<std::string> names = t.getStrArrayArg("captures");
    if (names.empty())
      names.assign(outputs, "");
    if (names.size() != outputs)
      bad = t.emitOpError("has ") << names.size() << " capture names for " << outputs
                                  << " outputs";
    names.resize(outputs);
    return names;
  };
  kernel.walk([&](TaskOpInterface t) {
    auto str = [&](StringRef n) { return t.getStrArg(n); };
    auto strs = [&](StringRef n) { return t.getStrArrayArg(n); };
    if (isa<ResidualRmsnormOp>(t.getOperation())) {
      StringRef w = str("weight"), acc = str("acc"), acc2 = str("acc2"), out = str("out");
      int64_t L = layerOf(w), d = t.getIntArg("dim");
      // The attention's input (its residual sums are the previous layer's
      // MoE output and output) or the MoE's (the attention output and h).
      const std::string role = captureNames(t, 1)[0];
      const bool attn = role == "attn_in";
      if (!attn && role != "moe_in") {
        // The whole model's final norm (no layer): its residual is the last
        // layer's MoE output and output, as a block's final residual's.
        if (L < 0 && !acc.empty()) {
          add(last, "moe_out", "bf16", {d}, copyFfn(acc, acc2, d));
          if (!out.empty())
            add(last, "out", "bf16", {d}, copy(ptr(out, true), d, "bf16"));
        }
        return;
      }
      // xs lives in shared memory: block 0 writes it after the norm.
      add(L, attn ? "attn_in" : "moe_in", "bf16", {d}, nullptr);
      smemCapture[t.getName()] =
          "layer" + std::to_string(L) + (attn ? ".attn_in" : ".moe_in");
      // The fp32 sum the residual rounds to bf16, and the residual itself.
      if (!acc.empty())
        add(attn ? L - 1 : L, attn ? "moe_out" : "attn_out", "bf16", {d},
            copyFfn(acc, acc2, d));
      if (!out.empty())
        add(attn ? L - 1 : L, attn ? "out" : "h", "bf16", {d},
            copy(ptr(out, true), d, "bf16"));
    } else if (isa<FinalResidualOp>(t.getOperation())) {
      int64_t d = t.getIntArg("dim");
      add(last, "moe_out", "bf16", {d}, copyFfn(str("acc"), str("acc2"), d));
      add(last, "out", "bf16", {d}, copy(ptr(str("out"), true), d, "bf16"));
    } else if (isa<W4A16GemvOp>(t.getOperation())) {
      if (str("epilogue") == "atomic_f32")
        return; // an accumulator: captured where the residual reads it
      auto weights = strs("weights"), outputs = strs("outputs");
      auto names = captureNames(t, outputs.size());
      for (auto [w, out, what] : llvm::zip(weights, outputs, names))
        if (!what.empty())
          add(layerOf(w), what, "bf16", {numelOf(out)},
              copy(ptr(out, true), numelOf(out), "bf16"));
    } else if (isa<Bf16RowsOp>(t.getOperation())) {
      StringRef w = str("weight"), out = str("output");
      const std::string what = captureNames(t, 1)[0];
      // bf16 rows, or a sigmoid router's fp32 logits.
      const StringRef dt = buffers.lookup(out).getDtype();
      if (!what.empty())
        add(layerOf(w), what, dt, {numelOf(out)}, copy(ptr(out, true), numelOf(out), dt));
    } else if (isa<KdaHeadChunkOp>(t.getOperation())) {
      int64_t L = layerOf(str("conv_w"));
      int64_t c = t.getIntArg("heads") * t.getIntArg("head_dim");
      // The conv outputs live in the task's shared memory: each instance
      // writes its channels (recomputed by the same function).
      for (StringRef what : {"q_conv", "k_conv", "v_conv"})
        add(L, what, "bf16", {c}, nullptr);
      convCapture[t.getName()] = L;
      add(L, "kda_o", "bf16", {c}, copy(ptr(str("o"), true), c, "bf16"));
    } else if (isa<MlaRopeAppendOp>(t.getOperation())) {
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
    } else if (isa<MlaCombineWvOp>(t.getOperation())) {
      int64_t n = numelOf(str("o"));
      add(layerOf(str("kv_b")), "mla_o", "bf16", {n},
          copy(ptr(str("o"), true), n, "bf16"));
    } else if ((isa<MoeGateUpOp, MoeDownOp>(t.getOperation())) &&
               !str("logits").empty()) {
      // The top-k lives in each block's shared memory: a block that
      // computes it writes it (every block computes the same values).
      int64_t L = layerOf(str(isa<MoeDownOp>(t.getOperation()) ? "down" : "gate"));
      int64_t k = t.getIntArg("top_k");
      add(L, "topk_idx", "i32", {k}, nullptr);
      add(L, "topk_w", "f32", {k}, nullptr);
      topkCapture[str("logits")] = L;
    }
  });
  if (failed(bad))
    return failure();
  std::stable_sort(captures.begin(), captures.end(),
                   [](const Capture &a, const Capture &b) {
                     return std::tie(a.layer, a.rank) <
                            std::tie(b.layer, b.rank);
                   });
  int64_t at = 0;
  for (auto [i, c] : llvm::enumerate(captures)) {
    captureIndex[c.name] = i;
    c.offset = at;
    at += (numel(c.shape) * dtypeSize(c.dtype) + 15) / 16 * 16;
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
