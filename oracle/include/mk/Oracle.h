//===- Oracle.h - The CPU reference of one decode step -----------*- C++ -*-===//
//
// The fp32 oracle of docs/semantics-kimi-linear.md: one decode step
// of a block spec's unit, with bf16 rounding exactly where the spec rounds and
// the MLA in its materialized form. Every GPU kernel is checked against it.
// The pieces are callable one by one (OracleOps.h); deterministic test data
// comes from TestData.h. docs/oracle.md is the user guide.
//
//===----------------------------------------------------------------------===//

#ifndef MK_ORACLE_H
#define MK_ORACLE_H

#include "mk/BFloat16.h"
#include "mk/BlockConfig.h"
#include "mk/Safetensors.h" // HostTensor, TensorMap

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace mk {

/// The decode state carried across steps: the tensors of
/// stateTensors(cfg, ctxLen) by name. MLA caches hold exactly ctxLen rows;
/// oracleStep appends one row to each and increments ctxLen.
struct DecodeState {
  TensorMap tensors;
  int64_t ctxLen = 0;
};

/// Intermediates of one step, by the capture names of docs/kernel-abi.md
/// ("layer<i>.q", ...), every value as float (bf16 values exactly,
/// topk_idx as the index). See docs/oracle.md for which are rounded.
struct OracleTrace {
  std::map<std::string, std::vector<float>> values;
};

/// Deterministic test data (see TestData.h for the generator). Weights follow
/// the spec's distributions: quantized linears from N(0, 0.02) quantized per
/// the spec, bf16 linears N(0, 0.02), conv_w N(0, 0.1), norms ones.
TensorMap makeRandomWeights(const BlockConfig &cfg, uint64_t seed);
/// S ~ N(0, 0.05^2) f32; conv windows and caches N(0, 0.1^2) bf16; caches hold
/// ctxLen rows (row l is the same for every ctxLen > l).
DecodeState makeRandomState(const BlockConfig &cfg, int64_t ctxLen,
                            uint64_t seed);
/// A token N(0, 0.25^2) in bf16.
std::vector<BFloat16> makeRandomHidden(const BlockConfig &cfg, uint64_t seed);

/// Quantizes a float weight `w` [in, out] (row-major) per the spec: groups of
/// `group` input rows per column, lo/hi/scale/zero in fp32, round half to even.
/// Writes wq [in/2, out], scales and zeros [in/group, out].
void quantizeW4A16(const float *w, int64_t in, int64_t out, int64_t group,
                   uint8_t *wq, BFloat16 *scales, BFloat16 *zeros);

/// Options of oracleStep. `forcedExperts[layer]`, when present, replaces that
/// layer's top-k choice by the given expert indices (weights are their softmax
/// probabilities, normalized as usual): the step a device computes when it
/// breaks a near tie of the router differently (see nearTieRoutings).
struct OracleOptions {
  std::map<int64_t, std::vector<int32_t>> forcedExperts;
  /// The W4A16 linears and experts without the spec's per-weight bf16
  /// rounding (QuantWeight::roundWeights): the arithmetic of the kernel's
  /// packed tiles under `arithmetic=scaled` / `folded`, up to summation
  /// order. Not the spec: for measuring what that arithmetic moves.
  bool unroundedWeights = false;
};

/// One decode step with the spec's semantics (materialized MLA). `weights`
/// must hold parameterTensors(cfg) and `state` stateTensors(cfg, ctxLen)
/// (abort with a message naming the tensor otherwise); the state is updated in
/// place. Returns the output hidden. If `trace` is given, fills it.
std::vector<BFloat16> oracleStep(const BlockConfig &cfg,
                                 const TensorMap &weights, DecodeState &state,
                                 const std::vector<BFloat16> &hidden,
                                 OracleTrace *trace = nullptr,
                                 const OracleOptions *options = nullptr);

/// The whole model's step (cfg.vocab > 0): the bf16 logits [vocab] and the
/// next token, their argmax (the first index of the largest; -0 equals +0,
/// a NaN is never chosen, all NaN gives -1).
struct ModelStepResult {
  std::vector<BFloat16> logits;
  int64_t next = 0;
};
/// One step of the whole model from token id `token` (0 <= token < vocab,
/// else abort naming it): its row of `embed.weight` through oracleStep's
/// layers (state updated as there), then the final norm (`final_norm`, the
/// family's norm arithmetic), the LM head (`lm_head` W4A16 or
/// `lm_head.weight` bf16, one rounding) and the argmax. The trace adds
/// "final_norm" and "logits" (no layer prefix).
ModelStepResult oracleModelStep(const BlockConfig &cfg, const TensorMap &weights,
                                DecodeState &state, int64_t token,
                                OracleTrace *trace = nullptr,
                                const OracleOptions *options = nullptr);
/// The head of oracleModelStep alone, on the last layer's output `hidden`
/// (cfg.hidden values): the final norm, the LM head and the argmax; the
/// trace adds "final_norm" and "logits". What a per-layer comparison of a
/// whole model needs after its layers: the head from the device's own input.
ModelStepResult oracleModelHead(const BlockConfig &cfg, const TensorMap &weights,
                                const std::vector<BFloat16> &hidden,
                                OracleTrace *trace = nullptr,
                                const OracleOptions *options = nullptr);
/// Layer `layer` alone of oracleStep, on its input hidden `input` (the
/// previous layer's output, or the step's input for layer 0): updates that
/// layer's state at position state.ctxLen (which it leaves as it is; the
/// step's other layers' state is untouched) and returns the layer's output.
/// The trace holds that layer's values. What a per-layer comparison needs:
/// each layer of a device's step checked from the device's own input to it,
/// so that rounding differences do not compound through a deep stack.
std::vector<BFloat16> oracleLayerStep(const BlockConfig &cfg, const TensorMap &weights,
                                      DecodeState &state, int64_t layer,
                                      const std::vector<BFloat16> &input,
                                      OracleTrace *trace = nullptr,
                                      const OracleOptions *options = nullptr);

/// The near-tie window of the spec's arithmetic, in bf16 ulps of a router's
/// decision (its k-th logit or selection score): two values that close are
/// a tie up to summation order.
inline constexpr int kSpecTieUlps = 2;
/// The window for a kernel declaring unrounded weights (a manifest's
/// `packed_arithmetic` "scaled" or "folded"), whose ties are also measured
/// on that arithmetic (the declared trace below, which takes the up to 4.5
/// ulps its logits move from the spec's). The kernel still differs from that
/// trace by its summation order (split-K atomics in no fixed order) and the
/// fold's cancellation: a choice 3.00 ulps apart under both arithmetics
/// flipped on the GPU (perf notes #169, #192), so the window is that
/// observed gap with a margin. A routing inside it is still accepted only
/// where the oracle with it agrees.
inline constexpr int kDeclaredTieUlps = 5;
/// The window for a kernel whose manifest declares `packedArithmetic`.
inline int tieWindowUlps(const std::string &packedArithmetic) {
  return packedArithmetic == "exact" ? kSpecTieUlps : kDeclaredTieUlps;
}

/// The routings a correct implementation may legitimately pick instead of the
/// oracle's: for every layer of `trace` (a traced oracleStep) whose k-th and
/// (k+1)-th router logits are within `ulps` bf16 ulps of each other, the
/// expert set with those two swapped. Logits are rounded to bf16, so two
/// experts that close are a tie up to summation order: a kernel that sums in
/// another order can land on either side. Empty when no layer is that close.
std::vector<OracleOptions> nearTieRoutings(const BlockConfig &cfg,
                                           const OracleTrace &trace, int ulps = kSpecTieUlps);

/// The routings a kernel declaring another arithmetic than the spec's may
/// legitimately pick (a manifest's `packed_arithmetic` "scaled" or
/// "folded": unrounded weights): nearTieRoutings of the spec's `trace`, and
/// of `declared`, the same step's trace under that arithmetic (oracleStep
/// with OracleOptions::unroundedWeights and the same forced experts); and,
/// where `declared` routes a layer otherwise than `trace`, its routing. A
/// tie is measured on the arithmetic that computes the logits: an
/// arithmetic that moves them by a few ulps moves its ties too, and the
/// spec's trace alone would take a choice that arithmetic makes 1 ulp apart
/// for a real disagreement. One option per layer and routing, in layer
/// order, the spec's first.
std::vector<OracleOptions> nearTieRoutings(const BlockConfig &cfg, const OracleTrace &trace,
                                           const OracleTrace &declared,
                                           int ulps = kSpecTieUlps);

/// The same step's routers under the arithmetic a kernel declares
/// (OracleOptions::unroundedWeights), each measured on the spec's path: the
/// `declared` trace nearTieRoutings compares `trace` with. `step` reruns the
/// step of `trace` (oracleStep, oracleModelStep or oracleLayerStep, from the
/// same state and input) under the options it is given and returns its
/// trace; `followed` are the options `trace` was computed under (routings a
/// caller has already forced). A declared step that routes layer l otherwise
/// than the spec leaves the spec's path above l, so every router layer's
/// values come from a step that follows `trace`'s routing below that layer:
/// one step, and one more per layer where the declared routing differs.
OracleTrace declaredRouterTrace(const BlockConfig &cfg, const OracleTrace &trace,
                                const OracleOptions &followed,
                                const std::function<OracleTrace(const OracleOptions &)> &step);

/// The routings a kernel whose manifest declares `packedArithmetic` may take
/// instead of the oracle's, whose traced step is `trace` (under
/// `followed`): the spec's near ties, and for a declared unrounded
/// arithmetic ("scaled", "folded") that arithmetic's ties and routing too,
/// its trace measured by declaredRouterTrace with `step` (run only then,
/// and left in `*declaredOut` where given). Ties within `ulps` bf16 ulps
/// (< 0: tieWindowUlps(packedArithmetic)).
std::vector<OracleOptions>
kernelTieRoutings(const BlockConfig &cfg, const OracleTrace &trace,
                  const std::string &packedArithmetic, const OracleOptions &followed,
                  const std::function<OracleTrace(const OracleOptions &)> &step,
                  OracleTrace *declaredOut = nullptr, int ulps = -1);

/// How far apart router `layer` of `trace` had its k-th and (k+1)-th
/// experts: the weakest chosen one's lead over the strongest left out, in
/// bf16 ulps of the larger (what nearTieRoutings compares with `ulps`); -1
/// where the trace has no router there.
double routerGapUlps(const BlockConfig &cfg, const OracleTrace &trace, int64_t layer);

/// Cosine similarity, accumulated in double. Two all-zero vectors give 1,
/// one all-zero vector 0; any non-finite input gives NaN.
double cosineSimilarity(const float *a, const float *b, size_t n);

/// Worker threads the oracle and the generators use: MK_ORACLE_THREADS if set,
/// otherwise std::thread::hardware_concurrency(). Results never depend on it.
unsigned oracleThreads();

} // namespace mk

#endif // MK_ORACLE_H
