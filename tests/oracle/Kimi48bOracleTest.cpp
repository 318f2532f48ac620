//===- Kimi48bOracleTest.cpp - The Kimi-Linear-48B-A3B step's oracle ------===//
//
// The released config.json parses with the released values; bad configs are
// rejected naming the key; the two-rounding RMSNorm against hand values; and
// whole steps of a reduced model (dense first layer, KDA and MLA layers, a
// small MoE): deterministic, finite, the greedy token the logits' argmax,
// the state advanced (MLA caches gain one row holding the normalized latent,
// the conv windows shift in the new pre-conv rows, KDA S changes).
//
//===----------------------------------------------------------------------===//

#include "mk/Kimi48bOracle.h"

#include "OracleTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>

using namespace mk;
using namespace mk::oracle;

namespace {

using mk::oracle::test_util::bf;

const char *kTiny = R"({
  "hidden_size": 64, "num_hidden_layers": 4, "vocab_size": 96,
  "linear_attn_config": {"kda_layers": [1, 2, 4], "full_attn_layers": [3],
                         "num_heads": 2, "head_dim": 16, "short_conv_kernel_size": 4},
  "num_attention_heads": 2, "q_lora_rank": null, "kv_lora_rank": 16,
  "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8, "mla_use_nope": true,
  "intermediate_size": 48, "first_k_dense_replace": 1, "moe_layer_freq": 1,
  "moe_intermediate_size": 16, "num_experts": 8, "num_experts_per_token": 2,
  "num_shared_experts": 1, "routed_scaling_factor": 2.446,
  "moe_router_activation_func": "sigmoid", "num_expert_group": 1, "topk_group": 1,
  "moe_renormalize": true, "rms_norm_eps": 1e-5, "hidden_act": "silu",
  "tie_word_embeddings": false, "num_nextn_predict_layers": 0,
  "model_type": "kimi_linear", "rope_theta": 10000.0
})";

Kimi48bConfig tinyConfig() {
  Kimi48bConfig c;
  std::string err;
  EXPECT_TRUE(parseKimi48bConfig(kTiny, c, err)) << err;
  return c;
}

std::vector<float> floats(const HostTensor &t) { return t.toFloat(); }

TEST(Kimi48bOracle, ReleasedConfigParses) {
  Kimi48bConfig c;
  std::string err;
  ASSERT_TRUE(parseKimi48bConfig(std::string(MK_SOURCE_DIR) +
                                     "/examples/hf/kimi_linear_48b_a3b.config.json",
                                 c, err))
      << err;
  EXPECT_EQ(c.hidden, 2304);
  EXPECT_EQ(c.layers, 27);
  EXPECT_EQ(c.vocab, 163840);
  EXPECT_EQ(c.kdaHeads, 32);
  EXPECT_EQ(c.kdaHeadDim, 128);
  EXPECT_EQ(c.convKernel, 4);
  EXPECT_EQ(c.mlaHeads, 32);
  EXPECT_EQ(c.kvLora, 512);
  EXPECT_EQ(c.qkNope, 128);
  EXPECT_EQ(c.qkRope, 64);
  EXPECT_EQ(c.vHead, 128);
  EXPECT_EQ(c.inter, 9216);
  EXPECT_EQ(c.firstKDense, 1);
  EXPECT_EQ(c.moeInter, 1024);
  EXPECT_EQ(c.experts, 256);
  EXPECT_EQ(c.topK, 8);
  EXPECT_EQ(c.sharedExperts, 1);
  EXPECT_DOUBLE_EQ(c.routedScaling, 2.446);
  EXPECT_TRUE(c.renormalize);
  EXPECT_EQ(c.eps, 1e-5f);
  EXPECT_EQ(c.kvNormEps, 1e-6f);
  // K K K M x 6, then K K M: MLA at 0-based 3, 7, ..., 23, 26.
  int kda = 0;
  for (int64_t i = 0; i < c.layers; ++i) {
    const bool mla = (i < 24 && i % 4 == 3) || i == 26;
    EXPECT_EQ(c.isKda(i), !mla) << "layer " << i;
    EXPECT_EQ(c.isMoe(i), i >= 1) << "layer " << i;
    kda += c.isKda(i);
  }
  EXPECT_EQ(kda, 20);
}

