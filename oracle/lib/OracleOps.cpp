//===- OracleOps.cpp - The oracle's operations, one by one ----------------===//
//
// Built with -ffp-contract=off: the spec's roundings are defined on separate
// multiplies and adds, and a fused multiply-add would also make results differ
// between machines.
//
//===----------------------------------------------------------------------===//

#include "mk/OracleOps.h"
#include "ParallelFor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>

namespace mk {
namespace oracle {

namespace {

/// Round-to-nearest-even to bf16 for finite values (the oracle's hot loops),
/// identical to BFloat16(f).toFloat() there, and vectorizable.
inline float roundBf16Finite(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  std::memcpy(&f, &u, 4);
  return f;
}

[[noreturn]] void fatal(const std::string &msg) {
  std::fprintf(stderr, "mk oracle: fatal: %s\n", msg.c_str());
  std::abort();
}

const HostTensor &tensorOf(const TensorMap &m, const std::string &name,
                           DType dtype, const std::vector<int64_t> &shape) {
  auto it = m.find(name);
  if (it == m.end())
    fatal("weight '" + name + "' is missing");
  if (it->second.desc.dtype != dtype || it->second.desc.shape != shape ||
      int64_t(it->second.data.size()) != it->second.desc.bytes())
    fatal("weight '" + name + "' is " + dtypeName(it->second.desc.dtype) +
          " " + shapeString(it->second.desc.shape) + ", expected " +
          dtypeName(dtype) + " " + shapeString(shape));
  return it->second;
}

// Columns per tile of the GEMV: the accumulators, scales and zeros of one
// tile stay in L1.
constexpr int64_t kTile = 256;

void gemvColumns(const float *x, const QuantWeight &w, int64_t n0, int64_t n1,
                 float *y) {
  float acc[kTile], s[kTile], z[kTile];
  const int64_t out = w.out, groups = w.in / w.group;
  for (int64_t t0 = n0; t0 < n1; t0 += kTile) {
    const int64_t nt = std::min(kTile, n1 - t0);
    std::fill(acc, acc + nt, 0.0f);
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t j = 0; j < nt; ++j) {
        s[j] = w.scales[g * out + t0 + j].toFloat();
        z[j] = w.zeros[g * out + t0 + j].toFloat();
      }
      for (int64_t r = g * w.group / 2; r < (g + 1) * w.group / 2; ++r) {
        const uint8_t *row = w.wq + r * out + t0;
        const float x0 = x[2 * r], x1 = x[2 * r + 1];
        for (int64_t j = 0; j < nt; ++j) {
          const uint8_t b = row[j];
          float w0 = (float(b & 15) - z[j]) * s[j], w1 = (float(b >> 4) - z[j]) * s[j];
          if (w.roundWeights) {
            w0 = roundBf16Finite(w0);
            w1 = roundBf16Finite(w1);
          }
          acc[j] = acc[j] + x0 * w0;
          acc[j] = acc[j] + x1 * w1;
        }
      }
    }
    std::copy(acc, acc + nt, y + t0);
  }
}

} // namespace

float silu(float x) { return x / (1.0f + std::exp(-x)); }
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

QuantWeight quantWeight(const TensorMap &weights, const std::string &prefix,
                        int64_t in, int64_t out, int64_t group,
                        int64_t expert) {
  std::vector<int64_t> lead;
  int64_t e = std::max<int64_t>(expert, 0);
  if (expert >= 0) {
    auto it = weights.find(prefix + ".w_q");
    if (it == weights.end() || it->second.desc.shape.size() != 3)
      fatal("stacked weight '" + prefix + ".w_q' is missing or not 3-D");
    lead.push_back(it->second.desc.shape[0]);
    if (expert >= lead[0])
      fatal("expert " + std::to_string(expert) + " out of range for '" +
            prefix + "'");
  }
  auto with = [&](std::vector<int64_t> tail) {
    std::vector<int64_t> s = lead;
    s.insert(s.end(), tail.begin(), tail.end());
    return s;
  };
  QuantWeight w;
  w.in = in;
  w.out = out;
  w.group = group;
  w.wq = tensorOf(weights, prefix + ".w_q", DType::U8, with({in / 2, out}))
             .u8() +
         e * (in / 2) * out;
  w.scales = tensorOf(weights, prefix + ".scales", DType::BF16,
                      with({in / group, out}))
                 .bf16() +
             e * (in / group) * out;
  w.zeros = tensorOf(weights, prefix + ".zeros", DType::BF16,
                     with({in / group, out}))
                .bf16() +
            e * (in / group) * out;
  return w;
}

