//===- BlockSpecTest.cpp - Tests of the block spec reader and writer ------===//

#include "mk/BlockSpec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>

using namespace mk;

namespace {

const char *kTiny = R"({
  "name": "tiny",
  "config": {
    "hidden": 256, "kda_heads": 2, "kda_head_dim": 32, "short_conv": 4,
    "mla_heads": 2, "kv_lora": 128, "qk_nope": 32, "qk_rope": 16, "v_head": 32,
    "rope_theta": 10000, "n_experts": 8, "n_active": 2, "n_shared": 1,
    "moe_inter": 128, "routed_scaling": 2.446, "group": 32, "eps": 1e-6
  },
  "pattern": ["K", "K", "K", "M"]
})";

/// `base` with the first occurrence of `from` replaced by `to`.
std::string replaced(std::string s, const std::string &from, const std::string &to) {
  size_t p = s.find(from);
  EXPECT_NE(p, std::string::npos) << from;
  if (p != std::string::npos)
    s.replace(p, from.size(), to);
  return s;
}
std::string tinyWith(const std::string &from, const std::string &to) {
  return replaced(kTiny, from, to);
}

std::string specError(const std::string &text) {
  BlockConfig cfg;
  cfg.hidden = 77; // must stay untouched on failure
  std::string err;
  EXPECT_FALSE(parseBlockSpec(text, cfg, err)) << text;
  EXPECT_EQ(cfg.hidden, 77);
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  return err;
}

TEST(BlockSpec, ParsesTiny) {
  BlockConfig cfg;
  std::string err;
  ASSERT_TRUE(parseBlockSpec(kTiny, cfg, err)) << err;
  EXPECT_EQ(cfg.name, "tiny");
  EXPECT_EQ(cfg.hidden, 256);
  EXPECT_EQ(cfg.kdaHeads, 2);
  EXPECT_EQ(cfg.kdaHeadDim, 32);
  EXPECT_EQ(cfg.shortConv, 4);
  EXPECT_EQ(cfg.mlaHeads, 2);
  EXPECT_EQ(cfg.kvLora, 128);
  EXPECT_EQ(cfg.qkNope, 32);
  EXPECT_EQ(cfg.qkRope, 16);
  EXPECT_EQ(cfg.vHead, 32);
  EXPECT_EQ(cfg.ropeTheta, 10000.0);
  EXPECT_EQ(cfg.nExperts, 8);
  EXPECT_EQ(cfg.nActive, 2);
  EXPECT_EQ(cfg.nShared, 1);
  EXPECT_EQ(cfg.moeInter, 128);
  EXPECT_EQ(cfg.routedScaling, 2.446);
  EXPECT_EQ(cfg.group, 32);
  EXPECT_EQ(cfg.eps, 1e-6);
  EXPECT_EQ(cfg.pattern,
            (std::vector<LayerKind>{LayerKind::KDA, LayerKind::KDA,
                                    LayerKind::KDA, LayerKind::MLA}));
}

TEST(BlockSpec, ExampleFilesMatchDefaults) {
  BlockConfig cfg;
  std::string err;
  ASSERT_TRUE(loadBlockSpecFile(
      MK_SOURCE_DIR "/examples/kimi_linear_w4a16.json", cfg, err))
      << err;
  EXPECT_EQ(blockConfigToJson(cfg), blockConfigToJson(BlockConfig()));
  for (const char *f : {"tiny.json", "tiny_mla_first.json",
                        "tiny_no_shared.json"}) {
    BlockConfig c;
    EXPECT_TRUE(loadBlockSpecFile(
        std::string(MK_SOURCE_DIR "/examples/specs/") + f, c, err))
        << err;
  }
}

TEST(BlockSpec, LongLayerNamesAndEpsDefault) {
  BlockConfig cfg;
  std::string err;
  std::string s = tinyWith(", \"eps\": 1e-6", "");
  s = s.replace(s.find("[\"K\", \"K\", \"K\", \"M\"]"), 20,
                "[\"kda\", \"mla\", \"K\"]");
  ASSERT_TRUE(parseBlockSpec(s, cfg, err)) << err;
  EXPECT_EQ(cfg.eps, 1e-6);
  EXPECT_EQ(cfg.pattern, (std::vector<LayerKind>{LayerKind::KDA, LayerKind::MLA,
                                                 LayerKind::KDA}));
}

