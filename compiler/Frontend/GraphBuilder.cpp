//===- GraphBuilder.cpp - Block configuration -> graph IR -----------------===//
//
// Every dimension comes from the BlockConfig and every symbol name from its
// tensor catalogue (core/lib/BlockConfig.cpp), so the IR, the oracle and the
// runtime agree on names and shapes by construction.
//
//===----------------------------------------------------------------------===//

#include "Frontend/GraphBuilder.h"
#include "mk/BlockSpec.h"

#include "Pipeline/PipelineStages.h"
#include "mk/Dialect/Graph/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mk;
using namespace mk::graph;

namespace {

/// The state values of one layer, threaded through the step function.
struct LayerState {
  // KDA
  Value s, cq, ck, cv;
  // MLA
  Value cKv, kRope;
  // GQA
  Value kCache, vCache;
};

class GraphBuilder {
public:
  GraphBuilder(MLIRContext &ctx, const BlockConfig &cfg)
      : ctx(ctx), cfg(cfg), b(&ctx) {}

  OwningOpRef<ModuleOp> build();
  /// Why build() returned no module.
  std::string error;

private:
  Type bf16() { return b.getBF16Type(); }
  RankedTensorType tensor(ArrayRef<int64_t> shape, Type elt) {
    return RankedTensorType::get(shape, elt);
  }
  RankedTensorType vec(int64_t n, Type elt) { return tensor({n}, elt); }
  RankedTensorType bvec(int64_t n) { return vec(n, bf16()); }
  Location loc(const std::string &name) {
    return NameLoc::get(b.getStringAttr(name));
  }
  FlatSymbolRefAttr sym(const std::string &name) {
    return FlatSymbolRefAttr::get(&ctx, name);
  }
  Type elementType(DType t);

  void declareSymbols(ModuleOp module);
  Value buildKda(int64_t layer, Value u, LayerState &st);
  Value buildMla(int64_t layer, Value u, Value pos, LayerState &st);
  /// The norms' `round_twice` (rmsnorm_rounding "twice"), or none.
  UnitAttr roundTwice() { return cfg.normRoundTwice ? b.getUnitAttr() : UnitAttr(); }
  Value buildGqa(int64_t layer, Value u, Value pos, LayerState &st);
  Value buildMoe(int64_t layer, Value u);
  Value buildDenseFfn(int64_t layer, Value u);
  Value linear(Value x, const std::string &weight, int64_t out, StringRef capture = "") {
    auto op = b.create<LinearW4A16Op>(loc(weight), bvec(out), x, sym(weight));
    return captured(op, capture);
  }
  /// `op`'s result, named `capture` for debug captures (docs/kernel-abi.md)
  /// where not empty.
  Value captured(Operation *op, StringRef capture) {
    if (!capture.empty())
      op->setAttr(GraphDialect::getCaptureAttrName(), b.getStringAttr(capture));
    return op->getResult(0);
  }

  MLIRContext &ctx;
  const BlockConfig &cfg;
  OpBuilder b;
  std::vector<TensorDesc> states;
};

} // namespace

Type GraphBuilder::elementType(DType t) {
  switch (t) {
  case DType::BF16:
    return b.getBF16Type();
  case DType::F32:
    return b.getF32Type();
  case DType::I32:
    return b.getI32Type();
  case DType::U8:
    return b.getIntegerType(8);
  }
  return b.getBF16Type();
}