float dequantW4(const QuantWeight &w, int64_t k, int64_t n) {
  uint8_t b = w.wq[(k / 2) * w.out + n];
  int q = (k & 1) ? (b >> 4) : (b & 15);
  float s = w.scales[(k / w.group) * w.out + n].toFloat();
  float z = w.zeros[(k / w.group) * w.out + n].toFloat();
  return BFloat16((float(q) - z) * s).toFloat();
}

void w4a16Gemv(const float *x, const QuantWeight &w, float *y) {
  detail::parallelFor(w.out, kTile, [&](int64_t b, int64_t e) {
    gemvColumns(x, w, b, e, y);
  });
}

std::vector<BFloat16> w4a16Linear(const std::vector<BFloat16> &x,
                                  const QuantWeight &w) {
  std::vector<float> xf(x.size()), y(size_t(w.out));
  for (size_t i = 0; i < x.size(); ++i)
    xf[i] = x[i].toFloat();
  w4a16Gemv(xf.data(), w, y.data());
  std::vector<BFloat16> out(y.size());
  for (size_t i = 0; i < y.size(); ++i)
    out[i] = BFloat16(y[i]);
  return out;
}

void f32Linear(const BFloat16 *x, const BFloat16 *W, int64_t out, int64_t in, float *y) {
  for (int64_t n = 0; n < out; ++n) {
    float acc = 0.0f;
    for (int64_t k = 0; k < in; ++k)
      acc = acc + x[k].toFloat() * W[n * in + k].toFloat();
    y[n] = acc;
  }
}

void bf16Linear(const BFloat16 *x, const BFloat16 *W, int64_t out, int64_t in,
                BFloat16 *y) {
  std::vector<float> acc(static_cast<size_t>(out));
  f32Linear(x, W, out, in, acc.data());
  for (int64_t n = 0; n < out; ++n)
    y[n] = BFloat16(acc[size_t(n)]);
}

void rmsNorm(const BFloat16 *x, const BFloat16 *w, int64_t n, float eps,
             BFloat16 *out, bool roundTwice) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    ss = ss + x[i].toFloat() * x[i].toFloat();
  float r = 1.0f / std::sqrt(ss / float(n) + eps);
  for (int64_t i = 0; i < n; ++i)
    out[i] = roundTwice ? BFloat16(BFloat16(x[i].toFloat() * r).toFloat() * w[i].toFloat())
                        : BFloat16(x[i].toFloat() * r * w[i].toFloat());
}

void shortConvStep(const BFloat16 *fresh, BFloat16 *window,
                   const BFloat16 *convW, int64_t C, int64_t taps,
                   BFloat16 *out) {
  const int64_t rows = taps - 1;
  for (int64_t c = 0; c < C; ++c) {
    float acc = 0.0f;
    for (int64_t t = 0; t < rows; ++t)
      acc = acc + window[t * C + c].toFloat() * convW[c * taps + t].toFloat();
    acc = acc + fresh[c].toFloat() * convW[c * taps + rows].toFloat();
    out[c] = BFloat16(silu(acc));
  }
  for (int64_t t = 0; t + 1 < rows; ++t)
    std::copy(window + (t + 1) * C, window + (t + 2) * C, window + t * C);
  std::copy(fresh, fresh + C, window + (rows - 1) * C);
}

