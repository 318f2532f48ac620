//===- Kimi48bOracle.cpp - CPU reference of Kimi-Linear-48B-A3B -----------===//
//
// Built with -ffp-contract=off like the rest of the oracle. Sums are
// sequential in index order unless stated.
//
//===----------------------------------------------------------------------===//

#include "mk/Kimi48bOracle.h"

#include "ParallelFor.h"
#include "mk/Json.h"
#include "mk/OracleOps.h"
#include "mk/TestData.h"
#include "mk/TextFile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>

namespace mk {
namespace oracle {

// ---------------------------------------------------------------- config

bool Kimi48bConfig::isKda(int64_t i) const {
  return std::find(kdaLayers.begin(), kdaLayers.end(), i + 1) != kdaLayers.end();
}

bool Kimi48bConfig::isMoe(int64_t i) const {
  return experts > 0 && i >= firstKDense && i % moeLayerFreq == 0;
}

std::string validateKimi48bConfig(const Kimi48bConfig &c) {
  const std::pair<const char *, int64_t> sizes[] = {
      {"hidden_size", c.hidden},
      {"num_hidden_layers", c.layers},
      {"vocab_size", c.vocab},
      {"linear_attn_config.num_heads", c.kdaHeads},
      {"linear_attn_config.head_dim", c.kdaHeadDim},
      {"linear_attn_config.short_conv_kernel_size", c.convKernel},
      {"num_attention_heads", c.mlaHeads},
      {"kv_lora_rank", c.kvLora},
      {"qk_nope_head_dim", c.qkNope},
      {"qk_rope_head_dim", c.qkRope},
      {"v_head_dim", c.vHead},
      {"intermediate_size", c.inter},
      {"moe_layer_freq", c.moeLayerFreq},
      {"moe_intermediate_size", c.moeInter},
      {"num_experts", c.experts},
      {"num_experts_per_token", c.topK}};
  for (const auto &[name, v] : sizes)
    if (v <= 0)
      return std::string("'") + name + "' must be positive";
  if (c.firstKDense < 0 || c.sharedExperts < 0)
    return "'first_k_dense_replace' and 'num_shared_experts' must be >= 0";
  if (c.topK > c.experts)
    return "'num_experts_per_token' (" + std::to_string(c.topK) + ") must not exceed 'num_experts' (" +
           std::to_string(c.experts) + ")";
  if (!(c.eps > 0.f) || !(c.kvNormEps > 0.f))
    return "'rms_norm_eps' must be positive";
  if (!std::isfinite(c.routedScaling))
    return "'routed_scaling_factor' must be finite";
  for (int64_t l : c.kdaLayers)
    if (l < 1 || l > c.layers)
      return "'linear_attn_config.kda_layers' entry " + std::to_string(l) + " is not in 1.." +
             std::to_string(c.layers) + " (the list is 1-based)";
  for (int64_t l : c.fullAttnLayers)
    if (l < 1 || l > c.layers)
      return "'linear_attn_config.full_attn_layers' entry " + std::to_string(l) +
             " is not in 1.." + std::to_string(c.layers) + " (the list is 1-based)";
  for (int64_t i = 1; i <= c.layers; ++i) {
    const auto k = std::count(c.kdaLayers.begin(), c.kdaLayers.end(), i);
    const auto f = std::count(c.fullAttnLayers.begin(), c.fullAttnLayers.end(), i);
    if (k + f != 1)
      return "layer " + std::to_string(i) +
             " (1-based) must be listed exactly once in 'linear_attn_config.kda_layers' or "
             "'linear_attn_config.full_attn_layers'";
  }
  return "";
}

namespace {

// Keys of config.json that do not enter one decode step.
const char *const kIgnoredKeys[] = {
    "architectures", "auto_map",          "bos_token_id",     "eos_token_id",
    "pad_token_id",  "dtype",             "torch_dtype",      "initializer_range",
    "model_max_length", "model_type",     "use_cache",        "transformers_version",
    "head_dim",      "num_key_value_heads", "rope_theta",     "rope_scaling",
    "use_grouped_topk", "tokenizer_class", "max_position_embeddings", "attention_dropout",
    "name_or_path",  "_name_or_path"};

struct Reader {
  const json::Value &obj;
  std::string prefix; // "" or "linear_attn_config."
  std::string error;

