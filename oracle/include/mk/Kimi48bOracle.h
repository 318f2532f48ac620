//===- Kimi48bOracle.h - CPU reference of Kimi-Linear-48B-A3B ----*- C++ -*-===//
//
// The fp32 oracle of one greedy decode step of the released
// Kimi-Linear-48B-A3B model (docs/semantics-kimi-linear-48b.md): token id in,
// bf16 logits and the next token id out. Embedding lookup; per layer a KDA
// (gated delta rule with short convs, L2-normalized q/k, low-rank decay and
// output gate) or a NoPE MLA attention, then a dense SwiGLU (the first
// layers) or a sigmoid-routed MoE with a shared expert; final norm; lm_head.
// Every parameter is bf16 under its Hugging Face state-dict name, PyTorch
// (out, in) layout; gate arithmetic is fp32. The rounding points are the
// spec's: every linear output rounds once to bf16, RMSNorm rounds twice
// (normalized value, then times the weight), elementwise ops round their
// bf16 outputs, residual adds round.
//
//===----------------------------------------------------------------------===//

#ifndef MK_KIMI48BORACLE_H
#define MK_KIMI48BORACLE_H

#include "mk/BFloat16.h"
#include "mk/Safetensors.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mk {
namespace oracle {

/// The model's sizes and switches, one field per config.json key (defaults:
/// the released values).
struct Kimi48bConfig {
  int64_t hidden = 2304;       // hidden_size
  int64_t layers = 27;         // num_hidden_layers
  int64_t vocab = 163840;      // vocab_size
  /// linear_attn_config.kda_layers / full_attn_layers, 1-based as in the file.
  std::vector<int64_t> kdaLayers = {1,  2,  3,  5,  6,  7,  9,  10, 11, 13,
                                    14, 15, 17, 18, 19, 21, 22, 23, 25, 26};
  std::vector<int64_t> fullAttnLayers = {4, 8, 12, 16, 20, 24, 27};
  int64_t kdaHeads = 32;       // linear_attn_config.num_heads
  int64_t kdaHeadDim = 128;    // linear_attn_config.head_dim (Dk = Dv)
  int64_t convKernel = 4;      // linear_attn_config.short_conv_kernel_size
  int64_t mlaHeads = 32;       // num_attention_heads
  int64_t kvLora = 512;        // kv_lora_rank
  int64_t qkNope = 128;        // qk_nope_head_dim
  int64_t qkRope = 64;         // qk_rope_head_dim (never rotated: NoPE)
  int64_t vHead = 128;         // v_head_dim
  int64_t inter = 9216;        // intermediate_size (dense FFN)
  int64_t firstKDense = 1;     // first_k_dense_replace
  int64_t moeLayerFreq = 1;    // moe_layer_freq
  int64_t moeInter = 1024;     // moe_intermediate_size
  int64_t experts = 256;       // num_experts
  int64_t topK = 8;            // num_experts_per_token
  int64_t sharedExperts = 1;   // num_shared_experts (shared width moeInter * this)
  double routedScaling = 2.446; // routed_scaling_factor
  bool renormalize = true;     // moe_renormalize
  int64_t expertGroups = 1;    // num_expert_group (only 1: no group stage)
  int64_t topkGroup = 1;       // topk_group
  float eps = 1e-5f;           // rms_norm_eps
  /// kv_a_layernorm's eps: the authors' code uses the class default 1e-6,
  /// not rms_norm_eps (no config key; the spec's choice).
  float kvNormEps = 1e-6f;

