//===- HfCheckpoint.cpp - Hugging Face checkpoints onto a spec's weights --===//

#include "mk/HfCheckpoint.h"

#include "mk/Json.h"
#include "mk/Oracle.h" // quantizeW4A16
#include "ParallelFor.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace mk {
namespace {

namespace fs = std::filesystem;

/// The dense GQA family's names after "blocks.<i>.", and the Hugging Face
/// (Qwen3) names after "model.layers.<i>.".
constexpr std::pair<const char *, const char *> kDenseGqaNames[] = {
    {"attn_norm", "input_layernorm.weight"},
    {"mlp_norm", "post_attention_layernorm.weight"},
    {"attn.q_norm", "self_attn.q_norm.weight"},
    {"attn.k_norm", "self_attn.k_norm.weight"},
    {"attn.q_proj", "self_attn.q_proj.weight"},
    {"attn.k_proj", "self_attn.k_proj.weight"},
    {"attn.v_proj", "self_attn.v_proj.weight"},
    {"attn.o_proj", "self_attn.o_proj.weight"},
    {"mlp.gate", "mlp.gate_proj.weight"},
    {"mlp.up", "mlp.up_proj.weight"},
    {"mlp.down", "mlp.down_proj.weight"},
};

/// The checkpoint's files: what the index names, else every
/// `*.safetensors` file of `dir` (sorted).
bool checkpointFiles(const std::string &dir, std::vector<std::string> &files,
                     std::vector<std::string> &problems) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    problems.push_back(dir + ": not a directory");
    return false;
  }
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index, ec)) {
    std::ifstream in(index);
    std::stringstream text;
    text << in.rdbuf();
    json::Value v;
    std::string error;
    if (!json::parse(text.str(), v, error)) {
      problems.push_back(index.string() + ": " + error);
      return false;
    }
    const json::Value *map = v.find("weight_map");
    if (!map || !map->isObject()) {
      problems.push_back(index.string() + ": no \"weight_map\" object");
      return false;
    }
    std::set<std::string> names;
    for (const auto &[tensor, file] : map->object) {
      if (!file.isString()) {
        problems.push_back(index.string() + ": " + file.where() + ": the file of '" + tensor +
                           "' is not a string");
        return false;
      }
      names.insert(file.string);
    }
    for (const std::string &n : names)
      files.push_back((fs::path(dir) / n).string());
    return true;
  }
  for (const fs::directory_entry &e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".safetensors")
      files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    problems.push_back(dir + ": no *.safetensors file and no model.safetensors.index.json");
    return false;
  }
  return true;
}

/// `t` as floats, if it is a bf16 or f32 tensor of `shape`; else a
/// problem naming `name`.
bool floatsOf(const HostTensor &t, const std::string &name, const std::vector<int64_t> &shape,
              std::vector<float> &out, std::vector<std::string> &problems) {
  if (t.desc.dtype != DType::BF16 && t.desc.dtype != DType::F32) {
    problems.push_back(name + ": dtype " + safetensorsDTypeName(t.desc.dtype) +
                       " (expected BF16 or F32)");
    return false;
  }
  if (t.shape() != shape) {
    problems.push_back(name + ": shape " + shapeString(t.shape()) + " (expected " +
                       shapeString(shape) + ")");
    return false;
  }
  out = t.toFloat();
  return true;
}

} // namespace