  const json::Value *need(const char *key) {
    if (!error.empty())
      return nullptr;
    const json::Value *v = obj.find(key);
    if (!v)
      error = "missing key '" + prefix + key + "'";
    return v;
  }
  void integer(const char *key, int64_t &out, int64_t minValue,
               int64_t maxValue = int64_t(1) << 24) {
    const json::Value *v = need(key);
    if (!v)
      return;
    if (!v->getInt(out) || out < minValue || out > maxValue)
      error = "'" + prefix + key + "' must be an integer in " + std::to_string(minValue) + ".." +
              (maxValue == int64_t(1) << 24 ? std::string("2^24") : std::to_string(maxValue)) +
              " at " + v->where();
  }
  void number(const char *key, double &out) {
    const json::Value *v = need(key);
    if (!v)
      return;
    if (!v->isNumber())
      error = "'" + prefix + key + "' must be a number at " + v->where();
    else
      out = v->number;
  }
  void boolean(const char *key, bool &out) {
    const json::Value *v = need(key);
    if (!v)
      return;
    if (!v->isBool())
      error = "'" + prefix + key + "' must be true or false at " + v->where();
    else
      out = v->boolean;
  }
  void intList(const char *key, std::vector<int64_t> &out) {
    const json::Value *v = need(key);
    if (!v)
      return;
    out.clear();
    bool ok = v->isArray();
    for (size_t i = 0; ok && i < v->array.size(); ++i) {
      int64_t x = 0;
      ok = v->array[i].getInt(x);
      out.push_back(x);
    }
    if (!ok)
      error = "'" + prefix + key + "' must be an array of integers at " + v->where();
  }
  // The released value is the only one whose semantics the oracle has.
  void mustBool(const char *key, bool want) {
    bool b = false;
    boolean(key, b);
    if (error.empty() && b != want)
      error = "'" + prefix + key + "' must be " + (want ? "true" : "false") +
              " (the only value this model's semantics define) at " + obj.find(key)->where();
  }
  void mustString(const char *key, const char *want) {
    const json::Value *v = need(key);
    if (!v)
      return;
    if (!v->isString() || v->string != want)
      error = "'" + prefix + key + "' must be \"" + want +
              "\" (the only value this model's semantics define) at " + v->where();
  }
  void mustInt(const char *key, int64_t want) {
    int64_t x = 0;
    integer(key, x, 0);
    if (error.empty() && x != want)
      error = "'" + prefix + key + "' must be " + std::to_string(want) +
              " (the only value this model's semantics define) at " + obj.find(key)->where();
  }
  void mustNull(const char *key) {
    const json::Value *v = need(key);
    if (v && !v->isNull())
      error = "'" + prefix + key + "' must be null (no low-rank q projection) at " + v->where();
  }
};

} // namespace

bool parseKimi48bConfig(const std::string &jsonOrPath, Kimi48bConfig &c, std::string &error) {
  std::string text = jsonOrPath;
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || (text[first] != '{' && text[first] != '[')) {
    if (!readTextFile(jsonOrPath, text, error))
      return false;
  }
  json::Value v;
  if (!json::parse(text, v, error))
    return false;
  if (!v.isObject()) {
    error = "the Kimi-Linear-48B config must be a JSON object";
    return false;
  }
  c = Kimi48bConfig();
  static const char *const known[] = {
      "hidden_size", "num_hidden_layers", "vocab_size", "linear_attn_config",
      "num_attention_heads", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
      "v_head_dim", "intermediate_size", "first_k_dense_replace", "moe_layer_freq",
      "moe_intermediate_size", "num_experts", "num_experts_per_token", "num_shared_experts",
      "routed_scaling_factor", "moe_renormalize", "num_expert_group", "topk_group",
      "rms_norm_eps", "mla_use_nope", "q_lora_rank", "moe_router_activation_func",
      "hidden_act", "tie_word_embeddings", "num_nextn_predict_layers"};
  for (const auto &[key, val] : v.object) {
    bool ok = false;
    for (const char *k : known)
      ok = ok || key == k;
    for (const char *k : kIgnoredKeys)
      ok = ok || key == k;
    if (!ok) {
      error = "unknown key '" + key + "' at " + val.keyWhere();
      return false;
    }
  }
  Reader r{v, "", ""};
  r.integer("hidden_size", c.hidden, 1);
  r.integer("num_hidden_layers", c.layers, 1, BlockConfig::kMaxLayers);
  r.integer("vocab_size", c.vocab, 1);
  r.integer("num_attention_heads", c.mlaHeads, 1);
  r.integer("kv_lora_rank", c.kvLora, 1);
  r.integer("qk_nope_head_dim", c.qkNope, 1);
  r.integer("qk_rope_head_dim", c.qkRope, 1);
  r.integer("v_head_dim", c.vHead, 1);
  r.integer("intermediate_size", c.inter, 1);
  r.integer("first_k_dense_replace", c.firstKDense, 0);
  r.mustInt("moe_layer_freq", 1);
  r.integer("moe_intermediate_size", c.moeInter, 1);
  r.integer("num_experts", c.experts, 1);
  r.integer("num_experts_per_token", c.topK, 1);
  r.integer("num_shared_experts", c.sharedExperts, 0);
  r.number("routed_scaling_factor", c.routedScaling);
  r.boolean("moe_renormalize", c.renormalize);
  r.mustInt("num_expert_group", 1);
  r.mustInt("topk_group", 1);
  double eps = 0;
  r.number("rms_norm_eps", eps);
  c.eps = float(eps);
  r.mustBool("mla_use_nope", true);
  r.mustNull("q_lora_rank");
  r.mustString("moe_router_activation_func", "sigmoid");
  r.mustString("hidden_act", "silu");
  r.mustBool("tie_word_embeddings", false);
  r.mustInt("num_nextn_predict_layers", 0);
  if (!r.error.empty()) {
    error = r.error;
    return false;
  }
  const json::Value *lin = r.need("linear_attn_config");
  if (!lin) {
    error = r.error;
    return false;
  }
  if (!lin->isObject()) {
    error = "'linear_attn_config' must be an object at " + lin->where();
    return false;
  }
  for (const auto &[key, val] : lin->object)
    if (key != "kda_layers" && key != "full_attn_layers" && key != "num_heads" &&
        key != "head_dim" && key != "short_conv_kernel_size") {
      error = "unknown key 'linear_attn_config." + key + "' at " + val.keyWhere();
      return false;
    }
  Reader l{*lin, "linear_attn_config.", ""};
  l.intList("kda_layers", c.kdaLayers);
  l.intList("full_attn_layers", c.fullAttnLayers);
  l.integer("num_heads", c.kdaHeads, 1);
  l.integer("head_dim", c.kdaHeadDim, 1);
  l.integer("short_conv_kernel_size", c.convKernel, 1);
  if (!l.error.empty()) {
    error = l.error;
    return false;
  }
  c.moeLayerFreq = 1;
  c.expertGroups = c.topkGroup = 1;
  error = validateKimi48bConfig(c);
  return error.empty();
}

// ---------------------------------------------------------------- test data

namespace {

HostTensor bf16Normal(const std::string &name, std::vector<int64_t> shape, uint64_t seed,
                      double stddev) {
  HostTensor t(TensorDesc{name, DType::BF16, std::move(shape)});
  testdata::fillNormalBf16(testdata::streamFor(seed, name), 0, t.numel(), stddev, t.bf16());
  return t;
}

HostTensor bf16Ones(const std::string &name, int64_t n) {
  HostTensor t(TensorDesc{name, DType::BF16, {n}});
  std::fill(t.bf16(), t.bf16() + n, BFloat16(1.0f));
  return t;
}

} // namespace

TensorMap makeRandomKimi48bWeights(const Kimi48bConfig &c, uint64_t seed) {
  TensorMap m;
  auto put = [&](HostTensor t) {
    std::string name = t.desc.name;
    m.emplace(std::move(name), std::move(t));
  };
  // N(0, 0.02) at the released fan-in 2304, scaled by 1/sqrt(fan-in)
  // elsewhere so that a unit-rms input gives a ~unit-rms output at any size.
  auto linear = [&](const std::string &name, int64_t out, int64_t in) {
    put(bf16Normal(name, {out, in}, seed, kKimi48bLinearStddev * std::sqrt(2304.0 / double(in))));
  };
  const int64_t d = c.hidden, C = c.kdaChannels(), H = c.kdaHeads;
  put(bf16Normal("model.embed_tokens.weight", {c.vocab, d}, seed, 1.0));
  put(bf16Ones("model.norm.weight", d));
  linear("lm_head.weight", c.vocab, d);
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    put(bf16Ones(p + "input_layernorm.weight", d));
    put(bf16Ones(p + "post_attention_layernorm.weight", d));
    const std::string a = p + "self_attn.";
    if (c.isKda(i)) {
      linear(a + "q_proj.weight", C, d);
      linear(a + "k_proj.weight", C, d);
      linear(a + "v_proj.weight", C, d);
      for (const char *x : {"q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight"})
        put(bf16Normal(a + x, {C, 1, c.convKernel}, seed, 0.1));
      linear(a + "f_a_proj.weight", c.kdaHeadDim, d);
      linear(a + "f_b_proj.weight", C, c.kdaHeadDim);
      // A_log = log(U(1, 16)).
      HostTensor alog(TensorDesc{a + "A_log", DType::BF16, {1, 1, H, 1}});
      const uint64_t st = testdata::streamFor(seed, a + "A_log");
      for (int64_t h = 0; h < H; ++h)
        alog.bf16()[h] = BFloat16(float(testdata::logUniform1To16(st, uint64_t(h))));
      put(std::move(alog));
      put(bf16Normal(a + "dt_bias", {C}, seed, 0.1));
      linear(a + "b_proj.weight", H, d);
      linear(a + "g_a_proj.weight", c.kdaHeadDim, d);
      linear(a + "g_b_proj.weight", C, c.kdaHeadDim);
      put(bf16Ones(a + "o_norm.weight", c.kdaHeadDim));
      linear(a + "o_proj.weight", d, C);
    } else {
      linear(a + "q_proj.weight", c.mlaHeads * (c.qkNope + c.qkRope), d);
      linear(a + "kv_a_proj_with_mqa.weight", c.kvLora + c.qkRope, d);
      put(bf16Ones(a + "kv_a_layernorm.weight", c.kvLora));
      linear(a + "kv_b_proj.weight", c.mlaHeads * (c.qkNope + c.vHead), c.kvLora);
      linear(a + "o_proj.weight", d, c.mlaHeads * c.vHead);
    }
    if (c.isMoe(i)) {
      const std::string e = p + "block_sparse_moe.";
      linear(e + "gate.weight", c.experts, d);
      put(bf16Normal(e + "gate.e_score_correction_bias", {c.experts}, seed, 0.01));
      for (int64_t x = 0; x < c.experts; ++x) {
        const std::string ex = e + "experts." + std::to_string(x) + ".";
        linear(ex + "w1.weight", c.moeInter, d);
        linear(ex + "w3.weight", c.moeInter, d);
        linear(ex + "w2.weight", d, c.moeInter);
      }
      if (c.sharedExperts > 0) {
        const int64_t sw = c.moeInter * c.sharedExperts;
        linear(e + "shared_experts.gate_proj.weight", sw, d);
        linear(e + "shared_experts.up_proj.weight", sw, d);
        linear(e + "shared_experts.down_proj.weight", d, sw);
      }
    } else {
      linear(p + "mlp.gate_proj.weight", c.inter, d);
      linear(p + "mlp.up_proj.weight", c.inter, d);
      linear(p + "mlp.down_proj.weight", d, c.inter);
    }
  }
  return m;
}

