//===- ManifestTest.cpp - Reading and checking kernel manifests -----------===//

#include "TestKernels.h"
#include "mk/runtime/Manifest.h"

#include <gtest/gtest.h>

using namespace mk;
using namespace mk::rt;
using mk::testing::makeManifest;
using mk::testing::eraseMember;
using mk::testing::makeManifestValue;
using mk::testing::member;
using mk::testing::tinyConfig;

namespace {

json::Value *findParam(json::Value &m, const std::string &name,
                       const std::string &role) {
  for (auto &kv : m.object)
    if (kv.first == "params")
      for (json::Value &p : kv.second.array)
        if (p.find("name")->string == name && p.find("role")->string == role)
          return &p;
  return nullptr;
}

Status parseValue(const json::Value &v, Manifest &m) {
  return parseManifest(json::write(v), m);
}

void expectError(const json::Value &v, const std::string &fragment) {
  Manifest m;
  Status st = parseValue(v, m);
  ASSERT_FALSE(st.isOk()) << "expected an error containing: " << fragment;
  EXPECT_EQ(st.code(), ErrorCode::Manifest);
  EXPECT_NE(st.message().find(fragment), std::string::npos) << st.message();
}

} // namespace

TEST(Manifest, ParsesFullAndTinyConfigs) {
  for (const BlockConfig &cfg : {BlockConfig(), tinyConfig()}) {
    Manifest m;
    Status st = parseManifest(makeManifest(cfg), m);
    ASSERT_TRUE(st.isOk()) << st.toString();
    EXPECT_EQ(m.kernel, "mk_test_stub");
    EXPECT_EQ(m.config.hidden, cfg.hidden);
    EXPECT_EQ(m.config.pattern.size(), cfg.pattern.size());
    size_t weights = 0;
    for (const ManifestParam &p : m.params)
      weights += p.role == ParamRole::Weight;
    EXPECT_EQ(weights, parameterTensors(cfg).size());
    EXPECT_GE(m.findParam("state.3.c_kv", ParamRole::StateIn), 0);
    EXPECT_GE(m.findParam("state.3.c_kv", ParamRole::StateOut), 0);
    EXPECT_EQ(m.findParam("state.3.c_kv", ParamRole::Weight), -1);
  }
}

TEST(Manifest, AcceptsEveryConfigForm) {
  BlockConfig cfg = tinyConfig();
  // A full spec under "spec".
  json::Value v = makeManifestValue(cfg);
  v.set("spec", blockConfigToJsonValue(cfg));
  Manifest m;
  ASSERT_TRUE(parseValue(v, m).isOk());
  // A full spec under "config".
  v = makeManifestValue(cfg);
  *member(v, "config") = blockConfigToJsonValue(cfg);
  ASSERT_TRUE(parseValue(v, m).isOk()) << parseValue(v, m).toString();
  // Flat keys with "pattern" at top level.
  v = makeManifestValue(cfg);
  json::Value pattern = *member(v, "config")->find("pattern");
  eraseMember(*member(v, "config"), "pattern");
  v.set("pattern", pattern);
  ASSERT_TRUE(parseValue(v, m).isOk());
  EXPECT_EQ(m.config.kvLora, cfg.kvLora);
}

TEST(Manifest, RejectsMalformedInput) {
  Manifest m;
  Status st = parseManifest("{ \"format\": ", m);
  EXPECT_EQ(st.code(), ErrorCode::Manifest);
  EXPECT_NE(st.message().find("not valid JSON"), std::string::npos);
  EXPECT_FALSE(parseManifest("[1, 2]", m).isOk());

  json::Value v = makeManifestValue(tinyConfig());
  *member(v, "format") = json::Value::fromString("mk-manifest-2");
  expectError(v, "unsupported format");

  v = makeManifestValue(tinyConfig());
  eraseMember(v, "kernel");
  expectError(v, "missing key 'kernel'");

  v = makeManifestValue(tinyConfig());
  *member(v, "threads_per_block") = json::Value::fromInt(2048);
  expectError(v, "threads_per_block");

  v = makeManifestValue(tinyConfig());
  *member(v, "workspace_bytes") = json::Value::fromString("big");
  expectError(v, "'workspace_bytes' must be an integer");
}

