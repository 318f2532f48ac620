//===- BlockConfig.h - Configuration of a decode block ----------*- C++ -*-===//
//
// The configuration of a decode block (the Kimi-Linear-style hybrid unit, or
// the dense GQA decoder family, whose layers are this config's GQA layers
// with a dense FFN), and the catalogue of every tensor it owns (weights and
// decode state), named as the spec's state-dict names. Plain C++17: shared by the compiler frontend, the CPU oracle
// and the runtime (which must build without MLIR or LLVM).
//
//===----------------------------------------------------------------------===//

#ifndef MK_BLOCKCONFIG_H
#define MK_BLOCKCONFIG_H

#include <cstdint>
#include <string>
#include <vector>

namespace mk {

/// A layer's attention: Kimi delta attention, multi-head latent attention,
/// or grouped-query attention (the dense family's, docs/semantics-dense-gqa.md).
enum class LayerKind { KDA, MLA, GQA };

/// Which spec format a config reads from and writes to: the Kimi hybrid
/// unit's (`config` + `pattern`) or the dense GQA decoder's (`family:
/// "dense_gqa"`, every layer GQA attention + a dense SwiGLU FFN).
enum class BlockFamily { KimiLinear, DenseGqa };

/// Every dimension of the unit. Defaults are the spec's Kimi-Linear unit.
/// How a MoE layer's router turns its logits into the chosen experts and
/// their weights (docs/semantics-kimi-linear.md 6.2):
/// - Softmax (the unit): p = softmax(logits); the top-k of p, weights
///   p / (sum + 1e-9) * routed_scaling.
/// - Sigmoid (the released Kimi-Linear-48B-A3B): s = sigmoid(logits); the
///   top-k of s + bias (`blocks.i.moe.router.bias`, [n_experts], bf16: the
///   correction bias steers the choice only), weights the unbiased s /
///   (sum + 1e-20) * routed_scaling.
enum class RouterKind { Softmax, Sigmoid };

struct BlockConfig {
  std::string name = "kimi_linear_w4a16";
  BlockFamily family = BlockFamily::KimiLinear;
  int64_t hidden = 2304;
  int64_t kdaHeads = 32;
  int64_t kdaHeadDim = 128;
  int64_t shortConv = 4;
  int64_t mlaHeads = 32;
  int64_t kvLora = 512;
  int64_t qkNope = 128;
  int64_t qkRope = 64;
  int64_t vHead = 128;
  double ropeTheta = 10000.0;
  int64_t nExperts = 64;
  int64_t nActive = 8;
  int64_t nShared = 1;
  int64_t moeInter = 1024;
  double routedScaling = 2.446;
  RouterKind router = RouterKind::Softmax;
  /// MLA layers' positional rotation: true (the unit) rotates q's rope part
  /// and the shared key part (RoPE at the token's position); false (the
  /// released model's `mla_use_nope`) uses them as projected.
  bool mlaRotary = true;
  /// MLA layers normalize the latent before caching it (the released
  /// model's `kv_a_layernorm`): RMSNorm with `blocks.i.attn.kv_a_norm`
  /// ([kv_lora], bf16) and epsilon kMlaLatentNormEps, the family's norm
  /// arithmetic; false (the unit) caches it as projected.
  bool mlaLatentNorm = false;
  static constexpr double kMlaLatentNormEps = 1e-6;
  /// RMSNorm rounding: false (the unit) rounds once, bf16(x * r * w); true
  /// (the released model) twice, bf16(bf16(x * r) * w). Every norm of the
  /// family: the layers' input and FFN norms and the MLA latent's.
  bool normRoundTwice = false;
  /// KDA layers' form (docs/semantics-kimi-linear.md, section 4): false (the
  /// unit) takes the decay from a full-rank g_proj, -softplus(g), and feeds
  /// o straight to o_proj; true (the released model, spec `kda_form`
  /// "released") L2-normalizes q and k per head (kKdaL2NormEps on the sum
  /// of squares), takes the decay -exp(A_log[h]) * softplus(f_b(f_a(u)) +
  /// dt_bias) through a head_dim-wide bottleneck, and gates o per head:
  /// z = bf16(o * rsqrt(mean(o^2) + eps) * o_norm * sigmoid(g_b(g_a(u)))).
  bool kdaReleased = false;
  static constexpr double kKdaL2NormEps = 1e-6;
  /// FFN rounding (spec `ffn_rounding`; docs/semantics-kimi-linear.md,
  /// sections 6.3-6.4): false ("once", the unit) keeps every expert's and
  /// the dense FFN's intermediate and outputs in fp32 and rounds the FFN's
  /// sum once; true ("each", the released model) rounds as a bf16 model
  /// does: gate and up outputs, silu(gate) and the product to bf16, each
  /// routed expert's output to bf16 before its weight, the routed sum and
  /// the shared experts' sum each to bf16, then their sum.
  bool ffnRoundEach = false;
  /// The whole model (spec key `vocab` > 0; docs/semantics-kimi-linear.md,
  /// section 6.5): the step takes a token id, whose row of `embed.weight`
  /// [vocab, hidden] (bf16) is the first layer's input, and after the last
  /// layer normalizes the hidden with `final_norm` [hidden] and projects it
  /// with the LM head to bf16 logits [vocab]: `lm_head`, W4A16 [hidden ->
  /// vocab], or (lmHeadBf16, spec `lm_head: "bf16"`) `lm_head.weight` bf16
  /// [vocab, hidden]. The next token is the logits' argmax (the first index
  /// of the largest). 0: a block of layers, hidden in and hidden out.
  int64_t vocab = 0;
  bool lmHeadBf16 = false;
  /// Layers [0, denseLayers) have a dense SwiGLU FFN of width denseInter
  /// (`blocks.i.mlp`, plain [in, out] linears) in place of the MoE;
  /// 0: every layer has the MoE (the spec's unit).
  int64_t denseLayers = 0;
  int64_t denseInter = 0;
  /// GQA layers: query heads, kv heads (dividing the query heads), head dim.
  int64_t gqaHeads = 32;
  int64_t gqaKvHeads = 8;
  int64_t gqaHeadDim = 128;
  int64_t group = 128;
  double eps = 1e-6;
  std::vector<LayerKind> pattern = {LayerKind::KDA, LayerKind::KDA,
                                    LayerKind::KDA, LayerKind::MLA};