Kimi48bState makeEmptyKimi48bState(const Kimi48bConfig &c) {
  Kimi48bState s;
  const int64_t C = c.kdaChannels();
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = "state." + std::to_string(i) + ".";
    auto add = [&](const std::string &n, DType t, std::vector<int64_t> shape) {
      s.tensors.emplace(p + n, HostTensor(TensorDesc{p + n, t, std::move(shape)}));
    };
    if (c.isKda(i)) {
      add("S", DType::F32, {c.kdaHeads, c.kdaHeadDim, c.kdaHeadDim});
      for (const char *w : {"q_conv", "k_conv", "v_conv"})
        add(w, DType::BF16, {c.convKernel - 1, C});
    } else {
      add("c_kv", DType::BF16, {0, c.kvLora});
      add("k_rope", DType::BF16, {0, c.qkRope});
    }
  }
  return s;
}

Kimi48bState makeRandomKimi48bState(const Kimi48bConfig &c, int64_t ctxLen, uint64_t seed) {
  Kimi48bState s;
  s.ctxLen = ctxLen;
  const int64_t C = c.kdaChannels();
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = "state." + std::to_string(i) + ".";
    if (c.isKda(i)) {
      HostTensor S(TensorDesc{p + "S", DType::F32, {c.kdaHeads, c.kdaHeadDim, c.kdaHeadDim}});
      testdata::fillNormal(testdata::streamFor(seed, p + "S"), 0, S.numel(),
                           testdata::kStateSStddev, S.f32());
      s.tensors.emplace(p + "S", std::move(S));
      for (const char *w : {"q_conv", "k_conv", "v_conv"})
        s.tensors.emplace(p + w, bf16Normal(p + w, {c.convKernel - 1, C}, seed,
                                            testdata::kStateBf16Stddev));
    } else {
      s.tensors.emplace(p + "c_kv", bf16Normal(p + "c_kv", {ctxLen, c.kvLora}, seed,
                                               testdata::kStateBf16Stddev));
      s.tensors.emplace(p + "k_rope", bf16Normal(p + "k_rope", {ctxLen, c.qkRope}, seed,
                                                 testdata::kStateBf16Stddev));
    }
  }
  return s;
}

