//===- HfCheckpoint.cpp - Hugging Face checkpoints onto a spec's weights --===//

#include "mk/HfCheckpoint.h"

#include "mk/Json.h"
#include "mk/Oracle.h" // quantizeW4A16

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

std::string hfTensorName(const BlockConfig &cfg, const std::string &param) {
  if (cfg.family != BlockFamily::DenseGqa)
    return "";
  const std::string blocks = "blocks.";
  if (param.compare(0, blocks.size(), blocks) != 0)
    return "";
  const size_t dot = param.find('.', blocks.size());
  if (dot == std::string::npos)
    return "";
  const std::string layer = param.substr(blocks.size(), dot - blocks.size());
  const std::string rest = param.substr(dot + 1);
  for (const auto &[ours, theirs] : kDenseGqaNames)
    if (rest == ours)
      return "model.layers." + layer + "." + theirs;
  return "";
}

bool convertHfCheckpoint(const BlockConfig &cfg, const std::string &dir, TensorMap &out,
                         std::vector<std::string> &problems, HfConversion *info) {
  const size_t problemsBefore = problems.size();
  if (cfg.family != BlockFamily::DenseGqa) {
    problems.push_back("spec '" + cfg.name +
                       "': only the dense GQA family (\"family\": \"dense_gqa\") maps onto a "
                       "Hugging Face checkpoint; the released Kimi-Linear layers are not "
                       "compiled yet");
    return false;
  }
  // What each checkpoint tensor becomes: a W4A16 linear's three tensors,
  // or one bf16 parameter.
  struct Want {
    const QuantLinearDesc *linear = nullptr;
    const TensorDesc *vector = nullptr;
  };
  const std::vector<QuantLinearDesc> linears = quantLinears(cfg);
  const std::vector<TensorDesc> params = parameterTensors(cfg);
  std::set<std::string> linearParts;
  std::map<std::string, Want> wanted;
  for (const QuantLinearDesc &q : linears) {
    for (const char *part : {".w_q", ".scales", ".zeros"})
      linearParts.insert(q.prefix + part);
    const std::string name = hfTensorName(cfg, q.prefix);
    if (name.empty())
      problems.push_back(q.prefix + ": no Hugging Face name for it");
    else
      wanted[name].linear = &q;
  }
  for (const TensorDesc &d : params) {
    if (linearParts.count(d.name))
      continue;
    const std::string name = hfTensorName(cfg, d.name);
    if (name.empty())
      problems.push_back(d.name + ": no Hugging Face name for it");
    else if (d.dtype != DType::BF16)
      problems.push_back(d.name + ": a " + std::string(dtypeName(d.dtype)) +
                         " parameter (only bf16 ones convert)");
    else
      wanted[name].vector = &d;
  }
  std::vector<std::string> files;
  if (problems.size() != problemsBefore || !checkpointFiles(dir, files, problems))
    return false;

  // One file at a time (a checkpoint's shards together can outgrow the
  // host's memory): each tensor converted as its file is read.
  std::set<std::string> seen;
  std::vector<std::string> unused;
  TensorMap result;
  auto convert = [&](const std::string &name, const Want &want, const HostTensor &t) {
    std::vector<float> w;
    if (const QuantLinearDesc *q = want.linear) {
      if (!floatsOf(t, name, {q->out, q->in}, w, problems))
        return;
      std::vector<float> wt(w.size()); // [out, in] -> [in, out]
      for (int64_t o = 0; o < q->out; ++o)
        for (int64_t i = 0; i < q->in; ++i)
          wt[size_t(i * q->out + o)] = w[size_t(o * q->in + i)];
      HostTensor wq({q->prefix + ".w_q", DType::U8, {q->in / 2, q->out}, q->layer});
      HostTensor scales(
          {q->prefix + ".scales", DType::BF16, {q->in / cfg.group, q->out}, q->layer});
      HostTensor zeros({q->prefix + ".zeros", DType::BF16, {q->in / cfg.group, q->out}, q->layer});
      quantizeW4A16(wt.data(), q->in, q->out, cfg.group, wq.u8(), scales.bf16(), zeros.bf16());
      for (HostTensor *part : {&wq, &scales, &zeros})
        result.emplace(part->desc.name, std::move(*part));
      return;
    }
    const TensorDesc &d = *want.vector;
    if (!floatsOf(t, name, d.shape, w, problems))
      return;
    HostTensor v(d);
    for (size_t i = 0; i < w.size(); ++i)
      v.bf16()[i] = BFloat16(w[i]);
    result.emplace(d.name, std::move(v));
  };
  for (const std::string &f : files) {
    TensorMap part;
    std::vector<std::string> fileProblems;
    if (!readSafetensors(f, part, fileProblems)) {
      for (const std::string &p : fileProblems)
        problems.push_back(f + ": " + p);
      continue;
    }
    for (const auto &[name, t] : part) {
      if (!seen.insert(name).second) {
        problems.push_back(name + ": in more than one file (again in " + f + ")");
        continue;
      }
      auto it = wanted.find(name);
      if (it == wanted.end())
        unused.push_back(name);
      else
        convert(name, it->second, t);
    }
  }
  for (const auto &[name, want] : wanted)
    if (!seen.count(name))
      problems.push_back(name + ": missing (the weight of " +
                         (want.linear ? want.linear->prefix : want.vector->name) + ")");
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
