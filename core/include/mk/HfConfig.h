//===- HfConfig.h - Block specs from Hugging Face config.json ----*- C++ -*-===//
//
// Users start from a model's Hugging Face `config.json`. importHfConfig maps
// one onto a block family's BlockConfig (the Kimi-Linear unit family,
// `model_type` "kimi_linear"; the dense GQA family, "qwen3"), key by key:
//
// - keys that name a dimension of the family are mapped (hidden_size ->
//   hidden, linear_attn_config.kda_layers / full_attn_layers -> pattern, ...);
// - a Kimi-Linear config's vocab_size makes the spec a whole model (its
//   `vocab`: embedding, LM head, greedy next token);
// - keys that do not change one decode step (token ids, dtype, ...; a Qwen3
//   config's vocabulary: that family imports the layer stack) are ignored;
// - keys whose value asks for semantics the family does not have (a
//   low-rank query, scaled rotary frequencies, ...; a dense first FFN, the
//   sigmoid router and the MLA without rotation and with the latent norm it
//   does have: dense_layers, router, mla_rotary, mla_latent_norm) are
//   differences: the import fails naming every one of them, unless
//   `asUnit` is set, which takes the model's dimensions into the family
//   anyway and lists each difference as a note;
// - any other key is an error (it might change the model).
//
// docs/spec-format.md ("Importing a Hugging Face config") lists the keys.
//
//===----------------------------------------------------------------------===//

#ifndef MK_HFCONFIG_H
#define MK_HFCONFIG_H

#include "mk/BlockConfig.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mk {

struct HfImportOptions {
  /// Map the dimensions onto the unit family even where the model's
  /// semantics differ; each difference becomes a note instead of an error.
  bool asUnit = false;
  /// Quantization group of the W4A16 projections. 0: the config's
  /// quantization_config.group_size, else the family's default (128).
  int64_t group = 0;
  /// Spec name; "" derives one from model_type and the layer count.
  std::string name;
};

struct HfImport {
  BlockConfig config;
  /// What the import assumed or dropped, one line each.
  std::vector<std::string> notes;
};

/// Maps config.json text. On failure returns false, leaves `out` untouched
/// and sets `error` to one line naming every problem (with "line L, column
/// C" where one key is at fault).
bool importHfConfig(const std::string &text, const HfImportOptions &options, HfImport &out,
                    std::string &error);

/// The same from a file, or from a checkpoint directory's config.json;
/// errors are prefixed with the file's path.
bool importHfConfigFile(const std::string &path, const HfImportOptions &options, HfImport &out,
                        std::string &error);

} // namespace mk

#endif // MK_HFCONFIG_H