namespace {

/// One checkpoint tensor's place in the spec's parameters: a W4A16 linear
/// (`linear`, transposed and quantized) or another parameter (`vector`,
/// converted to its dtype), whole or (`slot` >= 0) one expert of a stacked
/// linear / one filter of `conv_w`; `hfShape` is the checkpoint's shape.
struct Want {
  const QuantLinearDesc *linear = nullptr;
  const TensorDesc *vector = nullptr;
  int64_t slot = -1;
  std::vector<int64_t> hfShape;
};

/// The Kimi-Linear family's Hugging Face names (the released model's,
/// docs/semantics-kimi-linear.md section 12): `param` after "blocks.<i>."
/// (or a whole-model name) -> the names, one per slot.
std::vector<std::string> kimiNames(const BlockConfig &cfg, int64_t layer,
                                   const std::string &rest) {
  const std::string l = "model.layers." + std::to_string(layer) + ".";
  const std::string a = l + "self_attn.", m = l + "block_sparse_moe.";
  if (rest == "attn_norm")
    return {l + "input_layernorm.weight"};
  if (rest == "moe_norm" || rest == "mlp_norm")
    return {l + "post_attention_layernorm.weight"};
  if (rest == "attn.beta_proj.weight")
    return {a + "b_proj.weight"};
  if (rest == "attn.conv_w")
    return {a + "q_conv1d.weight", a + "k_conv1d.weight", a + "v_conv1d.weight"};
  if (rest == "attn.A_log" || rest == "attn.dt_bias")
    return {a + rest.substr(5)};
  if (rest == "attn.o_norm" || rest == "attn.kv_a_norm")
    return {a + (rest == "attn.o_norm" ? "o_norm" : "kv_a_layernorm") + ".weight"};
  if (rest == "attn.kv_a")
    return {a + "kv_a_proj_with_mqa.weight"};
  if (rest == "attn.kv_b")
    return {a + "kv_b_proj.weight"};
  if (rest.compare(0, 5, "attn.") == 0 && rest.size() > 10 &&
      rest.compare(rest.size() - 5, 5, "_proj") == 0) // q/k/v/o, f_a/f_b/g_a/g_b
    return {a + rest.substr(5) + ".weight"};
  if (rest == "mlp.gate" || rest == "mlp.up" || rest == "mlp.down")
    return {l + rest + "_proj.weight"};
  if (rest == "moe.router.weight")
    return {m + "gate.weight"};
  if (rest == "moe.router.bias")
    return {m + "gate.e_score_correction_bias"};
  const char *const routed[][2] = {{"moe.gate", "w1"}, {"moe.up", "w3"}, {"moe.down", "w2"}};
  for (const auto &[ours, theirs] : routed)
    if (rest == ours) {
      std::vector<std::string> v;
      for (int64_t e = 0; e < cfg.nExperts; ++e)
        v.push_back(m + "experts." + std::to_string(e) + "." + theirs + ".weight");
      return v;
    }
  const char *const shared[][2] = {
      {"moe.s_gate", "gate_proj"}, {"moe.s_up", "up_proj"}, {"moe.s_down", "down_proj"}};
  for (const auto &[ours, theirs] : shared)
    if (rest == ours)
      return {m + "shared_experts." + theirs + ".weight"};
  return {};
}

} // namespace

std::string hfTensorName(const BlockConfig &cfg, const std::string &param) {
  std::vector<std::string> names = hfTensorNames(cfg, param);
  return names.size() == 1 ? names[0] : "";
}

std::vector<std::string> hfTensorNames(const BlockConfig &cfg, const std::string &param) {
  if (cfg.family == BlockFamily::KimiLinear) {
    if (param == "embed.weight")
      return {"model.embed_tokens.weight"};
    if (param == "final_norm")
      return {"model.norm.weight"};
    if (param == "lm_head" || param == "lm_head.weight")
      return {"lm_head.weight"};
  }
  const std::string blocks = "blocks.";
  if (param.compare(0, blocks.size(), blocks) != 0)
    return {};
  const size_t dot = param.find('.', blocks.size());
  if (dot == std::string::npos)
    return {};
  const std::string layer = param.substr(blocks.size(), dot - blocks.size());
  const std::string rest = param.substr(dot + 1);
  if (cfg.family == BlockFamily::KimiLinear) {
    char *end = nullptr;
    const long long i = std::strtoll(layer.c_str(), &end, 10);
    if (layer.empty() || *end || i < 0)
      return {};
    return kimiNames(cfg, int64_t(i), rest);
  }
  for (const auto &[ours, theirs] : kDenseGqaNames)
    if (rest == ours)
      return {"model.layers." + layer + "." + theirs};
  return {};
}