TEST(BlockSpec, RoundTrip) {
  BlockConfig cfg;
  cfg.name = "odd";
  cfg.ropeTheta = 123456.789;
  cfg.routedScaling = 1.0 / 3.0;
  cfg.eps = 1.2345678901234567e-7;
  cfg.pattern = {LayerKind::MLA, LayerKind::KDA};
  std::string text = blockConfigToJson(cfg);
  BlockConfig back;
  std::string err;
  ASSERT_TRUE(parseBlockSpec(text, back, err)) << err << "\n" << text;
  EXPECT_EQ(back.name, "odd");
  EXPECT_EQ(back.ropeTheta, cfg.ropeTheta);
  EXPECT_EQ(back.routedScaling, cfg.routedScaling);
  EXPECT_EQ(back.eps, cfg.eps);
  EXPECT_EQ(back.pattern, cfg.pattern);
  EXPECT_EQ(blockConfigToJson(back), text);
  // The writer emits every key, in the documented order.
  EXPECT_NE(text.find("\"hidden\": 2304"), std::string::npos) << text;
  EXPECT_NE(text.find("\"pattern\": [\"M\", \"K\"]"), std::string::npos)
      << text;
}

TEST(BlockSpec, MalformedJson) {
  EXPECT_EQ(specError(tinyWith("\"short_conv\": 4,", "\"short_conv\": 4")),
             "line 5, column 5: expected ',' or '}', found '\"'");
  EXPECT_EQ(specError("{\"name\": \"x\",}"),
            "line 1, column 14: expected a string key, found '}'");
}

TEST(BlockSpec, UnknownKeys) {
  EXPECT_EQ(specError(tinyWith("\"group\": 32", "\"group\": 32, \"grop\": 1")),
            "line 7, column 61: unknown config key 'grop'");
  EXPECT_EQ(
      specError(tinyWith("\"name\": \"tiny\",", "\"name\": \"tiny\", \"x\": [],")),
      "line 2, column 19: unknown key 'x' (expected 'name', 'family', 'config', "
      "'pattern')");
}

TEST(BlockSpec, MissingKeys) {
  EXPECT_EQ(specError(tinyWith("\"v_head\": 32,", "")),
            "line 3, column 13: config is missing required key 'v_head'");
  EXPECT_EQ(specError(tinyWith("\"routed_scaling\": 2.446,", "")),
            "line 3, column 13: config is missing required key "
            "'routed_scaling'");
  EXPECT_EQ(specError(tinyWith("\"name\": \"tiny\",", "")),
            "line 1, column 1: block spec is missing required key 'name'");
  EXPECT_EQ(specError("{\"name\": \"a\", \"config\": {}}"),
            "line 1, column 25: config is missing required key 'hidden'");
}

TEST(BlockSpec, WrongTypes) {
  EXPECT_EQ(specError(tinyWith("\"hidden\": 256", "\"hidden\": \"256\"")),
            "line 4, column 15: config key 'hidden' must be an integer, got "
            "string");
  EXPECT_EQ(specError(tinyWith("\"hidden\": 256", "\"hidden\": 256.5")),
            "line 4, column 15: config key 'hidden' must be an integer, got "
            "256.5");
  EXPECT_EQ(specError(tinyWith("\"hidden\": 256", "\"hidden\": 2.56e2")),
            "line 4, column 15: config key 'hidden' must be an integer, got "
            "2.56e2");
  EXPECT_EQ(specError(tinyWith("\"rope_theta\": 10000", "\"rope_theta\": null")),
            "line 6, column 19: config key 'rope_theta' must be a number, got "
            "null");
  EXPECT_EQ(specError(tinyWith("\"name\": \"tiny\"", "\"name\": 3")),
            "line 2, column 11: 'name' must be a string, got number");
  EXPECT_NE(specError(tinyWith("\"name\": \"tiny\"", "\"name\": \"a b\""))
                .find("'name' must be non-empty"),
            std::string::npos);
  EXPECT_EQ(specError("[1]"),
            "line 1, column 1: a block spec must be a JSON object, got array");
  EXPECT_NE(specError(tinyWith("\"hidden\": 256", "\"hidden\": 99999999999"))
                .find("too large"),
            std::string::npos);
}

