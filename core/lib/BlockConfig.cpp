//===- BlockConfig.cpp - Configuration of a decode block ------------------===//

#include "mk/BlockConfig.h"

#include <sstream>
#include <unordered_map>

namespace mk {

const char *dtypeName(DType t) {
  switch (t) {
  case DType::U8:
    return "u8";
  case DType::BF16:
    return "bf16";
  case DType::F32:
    return "f32";
  case DType::I32:
    return "i32";
  }
  return "?";
}

int64_t dtypeBytes(DType t) {
  switch (t) {
  case DType::U8:
    return 1;
  case DType::BF16:
    return 2;
  case DType::F32:
  case DType::I32:
    return 4;
  }
  return 0;
}

bool parseDType(const std::string &s, DType &out) {
  for (DType t : {DType::U8, DType::BF16, DType::F32, DType::I32})
    if (s == dtypeName(t)) {
      out = t;
      return true;
    }
  return false;
}

int64_t TensorDesc::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string layerPrefix(int64_t layer) {
  return "blocks." + std::to_string(layer);
}
std::string statePrefix(int64_t layer) {
  return "state." + std::to_string(layer);
}

bool BlockConfig::hasLayer(LayerKind k) const {
  for (LayerKind l : pattern)
    if (l == k)
      return true;
  return false;
}

std::string BlockConfig::validate() const {
  std::ostringstream os;
  auto positive = [&](const char *n, int64_t v) {
    if (v <= 0 && os.str().empty())
      os << "'" << n << "' must be positive, got " << v;
  };
  positive("hidden", hidden);
  positive("kda_heads", kdaHeads);
  positive("kda_head_dim", kdaHeadDim);
  positive("short_conv", shortConv);
  positive("mla_heads", mlaHeads);
  positive("kv_lora", kvLora);
  positive("qk_nope", qkNope);
  positive("qk_rope", qkRope);
  positive("v_head", vHead);
  positive("n_experts", nExperts);
  positive("n_active", nActive);
  positive("moe_inter", moeInter);
  positive("group", group);
  if (hasLayer(LayerKind::GQA)) {
    positive("heads", gqaHeads);
    positive("kv_heads", gqaKvHeads);
    positive("head_dim", gqaHeadDim);
  }
  if (!os.str().empty())
    return os.str();
  if (hasLayer(LayerKind::GQA)) {
    if (gqaHeads % gqaKvHeads)
      return "'heads' (" + std::to_string(gqaHeads) + ") must be a multiple of 'kv_heads' (" +
             std::to_string(gqaKvHeads) + ")";
    if (gqaHeadDim % 2)
      return "'head_dim' must be even (rotate-half pairs), got " + std::to_string(gqaHeadDim);
  }
  if (nShared < 0)
    return "'n_shared' must be >= 0, got " + std::to_string(nShared);
  if (vocab < 0)
    return "'vocab' must be >= 0, got " + std::to_string(vocab);
  if (lmHeadBf16 && vocab == 0)
    return "'lm_head' needs 'vocab' (a model with an LM head)";

  if (denseLayers < 0)
    return "'dense_layers' must be >= 0, got " + std::to_string(denseLayers);
  if (denseLayers > int64_t(pattern.size()))
    return "'dense_layers' (" + std::to_string(denseLayers) + ") exceeds the " +
           std::to_string(pattern.size()) + " layers of 'pattern'";
  if (denseLayers > 0 && denseInter <= 0)
    return "'dense_inter' must be positive where 'dense_layers' is set, got " +
           std::to_string(denseInter);
  if (shortConv < 2)
    return "'short_conv' must be >= 2 (the window keeps short_conv-1 rows)";
  if (!(ropeTheta > 0))
    return "'rope_theta' must be positive";
  if (!(eps > 0))
    return "'eps' must be positive";
  if (group % 2)
    return "'group' must be even, got " + std::to_string(group);
  if (qkRope % 2)
    return "'qk_rope' must be even (rotary pairs), got " +
           std::to_string(qkRope);
  if (nActive > nExperts)
    return "'n_active' (" + std::to_string(nActive) +
           ") exceeds 'n_experts' (" + std::to_string(nExperts) + ")";
  if (pattern.empty())
    return "'pattern' must list at least one layer";
  if (int64_t(pattern.size()) > kMaxLayers)
    return "'pattern' lists " + std::to_string(pattern.size()) + " layers, at most " +
           std::to_string(kMaxLayers);
  // Every quantized linear's input dim must be a multiple of the group.
  for (const QuantLinearDesc &q : quantLinears(*this))
    if (q.in % group)
      return "input dim " + std::to_string(q.in) + " of '" + q.prefix +
             "' is not divisible by the group size " + std::to_string(group);
  return "";
}

std::vector<QuantLinearDesc> quantLinears(const BlockConfig &c) {
  std::vector<QuantLinearDesc> out;
  const int64_t C = c.kdaChannels();
  for (size_t i = 0; i < c.pattern.size(); ++i) {
    const size_t first = out.size();
    std::string p = layerPrefix(i);
    if (c.pattern[i] == LayerKind::KDA && c.kdaReleased) {
      // The released form: no g_proj; the decay's and the output gate's
      // low-rank pairs (hidden -> head_dim -> C).
      for (const char *n : {"q_proj", "k_proj", "v_proj"})
        out.push_back({p + ".attn." + n, c.hidden, C, 0});
      for (const char *n : {"f_a_proj", "g_a_proj"})
        out.push_back({p + ".attn." + n, c.hidden, c.kdaHeadDim, 0});
      for (const char *n : {"f_b_proj", "g_b_proj"})
        out.push_back({p + ".attn." + n, c.kdaHeadDim, C, 0});
      out.push_back({p + ".attn.o_proj", C, c.hidden, 0});
    } else if (c.pattern[i] == LayerKind::KDA) {
      for (const char *n : {"q_proj", "k_proj", "v_proj", "g_proj"})
        out.push_back({p + ".attn." + n, c.hidden, C, 0});
      out.push_back({p + ".attn.o_proj", C, c.hidden, 0});
    } else if (c.pattern[i] == LayerKind::GQA) {
      const int64_t qd = c.gqaHeads * c.gqaHeadDim, kvd = c.gqaKvHeads * c.gqaHeadDim;
      out.push_back({p + ".attn.q_proj", c.hidden, qd, 0});
      out.push_back({p + ".attn.k_proj", c.hidden, kvd, 0});
      out.push_back({p + ".attn.v_proj", c.hidden, kvd, 0});
      out.push_back({p + ".attn.o_proj", qd, c.hidden, 0});
    } else {
      out.push_back(
          {p + ".attn.q_proj", c.hidden, c.mlaHeads * c.mlaQHeadDim(), 0});
      out.push_back({p + ".attn.kv_a", c.hidden, c.kvLora + c.qkRope, 0});
      out.push_back(
          {p + ".attn.kv_b", c.kvLora, c.mlaHeads * c.mlaKvBHeadDim(), 0});
      out.push_back({p + ".attn.o_proj", c.mlaHeads * c.vHead, c.hidden, 0});
    }
    if (c.denseFfn(int64_t(i))) {
      out.push_back({p + ".mlp.gate", c.hidden, c.denseInter, 0});
      out.push_back({p + ".mlp.up", c.hidden, c.denseInter, 0});
      out.push_back({p + ".mlp.down", c.denseInter, c.hidden, 0});
    } else {
      out.push_back({p + ".moe.gate", c.hidden, c.moeInter, c.nExperts});
      out.push_back({p + ".moe.up", c.hidden, c.moeInter, c.nExperts});
      out.push_back({p + ".moe.down", c.moeInter, c.hidden, c.nExperts});
    }
    if (c.nShared > 0 && !c.denseFfn(int64_t(i))) {
      out.push_back({p + ".moe.s_gate", c.hidden, c.moeInter, c.nShared});
      out.push_back({p + ".moe.s_up", c.hidden, c.moeInter, c.nShared});
      out.push_back({p + ".moe.s_down", c.moeInter, c.hidden, c.nShared});
    }
    for (size_t j = first; j < out.size(); ++j)
      out[j].layer = int64_t(i);
  }
  // The whole model's LM head (no layer).
  if (c.vocab > 0 && !c.lmHeadBf16)
    out.push_back({"lm_head", c.hidden, c.vocab, 0});
  return out;
}

static void appendQuant(std::vector<TensorDesc> &out, const QuantLinearDesc &q,
                        int64_t group) {
  std::vector<int64_t> lead;
  if (q.experts > 0)
    lead.push_back(q.experts);
  auto with = [&](std::vector<int64_t> tail) {
    std::vector<int64_t> s = lead;
    s.insert(s.end(), tail.begin(), tail.end());
    return s;
  };
  out.push_back({q.prefix + ".w_q", DType::U8, with({q.in / 2, q.out})});
  out.push_back(
      {q.prefix + ".scales", DType::BF16, with({q.in / group, q.out})});
  out.push_back({q.prefix + ".zeros", DType::BF16, with({q.in / group, q.out})});
}

std::vector<TensorDesc> parameterTensors(const BlockConfig &c) {
  std::vector<TensorDesc> out;
  const int64_t C = c.kdaChannels();
  std::vector<QuantLinearDesc> qls = quantLinears(c);
  // By prefix: a scan per name made this quadratic in the depth.
  std::unordered_map<std::string, const QuantLinearDesc *> byPrefix;
  for (const QuantLinearDesc &q : qls)
    byPrefix.emplace(q.prefix, &q);
  auto quant = [&](const std::string &prefix) {
    auto it = byPrefix.find(prefix);
    if (it != byPrefix.end())
      appendQuant(out, *it->second, c.group);
  };
  for (size_t i = 0; i < c.pattern.size(); ++i) {
    const size_t first = out.size();
    std::string p = layerPrefix(i);
    out.push_back({p + ".attn_norm", DType::BF16, {c.hidden}});
    if (c.pattern[i] == LayerKind::KDA) {
      for (const char *n : {"q_proj", "k_proj", "v_proj", "g_proj", "f_a_proj", "f_b_proj",
                            "g_a_proj", "g_b_proj", "o_proj"})
        quant(p + ".attn." + n); // those of the layer's form
      out.push_back(
          {p + ".attn.beta_proj.weight", DType::BF16, {c.kdaHeads, c.hidden}});
      out.push_back({p + ".attn.conv_w", DType::BF16, {3, C, c.shortConv}});
      if (c.kdaReleased) {
        // The decay's per-head rate and per-channel bias (fp32, as the
        // gate's arithmetic), the output norm's weight shared by the heads.
        out.push_back({p + ".attn.A_log", DType::F32, {c.kdaHeads}});
        out.push_back({p + ".attn.dt_bias", DType::F32, {C}});
        out.push_back({p + ".attn.o_norm", DType::BF16, {c.kdaHeadDim}});
      }
    } else if (c.pattern[i] == LayerKind::GQA) {
      for (const char *n : {"q_proj", "k_proj", "v_proj", "o_proj"})
        quant(p + ".attn." + n);
      out.push_back({p + ".attn.q_norm", DType::BF16, {c.gqaHeadDim}});
      out.push_back({p + ".attn.k_norm", DType::BF16, {c.gqaHeadDim}});
    } else {
      for (const char *n : {"q_proj", "kv_a", "kv_b", "o_proj"})
        quant(p + ".attn." + n);
      if (c.mlaLatentNorm)
        out.push_back({p + ".attn.kv_a_norm", DType::BF16, {c.kvLora}});
    }
    if (c.denseFfn(int64_t(i))) {
      out.push_back({p + ".mlp_norm", DType::BF16, {c.hidden}});
      for (const char *n : {"gate", "up", "down"})
        quant(p + ".mlp." + n);
    } else {
      out.push_back({p + ".moe_norm", DType::BF16, {c.hidden}});
      out.push_back(
          {p + ".moe.router.weight", DType::BF16, {c.nExperts, c.hidden}});
      if (c.router == RouterKind::Sigmoid)
        out.push_back({p + ".moe.router.bias", DType::BF16, {c.nExperts}});
      for (const char *n : {"gate", "up", "down", "s_gate", "s_up", "s_down"})
        quant(p + ".moe." + n);
    }
    for (size_t j = first; j < out.size(); ++j)
      out[j].layer = int64_t(i);
  }
  // The whole model's embedding, final norm and LM head (no layer).
  if (c.vocab > 0) {
    out.push_back({"embed.weight", DType::BF16, {c.vocab, c.hidden}});
    out.push_back({"final_norm", DType::BF16, {c.hidden}});
    if (c.lmHeadBf16)
      out.push_back({"lm_head.weight", DType::BF16, {c.vocab, c.hidden}});
    else
      quant("lm_head");
  }
  return out;
}

std::vector<TensorDesc> stateTensors(const BlockConfig &c, int64_t rows) {
  std::vector<TensorDesc> out;
  const int64_t C = c.kdaChannels();
  for (size_t i = 0; i < c.pattern.size(); ++i) {
    const size_t first = out.size();
    std::string p = statePrefix(i);
    if (c.pattern[i] == LayerKind::KDA) {
      out.push_back(
          {p + ".S", DType::F32, {c.kdaHeads, c.kdaHeadDim, c.kdaHeadDim}});
      for (const char *n : {"cq", "ck", "cv"})
        out.push_back({p + "." + n, DType::BF16, {c.convWindowRows(), C}});
    } else if (c.pattern[i] == LayerKind::GQA) {
      out.push_back({p + ".k_cache", DType::BF16, {rows, c.gqaKvHeads, c.gqaHeadDim}});
      out.push_back({p + ".v_cache", DType::BF16, {rows, c.gqaKvHeads, c.gqaHeadDim}});
    } else {
      out.push_back({p + ".c_kv", DType::BF16, {rows, c.kvLora}});
      out.push_back({p + ".k_rope", DType::BF16, {rows, c.qkRope}});
    }
    for (size_t j = first; j < out.size(); ++j)
      out[j].layer = int64_t(i);
  }
  return out;
}

} // namespace mk
