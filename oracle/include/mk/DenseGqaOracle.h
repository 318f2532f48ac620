//===- DenseGqaOracle.h - CPU reference of the dense GQA layer ----*- C++ -*-===//
//
// The fp32 oracle of the second block family, the dense GQA W4A16 decoder
// layer (docs/semantics-dense-gqa.md): per-head q/k RMSNorm, rotate-half
// RoPE, a bf16 KV cache with one row appended per step, grouped-query
// attention, and a SwiGLU MLP. It reuses the Kimi oracle's W4A16 product,
// RMSNorm and expert FFN (OracleOps.h), whose rounding the family shares.
//
//===----------------------------------------------------------------------===//

#ifndef MK_DENSEGQAORACLE_H
#define MK_DENSEGQAORACLE_H

#include "mk/BFloat16.h"
#include "mk/OracleOps.h"
#include "mk/Safetensors.h"
#include "mk/TestData.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mk {
namespace oracle {

/// One dense GQA layer's sizes (defaults: a Qwen3-8B layer).
struct DenseGqaConfig {
  int64_t hidden = 4096, heads = 32, kvHeads = 8, headDim = 128, inter = 12288;
  double ropeTheta = 1000000.0;
  float eps = 1e-6f;
  int64_t group = 128;
  int64_t layers = 2;
};

/// "" if `c` is a config the layer's semantics are defined for, else what is
/// wrong (every size positive, heads a multiple of kvHeads, headDim even,
/// group even and dividing hidden, heads * headDim and inter).
std::string validateDenseGqaConfig(const DenseGqaConfig &c);

/// Rotate-half RoPE of `dim` values in place at position `pos`: element i
/// pairs with i + dim/2 (i < dim/2), angle a = pos * theta^(-2i/dim)
/// (computed in double, cos/sin rounded to fp32), rotated in fp32 and
/// rounded to bf16.
void ropeRotateHalf(BFloat16 *x, int64_t dim, int64_t pos, double theta);

/// Grouped-query attention over `rows` cache rows: query head h reads kv
/// head h / (heads / kvHeads); score[l] = (q[h] . k[l, g]) * s, s the fp32
/// constant 1 / sqrt(headDim) (sequential dot in fp32), softmax over rows, o[h] = sum_l p[l] v[l, g]
/// (sequential in l) rounded to bf16. q [heads, headDim]; kCache, vCache
/// [rows, kvHeads, headDim]; o [heads, headDim].
void gqaAttention(const BFloat16 *q, const BFloat16 *kCache, const BFloat16 *vCache,
                  int64_t rows, int64_t heads, int64_t kvHeads, int64_t headDim,
                  BFloat16 *o);

/// The weights of layer `i` (`blocks.i.attn_norm`, `blocks.i.mlp_norm`,
/// `blocks.i.attn.{q,k,v,o}_proj`, `blocks.i.attn.{q,k}_norm`,
/// `blocks.i.mlp.{gate,up,down}`), as views into a TensorMap.
struct DenseGqaLayerWeights {
  const BFloat16 *attnNorm = nullptr, *mlpNorm = nullptr, *qNorm = nullptr,
                 *kNorm = nullptr;
  QuantWeight q, k, v, o, gate, up, down;
};
/// The views of layer `layer`'s weights in `weights`; aborts with a message
/// naming the tensor when one is missing or mis-shaped.
DenseGqaLayerWeights denseGqaLayerWeights(const DenseGqaConfig &c, const TensorMap &weights,
                                          int64_t layer);

/// One layer's decode step at position ctxLen: `kCache` and `vCache` hold
/// ctxLen rows of [kvHeads, headDim] and gain one (the new key after its norm
/// and RoPE, the new value); returns x' (bf16 [hidden]).
std::vector<BFloat16> denseGqaLayerStep(const DenseGqaConfig &c, const DenseGqaLayerWeights &w,
                                        const std::vector<BFloat16> &x,
                                        std::vector<BFloat16> &kCache,
                                        std::vector<BFloat16> &vCache, int64_t ctxLen);

/// Reads a dense GQA configuration from a JSON object with the keys of
/// docs/semantics-dense-gqa.md (`hidden`, `heads`, `kv_heads`, `head_dim`,
/// `inter`, `rope_theta`, `eps`, `group`, `layers`; every key required but
/// `eps` (1e-6), no other key); "" on success, else what is wrong (the key
/// and its place), the config then also validated.
std::string parseDenseGqaConfig(const std::string &json, DenseGqaConfig &c);

/// Seeded random weights of every layer, in the spec's names: quantized
/// linears from normal floats of `linearStddev` (the Kimi unit's quantizer;
/// 0: all zero), norm weights 1 + N(0, normStddev), each tensor its own
/// stream of `seed`.
TensorMap makeRandomDenseGqaWeights(const DenseGqaConfig &c, uint64_t seed,
                                    double linearStddev = testdata::kQuantStddev,
                                    double normStddev = 0.1);

/// Every layer's step in order: x' of the last layer; caches[i] (k then v
/// of layer i, ctxLen rows each) gain one row.
std::vector<BFloat16> denseGqaStep(const DenseGqaConfig &c, const TensorMap &weights,
                                   const std::vector<BFloat16> &x,
                                   std::vector<std::vector<BFloat16>> &kCaches,
                                   std::vector<std::vector<BFloat16>> &vCaches, int64_t ctxLen);

} // namespace oracle
} // namespace mk

#endif // MK_DENSEGQAORACLE_H
