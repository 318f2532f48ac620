//===- BlockSpec.cpp - Block spec files (JSON) <-> BlockConfig -------------===//

#include "mk/BlockSpec.h"

#include "mk/TextFile.h"

#include <cmath>
#include <cstring>

namespace mk {

namespace {

// Guards the tensor-size arithmetic (products of a few dims) against overflow.
constexpr int64_t kMaxDim = int64_t(1) << 24;

struct IntKey {
  const char *name;
  int64_t BlockConfig::*field;
  bool required = true;
};
struct RealKey {
  const char *name;
  double BlockConfig::*field;
  bool required;
};

const IntKey kIntKeys[] = {
    {"hidden", &BlockConfig::hidden},
    {"kda_heads", &BlockConfig::kdaHeads},
    {"kda_head_dim", &BlockConfig::kdaHeadDim},
    {"short_conv", &BlockConfig::shortConv},
    {"mla_heads", &BlockConfig::mlaHeads},
    {"kv_lora", &BlockConfig::kvLora},
    {"qk_nope", &BlockConfig::qkNope},
    {"qk_rope", &BlockConfig::qkRope},
    {"v_head", &BlockConfig::vHead},
    {"n_experts", &BlockConfig::nExperts},
    {"n_active", &BlockConfig::nActive},
    {"n_shared", &BlockConfig::nShared},
    {"moe_inter", &BlockConfig::moeInter},
    {"group", &BlockConfig::group},
    // Optional: leading layers with a dense SwiGLU FFN instead of the MoE.
    {"dense_layers", &BlockConfig::denseLayers, false},
    {"dense_inter", &BlockConfig::denseInter, false},
    // Optional: the sizes of GQA layers ("G" in the pattern).
    {"gqa_heads", &BlockConfig::gqaHeads, false},
    {"gqa_kv_heads", &BlockConfig::gqaKvHeads, false},
    {"gqa_head_dim", &BlockConfig::gqaHeadDim, false},
    // Optional: the whole model's vocabulary (embedding, LM head, argmax).
    {"vocab", &BlockConfig::vocab, false},
};
const RealKey kRealKeys[] = {
    {"rope_theta", &BlockConfig::ropeTheta, true},
    {"routed_scaling", &BlockConfig::routedScaling, true},
    {"eps", &BlockConfig::eps, false},
};

// The order keys are written in (and listed in error messages).
const char *const kConfigOrder[] = {
    "hidden",   "kda_heads", "kda_head_dim",   "short_conv", "mla_heads",
    "kv_lora",  "qk_nope",   "qk_rope",        "v_head",     "rope_theta",
    "n_experts", "n_active", "n_shared",       "moe_inter",  "routed_scaling",
    "dense_layers", "dense_inter", "gqa_heads", "gqa_kv_heads", "gqa_head_dim", "group", "eps",
    "vocab"};

// The dense GQA family's config keys (docs/semantics-dense-gqa.md): every
// layer is GQA attention + a dense SwiGLU FFN of width `inter`.
const IntKey kDenseIntKeys[] = {
    {"hidden", &BlockConfig::hidden},       {"heads", &BlockConfig::gqaHeads},
    {"kv_heads", &BlockConfig::gqaKvHeads}, {"head_dim", &BlockConfig::gqaHeadDim},
    {"inter", &BlockConfig::denseInter},    {"group", &BlockConfig::group},
};
const RealKey kDenseRealKeys[] = {
    {"rope_theta", &BlockConfig::ropeTheta, true},
    {"eps", &BlockConfig::eps, false},
};
const char *const kDenseConfigOrder[] = {"hidden", "heads",      "kv_heads", "head_dim", "inter",
                                         "rope_theta", "eps",    "group",    "layers"};
std::string at(const json::Value &v) { return v.where() + ": "; }

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_';
}

template <size_t NI, size_t NR>
bool parseConfigKeys(const json::Value &obj, BlockConfig &cfg, const IntKey (&intKeys)[NI],
                     const RealKey (&realKeys)[NR], bool dense, std::string &error);

bool parseConfig(const json::Value &obj, BlockConfig &cfg, std::string &error) {
  return parseConfigKeys(obj, cfg, kIntKeys, kRealKeys, false, error);
}

template <size_t NI, size_t NR>
bool parseConfigKeys(const json::Value &obj, BlockConfig &cfg, const IntKey (&intKeys)[NI],
                     const RealKey (&realKeys)[NR], bool dense, std::string &error) {
  if (!obj.isObject()) {
    error = at(obj) + "'config' must be an object, got " +
            json::kindName(obj.kind);
    return false;
  }
  for (const auto &kv : obj.object) {
    const std::string &key = kv.first;
    const json::Value &v = kv.second;
    bool known = false;
    // The dense family's layer count: the pattern it stands for.
    int64_t layers = 0;
    int64_t *intField = nullptr;
    if (dense && key == "layers")
      intField = &layers;
    for (const IntKey &k : intKeys)
      if (key == k.name)
        intField = &(cfg.*k.field);
    if (intField) {
      known = true;
      int64_t i;
      if (!v.isNumber()) {
        error = at(v) + "config key '" + key + "' must be an integer, got " +
                json::kindName(v.kind);
        return false;
      }
      if (!v.getInt(i)) {
        error = at(v) + "config key '" + key +
                "' must be an integer, got " + v.numberText;
        return false;
      }
      if (i > kMaxDim) {
        error = at(v) + "config key '" + key + "' is too large (" +
                std::to_string(i) + " > " + std::to_string(kMaxDim) + ")";
        return false;
      }
      *intField = i;
      if (dense && key == "layers") {
        // More layers than this is a typo, not a model (the tensor
        // catalogue is built per layer).
        if (i < 1 || i > BlockConfig::kMaxLayers) {
          error = at(v) + "config key 'layers' must be in 1.." +
                  std::to_string(BlockConfig::kMaxLayers) + ", got " + std::to_string(i);
          return false;
        }
        cfg.pattern.assign(size_t(i), LayerKind::GQA);
        cfg.denseLayers = i;
      }
    }
    for (const RealKey &k : realKeys) {
      if (key != k.name)
        continue;
      known = true;
      if (!v.isNumber()) {
        error = at(v) + "config key '" + key + "' must be a number, got " +
                json::kindName(v.kind);
        return false;
      }
      cfg.*k.field = v.number;
    }
    // Two-valued string keys: whether the value is the second (the
    // released model's) choice.
    auto choice = [&](const char *first, const char *second, bool &isSecond) {
      known = true;
      if (!v.isString() || (v.string != first && v.string != second)) {
        error = at(v) + "config key '" + key + "' must be " + json::quote(first) + " or " +
                json::quote(second) + ", got " +
                (v.isString() ? json::quote(v.string) : std::string(json::kindName(v.kind)));
        return false;
      }
      isSecond = v.string == second;
      return true;
    };
    if (!dense && key == "router") {
      bool sigmoid = false;
      if (!choice("softmax", "sigmoid", sigmoid))
        return false;
      cfg.router = sigmoid ? RouterKind::Sigmoid : RouterKind::Softmax;
    }
    if (!dense && key == "rmsnorm_rounding" && !choice("once", "twice", cfg.normRoundTwice))
      return false;
    if (!dense && key == "kda_form" && !choice("unit", "released", cfg.kdaReleased))
      return false;
    if (!dense && key == "ffn_rounding" && !choice("once", "each", cfg.ffnRoundEach))
      return false;
    if (!dense && key == "lm_head" && !choice("w4a16", "bf16", cfg.lmHeadBf16))
      return false;
    // The MLA layers' form: rotation (mla_rotary, default true) and the
    // latent's norm (mla_latent_norm, default false).
    for (auto [name, field] : {std::pair<const char *, bool BlockConfig::*>{
                                   "mla_rotary", &BlockConfig::mlaRotary},
                               {"mla_latent_norm", &BlockConfig::mlaLatentNorm}}) {
      if (dense || key != name)
        continue;
      known = true;
      if (!v.isBool()) {
        error = at(v) + "config key '" + key + "' must be true or false, got " +
                json::kindName(v.kind);
        return false;
      }
      cfg.*field = v.boolean;
    }
    if (!known) {
      error = v.keyWhere() + ": unknown config key '" + key + "'";
      return false;
    }
  }
  for (const IntKey &k : intKeys)
    if (k.required && !obj.find(k.name)) {
      error = at(obj) + "config is missing required key '" + k.name + "'";
      return false;
    }
  if (dense && !obj.find("layers")) {
    error = at(obj) + "config is missing required key 'layers'";
    return false;
  }
  for (const RealKey &k : realKeys)
    if (k.required && !obj.find(k.name)) {
      error = at(obj) + "config is missing required key '" + k.name + "'";
      return false;
    }
  return true;
}

bool parsePattern(const json::Value &arr, BlockConfig &cfg,
                  std::string &error) {
  if (!arr.isArray()) {
    error = at(arr) + "'pattern' must be an array of \"K\"/\"M\"/\"G\", got " +
            json::kindName(arr.kind);
    return false;
  }
  cfg.pattern.clear();
  for (const json::Value &e : arr.array) {
    if (!e.isString()) {
      error = at(e) + "pattern entries must be strings (\"K\", \"kda\", "
                      "\"M\", \"mla\", \"G\" or \"gqa\"), got " +
              json::kindName(e.kind);
      return false;
    }
    if (e.string == "K" || e.string == "kda") {
      cfg.pattern.push_back(LayerKind::KDA);
    } else if (e.string == "G" || e.string == "gqa") {
      cfg.pattern.push_back(LayerKind::GQA);
    } else if (e.string == "M" || e.string == "mla") {
      cfg.pattern.push_back(LayerKind::MLA);
    } else {
      error = at(e) + "unknown layer kind " + json::quote(e.string) +
              " in 'pattern' (expected \"K\", \"kda\", \"M\", \"mla\", \"G\" or \"gqa\")";
      return false;
    }
  }
  return true;
}

} // namespace