void GraphBuilder::declareSymbols(ModuleOp module) {
  b.setInsertionPointToEnd(module.getBody());
  // Quantized linears are catalogued as three storage tensors; the IR has
  // one symbol per linear, declared where its w_q appears.
  llvm::StringMap<QuantLinearDesc> quant;
  for (const QuantLinearDesc &q : quantLinears(cfg))
    quant[q.prefix] = q;
  Type i4 = b.getIntegerType(4);
  for (const TensorDesc &t : parameterTensors(cfg)) {
    llvm::StringRef name(t.name);
    auto [prefix, field] = name.rsplit('.');
    auto it = quant.find(prefix);
    if (it != quant.end() &&
        (field == "w_q" || field == "scales" || field == "zeros")) {
      if (field != "w_q")
        continue;
      const QuantLinearDesc &q = it->second;
      SmallVector<int64_t> shape;
      if (q.experts > 0)
        shape.push_back(q.experts);
      shape.append({q.in, q.out});
      // The whole model's LM head belongs to no layer (no attribute).
      b.create<QuantizedWeightOp>(loc(q.prefix), q.prefix, cfg.group, tensor(shape, i4),
                                  q.layer >= 0 ? b.getI64IntegerAttr(q.layer) : IntegerAttr());
      continue;
    }
    b.create<WeightOp>(loc(t.name), t.name, tensor(t.shape, elementType(t.dtype)),
                       t.layer >= 0 ? b.getI64IntegerAttr(t.layer) : IntegerAttr());
  }
  // Caches are catalogued with a row count of -1: dynamic in the IR.
  states = stateTensors(cfg, -1);
  for (const TensorDesc &t : states) {
    SmallVector<int64_t> shape(t.shape.begin(), t.shape.end());
    for (int64_t &d : shape)
      if (d < 0)
        d = ShapedType::kDynamic;
    b.create<StateOp>(loc(t.name), t.name, tensor(shape, elementType(t.dtype)),
                      b.getI64IntegerAttr(t.layer));
  }
}

Value GraphBuilder::buildKda(int64_t layer, Value u, LayerState &st) {
  const std::string p = layerPrefix(layer) + ".attn";
  const int64_t c = cfg.kdaChannels();
  Value q = linear(u, p + ".q_proj", c, "q");
  Value k = linear(u, p + ".k_proj", c, "k");
  Value v = linear(u, p + ".v_proj", c, "v");
  // The decay's projection: the unit's full-rank g_proj, or (kda_form
  // "released") f_b(f_a(u)) through a head_dim-wide bottleneck; the
  // released form's output gate g_b(g_a(u)) likewise.
  const int64_t rank = cfg.kdaHeadDim;
  Value g = cfg.kdaReleased
                ? linear(linear(u, p + ".f_a_proj", rank), p + ".f_b_proj", c, "g")
                : linear(u, p + ".g_proj", c, "g");
  Value gate = cfg.kdaReleased
                   ? linear(linear(u, p + ".g_a_proj", rank), p + ".g_b_proj", c, "gate")
                   : Value();
  Value beta = captured(b.create<LinearBF16Op>(loc(p + ".beta_proj"), bvec(cfg.kdaHeads), u,
                                               sym(p + ".beta_proj.weight")),
                        "beta_logits");
  auto conv = [&](Value x, Value &window, int64_t index, const char *what) {
    auto op = b.create<KdaShortConvOp>(
        loc(p + ".conv." + what), x.getType(), window.getType(), x, window,
        sym(p + ".conv_w"), b.getI64IntegerAttr(index));
    window = op.getNewWindow();
    return op.getOutput();
  };
  Value qc = conv(q, st.cq, 0, "q");
  Value kc = conv(k, st.ck, 1, "k");
  Value vc = conv(v, st.cv, 2, "v");
  auto delta = b.create<KdaGatedDeltaOp>(
      loc(p + ".gated_delta"), bvec(c), st.s.getType(), qc, kc, vc, g, beta,
      st.s, cfg.kdaHeads, cfg.kdaHeadDim,
      cfg.kdaReleased ? b.getF64FloatAttr(BlockConfig::kKdaL2NormEps) : FloatAttr(),
      cfg.kdaReleased ? sym(p + ".A_log") : FlatSymbolRefAttr(),
      cfg.kdaReleased ? sym(p + ".dt_bias") : FlatSymbolRefAttr());
  st.s = delta.getNewState();
  Value o = delta.getOutput();
  if (cfg.kdaReleased)
    o = b.create<KdaGatedNormOp>(loc(p + ".o_norm"), o.getType(), o, gate, sym(p + ".o_norm"),
                                 b.getI64IntegerAttr(cfg.kdaHeads),
                                 b.getI64IntegerAttr(cfg.kdaHeadDim), b.getF64FloatAttr(cfg.eps));
  return linear(o, p + ".o_proj", cfg.hidden);
}