// ---------------------------------------------------------------- the step

void rmsNormTwoRoundings(const BFloat16 *x, const BFloat16 *w, int64_t n, float eps,
                         BFloat16 *out) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    ss = ss + x[i].toFloat() * x[i].toFloat();
  const float r = 1.0f / std::sqrt(ss / float(n) + eps);
  for (int64_t i = 0; i < n; ++i) {
    const float t = roundBf16(x[i].toFloat() * r);
    out[i] = BFloat16(t * w[i].toFloat());
  }
}

namespace {

using Vec = std::vector<BFloat16>;

[[noreturn]] void fatal(const std::string &msg) {
  std::fprintf(stderr, "mk kimi48b oracle: fatal: %s\n", msg.c_str());
  std::abort();
}

const HostTensor &need(const TensorMap &m, const std::string &name, DType t,
                       const std::vector<int64_t> &shape) {
  auto it = m.find(name);
  if (it == m.end())
    fatal("tensor '" + name + "' is missing");
  if (it->second.desc.dtype != t || it->second.desc.shape != shape ||
      int64_t(it->second.data.size()) != it->second.desc.bytes())
    fatal("tensor '" + name + "' is " + dtypeName(it->second.desc.dtype) + " " +
          shapeString(it->second.desc.shape) + ", expected " + dtypeName(t) + " " +
          shapeString(shape));
  return it->second;
}
HostTensor &need(TensorMap &m, const std::string &name, DType t,
                 const std::vector<int64_t> &shape) {
  return const_cast<HostTensor &>(need(static_cast<const TensorMap &>(m), name, t, shape));
}
const BFloat16 *bw(const TensorMap &m, const std::string &name, std::vector<int64_t> shape) {
  return need(m, name, DType::BF16, shape).bf16();
}

/// y = bf16(x @ W^T), W bf16 [out, in]: bf16Linear split over output rows.
Vec linear(const TensorMap &m, const std::string &name, const Vec &x, int64_t out) {
  const int64_t in = int64_t(x.size());
  const BFloat16 *W = bw(m, name, {out, in});
  Vec y(static_cast<size_t>(out));
  detail::parallelFor(out, 64, [&](int64_t b, int64_t e) {
    bf16Linear(x.data(), W + b * in, e - b, in, y.data() + b);
  });
  return y;
}

void recordBf16(Kimi48bTrace *t, const std::string &name, const Vec &v) {
  if (!t)
    return;
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    f[i] = v[i].toFloat();
  t->values[name] = std::move(f);
}

Vec kdaLayer(const Kimi48bConfig &c, const TensorMap &w, Kimi48bState &st, int64_t layer,
             const Vec &u) {
  const std::string a = "model.layers." + std::to_string(layer) + ".self_attn.";
  const std::string sp = "state." + std::to_string(layer) + ".";
  const int64_t H = c.kdaHeads, D = c.kdaHeadDim, C = c.kdaChannels(), taps = c.convKernel;
  // 1: projections, each output rounded once; the low-rank paths round the
  // 128-wide bottleneck too.
  const Vec qp = linear(w, a + "q_proj.weight", u, C), kp = linear(w, a + "k_proj.weight", u, C),
            vp = linear(w, a + "v_proj.weight", u, C);
  const Vec fl = linear(w, a + "f_b_proj.weight", linear(w, a + "f_a_proj.weight", u, D), C);
  const Vec gl = linear(w, a + "g_b_proj.weight", linear(w, a + "g_a_proj.weight", u, D), C);
  const Vec bl = linear(w, a + "b_proj.weight", u, H);
  // 2: the three short convs (own weight, own window of pre-conv rows).
  Vec qc(static_cast<size_t>(C)), kc(static_cast<size_t>(C)), vc(static_cast<size_t>(C));
  const std::pair<const char *, std::pair<const Vec *, Vec *>> convs[] = {
      {"q", {&qp, &qc}}, {"k", {&kp, &kc}}, {"v", {&vp, &vc}}};
  for (const auto &[x, io] : convs) {
    const BFloat16 *cw = bw(w, a + x + "_conv1d.weight", {C, 1, taps});
    HostTensor &win = need(st.tensors, sp + x + "_conv", DType::BF16, {taps - 1, C});
    shortConvStep(io.first->data(), win.bf16(), cw, C, taps, io.second->data());
  }
  // 3: per-head L2 norms (eps 1e-6 on the sum of squares), q scaled by
  // D^-0.5; the log-decay and beta in fp32.
  const BFloat16 *alog = bw(w, a + "A_log", {1, 1, H, 1});
  const BFloat16 *dtb = bw(w, a + "dt_bias", {C});
  std::vector<float> q(static_cast<size_t>(C)), k(static_cast<size_t>(C)),
      v(static_cast<size_t>(C)), g(static_cast<size_t>(C)), beta(static_cast<size_t>(H));
  for (int64_t ch = 0; ch < C; ++ch) {
    q[ch] = qc[ch].toFloat();
    k[ch] = kc[ch].toFloat();
    v[ch] = vc[ch].toFloat();
    g[ch] = kdaLowRankDecay(alog[ch / D].toFloat(), fl[ch].toFloat(), dtb[ch].toFloat());
  }
  kdaL2NormHeads(q.data(), k.data(), H, D, 1e-6f);
  for (int64_t h = 0; h < H; ++h)
    beta[h] = sigmoid(bl[h].toFloat());
  // 4: the recurrence on the fp32 state, output rounded to bf16.
  HostTensor &S = need(st.tensors, sp + "S", DType::F32, {H, D, D});
  std::vector<float> o(static_cast<size_t>(C));
  gatedDeltaStep(S.f32(), H, D, D, q.data(), k.data(), v.data(), g.data(), beta.data(), o.data());
  // 5: the gated RMSNorm per head (sigmoid gate, fp32 throughout, one rounding).
  const BFloat16 *onw = bw(w, a + "o_norm.weight", {D});
  Vec z(static_cast<size_t>(C));
  kdaGatedOutputNorm(o.data(), gl.data(), onw, H, D, c.eps, z.data());
  // 6.
  return linear(w, a + "o_proj.weight", z, c.hidden);
}

Vec mlaLayer(const Kimi48bConfig &c, const TensorMap &w, Kimi48bState &st, int64_t layer,
             const Vec &u) {
  const std::string a = "model.layers." + std::to_string(layer) + ".self_attn.";
  const std::string sp = "state." + std::to_string(layer) + ".";
  const int64_t Hm = c.mlaHeads, nope = c.qkNope, rope = c.qkRope, dq = nope + rope;
  const int64_t dkv = nope + c.vHead, lora = c.kvLora, L0 = st.ctxLen;
  const Vec q = linear(w, a + "q_proj.weight", u, Hm * dq);
  const Vec kva = linear(w, a + "kv_a_proj_with_mqa.weight", u, lora + rope);
  Vec cn(static_cast<size_t>(lora));
  rmsNormTwoRoundings(kva.data(), bw(w, a + "kv_a_layernorm.weight", {lora}), lora, c.kvNormEps,
                      cn.data());
  // Append (cn, kr) to the caches: L0 rows become L0 + 1.
  HostTensor &ckv = need(st.tensors, sp + "c_kv", DType::BF16, {L0, lora});
  HostTensor &kr = need(st.tensors, sp + "k_rope", DType::BF16, {L0, rope});
  const int64_t L = L0 + 1;
  HostTensor ckv2(TensorDesc{ckv.desc.name, DType::BF16, {L, lora}});
  HostTensor kr2(TensorDesc{kr.desc.name, DType::BF16, {L, rope}});
  std::copy(ckv.bf16(), ckv.bf16() + L0 * lora, ckv2.bf16());
  std::copy(cn.begin(), cn.end(), ckv2.bf16() + L0 * lora);
  std::copy(kr.bf16(), kr.bf16() + L0 * rope, kr2.bf16());
  std::copy(kva.begin() + lora, kva.end(), kr2.bf16() + L0 * rope);
  ckv = std::move(ckv2);
  kr = std::move(kr2);
  // Per row: [kn | val] = bf16(kv_b_proj(cn_l)) per head; scores over the
  // nope then the rope part, softmax in fp32, o rounded to bf16.
  const BFloat16 *kvb = bw(w, a + "kv_b_proj.weight", {Hm * dkv, lora});
  const BFloat16 *cache = ckv.bf16(), *krope = kr.bf16();
  const float scale = 1.0f / std::sqrt(float(dq));
  Vec o(static_cast<size_t>(Hm * c.vHead));
  detail::parallelFor(Hm, 1, [&](int64_t h0, int64_t h1) {
    Vec kv(static_cast<size_t>(L * dkv));
    std::vector<float> score(static_cast<size_t>(L)), p(static_cast<size_t>(L)),
        acc(static_cast<size_t>(c.vHead));
    for (int64_t h = h0; h < h1; ++h) {
      for (int64_t l = 0; l < L; ++l)
        bf16Linear(cache + l * lora, kvb + h * dkv * lora, dkv, lora, kv.data() + l * dkv);
      const BFloat16 *qh = q.data() + h * dq;
      for (int64_t l = 0; l < L; ++l) {
        float dot = 0.0f;
        for (int64_t i = 0; i < nope; ++i)
          dot = dot + qh[i].toFloat() * kv[size_t(l * dkv + i)].toFloat();
        for (int64_t i = 0; i < rope; ++i)
          dot = dot + qh[nope + i].toFloat() * krope[l * rope + i].toFloat();
        score[size_t(l)] = dot * scale;
      }
      softmax(score.data(), L, p.data());
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t l = 0; l < L; ++l)
        for (int64_t j = 0; j < c.vHead; ++j)
          acc[size_t(j)] = acc[size_t(j)] + p[size_t(l)] * kv[size_t(l * dkv + nope + j)].toFloat();
      for (int64_t j = 0; j < c.vHead; ++j)
        o[size_t(h * c.vHead + j)] = BFloat16(acc[size_t(j)]);
    }
  });
  return linear(w, a + "o_proj.weight", o, c.hidden);
}

