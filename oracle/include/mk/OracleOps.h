//===- OracleOps.h - The oracle's operations, one by one ---------*- C++ -*-===//
//
// Every operation of the spec's decode step as a plain function over host
// arrays, so each can be unit tested against hand-computed values. All
// arithmetic is fp32 unless stated; "sequential" sums run in index order.
// oracleStep (Oracle.h) is these functions composed.
//
//===----------------------------------------------------------------------===//

#ifndef MK_ORACLEOPS_H
#define MK_ORACLEOPS_H

#include "mk/BFloat16.h"
#include "mk/BlockConfig.h"
#include "mk/Safetensors.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mk {
namespace oracle {

float silu(float x);     // x / (1 + exp(-x))
float sigmoid(float x);  // 1 / (1 + exp(-x))
float softplus(float x); // log1p(exp(x)), = x for x > 20

/// A view of one W4A16 linear W [in, out] (one expert of a stacked set).
struct QuantWeight {
  const uint8_t *wq = nullptr;      // [in/2, out]
  const BFloat16 *scales = nullptr; // [in/group, out]
  const BFloat16 *zeros = nullptr;  // [in/group, out]
  int64_t in = 0, out = 0, group = 0;
  /// Each dequantized weight (q - z) * s rounded to bf16 before its product,
  /// as the spec does; false: not rounded, as the kernel's packed tiles with
  /// `arithmetic=scaled` / `folded` compute (w4a16Gemv; dequantW4 always
  /// rounds).
  bool roundWeights = true;
};

/// The view of `<prefix>.{w_q,scales,zeros}` in `weights` (expert `expert` of
/// a stacked set, or -1 for an unstacked linear). Aborts with a message naming
/// the tensor if it is missing or has the wrong shape.
QuantWeight quantWeight(const TensorMap &weights, const std::string &prefix,
                        int64_t in, int64_t out, int64_t group,
                        int64_t expert = -1);

/// w[k, n] = bf16((q[k,n] - zero) * scale), as a float.
float dequantW4(const QuantWeight &w, int64_t k, int64_t n);

/// y[n] = sum_k x[k] * w[k, n] in fp32, sequential in k, no final rounding.
/// Columns are split across threads; nothing beyond one tile is dequantized.
void w4a16Gemv(const float *x, const QuantWeight &w, float *y);
/// The spec's W4A16 product on a bf16 input: bf16(sum_k f32(x[k]) w[k,n]).
std::vector<BFloat16> w4a16Linear(const std::vector<BFloat16> &x,
                                  const QuantWeight &w);

/// y = x @ W^T in fp32, W bf16 (out, in), sequential accumulation, not
/// rounded (the sigmoid router's logits).
void f32Linear(const BFloat16 *x, const BFloat16 *W, int64_t out, int64_t in, float *y);

/// y = bf16(x @ W^T), W bf16 (out, in), fp32 sequential accumulation.
void bf16Linear(const BFloat16 *x, const BFloat16 *W, int64_t out, int64_t in,
                BFloat16 *y);

/// bf16(f32(x) * rsqrt(mean(f32(x)^2) + eps) * f32(w)); the mean is the
/// sequential sum of squares divided by n. `roundTwice`: bf16(bf16(f32(x) *
/// rsqrt(...)) * f32(w)) (the released model's norms).
void rmsNorm(const BFloat16 *x, const BFloat16 *w, int64_t n, float eps,
             BFloat16 *out, bool roundTwice = false);

/// One step of the causal depthwise conv over C channels with `taps` taps:
/// window [taps-1, C] holds the previous pre-conv rows (oldest first);
/// convW is [C, taps] (tap taps-1 multiplies `fresh`).
/// out[c] = bf16(silu(sum_t win[t][c] * convW[c][t])) with t sequential; the
/// window then drops its oldest row and appends `fresh` (pre-conv values).
void shortConvStep(const BFloat16 *fresh, BFloat16 *window,
                   const BFloat16 *convW, int64_t C, int64_t taps,
                   BFloat16 *out);

/// The gated delta rule for H heads, S [H, Dk, Dv] updated in place, q/k/g
/// [H, Dk], v [H, Dv], beta [H], o [H, Dv]:
///   S[h,i,j] *= exp(g[h,i]); pred[j] = sum_i S[h,i,j] k[h,i];
///   S[h,i,j] += (beta[h] * k[h,i]) * (v[h,j] - pred[j]);
///   o[h,j] = sum_i S[h,i,j] q[h,i]            (sums sequential in i).
void gatedDeltaStep(float *S, int64_t H, int64_t Dk, int64_t Dv,
                    const float *q, const float *k, const float *v,
                    const float *g, const float *beta, float *o);

/// The released KDA's per-head normalization of q and k ([H, D] each, fp32
/// values of the convolved bf16 rows), in place: x / sqrt(sum_i x_i^2 + eps)
/// (sum sequential in i), q then also times D^-0.5.
void kdaL2NormHeads(float *q, float *k, int64_t H, int64_t D, float eps);

/// The released KDA's log-decay of one channel: -exp(aLog) * softplus(f +
/// dtBias), all fp32 (f: the low-rank projection's bf16 output).
float kdaLowRankDecay(float aLog, float f, float dtBias);

/// The released KDA's gated output norm per head (sigmoid gate, fp32 until
/// one rounding): with x = bf16(o) [H, D], r_h = rsqrt(sum_i x_i^2 / D + eps)
/// (sum sequential), z[h,i] = bf16(x[h,i] * r_h * w[i] * sigmoid(gate[h,i])).
void kdaGatedOutputNorm(const float *o, const BFloat16 *gate, const BFloat16 *w, int64_t H,
                        int64_t D, float eps, BFloat16 *z);

/// Interleaved RoPE of `dim` values in place at position `pos`: pair i is
/// (x[2i], x[2i+1]), angle a = pos * theta^(-2i/dim) (computed in double,
/// cos/sin rounded to fp32), rotated in fp32 and rounded to bf16.
void ropeInterleaved(BFloat16 *x, int64_t dim, int64_t pos, double theta);

/// p = softmax(x) over n values: max-subtracted, exp, sequential sum, divide.
void softmax(const float *x, int64_t n, float *p);

/// The k largest of p[0..n) in descending order; equal values: the lower
/// index wins (comes first and is preferred at the cut).
void topK(const float *p, int64_t n, int64_t k, int32_t *idx, float *w);

/// The sigmoid router's two score vectors over n experts: score[e] =
/// sigmoid(logit[e]) (what weighs a chosen expert) and select[e] =
/// score[e] + bias[e] (what chooses: the correction bias steers the
/// choice only). Both oracles' sigmoid routers call it.
void sigmoidRouterScores(const float *logit, const BFloat16 *bias, int64_t n, float *score,
                         float *select);

/// w[j] = w[j] / (sum_j w[j] + eps) * scaling, sum sequential (eps: 1e-9
/// for the unit's softmax router, 1e-20 for the sigmoid router).
void normalizeRouteWeights(float *w, int64_t k, float scaling, float eps = 1e-9f);

/// One expert FFN, all fp32: y = (silu(u @ gate) * (u @ up)) @ down; with
/// `bf16Steps` (ffn_rounding "each") its intermediate in bf16 steps,
/// h = bf16(bf16(silu(bf16(u @ gate))) * bf16(u @ up)), y = h @ down still
/// fp32 (the caller rounds it).
void expertFfn(const float *u, const QuantWeight &gate, const QuantWeight &up,
               const QuantWeight &down, float *y, bool bf16Steps = false);

/// The materialized MLA attention for all heads: with kvb =
/// bf16(c_kv[rows] @ W_kv_b) viewed [rows, Hm, qkNope+vHead],
/// score[l,h] = (q_nope[h].k_nope[l,h] + q_rope[h].k_rope[l]) * (1/sqrt(qkNope+qkRope))
/// (one sequential dot over the nope then the rope part), softmax over rows,
/// o[h] = sum_l p[l,h] val[l,h]. q bf16 [Hm, qkNope+qkRope] (rotated),
/// cKv [rows, kvLora], kRope [rows, qkRope]; o f32 [Hm, vHead].
void mlaAttention(const BlockConfig &cfg, const BFloat16 *q,
                  const BFloat16 *cKv, const BFloat16 *kRope, int64_t rows,
                  const QuantWeight &kvB, float *o);

} // namespace oracle
} // namespace mk

#endif // MK_ORACLEOPS_H