TEST(Kimi48bOracle, ConfigErrorsNameTheKey) {
  const std::string good = kTiny;
  auto without = [&](const std::string &key) {
    std::string t = good;
    const size_t at = t.find("\"" + key + "\"");
    EXPECT_NE(at, std::string::npos) << key;
    t.replace(at, key.size() + 2, "\"x_" + key + "\"");
    return t;
  };
  auto replaced = [&](const std::string &from, const std::string &to) {
    std::string t = good;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    t.replace(at, from.size(), to);
    return t;
  };
  Kimi48bConfig c;
  std::string err;
  // A missing key (renamed to an unknown one: the unknown key is named first).
  EXPECT_FALSE(parseKimi48bConfig(without("kv_lora_rank"), c, err));
  EXPECT_NE(err.find("x_kv_lora_rank"), std::string::npos) << err;
  std::string t = replaced("\"kv_lora_rank\": 16,", "");
  EXPECT_FALSE(parseKimi48bConfig(t, c, err));
  EXPECT_NE(err.find("missing key 'kv_lora_rank'"), std::string::npos) << err;
  t = replaced("\"short_conv_kernel_size\": 4", "\"short_conv_kernel\": 4");
  EXPECT_FALSE(parseKimi48bConfig(t, c, err));
  EXPECT_NE(err.find("linear_attn_config.short_conv_kernel"), std::string::npos) << err;
  for (auto [from, to, why] :
       {std::tuple<const char *, const char *, const char *>{
            "\"hidden_size\": 64", "\"hidden_size\": 64.5", "'hidden_size' must be an integer"},
        {"\"num_hidden_layers\": 4", "\"num_hidden_layers\": 1025",
         "'num_hidden_layers' must be an integer in 1..1024"},
        {"\"rms_norm_eps\": 1e-5", "\"rms_norm_eps\": \"1e-5\"", "'rms_norm_eps' must be a number"},
        {"\"moe_renormalize\": true", "\"moe_renormalize\": 1", "'moe_renormalize' must be true or false"},
        {"\"mla_use_nope\": true", "\"mla_use_nope\": false", "'mla_use_nope' must be true"},
        {"\"q_lora_rank\": null", "\"q_lora_rank\": 1536", "'q_lora_rank' must be null"},
        {"\"moe_router_activation_func\": \"sigmoid\"", "\"moe_router_activation_func\": \"softmax\"",
         "'moe_router_activation_func' must be \"sigmoid\""},
        {"\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true",
         "'tie_word_embeddings' must be false"},
        {"\"kda_layers\": [1, 2, 4]", "\"kda_layers\": [1, 2]", "layer 4 (1-based)"},
        {"\"kda_layers\": [1, 2, 4]", "\"kda_layers\": [0, 1, 2, 4]", "1-based"},
        {"\"kda_layers\": [1, 2, 4]", "\"kda_layers\": \"1,2,4\"",
         "'linear_attn_config.kda_layers' must be an array of integers"},
        {"\"num_experts_per_token\": 2", "\"num_experts_per_token\": 9",
         "'num_experts_per_token' (9) must not exceed 'num_experts' (8)"},
        {"\"rope_theta\": 10000.0", "\"rope_thetas\": 10000.0", "unknown key 'rope_thetas'"}}) {
    EXPECT_FALSE(parseKimi48bConfig(replaced(from, to), c, err)) << to;
    EXPECT_NE(err.find(why), std::string::npos) << to << " -> " << err;
  }
  EXPECT_FALSE(parseKimi48bConfig("[1]", c, err));
  EXPECT_NE(err.find("JSON object"), std::string::npos) << err;
  EXPECT_FALSE(parseKimi48bConfig("/nonexistent/config.json", c, err));
  EXPECT_NE(err.find("/nonexistent/config.json"), std::string::npos) << err;
}

TEST(Kimi48bOracle, RmsNormRoundsTwice) {
  // x = [1, 3]: mean square 5, r = 1/sqrt(5 + eps); t = bf16(x r); y = bf16(t w).
  const std::vector<BFloat16> x = bf({1, 3}), w = bf({1.5f, 1.125f});
  std::vector<BFloat16> y(2);
  rmsNormTwoRoundings(x.data(), w.data(), 2, 1e-5f, y.data());
  const float r = 1.0f / std::sqrt(5.0f + 1e-5f);
  EXPECT_EQ(y[0].toFloat(), roundBf16(roundBf16(1.0f * r) * 1.5f));
  EXPECT_EQ(y[1].toFloat(), roundBf16(roundBf16(3.0f * r) * 1.125f));
  // One rounding would give a different value here (1.5078125).
  EXPECT_EQ(y[1].toFloat(), 1.515625f);
  EXPECT_NE(y[1].toFloat(), roundBf16(3.0f * r * 1.125f));
}