TEST(BlockSpec, BadPattern) {
  EXPECT_EQ(specError(tinyWith("\"M\"]", "\"X\"]")),
            "line 9, column 30: unknown layer kind \"X\" in 'pattern' "
            "(expected \"K\", \"kda\", \"M\", \"mla\", \"G\" or \"gqa\")");
  EXPECT_EQ(specError(tinyWith("\"M\"]", "7]")),
            "line 9, column 30: pattern entries must be strings (\"K\", "
            "\"kda\", \"M\", \"mla\", \"G\" or \"gqa\"), got number");
  EXPECT_EQ(specError(tinyWith("[\"K\", \"K\", \"K\", \"M\"]", "\"KKKM\"")),
            "line 9, column 14: 'pattern' must be an array of \"K\"/\"M\"/\"G\", got "
            "string");
  EXPECT_EQ(specError(tinyWith("[\"K\", \"K\", \"K\", \"M\"]", "[]")),
            "invalid block spec: 'pattern' must list at least one layer");
  // At most BlockConfig::kMaxLayers layers.
  std::string many = "[\"K\"";
  for (int i = 1; i < 1025; ++i)
    many += ", \"K\"";
  many += "]";
  EXPECT_EQ(specError(tinyWith("[\"K\", \"K\", \"K\", \"M\"]", many)),
            "invalid block spec: 'pattern' lists 1025 layers, at most 1024");
}

TEST(BlockSpec, ContradictoryDims) {
  struct Case {
    const char *from, *to, *error;
  };
  const Case cases[] = {
      {"\"n_active\": 2", "\"n_active\": 9", "'n_active' (9) exceeds 'n_experts' (8)"},
      {"\"group\": 32", "\"group\": 48",
       "input dim 256 of 'blocks.0.attn.q_proj' is not divisible by the group size 48"},
      {"\"moe_inter\": 128", "\"moe_inter\": 80",
       "input dim 80 of 'blocks.0.moe.down' is not divisible by the group size 32"},
      {"\"kda_heads\": 2", "\"kda_heads\": 0", "'kda_heads' must be positive, got 0"},
      {"\"qk_rope\": 16", "\"qk_rope\": 15", "'qk_rope' must be even (rotary pairs), got 15"},
      {"\"eps\": 1e-6", "\"eps\": -1", "'eps' must be positive"},
      // The optional dense-FFN keys.
      {"\"group\": 32", "\"dense_layers\": 5, \"dense_inter\": 64, \"group\": 32",
       "'dense_layers' (5) exceeds the 4 layers of 'pattern'"},
      {"\"group\": 32", "\"dense_layers\": 1, \"group\": 32",
       "'dense_inter' must be positive where 'dense_layers' is set, got 0"},
      {"\"group\": 32", "\"dense_layers\": -1, \"group\": 32",
       "'dense_layers' must be >= 0, got -1"},
      {"\"group\": 32", "\"dense_layers\": 1, \"dense_inter\": 80, \"group\": 32",
       "input dim 80 of 'blocks.0.mlp.down' is not divisible by the group size 32"},
  };
  for (const Case &c : cases)
    EXPECT_EQ(specError(tinyWith(c.from, c.to)), std::string("invalid block spec: ") + c.error)
        << c.to;
}

