//===- HfConfig.cpp - Block specs from Hugging Face config.json -----------===//

#include "mk/HfConfig.h"

#include "mk/BlockSpec.h"
#include "mk/Json.h"
#include "mk/TextFile.h"

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <functional>
#include <set>
#include <utility>
#include <sys/stat.h>

namespace mk {

namespace {

/// Keys of a config.json that do not change one decode step (token ids,
/// dtypes, ...; a Kimi-Linear config's vocab_size and tie_word_embeddings
/// are read: the whole model's embedding and LM head).
const char *const kIgnoredKeys[] = {
    "architectures",     "auto_map",          "bos_token_id",      "eos_token_id",
    "pad_token_id",      "vocab_size",        "tie_word_embeddings", "dtype",
    "torch_dtype",       "transformers_version", "use_cache",       "initializer_range",
    "model_max_length",  "max_position_embeddings", "_name_or_path", "tokenizer_class",
    "attention_dropout", "return_dict",       "output_attentions", "output_hidden_states",
    // MLA does not group heads; 72 = hidden / heads is a leftover of the
    // generic attention config.
    "num_key_value_heads", "head_dim",
    // Multi-token-prediction heads (speculative decoding) are not part of a
    // step; 0 in the released model.
    "num_nextn_predict_layers"};

bool isIgnored(const std::string &key) {
  return std::any_of(std::begin(kIgnoredKeys), std::end(kIgnoredKeys),
                     [&](const char *k) { return key == k; });
}

/// Reads the config's members, remembering which were used.
class Reader {
public:
  explicit Reader(const json::Value &root) : root(root) {}

  const json::Value *get(const char *key) {
    used.insert(key);
    return root.find(key);
  }
  /// The first of `keys` present (aliases of one key), or nullptr.
  const json::Value *getAny(std::initializer_list<const char *> keys, std::string &which) {
    const json::Value *found = nullptr;
    for (const char *k : keys) {
      used.insert(k);
      if (!found && (found = root.find(k)))
        which = k;
    }
    return found;
  }
  bool isUsed(const std::string &key) const { return used.count(key) != 0; }

  const json::Value &root;
  std::set<std::string> used;
};

std::string describe(const json::Value &v) {
  if (v.isNull())
    return "null";
  if (v.isBool())
    return v.boolean ? "true" : "false";
  if (v.isString())
    return json::quote(v.string);
  if (v.isNumber())
    return v.numberText.empty() ? json::formatNumber(v.number) : v.numberText;
  return json::kindName(v.kind);
}

bool isName(const std::string &s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_';
  });
}

/// The W4A16 quantization group: the families' projections are int4 with a
/// bf16 scale and zero point per group of input rows; the option's group,
/// else quantization_config.group_size (4 bits), else 128 (noted).
int64_t importGroup(Reader &r, const HfImportOptions &options,
                    std::vector<std::string> &problems, std::vector<std::string> &notes) {
  int64_t group = 0;
  if (const json::Value *q = r.get("quantization_config")) {
    int64_t bits = 0;
    const json::Value *b = q->isObject() ? q->find("bits") : nullptr;
    if (!q->isObject())
      problems.push_back(q->where() + ": quantization_config must be an object");
    else if (b && (!b->getInt(bits) || bits != 4))
      problems.push_back(b->where() + ": quantization_config.bits = " + describe(*b) +
                         ": the family's projections are 4-bit (W4A16)");
    else if (const json::Value *g = q->find("group_size"); g && !(g->getInt(group) && group > 0))
      problems.push_back(g->where() + ": quantization_config.group_size must be a positive "
                                      "integer, got " +
                         describe(*g));
  }
  if (options.group > 0 && group > 0 && options.group != group)
    problems.push_back("the group asked for (" + std::to_string(options.group) +
                       ") differs from quantization_config.group_size (" +
                       std::to_string(group) + ")");
  if (options.group == 0 && group == 0)
    notes.push_back("quantization group 128 (the config names none; the family's "
                    "projections are int4 in groups of input rows)");
  return options.group > 0 ? options.group : group > 0 ? group : 128;
}

