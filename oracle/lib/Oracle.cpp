//===- Oracle.cpp - The CPU reference of one decode step ------------------===//

#include "mk/Oracle.h"
#include "mk/DenseGqaOracle.h"
#include "mk/OracleOps.h"

#include <algorithm>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace mk {

unsigned oracleThreads() {
  static const unsigned n = [] {
    if (const char *env = std::getenv("MK_ORACLE_THREADS")) {
      int v = std::atoi(env);
      if (v > 0)
        return unsigned(v);
    }
    unsigned hw = std::thread::hardware_concurrency();
    return hw ? hw : 1u;
  }();
  return n;
}

double cosineSimilarity(const float *a, const float *b, size_t n) {
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i]))
      return std::nan("");
    dot += double(a[i]) * b[i];
    na += double(a[i]) * a[i];
    nb += double(b[i]) * b[i];
  }
  if (na == 0 && nb == 0)
    return 1.0;
  if (na == 0 || nb == 0)
    return 0.0;
  return dot / (std::sqrt(na) * std::sqrt(nb));
}

namespace {

using oracle::QuantWeight;

[[noreturn]] void fatal(const std::string &msg) {
  std::fprintf(stderr, "mk oracle: fatal: %s\n", msg.c_str());
  std::abort();
}

/// Records intermediates under "layer<i>.<what>" when tracing.
class Recorder {
public:
  Recorder(OracleTrace *trace) : trace(trace) {}
  void layer(int64_t i) { prefix = "layer" + std::to_string(i) + "."; }
  void bf16(const char *what, const BFloat16 *v, size_t n) {
    if (!trace)
      return;
    std::vector<float> &dst = trace->values[prefix + what];
    dst.resize(n);
    for (size_t i = 0; i < n; ++i)
      dst[i] = v[i].toFloat();
  }
  void bf16(const char *what, const std::vector<BFloat16> &v) {
    bf16(what, v.data(), v.size());
  }
  void f32(const char *what, const float *v, size_t n) {
    if (trace)
      trace->values[prefix + what].assign(v, v + n);
  }
  void f32(const char *what, const std::vector<float> &v) {
    f32(what, v.data(), v.size());
  }

private:
  OracleTrace *trace;
  std::string prefix;
};

const HostTensor &weight(const TensorMap &w, const std::string &name) {
  auto it = w.find(name);
  if (it == w.end())
    fatal("weight '" + name + "' is missing");
  return it->second;
}

std::vector<BFloat16> toBf16(const std::vector<float> &v) {
  std::vector<BFloat16> r(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    r[i] = BFloat16(v[i]);
  return r;
}

/// oracle::quantWeight, its weights rounded to bf16 per weight (the spec)
/// or not (OracleOptions::unroundedWeights).
oracle::QuantWeight quantWeightRounded(const TensorMap &w, const std::string &prefix, int64_t in,
                                       int64_t out, int64_t group, int64_t expert, bool round) {
  oracle::QuantWeight q = oracle::quantWeight(w, prefix, in, out, group, expert);
  q.roundWeights = round;
  return q;
}

std::vector<BFloat16> kdaAttention(const BlockConfig &cfg, const TensorMap &w,
                                   DecodeState &st, int64_t layer,
                                   const std::vector<BFloat16> &u,
                                   Recorder &rec, bool round) {
  const std::string p = layerPrefix(layer) + ".attn.";
  const std::string sp = statePrefix(layer) + ".";
  const int64_t d = cfg.hidden, H = cfg.kdaHeads, Dk = cfg.kdaHeadDim;
  const int64_t C = cfg.kdaChannels(), taps = cfg.shortConv;
  auto proj = [&](const char *n, int64_t in, int64_t out) {
    return quantWeightRounded(w, p + n, in, out, cfg.group, -1, round);
  };
  std::vector<BFloat16> q = oracle::w4a16Linear(u, proj("q_proj", d, C));
  std::vector<BFloat16> k = oracle::w4a16Linear(u, proj("k_proj", d, C));
  std::vector<BFloat16> v = oracle::w4a16Linear(u, proj("v_proj", d, C));
  // The decay's projection: the unit's full-rank g_proj, or the released
  // form's f_b(f_a(u)) (its bottleneck rounded to bf16); the released
  // form's output gate g_b(g_a(u)).
  std::vector<BFloat16> gr, gate;
  if (cfg.kdaReleased) {
    gr = oracle::w4a16Linear(oracle::w4a16Linear(u, proj("f_a_proj", d, Dk)),
                             proj("f_b_proj", Dk, C));
    gate = oracle::w4a16Linear(oracle::w4a16Linear(u, proj("g_a_proj", d, Dk)),
                               proj("g_b_proj", Dk, C));
    rec.bf16("gate", gate);
  } else {
    gr = oracle::w4a16Linear(u, proj("g_proj", d, C));
  }
  std::vector<BFloat16> b(static_cast<size_t>(H));
  oracle::bf16Linear(u.data(), weight(w, p + "beta_proj.weight").bf16(), H, d,
                     b.data());
  rec.bf16("q", q);
  rec.bf16("k", k);
  rec.bf16("v", v);
  rec.bf16("g", gr);
  rec.bf16("beta_logits", b);

  const BFloat16 *convW = weight(w, p + "conv_w").bf16();
  std::vector<BFloat16> qc(static_cast<size_t>(C)), kc(static_cast<size_t>(C)), vc(static_cast<size_t>(C));
  oracle::shortConvStep(q.data(), st.tensors.at(sp + "cq").bf16(),
                        convW + 0 * C * taps, C, taps, qc.data());
  oracle::shortConvStep(k.data(), st.tensors.at(sp + "ck").bf16(),
                        convW + 1 * C * taps, C, taps, kc.data());
  oracle::shortConvStep(v.data(), st.tensors.at(sp + "cv").bf16(),
                        convW + 2 * C * taps, C, taps, vc.data());
  rec.bf16("q_conv", qc);
  rec.bf16("k_conv", kc);
  rec.bf16("v_conv", vc);

  const float qScale = 1.0f / std::sqrt(float(Dk));
  std::vector<float> qf(static_cast<size_t>(C)), kf(static_cast<size_t>(C)), vf(static_cast<size_t>(C)),
      g(static_cast<size_t>(C)), beta(static_cast<size_t>(H)), o(static_cast<size_t>(C));
  const float *aLog = cfg.kdaReleased ? weight(w, p + "A_log").f32() : nullptr;
  const float *dtBias = cfg.kdaReleased ? weight(w, p + "dt_bias").f32() : nullptr;
  for (int64_t c = 0; c < C; ++c) {
    // The released form scales q after its L2 norm (below).
    qf[c] = cfg.kdaReleased ? qc[c].toFloat() : qc[c].toFloat() * qScale;
    kf[c] = kc[c].toFloat();
    vf[c] = vc[c].toFloat();
    g[c] = cfg.kdaReleased ? oracle::kdaLowRankDecay(aLog[c / Dk], gr[c].toFloat(), dtBias[c])
                           : -oracle::softplus(gr[c].toFloat());
  }
  if (cfg.kdaReleased)
    oracle::kdaL2NormHeads(qf.data(), kf.data(), H, Dk, float(BlockConfig::kKdaL2NormEps));
  for (int64_t h = 0; h < H; ++h)
    beta[h] = oracle::sigmoid(b[h].toFloat());
  oracle::gatedDeltaStep(st.tensors.at(sp + "S").f32(), H, Dk, Dk, qf.data(),
                         kf.data(), vf.data(), g.data(), beta.data(),
                         o.data());
  rec.f32("kda_o", o);
  if (!cfg.kdaReleased)
    return oracle::w4a16Linear(toBf16(o), proj("o_proj", C, d));
  // The released form's gated output norm (weight o_norm shared by the
  // heads, the family's epsilon) before o_proj.
  std::vector<BFloat16> z(static_cast<size_t>(C));
  oracle::kdaGatedOutputNorm(o.data(), gate.data(), weight(w, p + "o_norm").bf16(), H, Dk,
                             float(cfg.eps), z.data());
  return oracle::w4a16Linear(z, proj("o_proj", C, d));
}

void appendRow(HostTensor &cache, const BFloat16 *row, int64_t width) {
  const uint8_t *bytes = reinterpret_cast<const uint8_t *>(row);
  cache.data.insert(cache.data.end(), bytes, bytes + width * 2);
  cache.desc.shape[0] += 1;
}

std::vector<BFloat16> mlaAttention(const BlockConfig &cfg, const TensorMap &w,
                                   DecodeState &st, int64_t layer,
                                   const std::vector<BFloat16> &u,
                                   Recorder &rec, bool round) {
  const std::string p = layerPrefix(layer) + ".attn.";
  const std::string sp = statePrefix(layer) + ".";
  const int64_t d = cfg.hidden, Hm = cfg.mlaHeads, dq = cfg.mlaQHeadDim();
  const int64_t lora = cfg.kvLora, rope = cfg.qkRope, pos = st.ctxLen;
  auto proj = [&](const char *n, int64_t in, int64_t out) {
    return quantWeightRounded(w, p + n, in, out, cfg.group, -1, round);
  };
  std::vector<BFloat16> q = oracle::w4a16Linear(u, proj("q_proj", d, Hm * dq));
  std::vector<BFloat16> kv =
      oracle::w4a16Linear(u, proj("kv_a", d, lora + rope));
  rec.bf16("q", q);
  // RoPE at the token's position, unless the layers use the rope parts as
  // projected (mla_rotary false).
  if (cfg.mlaRotary) {
    for (int64_t h = 0; h < Hm; ++h)
      oracle::ropeInterleaved(q.data() + h * dq + cfg.qkNope, rope, pos,
                              cfg.ropeTheta);
    oracle::ropeInterleaved(kv.data() + lora, rope, pos, cfg.ropeTheta);
  }
  rec.bf16("mla_q", q);
  // The latent as cached: normalized first with mla_latent_norm.
  std::vector<BFloat16> latent(kv.begin(), kv.begin() + lora);
  if (cfg.mlaLatentNorm)
    oracle::rmsNorm(kv.data(), weight(w, p + "kv_a_norm").bf16(), lora,
                    float(BlockConfig::kMlaLatentNormEps), latent.data(), cfg.normRoundTwice);
  // The trace's mla_kv is the appended row: the cached latent, then kr.
  std::vector<BFloat16> row(latent);
  row.insert(row.end(), kv.begin() + lora, kv.end());
  rec.bf16("mla_kv", row);

  HostTensor &cKv = st.tensors.at(sp + "c_kv");
  HostTensor &kRope = st.tensors.at(sp + "k_rope");
  appendRow(cKv, latent.data(), lora);
  appendRow(kRope, kv.data() + lora, rope);

  std::vector<float> o(size_t(Hm * cfg.vHead));
  oracle::mlaAttention(cfg, q.data(), cKv.bf16(), kRope.bf16(), pos + 1,
                       proj("kv_b", lora, Hm * cfg.mlaKvBHeadDim()),
                       o.data());
  rec.f32("mla_o", o);
  return oracle::w4a16Linear(toBf16(o), proj("o_proj", Hm * cfg.vHead, d));
}

/// A GQA layer's attention (docs/semantics-dense-gqa.md steps 2-7, without
/// the residual): the dense family's functions on this config's sizes.
std::vector<BFloat16> gqaAttentionLayer(const BlockConfig &cfg, const TensorMap &w,
                                        DecodeState &st, int64_t layer,
                                        const std::vector<BFloat16> &u, Recorder &rec,
                                        bool round) {
  const std::string p = layerPrefix(layer) + ".attn.";
  const std::string sp = statePrefix(layer) + ".";
  const int64_t d = cfg.hidden, hq = cfg.gqaHeads, hkv = cfg.gqaKvHeads, hd = cfg.gqaHeadDim;
  const int64_t pos = st.ctxLen;
  const float eps = float(cfg.eps);
  auto proj = [&](const char *n, int64_t in, int64_t out) {
    return quantWeightRounded(w, p + n, in, out, cfg.group, -1, round);
  };
  std::vector<BFloat16> q = oracle::w4a16Linear(u, proj("q_proj", d, hq * hd));
  std::vector<BFloat16> k = oracle::w4a16Linear(u, proj("k_proj", d, hkv * hd));
  std::vector<BFloat16> v = oracle::w4a16Linear(u, proj("v_proj", d, hkv * hd));
  rec.bf16("q", q);
  rec.bf16("k", k);
  rec.bf16("v", v);
  std::vector<BFloat16> tmp(static_cast<size_t>(hd));
  auto normRotate = [&](std::vector<BFloat16> &x, int64_t heads, const char *norm) {
    const BFloat16 *nw = weight(w, p + norm).bf16();
    for (int64_t h = 0; h < heads; ++h) {
      oracle::rmsNorm(x.data() + h * hd, nw, hd, eps, tmp.data());
      std::copy(tmp.begin(), tmp.end(), x.begin() + h * hd);
      oracle::ropeRotateHalf(x.data() + h * hd, hd, pos, cfg.ropeTheta);
    }
  };
  normRotate(q, hq, "q_norm");
  normRotate(k, hkv, "k_norm");
  rec.bf16("gqa_q", q);
  HostTensor &kc = st.tensors.at(sp + "k_cache");
  HostTensor &vc = st.tensors.at(sp + "v_cache");
  appendRow(kc, k.data(), hkv * hd);
  appendRow(vc, v.data(), hkv * hd);
  std::vector<BFloat16> o(static_cast<size_t>(hq * hd));
  oracle::gqaAttention(q.data(), kc.bf16(), vc.bf16(), pos + 1, hq, hkv, hd, o.data());
  rec.bf16("gqa_o", o);
  return oracle::w4a16Linear(o, proj("o_proj", hq * hd, d));
}

std::vector<BFloat16> moe(const BlockConfig &cfg, const TensorMap &w,
                          int64_t layer, const std::vector<BFloat16> &u,
                          Recorder &rec, const OracleOptions *options) {
  const bool round = !(options && options->unroundedWeights);
  const std::string p = layerPrefix(layer) + ".moe.";
  const int64_t d = cfg.hidden, E = cfg.nExperts, K = cfg.nActive;
  // The logits: rounded to bf16 (the unit), or fp32 for the released
  // model's sigmoid router (the same sums, not rounded).
  const bool sigmoid = cfg.router == RouterKind::Sigmoid;
  std::vector<float> lf(static_cast<size_t>(E)), prob(static_cast<size_t>(E)), tw(static_cast<size_t>(K));
  const BFloat16 *rw = weight(w, p + "router.weight").bf16();
  if (sigmoid) {
    oracle::f32Linear(u.data(), rw, E, d, lf.data());
    rec.f32("router_logits", lf);
  } else {
    std::vector<BFloat16> logits(static_cast<size_t>(E));
    oracle::bf16Linear(u.data(), rw, E, d, logits.data());
    rec.bf16("router_logits", logits);
    for (int64_t e = 0; e < E; ++e)
      lf[e] = logits[e].toFloat();
  }
  // The scores that weigh (prob) and the ones that choose (sel): the
  // unit's softmax, or the released model's sigmoid with its correction
  // bias steering the choice only.
  std::vector<float> sel(static_cast<size_t>(E)), chosen(static_cast<size_t>(K));
  if (sigmoid) {
    oracle::sigmoidRouterScores(lf.data(), weight(w, p + "router.bias").bf16(), E, prob.data(),
                                sel.data());
    rec.f32("router_select", sel);
  } else {
    oracle::softmax(lf.data(), E, prob.data());
    sel = prob;
  }
  std::vector<int32_t> idx(static_cast<size_t>(K));
  oracle::topK(sel.data(), E, K, idx.data(), chosen.data());
  if (options) {
    auto it = options->forcedExperts.find(layer);
    if (it != options->forcedExperts.end() && int64_t(it->second.size()) == K)
      for (int64_t j = 0; j < K; ++j)
        idx[j] = it->second[j];
  }
  for (int64_t j = 0; j < K; ++j)
    tw[j] = prob[idx[j]];
  oracle::normalizeRouteWeights(tw.data(), K, float(cfg.routedScaling), sigmoid ? 1e-20f : 1e-9f);
  std::vector<float> idxf(idx.begin(), idx.end());
  rec.f32("topk_idx", idxf);
  rec.f32("topk_w", tw);

  std::vector<float> uf(static_cast<size_t>(d)), y(static_cast<size_t>(d)), acc(size_t(d), 0.0f);
  for (int64_t i = 0; i < d; ++i)
    uf[i] = u[i].toFloat();
  // ffn_rounding "each": the experts' intermediates in bf16 steps, each
  // routed output rounded before its weight, the shared experts summed
  // apart, both sums rounded before their own.
  const bool each = cfg.ffnRoundEach;
  auto expert = [&](const char *g, const char *up, const char *down,
                    int64_t e) {
    oracle::expertFfn(
        uf.data(), quantWeightRounded(w, p + g, d, cfg.moeInter, cfg.group, e, round),
        quantWeightRounded(w, p + up, d, cfg.moeInter, cfg.group, e, round),
        quantWeightRounded(w, p + down, cfg.moeInter, d, cfg.group, e, round),
        y.data(), each);
  };
  for (int64_t j = 0; j < K; ++j) {
    expert("gate", "up", "down", idx[j]);
    for (int64_t i = 0; i < d; ++i)
      acc[i] = acc[i] + tw[j] * (each ? roundBf16(y[i]) : y[i]);
  }
  std::vector<float> sharedAcc(each ? size_t(d) : 0, 0.0f);
  std::vector<float> &sharedInto = each ? sharedAcc : acc;
  for (int64_t s = 0; s < cfg.nShared; ++s) {
    expert("s_gate", "s_up", "s_down", s);
    for (int64_t i = 0; i < d; ++i)
      sharedInto[i] = sharedInto[i] + y[i];
  }
  if (each && cfg.nShared > 0)
    for (int64_t i = 0; i < d; ++i)
      acc[i] = roundBf16(acc[i]) + roundBf16(sharedAcc[i]);
  std::vector<BFloat16> out = toBf16(acc);
  rec.bf16("moe_out", out);
  return out;
}

/// A dense-FFN layer's FFN (`blocks.i.mlp`, layers below dense_layers): a
/// shared expert of width dense_inter (unstacked [in, out] linears; its
/// intermediate in bf16 steps with ffn_rounding "each"), the fp32 sum
/// rounded once to bf16.
std::vector<BFloat16> denseFfn(const BlockConfig &cfg, const TensorMap &w, int64_t layer,
                               const std::vector<BFloat16> &u, Recorder &rec, bool round) {
  const std::string p = layerPrefix(layer) + ".mlp.";
  const int64_t d = cfg.hidden, m = cfg.denseInter;
  std::vector<float> uf(static_cast<size_t>(d)), y(static_cast<size_t>(d));
  for (int64_t i = 0; i < d; ++i)
    uf[i] = u[i].toFloat();
  oracle::expertFfn(uf.data(), quantWeightRounded(w, p + "gate", d, m, cfg.group, -1, round),
                    quantWeightRounded(w, p + "up", d, m, cfg.group, -1, round),
                    quantWeightRounded(w, p + "down", m, d, cfg.group, -1, round), y.data(),
                    cfg.ffnRoundEach);
  std::vector<BFloat16> out = toBf16(y);
  rec.bf16("moe_out", out);
  return out;
}

std::vector<BFloat16> residual(const std::vector<BFloat16> &a,
                               const std::vector<BFloat16> &b) {
  std::vector<BFloat16> r(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    r[i] = BFloat16(a[i].toFloat() + b[i].toFloat());
  return r;
}

/// With `layer` >= 0 only that layer's state is checked (oracleLayerStep:
/// the layers before it in a step have appended their cache rows already).
void checkInputs(const BlockConfig &cfg, const TensorMap &weights,
                 const DecodeState &state, const std::vector<BFloat16> &x,
                 int64_t layer = -1) {
  std::vector<std::string> problems;
  checkTensors(weights, parameterTensors(cfg), problems);
  std::vector<std::string> stateProblems;
  if (layer < 0) {
    checkTensors(state.tensors, stateTensors(cfg, state.ctxLen), stateProblems);
  } else {
    const std::string pre = "state." + std::to_string(layer) + ".";
    std::vector<TensorDesc> want;
    for (const TensorDesc &t : stateTensors(cfg, state.ctxLen))
      if (t.name.rfind(pre, 0) == 0)
        want.push_back(t);
    TensorMap own;
    for (const auto &kv : state.tensors)
      if (kv.first.rfind(pre, 0) == 0)
        own.emplace(kv.first, kv.second);
    checkTensors(own, want, stateProblems);
  }
  for (std::string &s : stateProblems)
    problems.push_back("state " + s);
  if (int64_t(x.size()) != cfg.hidden)
    problems.push_back("hidden has " + std::to_string(x.size()) +
                       " values, expected " + std::to_string(cfg.hidden));
  if (problems.empty())
    return;
  std::string msg = "oracleStep inputs do not match the spec '" + cfg.name +
                    "':";
  for (size_t i = 0; i < problems.size() && i < 20; ++i)
    msg += "\n  " + problems[i];
  if (problems.size() > 20)
    msg += "\n  ... and " + std::to_string(problems.size() - 20) + " more";
  fatal(msg);
}

/// Layer `layer` of the step on x (in place), state at position
/// state.ctxLen; records into `rec` (already set to the layer).
void layerStep(const BlockConfig &cfg, const TensorMap &weights, DecodeState &state,
               int64_t layer, std::vector<BFloat16> &x, Recorder &rec,
               const OracleOptions *options) {
  const int64_t d = cfg.hidden;
  const float eps = float(cfg.eps);
  const bool round = !(options && options->unroundedWeights);
  std::vector<BFloat16> u(static_cast<size_t>(d));
  const std::string p = layerPrefix(layer);
  oracle::rmsNorm(x.data(), weight(weights, p + ".attn_norm").bf16(), d, eps, u.data(),
                  cfg.normRoundTwice);
  rec.bf16("attn_in", u);
  const LayerKind kind = cfg.pattern[size_t(layer)];
  std::vector<BFloat16> attn =
      kind == LayerKind::KDA   ? kdaAttention(cfg, weights, state, layer, u, rec, round)
      : kind == LayerKind::GQA ? gqaAttentionLayer(cfg, weights, state, layer, u, rec, round)
                               : mlaAttention(cfg, weights, state, layer, u, rec, round);
  rec.bf16("attn_out", attn);
  std::vector<BFloat16> h = residual(x, attn);
  rec.bf16("h", h);
  // The FFN's input and output keep the names moe_in / moe_out in a
  // dense-FFN layer too.
  const bool dense = cfg.denseFfn(layer);
  oracle::rmsNorm(h.data(), weight(weights, p + (dense ? ".mlp_norm" : ".moe_norm")).bf16(), d,
                  eps, u.data(), cfg.normRoundTwice);
  rec.bf16("moe_in", u);
  x = residual(h, dense ? denseFfn(cfg, weights, layer, u, rec, round)
                        : moe(cfg, weights, layer, u, rec, options));
  rec.bf16("out", x);
}
} // namespace

std::vector<BFloat16> oracleStep(const BlockConfig &cfg,
                                 const TensorMap &weights, DecodeState &state,
                                 const std::vector<BFloat16> &hidden,
                                 OracleTrace *trace, const OracleOptions *options) {
  checkInputs(cfg, weights, state, hidden);
  Recorder rec(trace);
  std::vector<BFloat16> x = hidden;
  for (size_t i = 0; i < cfg.pattern.size(); ++i) {
    rec.layer(int64_t(i));
    layerStep(cfg, weights, state, int64_t(i), x, rec, options);
  }
  state.ctxLen += 1;
  return x;
}

ModelStepResult oracleModelStep(const BlockConfig &cfg, const TensorMap &weights,
                                DecodeState &state, int64_t token, OracleTrace *trace,
                                const OracleOptions *options) {
  if (cfg.vocab <= 0)
    fatal("oracleModelStep: the spec has no vocabulary (a block, not a whole model)");
  if (token < 0 || token >= cfg.vocab)
    fatal("oracleModelStep: token " + std::to_string(token) + " outside 0.." +
          std::to_string(cfg.vocab - 1));
  const HostTensor &embed = weight(weights, "embed.weight");
  const BFloat16 *row = embed.bf16() + token * cfg.hidden;
  std::vector<BFloat16> h = oracleStep(cfg, weights, state,
                                       std::vector<BFloat16>(row, row + cfg.hidden), trace,
                                       options);
  return oracleModelHead(cfg, weights, h, trace, options);
}

ModelStepResult oracleModelHead(const BlockConfig &cfg, const TensorMap &weights,
                                const std::vector<BFloat16> &h, OracleTrace *trace,
                                const OracleOptions *options) {
  if (cfg.vocab <= 0)
    fatal("oracleModelHead: the spec has no vocabulary (a block, not a whole model)");
  if (int64_t(h.size()) != cfg.hidden)
    fatal("oracleModelHead: hidden has " + std::to_string(h.size()) + " values, not " +
          std::to_string(cfg.hidden));
  // The final norm (the family's norm arithmetic), the LM head, the argmax.
  std::vector<BFloat16> y(static_cast<size_t>(cfg.hidden));
  oracle::rmsNorm(h.data(), weight(weights, "final_norm").bf16(), cfg.hidden, float(cfg.eps),
                  y.data(), cfg.normRoundTwice);
  ModelStepResult r;
  if (cfg.lmHeadBf16) {
    r.logits.resize(static_cast<size_t>(cfg.vocab));
    oracle::bf16Linear(y.data(), weight(weights, "lm_head.weight").bf16(), cfg.vocab,
                       cfg.hidden, r.logits.data());
  } else {
    const bool round = !(options && options->unroundedWeights);
    r.logits = oracle::w4a16Linear(
        y, quantWeightRounded(weights, "lm_head", cfg.hidden, cfg.vocab, cfg.group, -1, round));
  }
  // The first index of the largest (-0 equals +0); a NaN is never chosen
  // (all NaN: -1), as the kernel's argmax.
  r.next = -1;
  for (int64_t i = 0; i < cfg.vocab; ++i) {
    const float v = r.logits[size_t(i)].toFloat();
    if (!std::isnan(v) && (r.next < 0 || v > r.logits[size_t(r.next)].toFloat()))
      r.next = i;
  }
  if (trace) {
    Recorder rec(trace);
    rec.bf16("final_norm", y);
    rec.bf16("logits", r.logits);
  }
  return r;
}

std::vector<BFloat16> oracleLayerStep(const BlockConfig &cfg, const TensorMap &weights,
                                      DecodeState &state, int64_t layer,
                                      const std::vector<BFloat16> &input,
                                      OracleTrace *trace, const OracleOptions *options) {
  if (layer < 0 || layer >= int64_t(cfg.pattern.size()))
    fatal("oracleLayerStep: layer " + std::to_string(layer) + " outside 0.." +
          std::to_string(int64_t(cfg.pattern.size()) - 1));
  checkInputs(cfg, weights, state, input, layer);
  Recorder rec(trace);
  rec.layer(layer);
  std::vector<BFloat16> x = input;
  layerStep(cfg, weights, state, layer, x, rec, options);
  return x;
}

namespace {
/// Router `layer`'s choice in `trace`: its experts (descending), the
/// strongest it leaves out, and the weakest chosen one's lead over that one
/// in bf16 ulps of the larger. False where the trace has no router there.
struct RouterMargin {
  std::vector<int32_t> chosen;
  int32_t strongestOut = -1;
  double gapUlps = 0;
};
bool routerMargin(const BlockConfig &cfg, const OracleTrace &trace, int64_t layer,
                  RouterMargin &m) {
  const int64_t E = cfg.nExperts, K = cfg.nActive;
  const std::string pre = "layer" + std::to_string(layer) + ".";
  auto lg = trace.values.find(pre + "router_logits");
  auto ix = trace.values.find(pre + "topk_idx");
  if (K >= E || lg == trace.values.end() || ix == trace.values.end())
    return false;
  // The values that rank the experts: the logits (a softmax router's
  // order), or a sigmoid router's selection scores (sigmoid + bias).
  auto sl = trace.values.find(pre + "router_select");
  const std::vector<float> &l = sl != trace.values.end() ? sl->second : lg->second;
  m.chosen.assign(ix->second.begin(), ix->second.end());
  m.strongestOut = -1;
  for (int32_t e = 0; e < int32_t(E); ++e)
    if (std::find(m.chosen.begin(), m.chosen.end(), e) == m.chosen.end() &&
        (m.strongestOut < 0 || l[e] > l[m.strongestOut]))
      m.strongestOut = e;
  // The weakest expert taken is the last of the descending top-k.
  const float a = l[m.chosen.back()], b = l[m.strongestOut];
  int exp = 0;
  std::frexp(std::max(std::fabs(a), std::fabs(b)), &exp);
  m.gapUlps = double(a - b) / std::ldexp(1.0, exp - 8); // bf16: 8 significant bits
  return true;
}
} // namespace

double routerGapUlps(const BlockConfig &cfg, const OracleTrace &trace, int64_t layer) {
  RouterMargin m;
  return routerMargin(cfg, trace, layer, m) ? m.gapUlps : -1;
}

std::vector<OracleOptions> nearTieRoutings(const BlockConfig &cfg,
                                           const OracleTrace &trace, int ulps) {
  std::vector<OracleOptions> out;
  for (size_t layer = 0; layer < cfg.pattern.size(); ++layer) {
    RouterMargin m;
    if (!routerMargin(cfg, trace, int64_t(layer), m) || m.gapUlps > double(ulps))
      continue;
    OracleOptions o;
    m.chosen.back() = m.strongestOut;
    o.forcedExperts[int64_t(layer)] = m.chosen;
    out.push_back(o);
  }
  return out;
}

std::vector<OracleOptions> nearTieRoutings(const BlockConfig &cfg, const OracleTrace &trace,
                                           const OracleTrace &declared, int ulps) {
  std::vector<OracleOptions> out = nearTieRoutings(cfg, trace, ulps);
  auto add = [&](int64_t layer, const std::vector<int32_t> &experts,
                 const std::vector<int32_t> &specChosen) {
    if (std::is_permutation(experts.begin(), experts.end(), specChosen.begin(),
                            specChosen.end()))
      return; // the spec's own routing
    for (const OracleOptions &o : out) {
      const auto &f = o.forcedExperts.begin()->second;
      if (o.forcedExperts.begin()->first == layer &&
          std::is_permutation(f.begin(), f.end(), experts.begin(), experts.end()))
        return;
    }
    OracleOptions o;
    o.forcedExperts[layer] = experts;
    out.push_back(std::move(o));
  };
  for (size_t layer = 0; layer < cfg.pattern.size(); ++layer) {
    RouterMargin spec, decl;
    if (!routerMargin(cfg, trace, int64_t(layer), spec) ||
        !routerMargin(cfg, declared, int64_t(layer), decl))
      continue;
    add(int64_t(layer), decl.chosen, spec.chosen);
    if (decl.gapUlps <= double(ulps)) {
      decl.chosen.back() = decl.strongestOut;
      add(int64_t(layer), decl.chosen, spec.chosen);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const OracleOptions &a, const OracleOptions &b) {
    return a.forcedExperts.begin()->first < b.forcedExperts.begin()->first;
  });
  return out;
}

std::vector<OracleOptions>
kernelTieRoutings(const BlockConfig &cfg, const OracleTrace &trace,
                  const std::string &packedArithmetic, const OracleOptions &followed,
                  const std::function<OracleTrace(const OracleOptions &)> &step,
                  OracleTrace *declaredOut, int ulps) {
  if (ulps < 0)
    ulps = tieWindowUlps(packedArithmetic);
  if (packedArithmetic == "exact")
    return nearTieRoutings(cfg, trace, ulps);
  OracleTrace declared = declaredRouterTrace(cfg, trace, followed, step);
  std::vector<OracleOptions> out = nearTieRoutings(cfg, trace, declared, ulps);
  if (declaredOut)
    *declaredOut = std::move(declared);
  return out;
}

OracleTrace declaredRouterTrace(const BlockConfig &cfg, const OracleTrace &trace,
                                const OracleOptions &followed,
                                const std::function<OracleTrace(const OracleOptions &)> &step) {
  auto routing = [](const OracleTrace &t, const std::string &pre) -> const std::vector<float> * {
    auto it = t.values.find(pre + "topk_idx");
    return it == t.values.end() ? nullptr : &it->second;
  };
  auto sameSet = [](std::vector<float> a, std::vector<float> b) {
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    return a == b;
  };
  OracleTrace merged;
  OracleOptions o = followed;
  o.unroundedWeights = true;
  const int64_t nLayers = int64_t(cfg.pattern.size());
  int64_t from = 0;
  while (from < nLayers) {
    const OracleTrace d = step(o);
    int64_t offPath = nLayers; // the first layer the declared step routes otherwise
    for (int64_t l = from; l < nLayers && offPath == nLayers; ++l) {
      const std::string pre = "layer" + std::to_string(l) + ".";
      for (const char *key : {"router_logits", "router_select", "topk_idx"})
        if (auto it = d.values.find(pre + key); it != d.values.end())
          merged.values[pre + key] = it->second;
      const std::vector<float> *spec = routing(trace, pre), *decl = routing(d, pre);
      if (spec && decl && !sameSet(*spec, *decl))
        offPath = l;
    }
    bool routerAbove = false;
    for (int64_t l = offPath + 1; l < nLayers && !routerAbove; ++l)
      routerAbove = routing(trace, "layer" + std::to_string(l) + ".") != nullptr;
    if (!routerAbove) // nothing left to measure past the last one
      break;
    // Back onto the spec's path up to that layer; the layers above it again.
    for (int64_t l = from; l <= offPath; ++l)
      if (const std::vector<float> *spec = routing(trace, "layer" + std::to_string(l) + "."))
        o.forcedExperts.emplace(l, std::vector<int32_t>(spec->begin(), spec->end()));
    from = offPath + 1;
  }
  return merged;
}

} // namespace mk