bool blockConfigFromJson(const json::Value &v, BlockConfig &out,
                         std::string &error) {
  if (!v.isObject()) {
    error = at(v) + "a block spec must be a JSON object, got " +
            json::kindName(v.kind);
    return false;
  }
  BlockConfig cfg;
  // The family decides how `config` reads, so it is read first.
  if (const json::Value *f = v.find("family")) {
    if (!f->isString() || (f->string != "kimi_linear" && f->string != "dense_gqa")) {
      error = at(*f) + "'family' must be \"kimi_linear\" or \"dense_gqa\", got " +
              (f->isString() ? json::quote(f->string) : std::string(json::kindName(f->kind)));
      return false;
    }
    cfg.family = f->string == "dense_gqa" ? BlockFamily::DenseGqa : BlockFamily::KimiLinear;
  }
  const bool dense = cfg.family == BlockFamily::DenseGqa;
  if (dense) {
    cfg.name = "dense_gqa_w4a16";
    cfg.ropeTheta = 1000000.0;
  }
  for (const auto &kv : v.object) {
    const std::string &key = kv.first;
    if (key == "family")
      continue;
    if (key == "name") {
      const json::Value &n = kv.second;
      if (!n.isString()) {
        error = at(n) + "'name' must be a string, got " +
                json::kindName(n.kind);
        return false;
      }
      bool ok = !n.string.empty();
      for (char c : n.string)
        ok = ok && isNameChar(c);
      if (!ok) {
        error = at(n) + "'name' must be non-empty and use only letters, "
                        "digits and '_' (it names the kernel), got " +
                json::quote(n.string);
        return false;
      }
      cfg.name = n.string;
    } else if (key == "config") {
      if (dense ? !parseConfigKeys(kv.second, cfg, kDenseIntKeys, kDenseRealKeys, true, error)
                : !parseConfig(kv.second, cfg, error))
        return false;
    } else if (key == "pattern" && !dense) {
      if (!parsePattern(kv.second, cfg, error))
        return false;
    } else {
      error = kv.second.keyWhere() + ": unknown key '" + key + "' (expected 'name', " +
              (dense ? "'family', 'config'; a dense_gqa spec has no 'pattern', its config "
                       "has 'layers')"
                     : "'family', 'config', 'pattern')");
      return false;
    }
  }
  for (const char *k : {"name", "config", "pattern"})
    if (!v.find(k) && !(dense && std::strcmp(k, "pattern") == 0)) {
      error = at(v) + "block spec is missing required key '" + k + "'";
      return false;
    }
  std::string problem = cfg.validate();
  if (!problem.empty()) {
    error = "invalid block spec: " + problem;
    return false;
  }
  out = cfg;
  return true;
}