/// Names the mapped config (the option's name, else `defaultName`) and
/// checks it as a spec file is (dimension bounds, divisibility) into
/// `out.config`.
bool finishImport(BlockConfig cfg, const std::string &defaultName, const HfImportOptions &options,
                  HfImport &out, std::string &error) {
  cfg.name = options.name.empty() ? defaultName : options.name;
  if (!isName(cfg.name)) {
    error = "spec name " + json::quote(cfg.name) + " must be letters, digits and _";
    return false;
  }
  BlockConfig checked;
  std::string why;
  if (!parseBlockSpec(blockConfigToJson(cfg), checked, why)) {
    error = "the mapped spec is not valid: " + why;
    return false;
  }
  out.config = checked;
  return true;
}

/// What every family's importer reads with: the config's members (which
/// were used), the options, and the problems (malformed or inconsistent)
/// and differences (well-formed, not the family's semantics) found.
class ImportBase {
protected:
  ImportBase(const json::Value &root, const HfImportOptions &o) : r(root), options(o) {}

  /// A required positive integer member.
  bool intKey(const json::Value &obj, const char *key, int64_t &out, const char *where) {
    const json::Value *v = obj.find(key);
    if (!v) {
      problems.push_back(std::string("missing ") + where + key);
      return false;
    }
    if (!v->getInt(out) || out < 1) {
      problems.push_back(v->where() + ": " + where + key + " must be a positive integer, got " +
                         describe(*v));
      return false;
    }
    return true;
  }
  bool topInt(const char *key, int64_t &out, int64_t most = INT64_MAX) {
    return topIntAlias({key}, out, 1, most);
  }
  /// A required integer in least..most under any of `keys` (aliases); `out`
  /// is set only when it is one.
  bool topIntAlias(std::initializer_list<const char *> keys, int64_t &out, int64_t least = 1,
                   int64_t most = INT64_MAX) {
    std::string which;
    const json::Value *v = r.getAny(keys, which);
    if (!v) {
      problems.push_back(std::string("missing ") + *keys.begin());
      return false;
    }
    int64_t n = 0;
    if (!v->getInt(n) || n < least || n > most) {
      const std::string rule =
          most != INT64_MAX ? " must be an integer in " + std::to_string(least) + ".." +
                                  std::to_string(most)
          : least == 1      ? std::string(" must be a positive integer")
                            : " must be an integer >= " + std::to_string(least);
      problems.push_back(v->where() + ": " + which + rule + ", got " + describe(*v));
      return false;
    }
    out = n;
    return true;
  }
  bool topReal(const char *key, double &out) {
    const json::Value *v = r.get(key);
    if (!v) {
      problems.push_back(std::string("missing ") + key);
      return false;
    }
    if (!v->isNumber() || !std::isfinite(v->number) || v->number <= 0) {
      problems.push_back(v->where() + ": " + key + " must be a positive number, got " +
                         describe(*v));
      return false;
    }
    out = v->number;
    return true;
  }
  /// A key whose value the unit family can represent only when it equals
  /// `ok` (absent counts as `absentOk`).
  void expect(const char *key, const std::function<bool(const json::Value &)> &ok, bool absentOk,
              const std::string &what) {
    const json::Value *v = r.get(key);
    if (!v ? absentOk : ok(*v))
      return;
    differences.push_back(std::string(key) + " = " + (v ? describe(*v) : "(absent)") + ": " +
                          what);
  }

  Reader r;
  const HfImportOptions &options;
  std::vector<std::string> problems;    // malformed or inconsistent
  std::vector<std::string> differences; // well-formed, not the family's semantics
};

class KimiLinearImport : ImportBase {
public:
  KimiLinearImport(const json::Value &root, const HfImportOptions &o) : ImportBase(root, o) {}