// Layers below dense_layers own a dense FFN (blocks.i.mlp, one-expert
// stacks, and mlp_norm) instead of the MoE's router, experts and norm; the
// keys round-trip, and a spec without them writes none.
TEST(BlockSpec, DenseFfnLayers) {
  BlockConfig cfg;
  cfg.denseLayers = 1;
  cfg.denseInter = 9216;
  ASSERT_EQ(cfg.validate(), "");
  BlockConfig back;
  std::string err;
  ASSERT_TRUE(parseBlockSpec(blockConfigToJson(cfg), back, err)) << err;
  EXPECT_EQ(back.denseLayers, 1);
  EXPECT_EQ(back.denseInter, 9216);
  EXPECT_EQ(blockConfigToJson(BlockConfig{}).find("dense"), std::string::npos);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const TensorDesc &t : parameterTensors(cfg))
    shapes[t.name] = t.shape;
  EXPECT_EQ(shapes["blocks.0.mlp.gate.w_q"], (std::vector<int64_t>{1152, 9216}));
  EXPECT_EQ(shapes["blocks.0.mlp.down.scales"], (std::vector<int64_t>{72, 2304}));
  EXPECT_EQ(shapes["blocks.0.mlp_norm"], (std::vector<int64_t>{2304}));
  EXPECT_EQ(shapes.count("blocks.0.moe.router.weight"), 0u);
  EXPECT_EQ(shapes.count("blocks.0.moe_norm"), 0u);
  EXPECT_EQ(shapes.count("blocks.0.moe.s_gate.w_q"), 0u);
  EXPECT_EQ(shapes.count("blocks.1.moe.router.weight"), 1u);
  EXPECT_EQ(shapes.count("blocks.1.mlp.gate.w_q"), 0u);
}

const char *kDense = R"({
  "name": "d", "family": "dense_gqa",
  "config": {"hidden": 256, "heads": 4, "kv_heads": 2, "head_dim": 64, "inter": 384,
             "rope_theta": 1000000, "group": 32, "layers": 3}
})";

std::string denseWith(const std::string &from, const std::string &to) {
  return replaced(kDense, from, to);
}

// The dense GQA family: `layers` GQA layers, each with a dense FFN of width
// `inter`, the spec's names and shapes (docs/semantics-dense-gqa.md).
TEST(BlockSpec, DenseGqaFamily) {
  BlockConfig cfg;
  std::string err;
  ASSERT_TRUE(parseBlockSpec(kDense, cfg, err)) << err;
  EXPECT_EQ(cfg.family, BlockFamily::DenseGqa);
  EXPECT_EQ(cfg.pattern, std::vector<LayerKind>(3, LayerKind::GQA));
  EXPECT_EQ(cfg.denseLayers, 3);
  EXPECT_EQ(cfg.denseInter, 384);
  EXPECT_EQ(cfg.gqaHeads, 4);
  EXPECT_EQ(cfg.gqaKvHeads, 2);
  EXPECT_EQ(cfg.gqaHeadDim, 64);
  EXPECT_EQ(cfg.ropeTheta, 1e6);
  EXPECT_EQ(cfg.eps, 1e-6);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const TensorDesc &t : parameterTensors(cfg))
    shapes[t.name] = t.shape;
  EXPECT_EQ(shapes["blocks.2.attn.q_proj.w_q"], (std::vector<int64_t>{128, 256}));
  EXPECT_EQ(shapes["blocks.2.attn.k_proj.scales"], (std::vector<int64_t>{8, 128}));
  EXPECT_EQ(shapes["blocks.2.attn.o_proj.w_q"], (std::vector<int64_t>{128, 256}));
  EXPECT_EQ(shapes["blocks.2.attn.q_norm"], (std::vector<int64_t>{64}));
  EXPECT_EQ(shapes["blocks.2.attn.k_norm"], (std::vector<int64_t>{64}));
  EXPECT_EQ(shapes["blocks.2.mlp.down.w_q"], (std::vector<int64_t>{192, 256}));
  EXPECT_EQ(shapes.count("blocks.0.moe_norm"), 0u);
  EXPECT_EQ(shapes.size(), 3u * 25u); // norm, 4 + 3 W4A16 triples, q / k / mlp norms
  std::vector<TensorDesc> st = stateTensors(cfg, 5);
  ASSERT_EQ(st.size(), 6u);
  EXPECT_EQ(st[0].name, "state.0.k_cache");
  EXPECT_EQ(st[1].name, "state.0.v_cache");
  EXPECT_EQ(st[1].shape, (std::vector<int64_t>{5, 2, 64}));
  // Written back in its own form, and read again to the same config.
  const std::string text = blockConfigToJson(cfg);
  EXPECT_NE(text.find("\"family\": \"dense_gqa\""), std::string::npos) << text;
  EXPECT_EQ(text.find("pattern"), std::string::npos) << text;
  BlockConfig back;
  ASSERT_TRUE(parseBlockSpec(text, back, err)) << err;
  EXPECT_EQ(blockConfigToJson(back), text);
  // The example specs read.
  for (const char *f : {"tiny_dense_gqa", "qwen3_8b_layer"})
    EXPECT_TRUE(loadBlockSpecFile(std::string(MK_SOURCE_DIR) + "/examples/specs/" + f + ".json",
                                  back, err))
        << err;
}