  /// Layer `i` (0-based) is a KDA layer (else MLA).
  bool isKda(int64_t i) const;
  /// Layer `i` has the MoE FFN (else the dense SwiGLU of width `inter`).
  bool isMoe(int64_t i) const;
  int64_t kdaChannels() const { return kdaHeads * kdaHeadDim; }
};

/// "" if the sizes are usable, else what is wrong: every size positive, topK
/// <= experts, every layer in exactly one of kda_layers / full_attn_layers.
std::string validateKimi48bConfig(const Kimi48bConfig &c);

/// Reads a Hugging Face config.json (text, or a path to a file when `text`
/// does not start with '{' after whitespace). Every key the step depends on
/// is required with the right type (the message names the key): the sizes
/// above, `rms_norm_eps`, `routed_scaling_factor`, `moe_renormalize`, and the
/// switches whose other values would change the semantics and must have the
/// released value: `mla_use_nope` true, `q_lora_rank` null,
/// `moe_router_activation_func` "sigmoid", `hidden_act` "silu",
/// `tie_word_embeddings` false, `num_nextn_predict_layers` 0,
/// `moe_layer_freq` 1, `num_expert_group` = `topk_group` = 1. Keys that do
/// not enter one decode step (token ids, dtype, rope_theta, ...) are ignored;
/// any key not known either way is an error. On failure returns false with
/// `error` naming the key (and its line and column); `c` is then unspecified.
bool parseKimi48bConfig(const std::string &jsonOrPath, Kimi48bConfig &c, std::string &error);

/// The stddev of a projection reading `2304` inputs (the released hidden
/// size); other fan-ins scale it by sqrt(2304 / in).
constexpr double kKimi48bLinearStddev = 0.02;

/// Seeded random parameters under the HF names and shapes, every one bf16,
/// each tensor its own stream of `seed` (the spec's test distributions, the
/// projections' scaled to their fan-in so that reduced sizes stay
/// well-scaled): every projection, lm_head and the router
/// N(0, (0.02 * sqrt(2304 / in))^2) (exactly the spec's N(0, 0.02) for the
/// released model's projections of the residual stream, ~unit-rms outputs
/// from unit-rms inputs at any size); embedding rows N(0, 1); every
/// RMSNorm weight, o_norm and kv_a_layernorm ones; conv weights N(0, 0.1);
/// A_log = log(U(1, 16)); dt_bias N(0, 0.1); e_score_correction_bias
/// N(0, 0.01).
TensorMap makeRandomKimi48bWeights(const Kimi48bConfig &c, uint64_t seed);

/// The decode state, per layer `i` under "state.i.":
///   KDA: `S` f32 [H, Dk, Dv] (key-major), `q_conv`, `k_conv`, `v_conv`
///        bf16 [convKernel - 1, C] (previous pre-conv rows, oldest first);
///   MLA: `c_kv` bf16 [ctxLen, kvLora] (normalized latent rows) and
///        `k_rope` bf16 [ctxLen, qkRope] (the shared key part, un-rotated).
struct Kimi48bState {
  TensorMap tensors;
  int64_t ctxLen = 0;
};

/// The state of a fresh sequence (S = 0, zero windows, empty caches).
Kimi48bState makeEmptyKimi48bState(const Kimi48bConfig &c);
/// A random state at context `ctxLen`: S ~ N(0, 0.05^2) f32, windows and
/// caches N(0, 0.1^2) bf16, each tensor its own stream of `seed`.
Kimi48bState makeRandomKimi48bState(const Kimi48bConfig &c, int64_t ctxLen, uint64_t seed);

/// Per-layer values of one step, every value as float: "layer<i>.attn",
/// "layer<i>.ffn", "layer<i>.hidden" (the residual after the layer),
/// "layer<i>.topk_idx" and "layer<i>.topk_w" (MoE layers), "final_norm".
struct Kimi48bTrace {
  std::map<std::string, std::vector<float>> values;
};

struct Kimi48bResult {
  std::vector<BFloat16> logits; // bf16 [vocab]
  int64_t next = 0;             // argmax of logits, first index on a tie
};

/// One decode step of token `tokenId` (0 <= tokenId < vocab): updates `state`
/// in place (KDA S and windows; one row appended to every MLA cache,
/// ctxLen + 1) and returns the logits and the greedy next token. Aborts with
/// a message naming the tensor if a weight or state tensor is missing or
/// mis-shaped.
Kimi48bResult kimi48bStep(const Kimi48bConfig &c, const TensorMap &weights, Kimi48bState &state,
                          int64_t tokenId, Kimi48bTrace *trace = nullptr);

/// The spec's RMSNorm with two roundings: t = bf16(x * rsqrt(mean(x^2) +
/// eps)) (sequential sum of squares), out = bf16(t * w).
void rmsNormTwoRoundings(const BFloat16 *x, const BFloat16 *w, int64_t n, float eps,
                         BFloat16 *out);

} // namespace oracle
} // namespace mk

#endif // MK_KIMI48BORACLE_H
