//===- DenseGqaOracle.cpp - CPU reference of the dense GQA layer -----------===//

#include "mk/DenseGqaOracle.h"

#include "mk/Json.h"
#include "mk/Oracle.h"
#include "mk/TestData.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace mk {
namespace oracle {

std::string validateDenseGqaConfig(const DenseGqaConfig &c) {
  if (c.hidden <= 0 || c.heads <= 0 || c.kvHeads <= 0 || c.headDim <= 0 || c.inter <= 0 ||
      c.group <= 0 || c.layers <= 0)
    return "every size (hidden, heads, kv_heads, head_dim, inter, group, layers) must be positive";
  if (c.heads % c.kvHeads)
    return "heads (" + std::to_string(c.heads) + ") must be a multiple of kv_heads (" +
           std::to_string(c.kvHeads) + ")";
  if (c.headDim % 2)
    return "head_dim (" + std::to_string(c.headDim) + ") must be even (RoPE pairs i with i + head_dim/2)";
  if (c.group % 2 || c.hidden % c.group || (c.heads * c.headDim) % c.group || c.inter % c.group)
    return "group (" + std::to_string(c.group) +
           ") must be even and divide hidden, heads * head_dim and inter";
  if (!(c.eps > 0.f) || !(c.ropeTheta > 0.0))
    return "eps and rope_theta must be positive";
  return "";
}

void ropeRotateHalf(BFloat16 *x, int64_t dim, int64_t pos, double theta) {
  const int64_t half = dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double a = double(pos) * std::pow(theta, -2.0 * double(i) / double(dim));
    const float c = float(std::cos(a)), s = float(std::sin(a));
    const float x0 = x[i].toFloat(), x1 = x[i + half].toFloat();
    x[i] = BFloat16(x0 * c - x1 * s);
    x[i + half] = BFloat16(x1 * c + x0 * s);
  }
}

void gqaAttention(const BFloat16 *q, const BFloat16 *kCache, const BFloat16 *vCache,
                  int64_t rows, int64_t heads, int64_t kvHeads, int64_t headDim,
                  BFloat16 *o) {
  const int64_t rep = heads / kvHeads;
  const float scale = 1.0f / std::sqrt(float(headDim));
  std::vector<float> score(static_cast<size_t>(rows)), p(static_cast<size_t>(rows));
  std::vector<float> acc(static_cast<size_t>(headDim));
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t g = h / rep;
    for (int64_t l = 0; l < rows; ++l) {
      const BFloat16 *k = kCache + (l * kvHeads + g) * headDim;
      float dot = 0.0f;
      for (int64_t i = 0; i < headDim; ++i)
        dot = dot + q[h * headDim + i].toFloat() * k[i].toFloat();
      score[l] = dot * scale;
    }
    softmax(score.data(), rows, p.data());
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t l = 0; l < rows; ++l) {
      const BFloat16 *v = vCache + (l * kvHeads + g) * headDim;
      for (int64_t i = 0; i < headDim; ++i)
        acc[i] = acc[i] + p[l] * v[i].toFloat();
    }
    for (int64_t i = 0; i < headDim; ++i)
      o[h * headDim + i] = BFloat16(acc[i]);
  }
}

namespace {
const BFloat16 *normWeight(const TensorMap &weights, const std::string &name, int64_t n) {
  auto it = weights.find(name);
  if (it == weights.end() || it->second.desc.dtype != DType::BF16 ||
      it->second.desc.shape != std::vector<int64_t>{n}) {
    std::fprintf(stderr, "dense GQA oracle: weight '%s' must be bf16 [%lld]\n", name.c_str(),
                 static_cast<long long>(n));
    std::abort();
  }
  return reinterpret_cast<const BFloat16 *>(it->second.data.data());
}
} // namespace

