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
#include "mk/HfConfig.h"
#include "mk/Kimi48bOracle.h"
#include "mk/Oracle.h"
#include "mk/OracleOps.h"

#include <gtest/gtest.h>

#include <cmath>
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
  EXPECT_TRUE(mentions(problems, "its KDA layers are the unit's form"));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_TRUE(w.count("keep"));
}

// The released Kimi-Linear's layout: a small random checkpoint under its
// Hugging Face names (the 48B oracle's test weights for a reduced config)
// converts into every parameter of the spec `importHfConfig` makes of the
// same config.json (a whole model: embedding, final norm, LM head), each
// value in its place: experts stacked in order, the three conv filters, the
// fp32 decay parameters, the router; and the family's oracle on the
// converted weights decodes what the 48B oracle does on the checkpoint with
// the same int4-quantized linears, bit for bit.
TEST(HfCheckpoint, KimiLinearReleasedModel) {
  const std::string config = std::string(MK_SOURCE_DIR) + "/tests/python/configs/kimi48b_tiny.json";
  oracle::Kimi48bConfig c;
  std::string error;
  ASSERT_TRUE(oracle::parseKimi48bConfig(config, c, error)) << error;
  const TensorMap hf = oracle::makeRandomKimi48bWeights(c, 7);
  const std::string dir = tempDir("kimi");
  fs::create_directories(dir);
  ASSERT_TRUE(writeSafetensors(dir + "/model.safetensors", hf, error)) << error;
  HfImportOptions o; // no as_unit: the family's released forms are the model's
  o.group = 16;
  HfImport imp;
  ASSERT_TRUE(importHfConfigFile(config, o, imp, error)) << error;
  const BlockConfig &cfg = imp.config;
  ASSERT_EQ(cfg.vocab, c.vocab);
  ASSERT_TRUE(cfg.kdaReleased);
  ASSERT_TRUE(cfg.ffnRoundEach);

  TensorMap w;
  std::vector<std::string> problems;
  HfConversion info;
  ASSERT_TRUE(convertHfCheckpoint(cfg, dir, w, problems, &info))
      << (problems.empty() ? "" : problems.front());
  EXPECT_TRUE(checkTensors(w, parameterTensors(cfg), problems))
      << (problems.empty() ? "" : problems.front());
  EXPECT_TRUE(info.unused.empty()) << info.unused.front();
  EXPECT_EQ(hfTensorNames(cfg, "blocks.1.moe.down").size(), size_t(cfg.nExperts));
  EXPECT_EQ(hfTensorNames(cfg, "blocks.1.moe.down")[3],
            "model.layers.1.block_sparse_moe.experts.3.w2.weight");
  EXPECT_EQ(hfTensorName(cfg, "blocks.0.attn.conv_w"), "") << "three filters, no one name";
  EXPECT_EQ(hfTensorName(cfg, "lm_head"), "lm_head.weight");

  // Values in place: A_log per head (fp32), a k filter's taps, the router,
  // an expert's weights within their quantization step.
  const int64_t H = cfg.kdaHeads, C = cfg.kdaChannels(), T = cfg.shortConv;
  for (int64_t h = 0; h < H; ++h)
    EXPECT_EQ(w.at("blocks.0.attn.A_log").f32()[h],
              hf.at("model.layers.0.self_attn.A_log").bf16()[h].toFloat());
  for (int64_t ch = 0; ch < C; ch += 7)
    for (int64_t t = 0; t < T; ++t)
      EXPECT_EQ(w.at("blocks.1.attn.conv_w").bf16()[(1 * C + ch) * T + t].bits,
                hf.at("model.layers.1.self_attn.k_conv1d.weight").bf16()[ch * T + t].bits);
  EXPECT_EQ(w.at("blocks.1.moe.router.bias").bf16()[5].bits,
            hf.at("model.layers.1.block_sparse_moe.gate.e_score_correction_bias").bf16()[5].bits);
  const oracle::QuantWeight up =
      oracle::quantWeight(w, "blocks.2.moe.up", cfg.hidden, cfg.moeInter, cfg.group, 3);
  const HostTensor &w3 = hf.at("model.layers.2.block_sparse_moe.experts.3.w3.weight");
  for (int64_t k = 0; k < cfg.hidden; k += 5)
    for (int64_t n = 0; n < cfg.moeInter; n += 3) {
      const float want = w3.bf16()[n * cfg.hidden + k].toFloat();
      const float step = up.scales[(k / cfg.group) * cfg.moeInter + n].toFloat();
      EXPECT_LE(std::fabs(oracle::dequantW4(up, k, n) - want), 0.51f * step + 1e-3f)
          << "expert 3's up at (" << k << ", " << n << ")";
    }

  // The same greedy steps from a fresh sequence, the 48B oracle on the
  // checkpoint with every linear replaced by what the conversion quantized
  // it to (dequantized, transposed back): the family's released forms
  // (ffn_rounding "each" included) compute what the model does, in the same
  // sequential fp32 order, so the logits agree bit for bit at every step. A
  // tensor mapped to the wrong place, or a rounding step of the released
  // model left out (without the experts' bf16 steps: cosine 0.98 by step
  // 1), would not.
  TensorMap hfq = hf;
  for (const QuantLinearDesc &q : quantLinears(cfg)) {
    const std::vector<std::string> names = hfTensorNames(cfg, q.prefix);
    for (size_t e = 0; e < names.size(); ++e) {
      const oracle::QuantWeight qw = oracle::quantWeight(w, q.prefix, q.in, q.out, cfg.group,
                                                         q.experts > 0 ? int64_t(e) : -1);
      HostTensor &t = hfq.at(names[e]);
      for (int64_t n = 0; n < q.out; ++n)
        for (int64_t k = 0; k < q.in; ++k)
          t.bf16()[n * q.in + k] = BFloat16(oracle::dequantW4(qw, k, n));
    }
  }
  DecodeState st;
  st.tensors.clear();
  for (const TensorDesc &d : stateTensors(cfg, 0))
    st.tensors.emplace(d.name, HostTensor(d));
  oracle::Kimi48bState ref = oracle::makeEmptyKimi48bState(c);
  int64_t token = 5;
  for (int step = 0; step < 8; ++step) {
    const ModelStepResult ours = oracleModelStep(cfg, w, st, token);
    const oracle::Kimi48bResult theirs = oracle::kimi48bStep(c, hfq, ref, token);
    std::vector<float> a(ours.logits.size()), b(theirs.logits.size());
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = ours.logits[i].toFloat();
      b[i] = theirs.logits[i].toFloat();
    }
    const double cs = cosineSimilarity(a.data(), b.data(), a.size());
    size_t differ = 0;
    for (size_t i = 0; i < a.size(); ++i)
      differ += a[i] != b[i];
    std::printf("[ info ] step %d: token %lld -> %lld (48B oracle %lld), logits cosine %.7f, "
                "%zu of %zu logits differ\n",
                step, (long long)token, (long long)ours.next, (long long)theirs.next, cs, differ,
                a.size());
    EXPECT_EQ(differ, 0u) << "step " << step << ": logits cosine " << cs;
    EXPECT_EQ(ours.next, theirs.next) << "step " << step;
    token = theirs.next;
  }
  fs::remove_all(dir);
}

} // namespace
