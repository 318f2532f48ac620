//===- HfCheckpointTest.cpp - Hugging Face checkpoints onto a spec ---------===//
//
// A small Qwen3-style checkpoint written here with the Hugging Face names
// (bf16, [out, in], sharded with an index, plus an embedding and lm_head
// the spec does not read) converts into exactly the spec's parameters: each
// W4A16 linear is quantizeW4A16 of its transposed weight, each norm's
// vector copied; missing tensors and files, wrong shapes and dtypes, a
// malformed index, a tensor in two files and a Kimi spec are refused by
// name, the output untouched.
//
//===----------------------------------------------------------------------===//

#include "mk/BlockSpec.h"
#include "mk/HfCheckpoint.h"
#include "mk/Oracle.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

using namespace mk;

namespace {

namespace fs = std::filesystem;

BlockConfig tinyDense() {
  BlockConfig cfg;
  std::string error;
  EXPECT_TRUE(loadBlockSpecFile(std::string(MK_SOURCE_DIR) + "/examples/specs/tiny_dense_gqa.json",
                                cfg, error))
      << error;
  return cfg;
}

/// A bf16 tensor of `shape` with a pattern that varies by position and
/// by `salt` (distinct weights per tensor).
HostTensor patterned(const std::string &name, std::vector<int64_t> shape, int salt) {
  HostTensor t({name, DType::BF16, std::move(shape), -1});
  for (int64_t i = 0; i < t.numel(); ++i)
    t.bf16()[i] = BFloat16(0.01f * float((i * 7 + salt * 13) % 29 - 14));
  return t;
}

/// The checkpoint of `cfg` under Hugging Face names, in two shards with an
/// index; `skip` names one tensor to leave out.
struct FakeCheckpoint {
  TensorMap tensors;
  std::string dir;
};

FakeCheckpoint writeCheckpoint(const BlockConfig &cfg, const std::string &dir,
                               const std::string &skip = "") {
  FakeCheckpoint ck;
  ck.dir = dir;
  fs::remove_all(dir);
  fs::create_directories(dir);
  int salt = 0;
  for (const QuantLinearDesc &q : quantLinears(cfg)) {
    std::string n = hfTensorName(cfg, q.prefix);
    EXPECT_FALSE(n.empty()) << q.prefix;
    ck.tensors.emplace(n, patterned(n, {q.out, q.in}, ++salt));
  }
  for (const TensorDesc &d : parameterTensors(cfg)) {
    std::string n = hfTensorName(cfg, d.name);
    if (n.empty())
      continue; // a W4A16 linear's part
    ck.tensors.emplace(n, patterned(n, d.shape, ++salt));
  }
  ck.tensors.emplace("model.embed_tokens.weight", patterned("model.embed_tokens.weight",
                                                            {8, cfg.hidden}, 1));
  ck.tensors.emplace("lm_head.weight", patterned("lm_head.weight", {8, cfg.hidden}, 2));
  ck.tensors.erase(skip);
  // Two shards: layer 0 and the rest.
  TensorMap a, b;
  std::string index = "{\"metadata\": {}, \"weight_map\": {";
  bool first = true;
  for (const auto &[name, t] : ck.tensors) {
    const bool inA = name.find("layers.0.") != std::string::npos;
    HostTensor copy = t;
    copy.desc.name = name;
    (inA ? a : b).emplace(name, std::move(copy));
    index += std::string(first ? "" : ", ") + "\"" + name + "\": \"" +
             (inA ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors") +
             "\"";
    first = false;
  }
  index += "}}";
  std::string error;
  EXPECT_TRUE(writeSafetensors(dir + "/model-00001-of-00002.safetensors", a, error)) << error;
  EXPECT_TRUE(writeSafetensors(dir + "/model-00002-of-00002.safetensors", b, error)) << error;
  std::ofstream(dir + "/model.safetensors.index.json") << index;
  return ck;
}

std::string tempDir(const std::string &name) {
  return (fs::temp_directory_path() / ("mk-hf-" + name + "-" + std::to_string(::getpid())))
      .string();
}

bool mentions(const std::vector<std::string> &problems, const std::string &what) {
  for (const std::string &p : problems)
    if (p.find(what) != std::string::npos)
      return true;
  return false;
}

TEST(HfCheckpoint, DenseGqaNames) {
  BlockConfig cfg = tinyDense();
  EXPECT_EQ(hfTensorName(cfg, "blocks.1.attn.q_proj"), "model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(hfTensorName(cfg, "blocks.0.attn_norm"), "model.layers.0.input_layernorm.weight");
  EXPECT_EQ(hfTensorName(cfg, "blocks.0.mlp.down"), "model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(hfTensorName(cfg, "blocks.0.attn.k_norm"), "model.layers.0.self_attn.k_norm.weight");
  EXPECT_EQ(hfTensorName(cfg, "blocks.0.attn.q_proj.w_q"), "");
  EXPECT_EQ(hfTensorName(cfg, "hidden"), "");
}

TEST(HfCheckpoint, ConvertsEveryParameterOfTheSpec) {
  BlockConfig cfg = tinyDense();
  FakeCheckpoint ck = writeCheckpoint(cfg, tempDir("ok"));
  TensorMap w;
  std::vector<std::string> problems;
  HfConversion info;
  ASSERT_TRUE(convertHfCheckpoint(cfg, ck.dir, w, problems, &info))
      << (problems.empty() ? "" : problems.front());
  EXPECT_TRUE(checkTensors(w, parameterTensors(cfg), problems))
      << (problems.empty() ? "" : problems.front());
  EXPECT_EQ(info.files.size(), 2u);
  EXPECT_EQ(info.unused, (std::vector<std::string>{"lm_head.weight", "model.embed_tokens.weight"}));
  for (const QuantLinearDesc &q : quantLinears(cfg)) {
    const HostTensor &src = ck.tensors.at(hfTensorName(cfg, q.prefix));
    std::vector<float> wt(size_t(q.in * q.out));
    for (int64_t o = 0; o < q.out; ++o)
      for (int64_t i = 0; i < q.in; ++i)
        wt[size_t(i * q.out + o)] = src.bf16()[o * q.in + i].toFloat();
    std::vector<uint8_t> wq(size_t(q.in / 2 * q.out));
    std::vector<BFloat16> scales(size_t(q.in / cfg.group * q.out)), zeros(scales.size());
    quantizeW4A16(wt.data(), q.in, q.out, cfg.group, wq.data(), scales.data(), zeros.data());
    const HostTensor &gq = w.at(q.prefix + ".w_q");
    EXPECT_TRUE(std::equal(wq.begin(), wq.end(), gq.u8())) << q.prefix;
    for (size_t i = 0; i < scales.size(); ++i) {
      ASSERT_EQ(scales[i].bits, w.at(q.prefix + ".scales").bf16()[i].bits) << q.prefix << " " << i;
      ASSERT_EQ(zeros[i].bits, w.at(q.prefix + ".zeros").bf16()[i].bits) << q.prefix << " " << i;
    }
  }
  const HostTensor &norm = w.at("blocks.1.mlp_norm");
  const HostTensor &hfNorm = ck.tensors.at("model.layers.1.post_attention_layernorm.weight");
  for (int64_t i = 0; i < norm.numel(); ++i)
    ASSERT_EQ(norm.bf16()[i].bits, hfNorm.bf16()[i].bits) << i;
  fs::remove_all(ck.dir);
}

TEST(HfCheckpoint, RefusesByNameAndLeavesTheOutputUntouched) {
  BlockConfig cfg = tinyDense();
  TensorMap w;
  w.emplace("keep", HostTensor({"keep", DType::F32, {1}, -1}));
  std::vector<std::string> problems;

  FakeCheckpoint missing =
      writeCheckpoint(cfg, tempDir("missing"), "model.layers.1.self_attn.v_proj.weight");
  EXPECT_FALSE(convertHfCheckpoint(cfg, missing.dir, w, problems));
  EXPECT_TRUE(mentions(problems, "model.layers.1.self_attn.v_proj.weight: missing"));
  fs::remove_all(missing.dir);

  // A weight stored [in, out] instead of [out, in], and an integer norm.
  FakeCheckpoint bad = writeCheckpoint(cfg, tempDir("bad"));
  TensorMap shard;
  std::vector<std::string> readProblems;
  const std::string f = bad.dir + "/model-00001-of-00002.safetensors";
  ASSERT_TRUE(readSafetensors(f, shard, readProblems));
  HostTensor &q = shard.at("model.layers.0.self_attn.k_proj.weight"); // [128, 256]
  std::swap(q.desc.shape[0], q.desc.shape[1]);
  shard.at("model.layers.0.input_layernorm.weight") =
      HostTensor({"model.layers.0.input_layernorm.weight", DType::I32, {cfg.hidden}, -1});
  std::string error;
  ASSERT_TRUE(writeSafetensors(f, shard, error)) << error;
  problems.clear();
  EXPECT_FALSE(convertHfCheckpoint(cfg, bad.dir, w, problems));
  EXPECT_TRUE(mentions(problems, "model.layers.0.self_attn.k_proj.weight: shape [256, 128]"));
  EXPECT_TRUE(mentions(problems, "model.layers.0.input_layernorm.weight: dtype I32"));
  fs::remove_all(bad.dir);

  // An index naming a file that is not there, and a malformed index.
  FakeCheckpoint gone = writeCheckpoint(cfg, tempDir("gone"));
  fs::remove(gone.dir + "/model-00002-of-00002.safetensors");
  problems.clear();
  EXPECT_FALSE(convertHfCheckpoint(cfg, gone.dir, w, problems));
  EXPECT_TRUE(mentions(problems, "model-00002-of-00002.safetensors: "));
  std::ofstream(gone.dir + "/model.safetensors.index.json") << "{\"weight_map\": [1, 2]}";
  problems.clear();
  EXPECT_FALSE(convertHfCheckpoint(cfg, gone.dir, w, problems));
  EXPECT_TRUE(mentions(problems, "no \"weight_map\" object"));
  fs::remove_all(gone.dir);

  // Without an index every *.safetensors file is read; a tensor in two of
  // them is refused.
  FakeCheckpoint twice = writeCheckpoint(cfg, tempDir("twice"));
  fs::remove(twice.dir + "/model.safetensors.index.json");
  TensorMap extra;
  const std::string dup = "model.layers.1.mlp.down_proj.weight";
  extra.emplace(dup, twice.tensors.at(dup));
  ASSERT_TRUE(writeSafetensors(twice.dir + "/extra.safetensors", extra, error)) << error;
  problems.clear();
  EXPECT_FALSE(convertHfCheckpoint(cfg, twice.dir, w, problems));
  EXPECT_TRUE(mentions(problems, dup + ": in more than one file"));
  fs::remove_all(twice.dir);

  problems.clear();
  EXPECT_FALSE(convertHfCheckpoint(cfg, tempDir("nowhere"), w, problems));
  EXPECT_TRUE(mentions(problems, "not a directory"));

  BlockConfig kimi;
  ASSERT_TRUE(loadBlockSpecFile(std::string(MK_SOURCE_DIR) + "/examples/specs/tiny.json", kimi,
                                error))
      << error;
  problems.clear();
  EXPECT_FALSE(convertHfCheckpoint(kimi, tempDir("nowhere"), w, problems));
  EXPECT_TRUE(mentions(problems, "only the dense GQA family"));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_TRUE(w.count("keep"));
}

} // namespace