  bool run(HfImport &out, std::string &error);

private:
  bool pattern(const json::Value &lac, int64_t layers, std::vector<LayerKind> &out);
};

bool KimiLinearImport::pattern(const json::Value &lac, int64_t layers,
                               std::vector<LayerKind> &out) {
  std::vector<int> kind(size_t(layers), -1); // 0 KDA, 1 MLA
  bool ok = true;
  for (int k = 0; k < 2; ++k) {
    const char *key = k == 0 ? "kda_layers" : "full_attn_layers";
    const json::Value *list = lac.find(key);
    if (!list || !list->isArray()) {
      problems.push_back(list ? list->where() + ": linear_attn_config." + key +
                                    " must be an array of 1-based layer numbers"
                              : std::string("missing linear_attn_config.") + key);
      ok = false;
      continue;
    }
    for (const json::Value &e : list->array) {
      int64_t n = 0;
      if (!e.getInt(n) || n < 1 || n > layers) {
        problems.push_back(e.where() + ": linear_attn_config." + key + " entry " + describe(e) +
                           " is not a layer number in 1.." + std::to_string(layers) +
                           " (num_hidden_layers)");
        ok = false;
        continue;
      }
      int &slot = kind[size_t(n - 1)];
      if (slot != -1) {
        problems.push_back(e.where() + ": layer " + std::to_string(n) + " is listed " +
                           (slot == k ? "twice in linear_attn_config." + std::string(key)
                                      : "in both kda_layers and full_attn_layers"));
        ok = false;
      }
      slot = k;
    }
  }
  if (!ok)
    return false;
  for (int64_t i = 0; i < layers; ++i)
    if (kind[size_t(i)] == -1) {
      problems.push_back("layer " + std::to_string(i + 1) +
                         " (1-based) is in neither linear_attn_config.kda_layers nor "
                         "full_attn_layers");
      ok = false;
    }
  if (!ok)
    return false;
  out.clear();
  for (int k : kind)
    out.push_back(k == 0 ? LayerKind::KDA : LayerKind::MLA);
  return true;
}