void gatedDeltaStep(float *S, int64_t H, int64_t Dk, int64_t Dv,
                    const float *q, const float *k, const float *v,
                    const float *g, const float *beta, float *o) {
  std::vector<float> pred(static_cast<size_t>(Dv));
  for (int64_t h = 0; h < H; ++h) {
    float *Sh = S + h * Dk * Dv;
    const float *qh = q + h * Dk, *kh = k + h * Dk, *gh = g + h * Dk;
    const float *vh = v + h * Dv;
    for (int64_t i = 0; i < Dk; ++i) {
      float decay = std::exp(gh[i]);
      for (int64_t j = 0; j < Dv; ++j)
        Sh[i * Dv + j] = Sh[i * Dv + j] * decay;
    }
    std::fill(pred.begin(), pred.end(), 0.0f);
    for (int64_t i = 0; i < Dk; ++i)
      for (int64_t j = 0; j < Dv; ++j)
        pred[j] = pred[j] + Sh[i * Dv + j] * kh[i];
    for (int64_t i = 0; i < Dk; ++i) {
      float bk = beta[h] * kh[i];
      for (int64_t j = 0; j < Dv; ++j)
        Sh[i * Dv + j] = Sh[i * Dv + j] + bk * (vh[j] - pred[j]);
    }
    float *oh = o + h * Dv;
    std::fill(oh, oh + Dv, 0.0f);
    for (int64_t i = 0; i < Dk; ++i)
      for (int64_t j = 0; j < Dv; ++j)
        oh[j] = oh[j] + Sh[i * Dv + j] * qh[i];
  }
}

void kdaL2NormHeads(float *q, float *k, int64_t H, int64_t D, float eps) {
  const float scale = 1.0f / std::sqrt(float(D));
  for (int64_t h = 0; h < H; ++h) {
    float *qh = q + h * D, *kh = k + h * D;
    float sq = 0.0f, sk = 0.0f;
    for (int64_t i = 0; i < D; ++i) {
      sq = sq + qh[i] * qh[i];
      sk = sk + kh[i] * kh[i];
    }
    const float nq = std::sqrt(sq + eps), nk = std::sqrt(sk + eps);
    for (int64_t i = 0; i < D; ++i) {
      qh[i] = qh[i] / nq * scale;
      kh[i] = kh[i] / nk;
    }
  }
}

float kdaLowRankDecay(float aLog, float f, float dtBias) {
  return -std::exp(aLog) * softplus(f + dtBias);
}

void kdaGatedOutputNorm(const float *o, const BFloat16 *gate, const BFloat16 *w, int64_t H,
                        int64_t D, float eps, BFloat16 *z) {
  for (int64_t h = 0; h < H; ++h) {
    float ss = 0.0f;
    for (int64_t i = 0; i < D; ++i) {
      const float x = roundBf16(o[h * D + i]);
      ss = ss + x * x;
    }
    const float r = 1.0f / std::sqrt(ss / float(D) + eps);
    for (int64_t i = 0; i < D; ++i) {
      const int64_t c = h * D + i;
      z[c] = BFloat16(roundBf16(o[c]) * r * w[i].toFloat() * sigmoid(gate[c].toFloat()));
    }
  }
}

void ropeInterleaved(BFloat16 *x, int64_t dim, int64_t pos, double theta) {
  for (int64_t i = 0; i < dim / 2; ++i) {
    double inv = std::pow(theta, -2.0 * double(i) / double(dim));
    double a = double(pos) * inv;
    float c = float(std::cos(a)), s = float(std::sin(a));
    float x0 = x[2 * i].toFloat(), x1 = x[2 * i + 1].toFloat();
    x[2 * i] = BFloat16(x0 * c - x1 * s);
    x[2 * i + 1] = BFloat16(x1 * c + x0 * s);
  }
}

void softmax(const float *x, int64_t n, float *p) {
  float m = x[0];
  for (int64_t i = 1; i < n; ++i)
    m = std::max(m, x[i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    p[i] = std::exp(x[i] - m);
    sum = sum + p[i];
  }
  for (int64_t i = 0; i < n; ++i)
    p[i] = p[i] / sum;
}

void topK(const float *p, int64_t n, int64_t k, int32_t *idx, float *w) {
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [p](int32_t a, int32_t b) {
                      if (p[a] != p[b])
                        return p[a] > p[b];
                      return a < b;
                    });
  for (int64_t j = 0; j < k; ++j) {
    idx[j] = order[size_t(j)];
    w[j] = p[order[size_t(j)]];
  }
}