TEST(BlockSpec, DenseGqaErrors) {
  EXPECT_EQ(specError(denseWith("\"layers\": 3", "\"layers\": 3, \"kda_heads\": 2")),
            "line 4, column 63: unknown config key 'kda_heads'");
  EXPECT_EQ(specError(denseWith(", \"layers\": 3", "")),
            "line 3, column 13: config is missing required key 'layers'");
  EXPECT_EQ(specError(denseWith("\"layers\": 3", "\"layers\": 0")),
            "line 4, column 60: config key 'layers' must be in 1..1024, got 0");
  EXPECT_EQ(specError(denseWith("\"layers\": 3", "\"layers\": 1025")),
            "line 4, column 60: config key 'layers' must be in 1..1024, got 1025");
  EXPECT_EQ(specError(denseWith("\"kv_heads\": 2", "\"kv_heads\": 3")),
            "invalid block spec: 'heads' (4) must be a multiple of 'kv_heads' (3)");
  EXPECT_EQ(specError(denseWith("\"head_dim\": 64", "\"head_dim\": 63")),
            "invalid block spec: 'head_dim' must be even (rotate-half pairs), got 63");
  EXPECT_EQ(specError(denseWith("\"family\": \"dense_gqa\"", "\"family\": \"dense\"")),
            "line 2, column 26: 'family' must be \"kimi_linear\" or \"dense_gqa\", got \"dense\"");
  EXPECT_EQ(specError(denseWith("\"family\": \"dense_gqa\",",
                                "\"family\": \"dense_gqa\", \"pattern\": [\"G\"],")),
            "line 2, column 39: unknown key 'pattern' (expected 'name', 'family', 'config'; a "
            "dense_gqa spec has no 'pattern', its config has 'layers')");
}

// "G" layers in the Kimi family's pattern, with the gqa_* sizes.
TEST(BlockSpec, GqaLayersInTheHybridPattern) {
  BlockConfig cfg;
  std::string err;
  const std::string text0 = tinyWith("\"group\": 32", "\"group\": 32, \"gqa_heads\": 4, "
                                                     "\"gqa_kv_heads\": 1, \"gqa_head_dim\": 64");
  const size_t m = text0.find("\"M\"]");
  ASSERT_NE(m, std::string::npos);
  ASSERT_TRUE(parseBlockSpec(std::string(text0).replace(m, 3, "\"G\""), cfg, err)) << err;
  EXPECT_EQ(cfg.pattern.back(), LayerKind::GQA);
  EXPECT_EQ(cfg.gqaHeads, 4);
  cfg.pattern = {LayerKind::GQA, LayerKind::KDA};
  ASSERT_EQ(cfg.validate(), "");
  const std::string text = blockConfigToJson(cfg);
  EXPECT_NE(text.find("\"gqa_kv_heads\": 1"), std::string::npos) << text;
  EXPECT_NE(text.find("\"G\""), std::string::npos) << text;
  BlockConfig back;
  ASSERT_TRUE(parseBlockSpec(text, back, err)) << err;
  EXPECT_EQ(back.pattern, cfg.pattern);
  EXPECT_EQ(back.gqaKvHeads, 1);
  EXPECT_EQ(blockConfigToJson(BlockConfig{}).find("gqa_"), std::string::npos);
}