/// down(bf16(bf16(silu(gate(u))) * up(u))): every linear output, the silu
/// and the product rounded to bf16.
Vec swiglu(const TensorMap &w, const std::string &gate, const std::string &up,
           const std::string &down, const Vec &u, int64_t width, int64_t hidden) {
  const Vec g = linear(w, gate, u, width), x = linear(w, up, u, width);
  Vec hm(static_cast<size_t>(width));
  for (int64_t i = 0; i < width; ++i)
    hm[size_t(i)] = BFloat16(roundBf16(silu(g[size_t(i)].toFloat())) * x[size_t(i)].toFloat());
  return linear(w, down, hm, hidden);
}

Vec moeLayer(const Kimi48bConfig &c, const TensorMap &w, int64_t layer, const Vec &u,
             Kimi48bTrace *trace) {
  const std::string e = "model.layers." + std::to_string(layer) + ".block_sparse_moe.";
  const int64_t d = c.hidden, E = c.experts, K = c.topK;
  // 1: fp32 router logits over the bf16 input; sigmoid scores.
  const BFloat16 *gw = bw(w, e + "gate.weight", {E, d});
  const BFloat16 *bias = bw(w, e + "gate.e_score_correction_bias", {E});
  std::vector<float> logit(static_cast<size_t>(E)), s(static_cast<size_t>(E)),
      sel(static_cast<size_t>(E));
  f32Linear(u.data(), gw, E, d, logit.data());
  sigmoidRouterScores(logit.data(), bias, E, s.data(), sel.data());
  // 2-3: the biased scores select, the unbiased ones weigh.
  std::vector<int32_t> idx(static_cast<size_t>(K));
  std::vector<float> wsel(static_cast<size_t>(K)), wt(static_cast<size_t>(K));
  topK(sel.data(), E, K, idx.data(), wsel.data());
  for (int64_t j = 0; j < K; ++j)
    wt[size_t(j)] = s[size_t(idx[size_t(j)])];
  const float scaling = float(c.routedScaling);
  if (c.renormalize)
    normalizeRouteWeights(wt.data(), K, scaling, 1e-20f);
  else
    for (int64_t j = 0; j < K; ++j)
      wt[size_t(j)] = wt[size_t(j)] * scaling;
  // 4: routed = bf16(sum_j f32(y_j) * w_j), plus the unscaled shared expert.
  std::vector<float> routed(static_cast<size_t>(d), 0.0f);
  for (int64_t j = 0; j < K; ++j) {
    const std::string ex = e + "experts." + std::to_string(idx[size_t(j)]) + ".";
    const Vec y = swiglu(w, ex + "w1.weight", ex + "w3.weight", ex + "w2.weight", u, c.moeInter, d);
    for (int64_t i = 0; i < d; ++i)
      routed[size_t(i)] = routed[size_t(i)] + y[size_t(i)].toFloat() * wt[size_t(j)];
  }
  Vec out(static_cast<size_t>(d));
  if (c.sharedExperts > 0) {
    const std::string sh = e + "shared_experts.";
    const Vec y = swiglu(w, sh + "gate_proj.weight", sh + "up_proj.weight",
                         sh + "down_proj.weight", u, c.moeInter * c.sharedExperts, d);
    for (int64_t i = 0; i < d; ++i)
      out[size_t(i)] = BFloat16(roundBf16(routed[size_t(i)]) + y[size_t(i)].toFloat());
  } else {
    for (int64_t i = 0; i < d; ++i)
      out[size_t(i)] = BFloat16(routed[size_t(i)]);
  }
  if (trace) {
    const std::string p = "layer" + std::to_string(layer) + ".";
    trace->values[p + "topk_idx"].assign(idx.begin(), idx.end());
    trace->values[p + "topk_w"] = wt;
  }
  return out;
}

} // namespace