  int64_t kdaChannels() const { return kdaHeads * kdaHeadDim; }
  int64_t mlaQHeadDim() const { return qkNope + qkRope; }
  int64_t mlaKvBHeadDim() const { return qkNope + vHead; }
  int64_t convWindowRows() const { return shortConv - 1; }
  /// Whether layer `i`'s FFN is the dense one (else the MoE).
  bool denseFfn(int64_t i) const { return i < denseLayers; }
  /// Query heads per kv head of a GQA layer.
  int64_t gqaRep() const { return gqaKvHeads > 0 ? gqaHeads / gqaKvHeads : 0; }
  bool hasLayer(LayerKind k) const;

  /// Returns an empty string if the configuration is consistent, otherwise a
  /// one-line description of the first problem found.
  std::string validate() const;

  /// The most layers a configuration may have: far past any released model
  /// (DeepSeek-V3 has 61), and a bound on what a layer count read from a
  /// config file makes the importers and the compiler allocate.
  static constexpr int64_t kMaxLayers = 1024;
};

enum class DType { U8, BF16, F32, I32 };
const char *dtypeName(DType t); // "u8", "bf16", "f32", "i32"
int64_t dtypeBytes(DType t);
bool parseDType(const std::string &s, DType &out);

/// A named tensor of the unit. For caches, dim 0 is the row count (context).
struct TensorDesc {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  /// The layer it belongs to (its name's "blocks.<i>" / "state.<i>").
  int64_t layer = -1;
  int64_t numel() const;
  int64_t bytes() const { return numel() * dtypeBytes(dtype); }
};

/// A W4A16 linear `y = x @ W`, W logically [in, out] (optionally stacked over
/// `experts` on a leading axis, 0 = not stacked). Stored as three tensors:
/// `<prefix>.w_q` u8 [E?, in/2, out], `<prefix>.scales` and `<prefix>.zeros`
/// bf16 [E?, in/group, out].
struct QuantLinearDesc {
  std::string prefix;
  int64_t in = 0, out = 0, experts = 0;
  /// The layer it belongs to.
  int64_t layer = -1;
};

/// Name prefix of layer `i`'s parameters: "blocks.<i>".
std::string layerPrefix(int64_t layer);
/// Name prefix of layer `i`'s decode state: "state.<i>".
std::string statePrefix(int64_t layer);

/// All quantized linears of the unit, in layer order.
std::vector<QuantLinearDesc> quantLinears(const BlockConfig &cfg);
/// Every parameter tensor (quantized linears expanded into their three
/// tensors), in a deterministic order.
std::vector<TensorDesc> parameterTensors(const BlockConfig &cfg);
/// Every decode-state tensor: per KDA layer `state.i.S` f32 [H, Dk, Dv] and
/// `state.i.{cq,ck,cv}` bf16 [shortConv-1, C]; for MLA layers
/// `state.i.c_kv` bf16 [rows, kvLora] and `state.i.k_rope` bf16 [rows, qkRope];
/// for GQA layers `state.i.k_cache` and `state.i.v_cache` bf16 [rows,
/// gqaKvHeads, gqaHeadDim].
std::vector<TensorDesc> stateTensors(const BlockConfig &cfg, int64_t cacheRows);

} // namespace mk

#endif // MK_BLOCKCONFIG_H