Value GraphBuilder::buildMla(int64_t layer, Value u, Value pos,
                             LayerState &st) {
  const std::string p = layerPrefix(layer) + ".attn";
  const int64_t hm = cfg.mlaHeads, qDim = cfg.mlaQHeadDim();
  Value q = linear(u, p + ".q_proj", hm * qDim, "q");
  Value q2 = b.create<ReshapeOp>(loc(p + ".q_heads"),
                                 tensor({hm, qDim}, bf16()), q);
  // The rope parts rotated at the token's position, or (mla_rotary false)
  // used as projected.
  Value qr = q2;
  if (cfg.mlaRotary)
    qr = b.create<RopeOp>(loc(p + ".q_rope"), q2.getType(), q2, pos,
                          b.getF64FloatAttr(cfg.ropeTheta), b.getI64IntegerAttr(cfg.qkNope),
                          b.getI64IntegerAttr(cfg.qkRope), /*rotate_half=*/UnitAttr());
  Value kv = linear(u, p + ".kv_a", cfg.kvLora + cfg.qkRope);
  Value c = b.create<SliceOp>(loc(p + ".c"), bvec(cfg.kvLora), kv, 0);
  // The latent normalized before it is cached (mla_latent_norm).
  if (cfg.mlaLatentNorm)
    c = b.create<RMSNormOp>(loc(p + ".kv_a_norm"), c.getType(), c, sym(p + ".kv_a_norm"),
                            b.getF64FloatAttr(BlockConfig::kMlaLatentNormEps),
                            roundTwice());
  Value kr = b.create<SliceOp>(loc(p + ".kr"), bvec(cfg.qkRope), kv,
                               cfg.kvLora);
  Value krr = kr;
  if (cfg.mlaRotary)
    krr = b.create<RopeOp>(loc(p + ".k_rope"), kr.getType(), kr, pos,
                           b.getF64FloatAttr(cfg.ropeTheta), b.getI64IntegerAttr(0),
                           b.getI64IntegerAttr(cfg.qkRope), /*rotate_half=*/UnitAttr());
  st.cKv = b.create<MlaCacheAppendOp>(loc(p + ".append_c_kv"),
                                      st.cKv.getType(), st.cKv, c);
  st.kRope = b.create<MlaCacheAppendOp>(loc(p + ".append_k_rope"),
                                        st.kRope.getType(), st.kRope, krr);
  Value o = b.create<MlaAttentionOp>(
      loc(p + ".attention"), bvec(hm * cfg.vHead), qr, st.cKv, st.kRope,
      sym(p + ".kv_b"), b.getI64IntegerAttr(hm),
      b.getI64IntegerAttr(cfg.qkNope), b.getI64IntegerAttr(cfg.qkRope),
      b.getI64IntegerAttr(cfg.vHead));
  return linear(o, p + ".o_proj", cfg.hidden);
}

Value GraphBuilder::buildGqa(int64_t layer, Value u, Value pos, LayerState &st) {
  const std::string p = layerPrefix(layer) + ".attn";
  const int64_t hq = cfg.gqaHeads, hkv = cfg.gqaKvHeads, hd = cfg.gqaHeadDim;
  const auto eps = b.getF64FloatAttr(cfg.eps);
  Value q = linear(u, p + ".q_proj", hq * hd, "q");
  Value k = linear(u, p + ".k_proj", hkv * hd, "k");
  Value v = linear(u, p + ".v_proj", hkv * hd, "v");
  auto heads = [&](Value x, int64_t n, const char *what) {
    return b.create<ReshapeOp>(loc(p + "." + what + "_heads"), tensor({n, hd}, bf16()), x);
  };
  auto normRotate = [&](Value x, const char *what) {
    Value n = b.create<HeadRMSNormOp>(loc(p + "." + what + "_norm"), x.getType(), x,
                                      sym(p + "." + what + "_norm"), eps);
    return b.create<RopeOp>(loc(p + "." + what + "_rope"), x.getType(), n, pos,
                            b.getF64FloatAttr(cfg.ropeTheta), b.getI64IntegerAttr(0),
                            b.getI64IntegerAttr(hd), /*rotate_half=*/b.getUnitAttr())
        .getOutput();
  };
  Value qr = normRotate(heads(q, hq, "q"), "q");
  Value kr = normRotate(heads(k, hkv, "k"), "k");
  st.kCache = b.create<KvCacheAppendOp>(loc(p + ".append_k"), st.kCache.getType(), st.kCache, kr);
  st.vCache = b.create<KvCacheAppendOp>(loc(p + ".append_v"), st.vCache.getType(), st.vCache,
                                        heads(v, hkv, "v"));
  Value o = b.create<GqaAttentionOp>(loc(p + ".attention"), bvec(hq * hd), qr, st.kCache,
                                     st.vCache);
  return linear(o, p + ".o_proj", cfg.hidden);
}