Kimi48bResult kimi48bStep(const Kimi48bConfig &c, const TensorMap &weights, Kimi48bState &state,
                          int64_t tokenId, Kimi48bTrace *trace) {
  if (std::string bad = validateKimi48bConfig(c); !bad.empty())
    fatal("bad config: " + bad);
  if (tokenId < 0 || tokenId >= c.vocab)
    fatal("token id " + std::to_string(tokenId) + " is not in 0.." + std::to_string(c.vocab - 1));
  const int64_t d = c.hidden;
  const BFloat16 *emb = bw(weights, "model.embed_tokens.weight", {c.vocab, d});
  Vec h(emb + tokenId * d, emb + (tokenId + 1) * d);
  Vec u(static_cast<size_t>(d));
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    rmsNormTwoRoundings(h.data(), bw(weights, p + "input_layernorm.weight", {d}), d, c.eps,
                        u.data());
    const Vec attn = c.isKda(i) ? kdaLayer(c, weights, state, i, u)
                                : mlaLayer(c, weights, state, i, u);
    for (int64_t j = 0; j < d; ++j)
      h[size_t(j)] = BFloat16(h[size_t(j)].toFloat() + attn[size_t(j)].toFloat());
    rmsNormTwoRoundings(h.data(), bw(weights, p + "post_attention_layernorm.weight", {d}), d,
                        c.eps, u.data());
    const Vec ffn = c.isMoe(i) ? moeLayer(c, weights, i, u, trace)
                               : swiglu(weights, p + "mlp.gate_proj.weight",
                                        p + "mlp.up_proj.weight", p + "mlp.down_proj.weight", u,
                                        c.inter, d);
    for (int64_t j = 0; j < d; ++j)
      h[size_t(j)] = BFloat16(h[size_t(j)].toFloat() + ffn[size_t(j)].toFloat());
    const std::string t = "layer" + std::to_string(i) + ".";
    recordBf16(trace, t + "attn", attn);
    recordBf16(trace, t + "ffn", ffn);
    recordBf16(trace, t + "hidden", h);
  }
  ++state.ctxLen;
  rmsNormTwoRoundings(h.data(), bw(weights, "model.norm.weight", {d}), d, c.eps, u.data());
  recordBf16(trace, "final_norm", u);
  Kimi48bResult r;
  r.logits = linear(weights, "lm_head.weight", u, c.vocab);
  for (int64_t x = 1; x < c.vocab; ++x)
    if (r.logits[size_t(x)].toFloat() > r.logits[size_t(r.next)].toFloat())
      r.next = x;
  return r;
}

} // namespace oracle
} // namespace mk
