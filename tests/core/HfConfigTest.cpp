//===- HfConfigTest.cpp - Block specs from Hugging Face config.json -------===//
//
// examples/hf/kimi_linear_48b_a3b.config.json carries the keys and values of
// the released Kimi-Linear-48B-A3B config.json; the cases below edit it.
//
//===----------------------------------------------------------------------===//

#include "mk/BlockSpec.h"
#include "mk/HfConfig.h"

#include "FuzzMutator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

using namespace mk;

namespace {

const std::string kReleased = std::string(MK_SOURCE_DIR) + "/examples/hf/kimi_linear_48b_a3b.config.json";
// A Qwen3 config.json (examples/hf/qwen3_8b.config.json: Qwen3-8B's
// dimensions in the Hugging Face layout) maps onto the dense GQA family:
// the same config as examples/specs/qwen3_8b_36l.json.
const std::string kQwen3 = std::string(MK_SOURCE_DIR) + "/examples/hf/qwen3_8b.config.json";

/// The text of a config file (a test failure if it is empty).
std::string configText(const std::string &path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << path;
  return ss.str();
}

std::string released() { return configText(kReleased); }

/// The released config with the first occurrence of `from` replaced by `to`.
std::string releasedWith(const std::string &from, const std::string &to) {
  std::string s = released();
  size_t p = s.find(from);
  EXPECT_NE(p, std::string::npos) << from;
  if (p != std::string::npos)
    s.replace(p, from.size(), to);
  return s;
}

HfImportOptions asUnit() {
  HfImportOptions o;
  o.asUnit = true;
  return o;
}

/// The import must fail with one line, leaving `out` untouched.
std::string importError(const std::string &text, const HfImportOptions &o = asUnit()) {
  HfImport out;
  out.config.hidden = 77;
  out.notes = {"kept"};
  std::string err;
  EXPECT_FALSE(importHfConfig(text, o, out, err));
  EXPECT_EQ(out.config.hidden, 77);
  EXPECT_EQ(out.notes, std::vector<std::string>{"kept"});
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  return err;
}

TEST(HfConfig, ReleasedKimiLinearMapsAsItIs) {
  // Every form of the released model is one of the family's (the sigmoid
  // router its `router`, the MLA without rotation its `mla_rotary`, the
  // experts' bf16 steps its `ffn_rounding`): no --hf-as-unit, no note but
  // the group's.
  HfImport out;
  std::string err;
  ASSERT_TRUE(importHfConfig(released(), HfImportOptions(), out, err)) << err;
  EXPECT_TRUE(out.config.ffnRoundEach);
  ASSERT_EQ(out.notes.size(), 1u);
  EXPECT_NE(out.notes[0].find("quantization group 128"), std::string::npos);
  // What the family does not compute is refused naming every difference
  // (and --hf-as-unit), and nothing it does represent.
  std::string text = releasedWith("\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true");
  ASSERT_NE(text.find("\"rope_scaling\": null"), std::string::npos);
  text = text.replace(text.find("\"rope_scaling\": null"), 20, "\"rope_scaling\": {\"factor\": 2}");
  err = importError(text, HfImportOptions());
  for (const char *key : {"tie_word_embeddings = true", "rope_scaling", "--hf-as-unit"})
    EXPECT_NE(err.find(key), std::string::npos) << key << " in: " << err;
  for (const char *key : {"model_type", "moe_renormalize", "use_grouped_topk", "q_lora_rank",
                          "first_k_dense_replace", "moe_router_activation_func", "mla_use_nope"})
    EXPECT_EQ(err.find(key), std::string::npos) << key << " in: " << err;
}

TEST(HfConfig, ReleasedKimiLinearKeepsItsDimensions) {
  HfImport out;
  std::string err;
  ASSERT_TRUE(importHfConfig(released(), HfImportOptions(), out, err)) << err;
  const BlockConfig &c = out.config;
  EXPECT_EQ(c.name, "kimi_linear_27l");
  EXPECT_EQ(c.hidden, 2304);
  EXPECT_EQ(c.kdaHeads, 32);
  EXPECT_EQ(c.kdaHeadDim, 128);
  EXPECT_EQ(c.shortConv, 4);
  EXPECT_EQ(c.mlaHeads, 32);
  EXPECT_EQ(c.kvLora, 512);
  EXPECT_EQ(c.qkNope, 128);
  EXPECT_EQ(c.qkRope, 64);
  EXPECT_EQ(c.vHead, 128);
  EXPECT_EQ(c.ropeTheta, 10000.0);
  EXPECT_EQ(c.nExperts, 256);
  EXPECT_EQ(c.nActive, 8);
  EXPECT_EQ(c.nShared, 1);
  EXPECT_EQ(c.moeInter, 1024);
  // Layer 0's dense SwiGLU FFN (first_k_dense_replace, intermediate_size).
  EXPECT_EQ(c.denseLayers, 1);
  EXPECT_EQ(c.denseInter, 9216);
  EXPECT_EQ(c.router, RouterKind::Sigmoid);
  EXPECT_EQ(c.routedScaling, 2.446);
  EXPECT_EQ(c.group, 128);
  EXPECT_EQ(c.eps, 1e-5);
  // 1-based kda_layers / full_attn_layers: MLA at 0-based 3, 7, ..., 23, 26.
  ASSERT_EQ(c.pattern.size(), 27u);
  for (size_t i = 0; i < 27; ++i) {
    bool mla = i == 26 || (i < 24 && i % 4 == 3);
    EXPECT_EQ(c.pattern[i], mla ? LayerKind::MLA : LayerKind::KDA) << "layer " << i;
  }
  // Its MLA: unrotated (mla_use_nope), the latent normalized (kv_a_layernorm).
  EXPECT_FALSE(c.mlaRotary);
  EXPECT_TRUE(c.mlaLatentNorm);
  EXPECT_TRUE(c.normRoundTwice);
  EXPECT_TRUE(c.kdaReleased);
  EXPECT_TRUE(c.ffnRoundEach);
  // The whole model: its vocabulary (embedding, untied LM head).
  EXPECT_EQ(c.vocab, 163840);
  EXPECT_FALSE(c.lmHeadBf16);
  // A note for the group only (the dense first layer, the sigmoid router,
  // the MLA form and the FFNs' rounding are represented).
  ASSERT_EQ(out.notes.size(), 1u);
  EXPECT_NE(out.notes[0].find("quantization group 128"), std::string::npos);
  // The spec it gives reads back the same.
  BlockConfig back;
  ASSERT_TRUE(parseBlockSpec(blockConfigToJson(c), back, err)) << err;
  EXPECT_EQ(blockConfigToJson(back), blockConfigToJson(c));
}

TEST(HfConfig, AliasesAndOptions) {
  HfImportOptions o = asUnit();
  o.name = "kl_test";
  o.group = 64;
  HfImport out;
  std::string err;
  std::string text = releasedWith("\"num_experts_per_token\"", "\"num_experts_per_tok\"");
  text = text.replace(text.find("\"num_experts\""), 13, "\"n_routed_experts\"");
  ASSERT_TRUE(importHfConfig(text, o, out, err)) << err;
  EXPECT_EQ(out.config.name, "kl_test");
  EXPECT_EQ(out.config.group, 64);
  EXPECT_EQ(out.config.nExperts, 256);
  EXPECT_EQ(out.config.nActive, 8);
  EXPECT_TRUE(out.notes.empty()) << "no group note when the group is given";
}

TEST(HfConfig, QuantizationConfigGivesTheGroup) {
  HfImport out;
  std::string err;
  std::string text = releasedWith(
      "\"use_cache\": true", "\"use_cache\": true, \"quantization_config\": {\"bits\": 4, "
                             "\"group_size\": 64, \"quant_method\": \"gptq\"}");
  ASSERT_TRUE(importHfConfig(text, asUnit(), out, err)) << err;
  EXPECT_EQ(out.config.group, 64);
  HfImportOptions other = asUnit();
  other.group = 128;
  EXPECT_NE(importError(text, other).find("differs from quantization_config.group_size (64)"),
            std::string::npos);
  std::string eight = releasedWith("\"use_cache\": true",
                                   "\"use_cache\": true, \"quantization_config\": {\"bits\": 8}");
  EXPECT_NE(importError(eight).find("quantization_config.bits = 8"), std::string::npos);
}

TEST(HfConfig, MalformedConfigsAreNamed) {
  struct Case {
    std::string text, expect;
  } cases[] = {
      {"{", "line 1"},
      {"[1]", "a config.json is an object"},
      {"{\"hidden_size\": 2304}", "missing model_type"},
      {releasedWith("\"kimi_linear\"", "\"llama\""),
       "dense GQA decoder without the per-head q / k norms"},
      {releasedWith("\"kimi_linear\"", "\"gpt2\""), "not a family this compiler knows"},
      {releasedWith("\"hidden_size\": 2304", "\"hidden_size\": 2304.5"),
       "hidden_size must be a positive integer, got 2304.5"},
      {releasedWith("\"hidden_size\": 2304,", ""), "missing hidden_size"},
      {releasedWith("\"kda_layers\": [1, 2,", "\"kda_layers\": [1, 1,"),
       "layer 1 is listed twice in linear_attn_config.kda_layers"},
      {releasedWith("\"kda_layers\": [1, 2,", "\"kda_layers\": [4, 2,"),
       "layer 4 is listed in both"},
      {releasedWith("\"kda_layers\": [1, 2,", "\"kda_layers\": [2,"),
       "layer 1 (1-based) is in neither"},
      {releasedWith("25, 26]", "25, 26, 28]"), "entry 28 is not a layer number in 1..27"},
      {releasedWith("\"linear_attn_config\": {", "\"linear_attn_config\": {\"chunk\": 64,"),
       "unknown key linear_attn_config.\"chunk\""},
      {releasedWith("\"use_cache\": true", "\"use_cache\": true, \"sliding_window\": 4096"),
       "unknown key \"sliding_window\""},
      {releasedWith("\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": -1"),
       "rms_norm_eps must be a positive number"},
      {releasedWith("\"qk_rope_head_dim\": 64", "\"qk_rope_head_dim\": 63"),
       "the mapped spec is not valid"},
      // A layer count is bounded before anything is made per layer (a
      // seeded mutant with 2^31 layers once exhausted the memory).
      {releasedWith("\"num_hidden_layers\": 27", "\"num_hidden_layers\": 2147483648"),
       "num_hidden_layers must be an integer in 1..1024, got 2147483648"},
  };
  for (const Case &c : cases) {
    std::string err = importError(c.text);
    EXPECT_NE(err.find(c.expect), std::string::npos) << "want '" << c.expect << "' in: " << err;
  }
  // An unknown key points at its line.
  std::string err = importError(
      releasedWith("\"use_cache\": true", "\"use_cache\": true,\n  \"sliding_window\": 4096"));
  EXPECT_NE(err.find("line "), std::string::npos) << err;
}

// mla_use_nope is the family's mla_rotary, negated; a non-boolean one is a
// difference named with its value.
TEST(HfConfig, MlaUseNopeIsTheMlaRotation) {
  HfImport out;
  std::string err;
  ASSERT_TRUE(importHfConfig(releasedWith("\"mla_use_nope\": true", "\"mla_use_nope\": false"),
                             asUnit(), out, err))
      << err;
  EXPECT_TRUE(out.config.mlaRotary);
  EXPECT_TRUE(out.config.mlaLatentNorm);
  err = importError(releasedWith("\"mla_use_nope\": true", "\"mla_use_nope\": 1"),
                    HfImportOptions());
  EXPECT_NE(err.find("mla_use_nope = 1: not a boolean"), std::string::npos) << err;
}

TEST(HfConfig, DifferencesTheUnitCannotExpress) {
  // Grouped top-k over several groups, a low-rank q and unrenormalized
  // weights are differences (refused, or notes with as_unit).
  std::string text = releasedWith("\"num_expert_group\": 1", "\"num_expert_group\": 8");
  text = text.replace(text.find("\"q_lora_rank\": null"), 19, "\"q_lora_rank\": 1536");
  text = text.replace(text.find("\"moe_renormalize\": true"), 23, "\"moe_renormalize\": false");
  std::string err = importError(text, HfImportOptions());
  for (const char *key : {"use_grouped_topk", "q_lora_rank = 1536", "moe_renormalize = false"})
    EXPECT_NE(err.find(key), std::string::npos) << key << " in: " << err;
  HfImport out;
  ASSERT_TRUE(importHfConfig(text, asUnit(), out, err)) << err;
  EXPECT_EQ(out.notes.size(), 4u); // the group and the three above
  // A router activation the family lacks is one too.
  err = importError(releasedWith("\"moe_router_activation_func\": \"sigmoid\"",
                                 "\"moe_router_activation_func\": \"relu\""),
                    HfImportOptions());
  EXPECT_NE(err.find("moe_router_activation_func = \"relu\""), std::string::npos) << err;
}

// first_k_dense_replace needs the dense FFN's width and at most the model's
// layers; 0 maps to no dense layer.
// vocab_size is the whole model's vocabulary (a positive multiple of 16: the
// W4A16 LM head's tiles); a tied LM head is a difference; without
// vocab_size the import gives the layer stack alone.
TEST(HfConfig, Vocabulary) {
  HfImport out;
  std::string err;
  EXPECT_FALSE(importHfConfig(releasedWith("\"vocab_size\": 163840", "\"vocab_size\": 1000"),
                              asUnit(), out, err));
  EXPECT_NE(err.find("vocab_size must be a positive multiple of 16, got 1000"), std::string::npos)
      << err;
  EXPECT_FALSE(importHfConfig(releasedWith("\"vocab_size\": 163840", "\"vocab_size\": \"big\""),
                              asUnit(), out, err));
  EXPECT_NE(err.find("vocab_size must be"), std::string::npos) << err;
  ASSERT_TRUE(importHfConfig(
      releasedWith("\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true"), asUnit(),
      out, err))
      << err;
  bool tiedNote = false;
  for (const std::string &n : out.notes)
    tiedNote |= n.find("tie_word_embeddings = true") != std::string::npos;
  EXPECT_TRUE(tiedNote);
  ASSERT_TRUE(importHfConfig(
      releasedWith("\"vocab_size\": 163840", "\"_name_or_path\": \"no vocabulary\""), asUnit(),
      out, err))
      << err;
  EXPECT_EQ(out.config.vocab, 0);
}

TEST(HfConfig, DenseFirstLayers) {
  EXPECT_NE(importError(releasedWith("\"intermediate_size\": 9216,", "")).find(
                "first_k_dense_replace = 1 needs intermediate_size"),
            std::string::npos);
  EXPECT_NE(importError(releasedWith("\"first_k_dense_replace\": 1", "\"first_k_dense_replace\": 28"))
                .find("first_k_dense_replace = 28 exceeds the 27 layers"),
            std::string::npos);
  EXPECT_NE(importError(releasedWith("\"first_k_dense_replace\": 1", "\"first_k_dense_replace\": -1"))
                .find("first_k_dense_replace must be an integer >= 0"),
            std::string::npos);
  HfImport out;
  std::string err;
  ASSERT_TRUE(importHfConfig(releasedWith("\"first_k_dense_replace\": 1", "\"first_k_dense_replace\": 0"),
                             asUnit(), out, err))
      << err;
  EXPECT_EQ(out.config.denseLayers, 0);
}

// Seeded mutants of the released config and of Qwen3-8B's
// (tests/support/FuzzMutator.h: MK_FUZZ_SEED, MK_FUZZ_ITERS): every one is
// imported or refused in one line, and what is imported is a valid spec.
TEST(HfConfig, MutantsAreImportedOrRefusedInOneLine) {
  const std::string base = released();
  const std::string qwen = configText(kQwen3);
  std::mt19937_64 rng(mk::testing::seedOr(20261202));
  const int n = mk::testing::iterations(3000);
  int imported = 0;
  for (int i = 0; i < n; ++i) {
    const bool q = rng() % 4 == 0;
    const std::string s = mk::testing::mutate(q ? qwen : base, q ? base : qwen, rng);
    HfImportOptions o = asUnit();
    HfImport out;
    out.config.hidden = 77;
    std::string err;
    if (importHfConfig(s, o, out, err)) {
      ++imported;
      BlockConfig back;
      ASSERT_TRUE(parseBlockSpec(blockConfigToJson(out.config), back, err)) << "mutant " << i
                                                                             << ": " << err;
    } else {
      ASSERT_FALSE(err.empty()) << "mutant " << i;
      ASSERT_EQ(err.find('\n'), std::string::npos) << "mutant " << i << ": " << err;
      ASSERT_EQ(out.config.hidden, 77) << "mutant " << i << ": the output changed on a failure";
    }
  }
  EXPECT_GT(imported, 0) << "some mutants (in ignored values, say) still import";
}

TEST(HfConfig, FileErrorsNameThePath) {
  HfImport out;
  std::string err;
  EXPECT_FALSE(importHfConfigFile("/no/such/config.json", asUnit(), out, err));
  EXPECT_NE(err.find("/no/such/config.json: cannot open"), std::string::npos) << err;
  EXPECT_TRUE(importHfConfigFile(kReleased, asUnit(), out, err)) << err;
  // A directory stands for its config.json.
  const std::string dir = std::string(MK_TEST_TMPDIR) + "/hf-checkpoint";
  std::system(("mkdir -p '" + dir + "'").c_str());
  std::ofstream(dir + "/config.json") << released();
  HfImport fromDir;
  ASSERT_TRUE(importHfConfigFile(dir, asUnit(), fromDir, err)) << err;
  EXPECT_EQ(blockConfigToJson(fromDir.config), blockConfigToJson(out.config));
  std::system(("rm -f '" + dir + "/config.json'").c_str());
  EXPECT_FALSE(importHfConfigFile(dir, asUnit(), fromDir, err));
  EXPECT_NE(err.find("hf-checkpoint/config.json: cannot open"), std::string::npos) << err;
}

std::string qwen3With(const std::string &from, const std::string &to) {
  std::string s = configText(kQwen3);
  size_t p = s.find(from);
  EXPECT_NE(p, std::string::npos) << from;
  if (p != std::string::npos)
    s.replace(p, from.size(), to);
  return s;
}

TEST(HfConfig, Qwen3IsTheDenseGqaFamily) {
  HfImport got;
  std::string err;
  ASSERT_TRUE(importHfConfigFile(kQwen3, HfImportOptions{}, got, err)) << err;
  BlockConfig want;
  ASSERT_TRUE(loadBlockSpecFile(std::string(MK_SOURCE_DIR) + "/examples/specs/qwen3_8b_36l.json",
                                want, err))
      << err;
  EXPECT_EQ(got.config.family, BlockFamily::DenseGqa);
  EXPECT_EQ(got.config.name, "qwen3_36l");
  want.name = got.config.name;
  EXPECT_EQ(blockConfigToJson(got.config), blockConfigToJson(want));
  ASSERT_EQ(got.notes.size(), 1u);
  EXPECT_NE(got.notes[0].find("quantization group 128"), std::string::npos);
  // A quantized checkpoint's group.
  ASSERT_TRUE(importHfConfig(qwen3With("\"use_cache\": true",
                                       "\"use_cache\": true, \"quantization_config\": "
                                       "{\"bits\": 4, \"group_size\": 64}"),
                             HfImportOptions{}, got, err))
      << err;
  EXPECT_EQ(got.config.group, 64);
}

TEST(HfConfig, Qwen3DifferencesAndErrors) {
  // What the family does not compute: refused naming each, or noted as-unit.
  std::string both = qwen3With("\"attention_bias\": false", "\"attention_bias\": true");
  const std::string rope = "\"rope_scaling\": null";
  ASSERT_NE(both.find(rope), std::string::npos);
  both.replace(both.find(rope), rope.size(),
               "\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0}");
  std::string err = importError(both, HfImportOptions{});
  EXPECT_NE(err.find("attention_bias = true: biases"), std::string::npos) << err;
  EXPECT_NE(err.find("rope_scaling = object: scaled RoPE"), std::string::npos) << err;
  EXPECT_NE(err.find("--hf-as-unit"), std::string::npos) << err;
  HfImport got;
  ASSERT_TRUE(importHfConfig(both, asUnit(), got, err)) << err;
  EXPECT_EQ(got.notes.size(), 3u);
  EXPECT_EQ(got.config.gqaKvHeads, 8);
  // Malformed or unknown: an error even as-unit.
  EXPECT_NE(importError(qwen3With("\"num_key_value_heads\": 8", "\"num_key_value_heads\": 0"))
                .find("num_key_value_heads must be a positive integer, got 0"),
            std::string::npos);
  EXPECT_NE(importError(qwen3With("\"num_key_value_heads\": 8", "\"num_key_value_heads\": 5"))
                .find("'heads' (32) must be a multiple of 'kv_heads' (5)"),
            std::string::npos);
  EXPECT_NE(importError(qwen3With("\"num_hidden_layers\": 36", "\"num_hidden_layers\": 1025"))
                .find("num_hidden_layers must be an integer in 1..1024, got 1025"),
            std::string::npos);
  EXPECT_NE(importError(qwen3With("\"head_dim\": 128,", "")).find("missing head_dim"),
            std::string::npos);
  EXPECT_NE(importError(qwen3With("\"use_cache\": true", "\"use_cache\": true, \"mlp_bias\": 1"))
                .find("unknown key \"mlp_bias\""),
            std::string::npos);
}

} // namespace