DenseGqaLayerWeights denseGqaLayerWeights(const DenseGqaConfig &c, const TensorMap &weights,
                                          int64_t layer) {
  const std::string p = "blocks." + std::to_string(layer) + ".";
  const int64_t qd = c.heads * c.headDim, kvd = c.kvHeads * c.headDim;
  DenseGqaLayerWeights w;
  w.attnNorm = normWeight(weights, p + "attn_norm", c.hidden);
  w.mlpNorm = normWeight(weights, p + "mlp_norm", c.hidden);
  w.qNorm = normWeight(weights, p + "attn.q_norm", c.headDim);
  w.kNorm = normWeight(weights, p + "attn.k_norm", c.headDim);
  w.q = quantWeight(weights, p + "attn.q_proj", c.hidden, qd, c.group);
  w.k = quantWeight(weights, p + "attn.k_proj", c.hidden, kvd, c.group);
  w.v = quantWeight(weights, p + "attn.v_proj", c.hidden, kvd, c.group);
  w.o = quantWeight(weights, p + "attn.o_proj", qd, c.hidden, c.group);
  w.gate = quantWeight(weights, p + "mlp.gate", c.hidden, c.inter, c.group);
  w.up = quantWeight(weights, p + "mlp.up", c.hidden, c.inter, c.group);
  w.down = quantWeight(weights, p + "mlp.down", c.inter, c.hidden, c.group);
  return w;
}

std::vector<BFloat16> denseGqaLayerStep(const DenseGqaConfig &c, const DenseGqaLayerWeights &w,
                                        const std::vector<BFloat16> &x,
                                        std::vector<BFloat16> &kCache,
                                        std::vector<BFloat16> &vCache, int64_t ctxLen) {
  const int64_t d = c.hidden, hd = c.headDim, kvd = c.kvHeads * hd;
  // 1-3: the norm, the projections (each rounded once), the per-head norms.
  std::vector<BFloat16> u(static_cast<size_t>(d));
  rmsNorm(x.data(), w.attnNorm, d, c.eps, u.data());
  std::vector<BFloat16> q = w4a16Linear(u, w.q), k = w4a16Linear(u, w.k),
                        v = w4a16Linear(u, w.v);
  std::vector<BFloat16> tmp(static_cast<size_t>(hd));
  for (int64_t h = 0; h < c.heads; ++h) {
    rmsNorm(q.data() + h * hd, w.qNorm, hd, c.eps, tmp.data());
    std::copy(tmp.begin(), tmp.end(), q.begin() + h * hd);
    ropeRotateHalf(q.data() + h * hd, hd, ctxLen, c.ropeTheta);
  }
  for (int64_t g = 0; g < c.kvHeads; ++g) {
    rmsNorm(k.data() + g * hd, w.kNorm, hd, c.eps, tmp.data());
    std::copy(tmp.begin(), tmp.end(), k.begin() + g * hd);
    ropeRotateHalf(k.data() + g * hd, hd, ctxLen, c.ropeTheta);
  }
  // 5: the new row appended, 6: attention over all ctxLen + 1 rows.
  kCache.resize(static_cast<size_t>(ctxLen * kvd));
  vCache.resize(static_cast<size_t>(ctxLen * kvd));
  kCache.insert(kCache.end(), k.begin(), k.end());
  vCache.insert(vCache.end(), v.begin(), v.end());
  std::vector<BFloat16> o(static_cast<size_t>(c.heads * hd));
  gqaAttention(q.data(), kCache.data(), vCache.data(), ctxLen + 1, c.heads, c.kvHeads, hd,
               o.data());
  // 7: h1 = bf16(x + bf16(o @ W_o)).
  std::vector<BFloat16> attn = w4a16Linear(o, w.o), h1(static_cast<size_t>(d));
  for (int64_t i = 0; i < d; ++i)
    h1[i] = BFloat16(x[i].toFloat() + attn[i].toFloat());
  // 8-9: the SwiGLU MLP (hmid fp32), y rounded once, x' = bf16(h1 + y).
  std::vector<BFloat16> u2(static_cast<size_t>(d));
  rmsNorm(h1.data(), w.mlpNorm, d, c.eps, u2.data());
  std::vector<float> uf(static_cast<size_t>(d)), y(static_cast<size_t>(d));
  for (int64_t i = 0; i < d; ++i)
    uf[i] = u2[i].toFloat();
  expertFfn(uf.data(), w.gate, w.up, w.down, y.data());
  std::vector<BFloat16> out(static_cast<size_t>(d));
  for (int64_t i = 0; i < d; ++i)
    out[i] = BFloat16(h1[i].toFloat() + BFloat16(y[i]).toFloat());
  return out;
}