bool KimiLinearImport::run(HfImport &out, std::string &error) {
  BlockConfig cfg;
  topInt("hidden_size", cfg.hidden);
  int64_t layers = 0; // each layer gets a pattern entry
  topInt("num_hidden_layers", layers, BlockConfig::kMaxLayers);
  const json::Value *lac = r.get("linear_attn_config");
  if (lac && lac->isObject()) {
    intKey(*lac, "num_heads", cfg.kdaHeads, "linear_attn_config.");
    intKey(*lac, "head_dim", cfg.kdaHeadDim, "linear_attn_config.");
    intKey(*lac, "short_conv_kernel_size", cfg.shortConv, "linear_attn_config.");
    for (const auto &[k, v] : lac->object)
      if (k != "num_heads" && k != "head_dim" && k != "short_conv_kernel_size" &&
          k != "kda_layers" && k != "full_attn_layers")
        problems.push_back(lac->find(k)->keyWhere() + ": unknown key linear_attn_config." +
                           json::quote(k));
    if (layers > 0)
      pattern(*lac, layers, cfg.pattern);
  } else {
    problems.push_back(lac ? lac->where() + ": linear_attn_config must be an object"
                           : "missing linear_attn_config (the KDA heads and which layers are "
                             "KDA or MLA)");
  }
  topInt("num_attention_heads", cfg.mlaHeads);
  topInt("kv_lora_rank", cfg.kvLora);
  topInt("qk_nope_head_dim", cfg.qkNope);
  topInt("qk_rope_head_dim", cfg.qkRope);
  topInt("v_head_dim", cfg.vHead);
  topReal("rope_theta", cfg.ropeTheta);
  topIntAlias({"num_experts", "n_routed_experts"}, cfg.nExperts);
  topIntAlias({"num_experts_per_token", "num_experts_per_tok"}, cfg.nActive);
  topIntAlias({"num_shared_experts", "n_shared_experts"}, cfg.nShared, 0);
  topInt("moe_intermediate_size", cfg.moeInter);
  topReal("routed_scaling_factor", cfg.routedScaling);
  topReal("rms_norm_eps", cfg.eps);

  cfg.group = importGroup(r, options, problems, out.notes);

  // Its FFNs round as a bf16 model does: every linear output, the silu and
  // the product, each routed expert's output, the routed and shared sums
  // (the family's ffn_rounding "each").
  cfg.ffnRoundEach = true;
  {
    // The whole model: its embedding and LM head (the family's vocab; the
    // W4A16 head's tiles need a multiple of 16), untied.
    const json::Value *v = r.get("vocab_size");
    int64_t n = 0;
    if (v && !(v->getInt(n) && n > 0 && n % 16 == 0))
      problems.push_back(v->where() + ": vocab_size must be a positive multiple of 16, got " +
                         describe(*v));
    else if (v)
      cfg.vocab = n;
    const json::Value *tie = r.get("tie_word_embeddings");
    if (tie && !(tie->isBool() && !tie->boolean))
      differences.push_back("tie_word_embeddings = " + describe(*tie) +
                            ": the LM head is the embedding (the family: a separate lm_head)");
  }
  // Its KDA layers: L2-normalized q and k, the low-rank decay with A_log
  // and dt_bias, the gated output norm (the family's kda_form "released").
  cfg.kdaReleased = true;
  expect("q_lora_rank", [](const json::Value &v) { int64_t n; return v.isNull() || (v.getInt(n) && n == 0); },
         true, "a low-rank query projection (the unit: one q_proj)");
  {
    // The model's MLA: its latent is normalized before it is cached
    // (kv_a_layernorm, part of every kimi_linear MLA layer: the family's
    // mla_latent_norm), and mla_use_nope leaves the rope parts unrotated
    // (the family's mla_rotary = false).
    cfg.mlaLatentNorm = true;
    // Its RMSNorms round twice (the family's rmsnorm_rounding "twice").
    cfg.normRoundTwice = true;
    const json::Value *nope = r.get("mla_use_nope");
    if (nope && nope->isBool())
      cfg.mlaRotary = !nope->boolean;
    else if (nope)
      differences.push_back("mla_use_nope = " + describe(*nope) +
                            ": not a boolean (the family: mla_rotary true or false)");
  }
  expect("rope_scaling", [](const json::Value &v) { return v.isNull(); }, true,
         "scaled rotary frequencies (the unit: plain RoPE)");
  {
    // The first layers' dense SwiGLU FFN: the family's dense_layers and
    // dense_inter (its arithmetic is the shared expert's, fp32 sums rounded
    // once: the model's per-linear bf16 rounding is in the difference above).
    const json::Value *fk = r.get("first_k_dense_replace");
    const json::Value *is = r.get("intermediate_size");
    int64_t k = 0, inter = 0;
    if (fk && !(fk->getInt(k) && k >= 0))
      problems.push_back(fk->where() + ": first_k_dense_replace must be an integer >= 0, got " +
                         describe(*fk));
    else if (!cfg.pattern.empty() && k > int64_t(cfg.pattern.size()))
      problems.push_back(fk->where() + ": first_k_dense_replace = " + std::to_string(k) +
                         " exceeds the " + std::to_string(cfg.pattern.size()) + " layers");
    else if (k > 0 && !(is && is->getInt(inter) && inter > 0))
      problems.push_back("first_k_dense_replace = " + std::to_string(k) +
                         " needs intermediate_size, the dense FFN's width (a positive integer)");
    else if (k > 0) {
      cfg.denseLayers = k;
      cfg.denseInter = inter;
    }
  }
  expect("moe_layer_freq", [](const json::Value &v) { int64_t n; return v.getInt(n) && n == 1; },
         true, "an MoE only every few layers (the unit: every layer)");
  {
    // The router: the unit's softmax, or the released model's sigmoid
    // scores over fp32 logits with the correction bias choosing (the
    // family's `router`).
    const json::Value *f = r.get("moe_router_activation_func");
    if (f && f->isString() && f->string == "sigmoid")
      cfg.router = RouterKind::Sigmoid;
    else if (f && !(f->isString() && f->string == "softmax"))
      differences.push_back("moe_router_activation_func = " + describe(*f) +
                            ": the router scores experts this way (the family: \"softmax\" "
                            "or \"sigmoid\" with a correction bias)");
  }
  expect("moe_renormalize", [](const json::Value &v) { return v.isBool() && v.boolean; }, true,
         "the chosen experts' weights are not renormalized (the unit renormalizes them)");
  expect("hidden_act", [](const json::Value &v) { return v.isString() && v.string == "silu"; },
         true, "another activation in the experts (the unit: silu)");
  {
    // Grouped top-k with one group (or off) selects as plain top-k does.
    const json::Value *use = r.get("use_grouped_topk");
    const json::Value *ng = r.get("num_expert_group");
    const json::Value *tg = r.get("topk_group");
    int64_t a = 1, b = 1;
    bool grouped = use && use->isBool() && use->boolean;
    bool oneGroup = (!ng || (ng->getInt(a) && a == 1)) && (!tg || (tg->getInt(b) && b == 1));
    if (use && !use->isBool())
      problems.push_back(use->where() + ": use_grouped_topk must be true or false");
    else if (grouped && !oneGroup)
      differences.push_back("use_grouped_topk with num_expert_group = " +
                            (ng ? describe(*ng) : std::string("(absent)")) + ", topk_group = " +
                            (tg ? describe(*tg) : std::string("(absent)")) +
                            ": experts chosen within groups (the unit: plain top-k)");
  }
  r.used.insert("model_type");

  for (const auto &[k, v] : r.root.object)
    if (!r.isUsed(k) && !isIgnored(k))
      problems.push_back(r.root.find(k)->keyWhere() + ": unknown key " + json::quote(k) +
                         " (not a Kimi-Linear config key this importer knows; it might change "
                         "the model)");

  auto join = [](const std::vector<std::string> &v) {
    std::string s;
    for (const std::string &x : v)
      s += (s.empty() ? "" : "; ") + x;
    return s;
  };
  if (!problems.empty()) {
    error = join(problems);
    return false;
  }
  if (!differences.empty() && !options.asUnit) {
    error = "cannot map to the Kimi-Linear unit family without changing what the model "
            "computes: " +
            join(differences) +
            ". The unit family with this model's dimensions: import with --hf-as-unit "
            "(Python: as_unit=True)";
    return false;
  }
  for (const std::string &d : differences)
    out.notes.push_back("not represented: " + d);

  return finishImport(cfg, "kimi_linear_" + std::to_string(layers) + "l", options, out, error);
}