bool convertHfCheckpoint(const BlockConfig &cfg, const std::string &dir, TensorMap &out,
                         std::vector<std::string> &problems, HfConversion *info) {
  const size_t problemsBefore = problems.size();
  if (cfg.family == BlockFamily::KimiLinear) {
    // The released model's layout only: its KDA form, one shared expert
    // (the checkpoint's shared FFN is one of width moe_inter).
    if (cfg.hasLayer(LayerKind::KDA) && !cfg.kdaReleased)
      problems.push_back("spec '" + cfg.name + "': its KDA layers are the unit's form; a "
                         "Hugging Face Kimi-Linear checkpoint has the released one "
                         "(kda_form \"released\")");
    if (cfg.nShared > 1)
      problems.push_back("spec '" + cfg.name + "': n_shared " + std::to_string(cfg.nShared) +
                         " (the checkpoint's shared experts are one FFN)");
    if (cfg.hasLayer(LayerKind::GQA))
      problems.push_back("spec '" + cfg.name + "': GQA layers have no Kimi-Linear checkpoint "
                         "names");
    // Its other forms: a checkpoint's tensors a spec without them would
    // leave unused (the router's correction bias, the latent's norm).
    if (cfg.router != RouterKind::Sigmoid)
      problems.push_back("spec '" + cfg.name + "': a softmax router (the checkpoint's is "
                         "sigmoid with a correction bias: router \"sigmoid\")");
    if (cfg.hasLayer(LayerKind::MLA) && (cfg.mlaRotary || !cfg.mlaLatentNorm))
      problems.push_back("spec '" + cfg.name + "': its MLA form (the checkpoint's: "
                         "mla_rotary false, mla_latent_norm true)");
    if (problems.size() != problemsBefore)
      return false;
  }
  // What each checkpoint tensor becomes.
  const std::vector<QuantLinearDesc> linears = quantLinears(cfg);
  const std::vector<TensorDesc> params = parameterTensors(cfg);
  std::set<std::string> linearParts;
  std::map<std::string, Want> wanted;
  auto want = [&](const std::string &param, Want w) {
    std::vector<std::string> names = hfTensorNames(cfg, param);
    if (names.empty()) {
      problems.push_back(param + ": no Hugging Face name for it");
      return;
    }
    for (size_t i = 0; i < names.size(); ++i) {
      Want x = w;
      if (names.size() > 1)
        x.slot = int64_t(i);
      wanted[names[i]] = x;
    }
  };
  for (const QuantLinearDesc &q : linears) {
    for (const char *part : {".w_q", ".scales", ".zeros"})
      linearParts.insert(q.prefix + part);
    want(q.prefix, Want{&q, nullptr, -1, {q.out, q.in}});
  }
  for (const TensorDesc &d : params) {
    if (linearParts.count(d.name))
      continue;
    std::vector<int64_t> hf = d.shape;
    const bool conv = cfg.family == BlockFamily::KimiLinear && d.shape.size() == 3 &&
                      d.name.size() > 7 && d.name.compare(d.name.size() - 7, 7, ".conv_w") == 0;
    if (conv) // one filter [C, 1, taps] per slot
      hf = {d.shape[1], 1, d.shape[2]};
    else if (d.name.size() > 6 && d.name.compare(d.name.size() - 6, 6, ".A_log") == 0)
      hf = {1, 1, d.shape[0], 1};
    want(d.name, Want{nullptr, &d, -1, hf});
  }
  std::vector<std::string> files;
  if (problems.size() != problemsBefore || !checkpointFiles(dir, files, problems))
    return false;

  // One file at a time (a checkpoint's shards together can outgrow the
  // host's memory): each tensor converted as its file is read, into its
  // slot of the destination. A file's tensors are converted in parallel
  // (the transposes and the quantizer are most of the time): their
  // destinations are made first, then each conversion writes only its own
  // slot of them, and its problems go to its own list, reported in the
  // file's order. Each conversion in flight holds its tensor in fp32 (and
  // a linear's transpose): ~8 bytes per element, on up to
  // MK_ORACLE_THREADS tensors at once beside the file.
  std::set<std::string> seen;
  std::vector<std::string> unused;
  TensorMap result;
  auto dest = [&](const TensorDesc &d) -> HostTensor & {
    auto it = result.find(d.name);
    if (it == result.end())
      it = result.emplace(d.name, HostTensor(d)).first;
    return it->second;
  };
  const std::map<std::string, TensorDesc> byName = [&] {
    std::map<std::string, TensorDesc> m;
    for (const TensorDesc &d : params)
      m.emplace(d.name, d);
    return m;
  }();
  // The destinations `w` writes, made before any conversion runs.
  auto makeDestinations = [&](const Want &w) {
    if (const QuantLinearDesc *q = w.linear) {
      for (const char *part : {".w_q", ".scales", ".zeros"})
        dest(byName.at(q->prefix + part));
    } else {
      dest(*w.vector);
    }
  };
  auto convert = [&](const std::string &name, const Want &w, const HostTensor &t,
                     std::vector<std::string> &problems) {
    auto dest = [&](const TensorDesc &d) -> HostTensor & { return result.find(d.name)->second; };
    std::vector<float> v;
    if (!floatsOf(t, name, w.hfShape, v, problems))
      return;
    if (const QuantLinearDesc *q = w.linear) {
      std::vector<float> wt(v.size()); // [out, in] -> [in, out]
      for (int64_t o = 0; o < q->out; ++o)
        for (int64_t i = 0; i < q->in; ++i)
          wt[size_t(i * q->out + o)] = v[size_t(o * q->in + i)];
      const int64_t e = std::max<int64_t>(w.slot, 0), groups = q->in / cfg.group;
      HostTensor &wq = dest(byName.at(q->prefix + ".w_q"));
      HostTensor &sc = dest(byName.at(q->prefix + ".scales"));
      HostTensor &ze = dest(byName.at(q->prefix + ".zeros"));
      quantizeW4A16(wt.data(), q->in, q->out, cfg.group, wq.u8() + e * (q->in / 2) * q->out,
                    sc.bf16() + e * groups * q->out, ze.bf16() + e * groups * q->out);
      return;
    }
    const TensorDesc &d = *w.vector;
    HostTensor &dst = dest(d);
    const size_t off = size_t(std::max<int64_t>(w.slot, 0)) * v.size();
    for (size_t i = 0; i < v.size(); ++i) {
      if (d.dtype == DType::F32)
        dst.f32()[off + i] = v[i];
      else
        dst.bf16()[off + i] = BFloat16(v[i]);
    }
  };
  for (const std::string &f : files) {
    TensorMap part;
    std::vector<std::string> fileProblems;
    if (!readSafetensors(f, part, fileProblems)) {
      for (const std::string &p : fileProblems)
        problems.push_back(f + ": " + p);
      continue;
    }
    // A job per tensor in the file's order; one already seen in another
    // file is a job with its problem and nothing to convert.
    struct Job {
      const std::string *name;
      const Want *want;
      const HostTensor *tensor;
      std::vector<std::string> problems;
    };
    std::vector<Job> jobs;
    for (const auto &[name, t] : part) {
      if (!seen.insert(name).second) {
        jobs.push_back(Job{&name, nullptr, nullptr,
                           {name + ": in more than one file (again in " + f + ")"}});
        continue;
      }
      auto it = wanted.find(name);
      if (it == wanted.end()) {
        unused.push_back(name);
        continue;
      }
      makeDestinations(it->second);
      jobs.push_back(Job{&name, &it->second, &t, {}});
    }
    detail::parallelForEach(int64_t(jobs.size()), [&](int64_t i) {
      Job &j = jobs[size_t(i)];
      if (j.want)
        convert(*j.name, *j.want, *j.tensor, j.problems);
    });
    for (const Job &j : jobs)
      problems.insert(problems.end(), j.problems.begin(), j.problems.end());
  }
  for (const auto &[name, w] : wanted)
    if (!seen.count(name))
      problems.push_back(name + ": missing (the weight of " +
                         (w.linear ? w.linear->prefix : w.vector->name) + ")" +
                         (name == "lm_head.weight" && seen.count("model.embed_tokens.weight")
                              ? "; a checkpoint whose LM head is its embedding (tied) has "
                                "none: the family's LM head is its own tensor"
                              : ""));
  if (problems.size() != problemsBefore)
    return false;
  if (info) {
    info->files = files;
    std::sort(unused.begin(), unused.end());
    info->unused = unused;
  }
  out = std::move(result);
  return true;
}

} // namespace mk