void sigmoidRouterScores(const float *logit, const BFloat16 *bias, int64_t n, float *score,
                         float *select) {
  for (int64_t e = 0; e < n; ++e) {
    score[e] = sigmoid(logit[e]);
    select[e] = score[e] + bias[e].toFloat();
  }
}

void normalizeRouteWeights(float *w, int64_t k, float scaling, float eps) {
  float sum = 0.0f;
  for (int64_t j = 0; j < k; ++j)
    sum = sum + w[j];
  for (int64_t j = 0; j < k; ++j)
    w[j] = w[j] / (sum + eps) * scaling;
}

void expertFfn(const float *u, const QuantWeight &gate, const QuantWeight &up,
               const QuantWeight &down, float *y, bool bf16Steps) {
  std::vector<float> g(size_t(gate.out)), v(size_t(up.out));
  w4a16Gemv(u, gate, g.data());
  w4a16Gemv(u, up, v.data());
  for (size_t i = 0; i < g.size(); ++i)
    g[i] = bf16Steps ? roundBf16(roundBf16(silu(roundBf16(g[i]))) * roundBf16(v[i]))
                     : silu(g[i]) * v[i];
  w4a16Gemv(g.data(), down, y);
}

void mlaAttention(const BlockConfig &cfg, const BFloat16 *q,
                  const BFloat16 *cKv, const BFloat16 *kRope, int64_t rows,
                  const QuantWeight &kvB, float *o) {
  const int64_t nope = cfg.qkNope, rope = cfg.qkRope, dq = nope + rope;
  const int64_t dkv = nope + cfg.vHead, lora = cfg.kvLora;
  const float scale = 1.0f / std::sqrt(float(dq));
  detail::parallelFor(cfg.mlaHeads, 1, [&](int64_t h0, int64_t h1) {
    std::vector<float> wt(size_t(lora * dkv)), kvb(size_t(rows * dkv));
    std::vector<float> score(static_cast<size_t>(rows)), p(static_cast<size_t>(rows)), qf(static_cast<size_t>(dq));
    constexpr int64_t kRows = 4;
    std::vector<float> acc(size_t(kRows * dkv));
    for (int64_t h = h0; h < h1; ++h) {
      // This head's columns of W_kv_b, dequantized (one head's tile only).
      for (int64_t k = 0; k < lora; ++k)
        for (int64_t j = 0; j < dkv; ++j)
          wt[k * dkv + j] = dequantW4(kvB, k, h * dkv + j);
      // kvb rows for this head, kRows rows at a time sharing the tile.
      for (int64_t l0 = 0; l0 < rows; l0 += kRows) {
        const int64_t nr = std::min(kRows, rows - l0);
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t k = 0; k < lora; ++k) {
          const float *wrow = &wt[k * dkv];
          for (int64_t r = 0; r < nr; ++r) {
            const float c = cKv[(l0 + r) * lora + k].toFloat();
            float *a = &acc[r * dkv];
            for (int64_t j = 0; j < dkv; ++j)
              a[j] = a[j] + c * wrow[j];
          }
        }
        for (int64_t r = 0; r < nr; ++r)
          for (int64_t j = 0; j < dkv; ++j)
            kvb[(l0 + r) * dkv + j] = roundBf16Finite(acc[r * dkv + j]);
      }
      for (int64_t i = 0; i < dq; ++i)
        qf[i] = q[h * dq + i].toFloat();
      for (int64_t l = 0; l < rows; ++l) {
        float d = 0.0f;
        for (int64_t i = 0; i < nope; ++i)
          d = d + qf[i] * kvb[l * dkv + i];
        for (int64_t i = 0; i < rope; ++i)
          d = d + qf[nope + i] * kRope[l * rope + i].toFloat();
        score[l] = d * scale;
      }
      softmax(score.data(), rows, p.data());
      float *oh = o + h * cfg.vHead;
      std::fill(oh, oh + cfg.vHead, 0.0f);
      for (int64_t l = 0; l < rows; ++l)
        for (int64_t j = 0; j < cfg.vHead; ++j)
          oh[j] = oh[j] + p[l] * kvb[l * dkv + nope + j];
    }
  });
}

} // namespace oracle
} // namespace mk