/// A Qwen3 dense decoder config (model_type "qwen3") onto the dense GQA
/// family: every layer GQA attention with per-head q / k norms and a dense
/// SwiGLU FFN (docs/semantics-dense-gqa.md).
class Qwen3Import : ImportBase {
public:
  Qwen3Import(const json::Value &root, const HfImportOptions &o) : ImportBase(root, o) {}

  bool run(HfImport &out, std::string &error) {
    BlockConfig cfg;
    cfg.family = BlockFamily::DenseGqa;
    topInt("hidden_size", cfg.hidden);
    int64_t layers = 0; // each layer gets a pattern entry
    topInt("num_hidden_layers", layers, BlockConfig::kMaxLayers);
    topInt("num_attention_heads", cfg.gqaHeads);
    topInt("num_key_value_heads", cfg.gqaKvHeads);
    topInt("head_dim", cfg.gqaHeadDim);
    topInt("intermediate_size", cfg.denseInter);
    topReal("rope_theta", cfg.ropeTheta);
    topReal("rms_norm_eps", cfg.eps);
    // What the family computes only with these values.
    expect("hidden_act", [](const json::Value &v) { return v.isString() && v.string == "silu"; },
           true, "the FFN's activation (the family: SwiGLU with silu)");
    expect("attention_bias", [](const json::Value &v) { return v.isBool() && !v.boolean; }, true,
           "biases on the q / k / v / o projections (the family has none)");
    expect("rope_scaling", [](const json::Value &v) { return v.isNull(); }, true,
           "scaled RoPE (the family: plain rotate-half RoPE)");
    expect("use_sliding_window", [](const json::Value &v) { return v.isBool() && !v.boolean; },
           true, "sliding-window attention (the family attends to every cached row)");
    r.get("sliding_window");     // read only with use_sliding_window
    r.get("max_window_layers");  // idem
    cfg.group = importGroup(r, options, problems, notes);
    r.used.insert("model_type");
    for (const auto &[k, v] : r.root.object)
      if (!r.isUsed(k) && !isIgnored(k))
        problems.push_back(r.root.find(k)->keyWhere() + ": unknown key " + json::quote(k) +
                           " (not a Qwen3 config key this importer knows; it might change the "
                           "model)");
    std::string sep;
    if (!problems.empty()) {
      for (const std::string &p : problems)
        error += std::exchange(sep, "; ") + p;
      return false;
    }
    if (!differences.empty() && !options.asUnit) {
      error = "cannot map to the dense GQA family without changing what the model computes: ";
      for (const std::string &d : differences)
        error += std::exchange(sep, "; ") + d;
      error += ". The family with this model's dimensions: import with --hf-as-unit "
               "(Python: as_unit=True)";
      return false;
    }
    out.notes = notes;
    for (const std::string &d : differences)
      out.notes.push_back("not represented: " + d);
    if (layers > 0) {
      cfg.pattern.assign(size_t(layers), LayerKind::GQA);
      cfg.denseLayers = layers;
    }
    return finishImport(cfg, "qwen3_" + std::to_string(layers) + "l", options, out, error);
  }

private:
  std::vector<std::string> notes;
};

} // namespace