TEST(Manifest, RejectsParamsThatDisagreeWithTheConfig) {
  BlockConfig cfg = tinyConfig();
  json::Value v = makeManifestValue(cfg);
  json::Value *p = findParam(v, "blocks.0.attn_norm", "weight");
  ASSERT_NE(p, nullptr);
  *member(*p, "shape") = json::Value::makeArray();
  member(*p, "shape")->push(json::Value::fromInt(cfg.hidden + 1));
  expectError(v, "param 'blocks.0.attn_norm' (weight): shape [256] expected, "
                 "manifest has [257]");

  v = makeManifestValue(cfg);
  *member(*findParam(v, "blocks.0.attn_norm", "weight"), "dtype") =
      json::Value::fromString("f32");
  expectError(v, "dtype bf16 expected");

  v = makeManifestValue(cfg);
  *member(*findParam(v, "blocks.0.attn_norm", "weight"), "name") =
      json::Value::fromString("blocks.0.attn_nrom");
  expectError(v, "'blocks.0.attn_nrom' (weight) is not a parameter");

  v = makeManifestValue(cfg);
  *member(*findParam(v, "blocks.1.moe_norm", "weight"), "role") =
      json::Value::fromString("wieght");
  expectError(v, "unknown role 'wieght'");

  v = makeManifestValue(cfg);
  *member(*findParam(v, "state.3.k_rope", "state_out"), "role") =
      json::Value::fromString("state_in");
  expectError(v, "appears twice");

  v = makeManifestValue(cfg);
  *member(*findParam(v, "ctx_len", "scalar"), "name") =
      json::Value::fromString("position");
  expectError(v, "unknown scalar param 'position'");

  v = makeManifestValue(cfg);
  *member(*findParam(v, "sync", "sync"), "shape") = json::Value::makeArray();
  expectError(v, "param 'sync' (sync): shape");
}

TEST(Manifest, RejectsAMissingWeightOrState) {
  BlockConfig cfg = tinyConfig();
  for (const char *name : {"blocks.2.attn.o_proj.zeros", "state.1.S"}) {
    json::Value v = makeManifestValue(cfg);
    auto &params = member(v, "params")->array;
    for (auto it = params.begin(); it != params.end(); ++it)
      if (it->find("name")->string == name) {
        params.erase(it);
        break;
      }
    expectError(v, std::string("lacks"));
  }
}

TEST(Manifest, DebugArenaAndCaptures) {
  BlockConfig cfg = tinyConfig();
  mk::testing::TestManifestOptions o;
  o.debugCapture = true;
  o.debugBytes = 1024;
  json::Value v = makeManifestValue(cfg, o);
  json::Value cap = json::Value::makeObject();
  cap.set("name", json::Value::fromString("layer0.q"));
  cap.set("dtype", json::Value::fromString("bf16"));
  json::Value shape = json::Value::makeArray();
  shape.push(json::Value::fromInt(64));
  cap.set("shape", shape);
  cap.set("offset", json::Value::fromInt(512));
  member(v, "captures")->push(cap);
  Manifest m;
  Status st = parseValue(v, m);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_EQ(m.debugBytes, 1024);
  ASSERT_EQ(m.captures.size(), 1u);
  EXPECT_EQ(m.captures[0].bytes(), 128);

  *member(member(v, "captures")->array[0], "offset") = json::Value::fromInt(1000);
  expectError(v, "outside the debug arena");

  // A debug param without debug_capture, and debug_capture without one.
  v = makeManifestValue(cfg, o);
  *member(v, "debug_capture") = json::Value::fromBool(false);
  expectError(v, "debug_capture is false");
  o.debugCapture = false;
  v = makeManifestValue(cfg, o);
  *member(v, "debug_capture") = json::Value::fromBool(true);
  expectError(v, "role 'debug'");
}

TEST(Manifest, OptionalMaxBlocks) {
  json::Value v = makeManifestValue(tinyConfig());
  v.set("max_blocks", json::Value::fromInt(64));
  Manifest m;
  ASSERT_TRUE(parseValue(v, m).isOk());
  EXPECT_EQ(m.maxBlocks, 64);
}