bool parseBlockSpec(const std::string &text, BlockConfig &cfg,
                    std::string &error) {
  json::Value v;
  if (!json::parse(text, v, error))
    return false;
  return blockConfigFromJson(v, cfg, error);
}

bool loadBlockSpecFile(const std::string &path, BlockConfig &cfg,
                       std::string &error) {
  std::string text;
  if (!readTextFile(path, text, error))
    return false;
  std::string why;
  if (!parseBlockSpec(text, cfg, why)) {
    error = path + ": " + why;
    return false;
  }
  return true;
}

json::Value blockConfigToJsonValue(const BlockConfig &cfg) {
  json::Value root = json::Value::makeObject();
  root.set("name", json::Value::fromString(cfg.name));
  if (cfg.family == BlockFamily::DenseGqa) {
    root.set("family", json::Value::fromString("dense_gqa"));
    json::Value conf = json::Value::makeObject();
    for (const char *key : kDenseConfigOrder) {
      for (const IntKey &k : kDenseIntKeys)
        if (std::strcmp(key, k.name) == 0)
          conf.set(key, json::Value::fromInt(cfg.*k.field));
      for (const RealKey &k : kDenseRealKeys)
        if (std::strcmp(key, k.name) == 0)
          conf.set(key, json::Value::fromNumber(cfg.*k.field));
      if (std::strcmp(key, "layers") == 0)
        conf.set(key, json::Value::fromInt(int64_t(cfg.pattern.size())));
    }
    root.set("config", std::move(conf));
    return root;
  }
  json::Value conf = json::Value::makeObject();
  for (const char *key : kConfigOrder) {
    for (const IntKey &k : kIntKeys)
      // The optional dense-FFN keys only where a layer has one (a spec
      // without them reads and writes as before).
      if (std::strcmp(key, k.name) == 0 &&
          (k.required ||
           (std::strncmp(key, "gqa_", 4) == 0 ? cfg.hasLayer(LayerKind::GQA)
            : std::strcmp(key, "vocab") == 0  ? cfg.vocab > 0
                                              : cfg.denseLayers > 0)))
        conf.set(key, json::Value::fromInt(cfg.*k.field));
    if (std::strcmp(key, "vocab") == 0 && cfg.lmHeadBf16)
      conf.set("lm_head", json::Value::fromString("bf16"));
    for (const RealKey &k : kRealKeys)
      if (std::strcmp(key, k.name) == 0)
        conf.set(key, json::Value::fromNumber(cfg.*k.field));
    // The router kind only where it is not the unit's softmax.
    if (std::strcmp(key, "routed_scaling") == 0 && cfg.router == RouterKind::Sigmoid)
      conf.set("router", json::Value::fromString("sigmoid"));
    if (std::strcmp(key, "eps") == 0 && cfg.normRoundTwice)
      conf.set("rmsnorm_rounding", json::Value::fromString("twice"));
    if (std::strcmp(key, "moe_inter") == 0 && cfg.ffnRoundEach)
      conf.set("ffn_rounding", json::Value::fromString("each"));
    // The KDA form only where it is not the unit's.
    if (std::strcmp(key, "short_conv") == 0 && cfg.kdaReleased)
      conf.set("kda_form", json::Value::fromString("released"));
    // The MLA form only where it is not the unit's.
    if (std::strcmp(key, "v_head") == 0) {
      if (!cfg.mlaRotary)
        conf.set("mla_rotary", json::Value::fromBool(false));
      if (cfg.mlaLatentNorm)
        conf.set("mla_latent_norm", json::Value::fromBool(true));
    }
  }
  root.set("config", std::move(conf));
  json::Value pat = json::Value::makeArray();
  for (LayerKind k : cfg.pattern)
    pat.push(json::Value::fromString(k == LayerKind::KDA ? "K" : k == LayerKind::MLA ? "M" : "G"));
  root.set("pattern", std::move(pat));
  return root;
}

std::string blockConfigToJson(const BlockConfig &cfg) {
  return json::write(blockConfigToJsonValue(cfg), 2) + "\n";
}

} // namespace mk
