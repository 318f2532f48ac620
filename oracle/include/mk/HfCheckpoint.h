//===- HfCheckpoint.h - Hugging Face checkpoints onto a spec's weights -*- C++ -*-===//
//
// A dense GQA spec (`"family": "dense_gqa"`, Qwen3-style layers) takes its
// weights from a Hugging Face checkpoint: the model's bf16 linears
// (`model.layers.<i>.self_attn.q_proj.weight`, stored [out, in]) become the
// spec's W4A16 linears (`blocks.<i>.attn.q_proj.{w_q,scales,zeros}`, W
// logically [in, out]) through quantizeW4A16, the norms' weights are copied
// as bf16. The embedding, the final norm and `lm_head` are not part of a
// block spec and are left out (listed as unused).
//
//===----------------------------------------------------------------------===//

#ifndef MK_HFCHECKPOINT_H
#define MK_HFCHECKPOINT_H

#include "mk/BlockConfig.h"
#include "mk/Safetensors.h"

#include <string>
#include <vector>

namespace mk {

/// The Hugging Face tensor name a parameter of `cfg` (a name of
/// parameterTensors(cfg), or a W4A16 linear's prefix) comes from; "" if
/// the family has no mapping (only the dense GQA family has one) or the
/// name is none of its parameters.
std::string hfTensorName(const BlockConfig &cfg, const std::string &param);

/// What convertHfCheckpoint found besides the weights.
struct HfConversion {
  /// Checkpoint tensors no parameter of the spec reads (the embedding, the
  /// final norm, lm_head, layers past the spec's).
  std::vector<std::string> unused;
  /// Checkpoint files read.
  std::vector<std::string> files;
};

/// Reads the checkpoint in `dir` (every `*.safetensors` file the
/// `model.safetensors.index.json` names, or every `*.safetensors` file in
/// the directory without an index) and builds parameterTensors(cfg) from
/// it into `out`: W4A16 linears quantized (group `cfg.group`) from the
/// transposed bf16 or f32 weight, bf16 vectors converted, one file at a
/// time (peak host memory: the largest file and the converted weights).
/// Every problem (a family without a mapping, a missing tensor, a wrong
/// shape or dtype, an unreadable file, a tensor in two files) goes to
/// `problems`, by tensor name; returns false if there is any, `out` then
/// unchanged.
bool convertHfCheckpoint(const BlockConfig &cfg, const std::string &dir, TensorMap &out,
                         std::vector<std::string> &problems, HfConversion *info = nullptr);

} // namespace mk

#endif // MK_HFCHECKPOINT_H