TEST(BlockSpec, SigmoidRouter) {
  BlockConfig cfg;
  std::string err;
  ASSERT_TRUE(parseBlockSpec(tinyWith("\"group\"", "\"router\": \"sigmoid\", \"group\""), cfg, err))
      << err;
  EXPECT_EQ(cfg.router, RouterKind::Sigmoid);
  // Written back only where it is not the unit's softmax.
  BlockConfig back;
  ASSERT_TRUE(parseBlockSpec(blockConfigToJson(cfg), back, err)) << err;
  EXPECT_EQ(back.router, RouterKind::Sigmoid);
  EXPECT_EQ(blockConfigToJson(BlockConfig{}).find("router\""), std::string::npos);
  ASSERT_TRUE(parseBlockSpec(tinyWith("\"group\"", "\"router\": \"softmax\", \"group\""), cfg, err))
      << err;
  EXPECT_EQ(cfg.router, RouterKind::Softmax);
  // Its correction bias is a parameter of every MoE layer, after the router.
  cfg.router = RouterKind::Sigmoid;
  std::vector<std::string> names;
  for (const TensorDesc &t : parameterTensors(cfg))
    names.push_back(t.name);
  auto at = std::find(names.begin(), names.end(), "blocks.1.moe.router.bias");
  ASSERT_NE(at, names.end());
  EXPECT_EQ(*(at - 1), "blocks.1.moe.router.weight");
  EXPECT_NE(specError(tinyWith("\"group\"", "\"router\": \"relu\", \"group\""))
                .find("config key 'router' must be \"softmax\" or \"sigmoid\", got \"relu\""),
            std::string::npos);
  EXPECT_NE(specError(tinyWith("\"group\"", "\"router\": 1, \"group\""))
                .find("config key 'router' must be \"softmax\" or \"sigmoid\", got number"),
            std::string::npos);
}

TEST(BlockSpec, MlaForm) {
  BlockConfig cfg;
  std::string err;
  ASSERT_TRUE(parseBlockSpec(tinyWith("\"group\"",
                                      "\"mla_rotary\": false, \"mla_latent_norm\": true, \"group\""),
                             cfg, err))
      << err;
  EXPECT_FALSE(cfg.mlaRotary);
  EXPECT_TRUE(cfg.mlaLatentNorm);
  // Written back only where they are not the unit's.
  BlockConfig back;
  ASSERT_TRUE(parseBlockSpec(blockConfigToJson(cfg), back, err)) << err;
  EXPECT_FALSE(back.mlaRotary);
  EXPECT_TRUE(back.mlaLatentNorm);
  const std::string unit = blockConfigToJson(BlockConfig{});
  EXPECT_EQ(unit.find("mla_rotary"), std::string::npos);
  EXPECT_EQ(unit.find("mla_latent_norm"), std::string::npos);
  // The latent norm's weight is a parameter of every MLA layer, after its
  // linears; not of KDA layers, nor without the norm.
  std::vector<std::string> names;
  for (const TensorDesc &t : parameterTensors(cfg))
    names.push_back(t.name);
  auto at = std::find(names.begin(), names.end(), "blocks.3.attn.kv_a_norm");
  ASSERT_NE(at, names.end());
  EXPECT_EQ(std::count(names.begin(), names.end(), "blocks.0.attn.kv_a_norm"), 0);
  for (const TensorDesc &t : parameterTensors(BlockConfig{}))
    EXPECT_EQ(t.name.find("kv_a_norm"), std::string::npos) << t.name;
  EXPECT_NE(specError(tinyWith("\"group\"", "\"mla_rotary\": 0, \"group\""))
                .find("config key 'mla_rotary' must be true or false, got number"),
            std::string::npos);
  EXPECT_NE(specError(tinyWith("\"group\"", "\"mla_latent_norm\": \"yes\", \"group\""))
                .find("config key 'mla_latent_norm' must be true or false, got string"),
            std::string::npos);
}