bool importHfConfig(const std::string &text, const HfImportOptions &options, HfImport &out,
                    std::string &error) {
  json::Value root;
  if (!json::parse(text, root, error))
    return false;
  if (!root.isObject()) {
    error = root.where() + ": a config.json is an object";
    return false;
  }
  const json::Value *type = root.find("model_type");
  if (!type || !type->isString()) {
    error = type ? type->where() + ": model_type must be a string"
                 : "missing model_type (which model family the config describes)";
    return false;
  }
  HfImport result;
  if (type->string == "kimi_linear") {
    if (!KimiLinearImport(root, options).run(result, error))
      return false;
    out = std::move(result);
    return true;
  }
  if (type->string == "qwen3") {
    if (!Qwen3Import(root, options).run(result, error))
      return false;
    out = std::move(result);
    return true;
  }
  if (type->string == "qwen2" || type->string == "llama" || type->string == "mistral")
    error = type->where() + ": model_type " + json::quote(type->string) +
            " is a dense GQA decoder without the per-head q / k norms of this compiler's "
            "dense family (docs/semantics-dense-gqa.md); known: kimi_linear, qwen3";
  else
    error = type->where() + ": model_type " + json::quote(type->string) +
            " is not a family this compiler knows (known: kimi_linear, qwen3)";
  return false;
}

bool importHfConfigFile(const std::string &path, const HfImportOptions &options, HfImport &out,
                        std::string &error) {
  // A checkpoint directory names its config.json.
  std::string file = path;
  if (struct stat st; ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    file = path + (path.empty() || path.back() != '/' ? "/" : "") + "config.json";
  std::string text;
  if (!readTextFile(file, text, error))
    return false;
  std::string why;
  if (!importHfConfig(text, options, out, why)) {
    error = file + ": " + why;
    return false;
  }
  return true;
}

} // namespace mk
