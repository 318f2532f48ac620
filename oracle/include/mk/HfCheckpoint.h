//===- HfCheckpoint.h - Hugging Face checkpoints onto a spec's weights -*- C++ -*-===//
//
// A spec takes its weights from a Hugging Face checkpoint: the model's bf16
// linears (`model.layers.<i>.self_attn.q_proj.weight`, stored [out, in])
// become the spec's W4A16 linears (`blocks.<i>.attn.q_proj.{w_q,scales,
// zeros}`, W logically [in, out]) through quantizeW4A16, the other
// parameters are converted to their dtype. The dense GQA family maps a
// Qwen3 checkpoint's layers (its embedding, final norm and `lm_head` are
// left out, listed as unused); the Kimi-Linear family the released
// Kimi-Linear-48B-A3B's (released KDA form): each routed expert's w1 / w3 /
// w2 into its slot of the stacked gate / up / down, the three short-conv
// filters into `conv_w`, `A_log` [1, 1, H, 1] and `dt_bias` as fp32, the
// router's gate and correction bias, and, for a whole model, the
// embedding, final norm and LM head.
//
//===----------------------------------------------------------------------===//

#ifndef MK_HFCHECKPOINT_H
#define MK_HFCHECKPOINT_H

#include "mk/BlockConfig.h"
#include "mk/Safetensors.h"

#include <string>
#include <vector>

namespace mk {

/// The Hugging Face tensor names a parameter of `cfg` (a name of
/// parameterTensors(cfg), or a W4A16 linear's prefix) comes from: one, or
/// one per slot where several fill it (a stacked expert linear's experts,
/// the three filters of a KDA layer's `conv_w`); empty if the name is none
/// of the family's parameters.
std::vector<std::string> hfTensorNames(const BlockConfig &cfg, const std::string &param);
/// The one name of hfTensorNames, or "" (none, or several).
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