/// A two-valued form key: its second (the released model's) value sets
/// `field` and is written back, its first clears it and is not written, and
/// a value of another kind (`bad`, JSON) is refused naming both values.
void expectTwoValuedKey(const std::string &key, const std::string &first,
                        const std::string &second, bool BlockConfig::*field,
                        const std::string &bad, const std::string &badKind) {
  BlockConfig cfg;
  std::string err;
  ASSERT_TRUE(parseBlockSpec(
      tinyWith("\"group\"", "\"" + key + "\": \"" + second + "\", \"group\""), cfg, err))
      << err;
  EXPECT_TRUE(cfg.*field);
  BlockConfig back;
  ASSERT_TRUE(parseBlockSpec(blockConfigToJson(cfg), back, err)) << err;
  EXPECT_TRUE(back.*field);
  EXPECT_EQ(blockConfigToJson(BlockConfig{}).find(key), std::string::npos);
  ASSERT_TRUE(parseBlockSpec(
      tinyWith("\"group\"", "\"" + key + "\": \"" + first + "\", \"group\""), back, err))
      << err;
  EXPECT_FALSE(back.*field);
  EXPECT_EQ(parameterTensors(back).size(), parameterTensors(cfg).size());
  EXPECT_NE(specError(tinyWith("\"group\"", "\"" + key + "\": " + bad + ", \"group\""))
                .find("config key '" + key + "' must be \"" + first + "\" or \"" + second +
                      "\", got " + badKind),
            std::string::npos);
}

TEST(BlockSpec, RmsnormRounding) {
  expectTwoValuedKey("rmsnorm_rounding", "once", "twice", &BlockConfig::normRoundTwice, "2",
                     "number");
}

// ffn_rounding: "once" (the unit, not written back) or the released
// model's "each"; the parameters are the same either way.
TEST(BlockSpec, FfnRounding) {
  expectTwoValuedKey("ffn_rounding", "once", "each", &BlockConfig::ffnRoundEach,
                     "\"twice\"", "\"twice\"");
}

TEST(BlockSpec, KdaForm) {
  BlockConfig cfg;
  std::string err;
  ASSERT_TRUE(parseBlockSpec(tinyWith("\"group\"", "\"kda_form\": \"released\", \"group\""),
                             cfg, err))
      << err;
  EXPECT_TRUE(cfg.kdaReleased);
  BlockConfig back;
  ASSERT_TRUE(parseBlockSpec(blockConfigToJson(cfg), back, err)) << err;
  EXPECT_TRUE(back.kdaReleased);
  EXPECT_EQ(blockConfigToJson(BlockConfig{}).find("kda_form"), std::string::npos);
  // The released form's parameters replace g_proj in every KDA layer: the
  // low-rank pairs (hidden -> head_dim -> channels), A_log, dt_bias, o_norm.
  std::map<std::string, TensorDesc> byName;
  for (const TensorDesc &t : parameterTensors(cfg))
    byName.emplace(t.name, t);
  EXPECT_EQ(byName.count("blocks.0.attn.g_proj.w_q"), 0u);
  const int64_t C = cfg.kdaChannels(), D = cfg.kdaHeadDim;
  EXPECT_EQ(byName.at("blocks.0.attn.f_a_proj.w_q").shape, (std::vector<int64_t>{cfg.hidden / 2, D}));
  EXPECT_EQ(byName.at("blocks.0.attn.f_b_proj.w_q").shape, (std::vector<int64_t>{D / 2, C}));
  EXPECT_EQ(byName.at("blocks.2.attn.g_a_proj.scales").shape,
            (std::vector<int64_t>{cfg.hidden / cfg.group, D}));
  EXPECT_EQ(byName.at("blocks.2.attn.g_b_proj.zeros").shape, (std::vector<int64_t>{D / cfg.group, C}));
  EXPECT_EQ(byName.at("blocks.1.attn.A_log").dtype, DType::F32);
  EXPECT_EQ(byName.at("blocks.1.attn.A_log").shape, (std::vector<int64_t>{cfg.kdaHeads}));
  EXPECT_EQ(byName.at("blocks.1.attn.dt_bias").shape, (std::vector<int64_t>{C}));
  EXPECT_EQ(byName.at("blocks.1.attn.o_norm").shape, (std::vector<int64_t>{D}));
  EXPECT_EQ(byName.count("blocks.3.attn.A_log"), 0u) << "layer 3 is MLA";
  for (const TensorDesc &t : parameterTensors(BlockConfig{}))
    EXPECT_EQ(t.name.find("f_a_proj"), std::string::npos) << t.name;
  // A head_dim the group does not divide cannot be the low-rank input.
  EXPECT_NE(specError(tinyWith("\"group\": 32", "\"kda_form\": \"released\", \"group\": 64"))
                .find("input dim 32 of 'blocks.0.attn.f_b_proj' is not divisible by the group size 64"),
            std::string::npos);
  EXPECT_NE(specError(tinyWith("\"group\"", "\"kda_form\": \"full\", \"group\""))
                .find("config key 'kda_form' must be \"unit\" or \"released\", got \"full\""),
            std::string::npos);
}