std::string parseDenseGqaConfig(const std::string &text, DenseGqaConfig &c) {
  json::Value v;
  std::string err;
  if (!json::parse(text, v, err))
    return err;
  if (!v.isObject())
    return "the dense GQA config must be a JSON object";
  c = DenseGqaConfig();
  struct IntKey {
    const char *name;
    int64_t *field;
  };
  const IntKey ints[] = {{"hidden", &c.hidden},   {"heads", &c.heads}, {"kv_heads", &c.kvHeads},
                         {"head_dim", &c.headDim}, {"inter", &c.inter}, {"group", &c.group},
                         {"layers", &c.layers}};
  for (const auto &[key, val] : v.object) {
    bool known = key == "rope_theta" || key == "eps";
    for (const IntKey &k : ints)
      known = known || key == k.name;
    if (!known)
      return "unknown key '" + key + "' at " + val.keyWhere();
  }
  for (const IntKey &k : ints) {
    const json::Value *x = v.find(k.name);
    if (!x)
      return std::string("missing key '") + k.name + "'";
    if (!x->getInt(*k.field) || *k.field <= 0 || *k.field > (int64_t(1) << 24))
      return std::string("'") + k.name + "' must be an integer in 1..2^24 at " + x->where();
  }
  const json::Value *theta = v.find("rope_theta");
  if (!theta)
    return "missing key 'rope_theta'";
  if (!theta->isNumber())
    return "'rope_theta' must be a number at " + theta->where();
  c.ropeTheta = theta->number;
  if (const json::Value *eps = v.find("eps")) {
    if (!eps->isNumber())
      return "'eps' must be a number at " + eps->where();
    c.eps = float(eps->number);
  }
  return validateDenseGqaConfig(c);
}

TensorMap makeRandomDenseGqaWeights(const DenseGqaConfig &c, uint64_t seed, double linearStddev,
                                    double normStddev) {
  TensorMap m;
  auto norm = [&](const std::string &name, int64_t n) {
    HostTensor t(TensorDesc{name, DType::BF16, {n}});
    auto *p = reinterpret_cast<BFloat16 *>(t.data.data());
    std::vector<float> noise(static_cast<size_t>(n));
    testdata::fillNormal(testdata::streamFor(seed, name), 0, n, normStddev, noise.data());
    for (int64_t i = 0; i < n; ++i)
      p[i] = BFloat16(1.0f + noise[i]);
    m.emplace(name, std::move(t));
  };
  auto linear = [&](const std::string &name, int64_t in, int64_t out) {
    std::vector<float> w(static_cast<size_t>(in * out));
    testdata::fillNormal(testdata::streamFor(seed, name), 0, in * out, linearStddev, w.data());
    HostTensor q(TensorDesc{name + ".w_q", DType::U8, {in / 2, out}});
    HostTensor s(TensorDesc{name + ".scales", DType::BF16, {in / c.group, out}});
    HostTensor z(TensorDesc{name + ".zeros", DType::BF16, {in / c.group, out}});
    quantizeW4A16(w.data(), in, out, c.group, q.data.data(),
                  reinterpret_cast<BFloat16 *>(s.data.data()),
                  reinterpret_cast<BFloat16 *>(z.data.data()));
    m.emplace(name + ".w_q", std::move(q));
    m.emplace(name + ".scales", std::move(s));
    m.emplace(name + ".zeros", std::move(z));
  };
  const int64_t qd = c.heads * c.headDim, kvd = c.kvHeads * c.headDim;
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    norm(p + "attn_norm", c.hidden);
    norm(p + "mlp_norm", c.hidden);
    norm(p + "attn.q_norm", c.headDim);
    norm(p + "attn.k_norm", c.headDim);
    linear(p + "attn.q_proj", c.hidden, qd);
    linear(p + "attn.k_proj", c.hidden, kvd);
    linear(p + "attn.v_proj", c.hidden, kvd);
    linear(p + "attn.o_proj", qd, c.hidden);
    linear(p + "mlp.gate", c.hidden, c.inter);
    linear(p + "mlp.up", c.hidden, c.inter);
    linear(p + "mlp.down", c.inter, c.hidden);
  }
  return m;
}

std::vector<BFloat16> denseGqaStep(const DenseGqaConfig &c, const TensorMap &weights,
                                   const std::vector<BFloat16> &x,
                                   std::vector<std::vector<BFloat16>> &kCaches,
                                   std::vector<std::vector<BFloat16>> &vCaches, int64_t ctxLen) {
  std::vector<BFloat16> h = x;
  for (int64_t i = 0; i < c.layers; ++i)
    h = denseGqaLayerStep(c, denseGqaLayerWeights(c, weights, i), h, kCaches[size_t(i)],
                          vCaches[size_t(i)], ctxLen);
  return h;
}

} // namespace oracle
} // namespace mk