TEST(Manifest, OptionalPackedArithmetic) {
  json::Value v = makeManifestValue(tinyConfig());
  Manifest m;
  ASSERT_TRUE(parseValue(v, m).isOk());
  EXPECT_EQ(m.packedArithmetic, "exact"); // absent: the spec's arithmetic
  v.set("packed_arithmetic", json::Value::fromString("folded"));
  ASSERT_TRUE(parseValue(v, m).isOk());
  EXPECT_EQ(m.packedArithmetic, "folded");
  v.set("packed_arithmetic", json::Value::fromString("int4"));
  expectError(v, "'packed_arithmetic' must be");
  v.set("packed_arithmetic", json::Value::fromInt(1));
  expectError(v, "'packed_arithmetic' must be a string");
}

TEST(Manifest, TileContiguousWeights) {
  json::Value v = makeManifestValue(tinyConfig());
  findParam(v, "blocks.0.attn.q_proj.w_q", "weight")->set("tile", json::Value::fromInt(16));
  Manifest m;
  ASSERT_TRUE(parseValue(v, m).isOk());
  int p = m.findParam("blocks.0.attn.q_proj.w_q", ParamRole::Weight);
  ASSERT_GE(p, 0);
  EXPECT_EQ(m.params[size_t(p)].tile, 16);
  EXPECT_EQ(m.params[size_t(m.findParam("blocks.0.attn.k_proj.w_q", ParamRole::Weight))].tile,
            0);
  // A tile must divide the last dim, and only weights have one.
  findParam(v, "blocks.0.attn.q_proj.w_q", "weight")->set("tile", json::Value::fromInt(48));
  expectError(v, "'tile' 48");
  json::Value w = makeManifestValue(tinyConfig());
  findParam(w, "hidden_in", "input")->set("tile", json::Value::fromInt(16));
  expectError(w, "needs a weight");
}

TEST(Manifest, MmaOrderNeedsA128Or64WideInt4Tile) {
  json::Value v = makeManifestValue(tinyConfig());
  json::Value *wq = findParam(v, "blocks.0.attn.o_proj.w_q", "weight");
  wq->set("tile", json::Value::fromInt(128));
  wq->set("order", json::Value::fromString("mma"));
  Manifest m;
  ASSERT_TRUE(parseValue(v, m).isOk());
  EXPECT_EQ(m.params[size_t(m.findParam("blocks.0.attn.o_proj.w_q", ParamRole::Weight))].order,
            mk::PackedOrder::Mma);
  wq->set("tile", json::Value::fromInt(64)); // steps of 16 rows: [32, 256] has 2
  Manifest m64;
  ASSERT_TRUE(parseValue(v, m64).isOk());
  wq->set("tile", json::Value::fromInt(16));
  expectError(v, "'order' \"mma\" needs");
  json::Value w = makeManifestValue(tinyConfig());
  json::Value *sc = findParam(w, "blocks.0.attn.o_proj.scales", "weight");
  sc->set("tile", json::Value::fromInt(128));
  sc->set("order", json::Value::fromString("mma"));
  expectError(w, "an int4 weight");
}

TEST(Manifest, Int8OrderNeedsA128Or64WideInt4TileOfWholeSteps) {
  json::Value v = makeManifestValue(tinyConfig());
  json::Value *wq = findParam(v, "blocks.0.attn.o_proj.w_q", "weight");
  wq->set("tile", json::Value::fromInt(128));
  wq->set("order", json::Value::fromString("int8"));
  Manifest m; // [32, 256]: two steps of 16 row pairs
  ASSERT_TRUE(parseValue(v, m).isOk());
  EXPECT_EQ(m.params[size_t(m.findParam("blocks.0.attn.o_proj.w_q", ParamRole::Weight))].order,
            mk::PackedOrder::Int8);
  wq->set("tile", json::Value::fromInt(16));
  expectError(v, "'order' \"int8\" needs");
  wq->set("tile", json::Value::fromInt(128));
  wq->set("order", json::Value::fromString("int4"));
  expectError(v, "'order' \"int4\" needs \"mma\" or \"int8\"");
}