Value GraphBuilder::buildMoe(int64_t layer, Value u) {
  const std::string p = layerPrefix(layer) + ".moe";
  const int64_t d = cfg.hidden;
  auto router = b.create<MoeRouterOp>(
      loc(p + ".router"), vec(cfg.nActive, b.getF32Type()),
      vec(cfg.nActive, b.getI32Type()), u, sym(p + ".router.weight"),
      cfg.router == RouterKind::Sigmoid ? sym(p + ".router.bias") : FlatSymbolRefAttr(),
      b.getI64IntegerAttr(cfg.nActive),
      b.getF64FloatAttr(cfg.routedScaling));
  // The router's captured value is its logits (before the top-k).
  captured(router, "router_logits");
  // ffn_rounding "each": the experts' steps in bf16, the parts rounded
  // before their sum.
  const bool each = cfg.ffnRoundEach;
  Value routed = b.create<MoeExpertsOp>(
      loc(p + ".experts"), vec(d, b.getF32Type()), u, router.getWeights(),
      router.getIndices(), sym(p + ".gate"), sym(p + ".up"),
      sym(p + ".down"), each ? b.getUnitAttr() : UnitAttr());
  Value shared;
  if (cfg.nShared > 0)
    shared = b.create<SharedExpertsOp>(loc(p + ".shared_experts"),
                                       vec(d, b.getF32Type()), u,
                                       sym(p + ".s_gate"), sym(p + ".s_up"),
                                       sym(p + ".s_down"), each ? b.getUnitAttr() : UnitAttr());
  return b.create<MoeCombineOp>(loc(p + ".combine"), bvec(d), routed, shared,
                                each && shared);
}

Value GraphBuilder::buildDenseFfn(int64_t layer, Value u) {
  // A dense SwiGLU FFN is a shared expert of its width (plain [in, out]
  // linears, taken as one expert; fp32 sums rounded once to bf16): the same
  // graph ops and tasks.
  const std::string p = layerPrefix(layer) + ".mlp";
  Value f = b.create<SharedExpertsOp>(loc(p), vec(cfg.hidden, b.getF32Type()), u,
                                      sym(p + ".gate"), sym(p + ".up"), sym(p + ".down"),
                                      cfg.ffnRoundEach ? b.getUnitAttr() : UnitAttr());
  return b.create<MoeCombineOp>(loc(p + ".combine"), bvec(cfg.hidden), f, Value(), false);
}

/// A JSON value as an attribute: objects as dictionaries, arrays as arrays,
/// integers as i64, other numbers as f64, strings, booleans; null as unit.
static Attribute jsonToAttribute(OpBuilder &b, const llvm::json::Value &v) {
  if (const llvm::json::Object *o = v.getAsObject()) {
    SmallVector<NamedAttribute> entries;
    for (const auto &[key, value] : *o)
      entries.push_back(b.getNamedAttr(key.str(), jsonToAttribute(b, value)));
    return b.getDictionaryAttr(entries);
  }
  if (const llvm::json::Array *a = v.getAsArray()) {
    SmallVector<Attribute> items;
    for (const llvm::json::Value &e : *a)
      items.push_back(jsonToAttribute(b, e));
    return b.getArrayAttr(items);
  }
  if (std::optional<int64_t> i = v.getAsInteger())
    return b.getI64IntegerAttr(*i);
  if (std::optional<double> d = v.getAsNumber())
    return b.getF64FloatAttr(*d);
  if (std::optional<bool> bv = v.getAsBoolean())
    return b.getBoolAttr(*bv);
  if (std::optional<StringRef> str = v.getAsString())
    return b.getStringAttr(*str);
  return b.getUnitAttr();
}