TEST(Kimi48bOracle, WeightsHaveTheHfNamesAndShapes) {
  const Kimi48bConfig c = tinyConfig();
  const TensorMap w = makeRandomKimi48bWeights(c, 7);
  auto shape = [&](const std::string &n) {
    auto it = w.find(n);
    EXPECT_NE(it, w.end()) << n;
    EXPECT_TRUE(it == w.end() || it->second.desc.dtype == DType::BF16) << n;
    return it == w.end() ? std::vector<int64_t>{} : it->second.desc.shape;
  };
  EXPECT_EQ(shape("model.embed_tokens.weight"), (std::vector<int64_t>{96, 64}));
  EXPECT_EQ(shape("lm_head.weight"), (std::vector<int64_t>{96, 64}));
  EXPECT_EQ(shape("model.layers.0.self_attn.q_conv1d.weight"), (std::vector<int64_t>{32, 1, 4}));
  EXPECT_EQ(shape("model.layers.0.self_attn.A_log"), (std::vector<int64_t>{1, 1, 2, 1}));
  EXPECT_EQ(shape("model.layers.0.mlp.gate_proj.weight"), (std::vector<int64_t>{48, 64}));
  EXPECT_EQ(shape("model.layers.2.self_attn.q_proj.weight"), (std::vector<int64_t>{24, 64}));
  EXPECT_EQ(shape("model.layers.2.self_attn.kv_a_proj_with_mqa.weight"),
            (std::vector<int64_t>{20, 64}));
  EXPECT_EQ(shape("model.layers.2.self_attn.kv_b_proj.weight"), (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(shape("model.layers.3.block_sparse_moe.experts.7.w2.weight"),
            (std::vector<int64_t>{64, 16}));
  EXPECT_EQ(shape("model.layers.1.block_sparse_moe.gate.e_score_correction_bias"),
            (std::vector<int64_t>{8}));
  EXPECT_EQ(shape("model.layers.1.block_sparse_moe.shared_experts.down_proj.weight"),
            (std::vector<int64_t>{64, 16}));
  EXPECT_EQ(w.count("model.layers.0.block_sparse_moe.gate.weight"), 0u);
  EXPECT_EQ(w.count("model.layers.1.mlp.gate_proj.weight"), 0u);
  // A_log = log(U(1, 16)).
  for (float a : floats(w.at("model.layers.3.self_attn.A_log"))) {
    EXPECT_GE(a, 0.0f);
    EXPECT_LE(a, std::log(16.0f) + 0.02f);
  }
}

TEST(Kimi48bOracle, StepIsDeterministicFiniteAndAdvancesTheState) {
  const Kimi48bConfig c = tinyConfig();
  const TensorMap w = makeRandomKimi48bWeights(c, 3);
  const Kimi48bState before = makeRandomKimi48bState(c, 5, 4);
  Kimi48bState s1 = before, s2 = before;
  Kimi48bTrace trace;
  const Kimi48bResult r1 = kimi48bStep(c, w, s1, 11, &trace);
  const Kimi48bResult r2 = kimi48bStep(c, w, s2, 11);
  ASSERT_EQ(r1.logits.size(), size_t(c.vocab));
  int64_t argmax = 0;
  for (size_t i = 0; i < r1.logits.size(); ++i) {
    EXPECT_EQ(r1.logits[i].bits, r2.logits[i].bits);
    EXPECT_TRUE(std::isfinite(r1.logits[i].toFloat()));
    if (r1.logits[i].toFloat() > r1.logits[size_t(argmax)].toFloat())
      argmax = int64_t(i);
  }
  EXPECT_EQ(r1.next, r2.next);
  EXPECT_EQ(r1.next, argmax);
  EXPECT_EQ(s1.ctxLen, 6);
  for (const auto &[name, t] : s1.tensors) {
    const HostTensor &t2 = s2.tensors.at(name);
    EXPECT_EQ(t.data, t2.data) << name;
    for (float v : floats(t))
      ASSERT_TRUE(std::isfinite(v)) << name;
  }
  // KDA: S changes; each window drops its oldest row and keeps the rest.
  for (int64_t i : {0, 1, 3}) {
    const std::string p = "state." + std::to_string(i) + ".";
    EXPECT_NE(s1.tensors.at(p + "S").data, before.tensors.at(p + "S").data) << p;
    for (const char *x : {"q_conv", "k_conv", "v_conv"}) {
      const HostTensor &a = before.tensors.at(p + x), &b = s1.tensors.at(p + x);
      ASSERT_EQ(b.desc.shape, (std::vector<int64_t>{3, 32}));
      EXPECT_EQ(0, std::memcmp(b.bf16(), a.bf16() + 32, 2 * 32 * sizeof(BFloat16))) << p << x;
      EXPECT_NE(0, std::memcmp(b.bf16() + 64, a.bf16() + 64, 32 * sizeof(BFloat16))) << p << x;
    }
  }
  // MLA: one row more, the old rows kept, the new latent row RMS-normalized
  // (kv_a_layernorm weights are ones: its mean square is ~1).
  const HostTensor &ckv = s1.tensors.at("state.2.c_kv"), &kr = s1.tensors.at("state.2.k_rope");
  ASSERT_EQ(ckv.desc.shape, (std::vector<int64_t>{6, 16}));
  ASSERT_EQ(kr.desc.shape, (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(0, std::memcmp(ckv.bf16(), before.tensors.at("state.2.c_kv").bf16(),
                           5 * 16 * sizeof(BFloat16)));
  EXPECT_EQ(0, std::memcmp(kr.bf16(), before.tensors.at("state.2.k_rope").bf16(),
                           5 * 4 * sizeof(BFloat16)));
  double ms = 0;
  for (int64_t j = 0; j < 16; ++j)
    ms += double(ckv.bf16()[5 * 16 + j].toFloat()) * ckv.bf16()[5 * 16 + j].toFloat();
  EXPECT_NEAR(ms / 16, 1.0, 0.03);
  // The trace: every layer, the router's choice in the MoE layers only.
  for (int64_t i = 0; i < c.layers; ++i)
    EXPECT_EQ(trace.values.at("layer" + std::to_string(i) + ".hidden").size(), size_t(c.hidden));
  EXPECT_EQ(trace.values.count("layer0.topk_idx"), 0u);
  ASSERT_EQ(trace.values.at("layer1.topk_idx").size(), 2u);
  const std::vector<float> &tw = trace.values.at("layer1.topk_w");
  EXPECT_NEAR(tw[0] + tw[1], 2.446, 1e-5);
  // A second step from the first's state: the cache grows again.
  const Kimi48bResult r3 = kimi48bStep(c, w, s1, r1.next);
  EXPECT_EQ(s1.ctxLen, 7);
  EXPECT_EQ(s1.tensors.at("state.2.c_kv").desc.shape[0], 7);
  bool differs = false;
  for (size_t i = 0; i < r3.logits.size(); ++i)
    differs = differs || r3.logits[i].bits != r1.logits[i].bits;
  EXPECT_TRUE(differs);
}

TEST(Kimi48bOracle, FreshSequenceStartsFromEmptyState) {
  const Kimi48bConfig c = tinyConfig();
  const TensorMap w = makeRandomKimi48bWeights(c, 5);
  Kimi48bState s = makeEmptyKimi48bState(c);
  EXPECT_EQ(s.tensors.at("state.2.c_kv").desc.shape, (std::vector<int64_t>{0, 16}));
  for (float v : floats(s.tensors.at("state.0.S")))
    ASSERT_EQ(v, 0.0f);
  const Kimi48bResult r = kimi48bStep(c, w, s, 0);
  EXPECT_EQ(s.ctxLen, 1);
  EXPECT_EQ(s.tensors.at("state.2.c_kv").desc.shape, (std::vector<int64_t>{1, 16}));
  for (const BFloat16 &v : r.logits)
    ASSERT_TRUE(std::isfinite(v.toFloat()));
  // From S = 0 the new S is k (beta v)^T per head: rank one, nonzero.
  bool nonzero = false;
  for (float v : floats(s.tensors.at("state.0.S")))
    nonzero = nonzero || v != 0.0f;
  EXPECT_TRUE(nonzero);
}

} // namespace