TEST(BlockSpec, WholeModel) {
  BlockConfig cfg;
  std::string err;
  ASSERT_TRUE(parseBlockSpec(tinyWith("\"group\"", "\"vocab\": 1008, \"group\""), cfg, err))
      << err;
  EXPECT_EQ(cfg.vocab, 1008);
  EXPECT_FALSE(cfg.lmHeadBf16);
  // The embedding, the final norm and the W4A16 LM head, after the layers'.
  std::vector<std::string> names;
  for (const TensorDesc &t : parameterTensors(cfg))
    names.push_back(t.name);
  ASSERT_GE(names.size(), 6u);
  EXPECT_EQ(std::vector<std::string>(names.end() - 5, names.end()),
            (std::vector<std::string>{"embed.weight", "final_norm", "lm_head.w_q",
                                      "lm_head.scales", "lm_head.zeros"}));
  EXPECT_EQ(quantLinears(cfg).back().prefix, "lm_head");
  EXPECT_EQ(quantLinears(cfg).back().out, 1008);
  EXPECT_EQ(quantLinears(cfg).back().layer, -1);
  BlockConfig back;
  ASSERT_TRUE(parseBlockSpec(blockConfigToJson(cfg), back, err)) << err;
  EXPECT_EQ(back.vocab, 1008);
  EXPECT_EQ(blockConfigToJson(BlockConfig{}).find("vocab"), std::string::npos);
  // A bf16 LM head.
  ASSERT_TRUE(parseBlockSpec(
      tinyWith("\"group\"", "\"vocab\": 1000, \"lm_head\": \"bf16\", \"group\""), cfg, err))
      << err;
  EXPECT_TRUE(cfg.lmHeadBf16);
  EXPECT_EQ(parameterTensors(cfg).back().name, "lm_head.weight");
  EXPECT_EQ(parameterTensors(cfg).back().shape, (std::vector<int64_t>{1000, 256}));
  ASSERT_TRUE(parseBlockSpec(blockConfigToJson(cfg), back, err)) << err;
  EXPECT_TRUE(back.lmHeadBf16);
  EXPECT_NE(specError(tinyWith("\"group\"", "\"lm_head\": \"bf16\", \"group\""))
                .find("'lm_head' needs 'vocab'"),
            std::string::npos);
  ASSERT_TRUE(parseBlockSpec(
      tinyWith("\"group\"", "\"vocab\": 1000, \"lm_head\": \"bf16\", \"group\""), cfg, err))
      << err;
  EXPECT_NE(specError(tinyWith("\"group\"", "\"vocab\": 8, \"lm_head\": \"int4\", \"group\""))
                .find("config key 'lm_head' must be \"w4a16\" or \"bf16\", got \"int4\""),
            std::string::npos);
}

TEST(BlockSpec, UnreadableFile) {
  BlockConfig cfg;
  std::string err;
  EXPECT_FALSE(loadBlockSpecFile("/nonexistent/dir/spec.json", cfg, err));
  EXPECT_EQ(err, "/nonexistent/dir/spec.json: cannot open: No such file or "
                 "directory");
  std::string path = MK_TEST_TMPDIR "/bad_spec.json";
  std::ofstream(path) << "{\"name\": 1}";
  EXPECT_FALSE(loadBlockSpecFile(path, cfg, err));
  EXPECT_EQ(err, path + ": line 1, column 10: 'name' must be a string, got "
                        "number");
}

} // namespace