OwningOpRef<ModuleOp> GraphBuilder::build() {
  ctx.getOrLoadDialect<GraphDialect>();
  ctx.getOrLoadDialect<func::FuncDialect>();
  OwningOpRef<ModuleOp> module =
      ModuleOp::create(loc(cfg.name), llvm::StringRef(cfg.name));
  // The spec as typed attributes: the kernel's manifest carries it (the
  // frontend is the only reader of the spec; no pass reads this).
  llvm::Expected<llvm::json::Value> spec = llvm::json::parse(blockConfigToJson(cfg));
  if (!spec) {
    error = "cannot re-read the block config as JSON: " + llvm::toString(spec.takeError());
    return nullptr;
  }
  (*module)->setAttr("mk.config", jsonToAttribute(b, *spec));
  declareSymbols(*module);

  // Signature: hidden (the whole model: a token id), ctx_len, then every
  // state in catalogue order; results: hidden' (the whole model: the next
  // token and the logits), then every new state in the same order.
  const bool model = cfg.vocab > 0;
  SmallVector<Type> argTypes = {model ? Type(b.getI32Type()) : Type(bvec(cfg.hidden)),
                                b.getI32Type()};
  SmallVector<Type> resultTypes = {model ? Type(b.getI32Type()) : Type(bvec(cfg.hidden))};
  if (model)
    resultTypes.push_back(bvec(cfg.vocab));
  const unsigned firstStateResult = resultTypes.size();
  SmallVector<StateOp> stateOps(module->getOps<StateOp>());
  for (StateOp s : stateOps) {
    argTypes.push_back(s.getType());
    resultTypes.push_back(s.getType());
  }
  b.setInsertionPointToEnd(module->getBody());
  auto fn = b.create<func::FuncOp>(loc(cfg.name + ".decode_step"),
                                   kDecodeStepFuncName,
                                   b.getFunctionType(argTypes, resultTypes));
  // Every argument's and result's attributes set at once (one at a time
  // rebuilds the whole list each time: quadratic in the depth).
  const unsigned firstState = 2;
  SmallVector<DictionaryAttr> argAttrs(argTypes.size(), b.getDictionaryAttr({}));
  SmallVector<DictionaryAttr> resultAttrs(resultTypes.size(), b.getDictionaryAttr({}));
  for (auto [i, s] : llvm::enumerate(stateOps)) {
    auto tie = b.getDictionaryAttr(b.getNamedAttr(
        GraphDialect::getStateAttrName(), FlatSymbolRefAttr::get(s.getSymNameAttr())));
    argAttrs[firstState + i] = tie;
    resultAttrs[firstStateResult + i] = tie;
  }
  fn.setAllArgAttrs(argAttrs);
  fn.setAllResultAttrs(resultAttrs);
  Block *entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);

  // Bind each layer's state arguments by name.
  llvm::StringMap<Value> stateArg;
  for (auto [i, s] : llvm::enumerate(stateOps))
    stateArg[s.getSymName()] = entry->getArgument(firstState + i);
  std::vector<LayerState> layerStates(cfg.pattern.size());
  for (size_t i = 0; i < cfg.pattern.size(); ++i) {
    std::string sp = statePrefix(i);
    LayerState &st = layerStates[i];
    if (cfg.pattern[i] == LayerKind::KDA) {
      st.s = stateArg.lookup(sp + ".S");
      st.cq = stateArg.lookup(sp + ".cq");
      st.ck = stateArg.lookup(sp + ".ck");
      st.cv = stateArg.lookup(sp + ".cv");
    } else if (cfg.pattern[i] == LayerKind::GQA) {
      st.kCache = stateArg.lookup(sp + ".k_cache");
      st.vCache = stateArg.lookup(sp + ".v_cache");
    } else {
      st.cKv = stateArg.lookup(sp + ".c_kv");
      st.kRope = stateArg.lookup(sp + ".k_rope");
    }
  }

  // The whole model's input is its token's embedding row.
  Value x = model ? Value(b.create<EmbeddingOp>(loc("embed"), bvec(cfg.hidden),
                                                entry->getArgument(0), sym("embed.weight")))
                  : entry->getArgument(0);
  Value pos = entry->getArgument(1);
  const auto eps = b.getF64FloatAttr(cfg.eps);
  for (size_t i = 0; i < cfg.pattern.size(); ++i) {
    const std::string p = layerPrefix(i);
    Value n = captured(b.create<RMSNormOp>(loc(p + ".attn_norm"), x.getType(), x,
                                           sym(p + ".attn_norm"), eps, roundTwice()),
                       "attn_in");
    Value attn = cfg.pattern[i] == LayerKind::KDA   ? buildKda(i, n, layerStates[i])
                 : cfg.pattern[i] == LayerKind::GQA ? buildGqa(i, n, pos, layerStates[i])
                                                    : buildMla(i, n, pos, layerStates[i]);
    Value h = b.create<AddOp>(loc(p + ".attn_residual"), x.getType(), x, attn);
    // The FFN's input is captured as "moe_in" (and its output as
    // "moe_out") in dense-FFN layers too: one trace vocabulary per layer.
    const bool dense = cfg.denseFfn(int64_t(i));
    const std::string norm = p + (dense ? ".mlp_norm" : ".moe_norm");
    Value m = captured(b.create<RMSNormOp>(loc(norm), h.getType(), h, sym(norm), eps,
                                           roundTwice()),
                       "moe_in");
    Value moe = dense ? buildDenseFfn(i, m) : buildMoe(i, m);
    x = b.create<AddOp>(loc(p + ".moe_residual"), h.getType(), h, moe);
  }

  // The whole model: the final norm, the LM head's logits, their argmax.
  SmallVector<Value> results = {x};
  if (model) {
    Value y = b.create<RMSNormOp>(loc("final_norm"), x.getType(), x, sym("final_norm"), eps,
                                  roundTwice());
    Value logits = cfg.lmHeadBf16 ? Value(b.create<LinearBF16Op>(loc("lm_head"), bvec(cfg.vocab),
                                                                 y, sym("lm_head.weight")))
                                  : linear(y, "lm_head", cfg.vocab);
    results = {b.create<ArgmaxOp>(loc("argmax"), b.getI32Type(), logits), logits};
  }
  // Return the new states in catalogue order.
  for (size_t i = 0; i < cfg.pattern.size(); ++i) {
    const LayerState &st = layerStates[i];
    if (cfg.pattern[i] == LayerKind::KDA)
      results.append({st.s, st.cq, st.ck, st.cv});
    else if (cfg.pattern[i] == LayerKind::GQA)
      results.append({st.kCache, st.vCache});
    else
      results.append({st.cKv, st.kRope});
  }
  b.create<func::ReturnOp>(loc(cfg.name + ".decode_step.return"), results);
  return module;
}

OwningOpRef<ModuleOp> mk::buildGraphModule(MLIRContext &ctx,
                                           const BlockConfig &cfg,
                                           std::string *error) {
  std::string problem = cfg.validate();
  if (!problem.empty()) {
    if (error)
      *error = "invalid block configuration: " + problem;
    return nullptr;
  }
  GraphBuilder builder(ctx, cfg);
  OwningOpRef<ModuleOp> module = builder.build();
  if (!module && error)
    *error = builder.error;
  return module;
}

void mk::registerFrontendPipelineStages() {
  PipelineStage graph;
  graph.name = "graph";
  graph.summary = "tensor data flow of one decode step (graph dialect), as "
                  "built from the block spec";
  registerPipelineStage(std::move(graph));
}
