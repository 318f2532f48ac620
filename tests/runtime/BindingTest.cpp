//===- BindingTest.cpp - Bind checks that need no device ------------------===//

#include "TestKernels.h"
#include "mk/runtime/Binding.h"

#include <gtest/gtest.h>

using namespace mk;
using namespace mk::rt;

namespace {
BindingLayout tinyLayout() {
  Manifest m;
  Status st = parseManifest(mk::testing::makeManifest(mk::testing::tinyConfig()), m);
  EXPECT_TRUE(st.isOk()) << st.toString();
  BindingLayout b;
  EXPECT_TRUE(BindingLayout::build(m, b).isOk());
  return b;
}
} // namespace

TEST(Binding, LayoutSortsTheParams) {
  BlockConfig cfg = mk::testing::tinyConfig();
  BindingLayout b = tinyLayout();
  EXPECT_EQ(b.weightParams.size(), parameterTensors(cfg).size());
  EXPECT_EQ(b.state.size(), stateTensors(cfg, 1).size());
  EXPECT_EQ(b.input, 0);
  EXPECT_EQ(b.output, 1);
  EXPECT_GE(b.ctxLen, 0);
  EXPECT_GE(b.capacity, 0);
  EXPECT_GE(b.workspace, 0);
  EXPECT_GE(b.sync, 0);
  EXPECT_EQ(b.debug, -1);
  const StateSlot &ckv = b.state[size_t(b.stateByName.at("state.3.c_kv"))];
  EXPECT_TRUE(ckv.isCache);
  EXPECT_EQ(ckv.rowBytes, cfg.kvLora * 2);
  EXPECT_EQ(ckv.bytesFor(10), 10 * cfg.kvLora * 2);
  const StateSlot &s = b.state[size_t(b.stateByName.at("state.0.S"))];
  EXPECT_FALSE(s.isCache);
  EXPECT_EQ(s.bytesFor(10), cfg.kdaHeads * cfg.kdaHeadDim * cfg.kdaHeadDim * 4);
}

TEST(Binding, WeightChecks) {
  BindingLayout b = tinyLayout();
  int p = -1;
  EXPECT_TRUE(b.checkWeight("blocks.0.attn_norm", DType::BF16, {256}, p).isOk());
  EXPECT_GE(p, 0);

  Status st = b.checkWeight("blocks.0.attn_norm", DType::BF16, {255}, p);
  EXPECT_EQ(st.code(), ErrorCode::Binding);
  EXPECT_EQ(st.message(),
            "weight 'blocks.0.attn_norm': shape [256] expected, got [255]");

  st = b.checkWeight("blocks.0.attn_norm", DType::F32, {256}, p);
  EXPECT_EQ(st.message(),
            "weight 'blocks.0.attn_norm': dtype bf16 expected, got f32");

  EXPECT_TRUE(b.checkWeight("blocks.0.attn.q_proj.w_q", DType::U8, {128, 64}, p).isOk());

  st = b.checkWeight("blocks.9.attn_norm", DType::BF16, {256}, p);
  EXPECT_EQ(st.code(), ErrorCode::Binding);
  EXPECT_NE(st.message().find("unknown weight 'blocks.9.attn_norm'"),
            std::string::npos);
  st = b.checkWeight("state.0.S", DType::F32, {2, 32, 32}, p);
  EXPECT_NE(st.message().find("it is a state tensor"), std::string::npos);
}

TEST(Binding, StateChecks) {
  BindingLayout b = tinyLayout();
  int slot = -1;
  EXPECT_TRUE(b.checkState("state.3.c_kv", DType::BF16, {7, 128}, 7, slot).isOk());
  Status st = b.checkState("state.3.c_kv", DType::BF16, {8, 128}, 7, slot);
  EXPECT_EQ(st.code(), ErrorCode::Binding);
  EXPECT_EQ(st.message(), "state 'state.3.c_kv': shape [7, 128] expected, got [8, 128]");
  EXPECT_TRUE(b.checkState("state.0.S", DType::F32, {2, 32, 32}, 7, slot).isOk());
  EXPECT_TRUE(b.checkState("state.0.cq", DType::BF16, {3, 64}, 0, slot).isOk());
  st = b.checkState("state.0.S", DType::BF16, {2, 32, 32}, 7, slot);
  EXPECT_EQ(st.message(), "state 'state.0.S': dtype f32 expected, got bf16");
  st = b.checkState("state.3.S", DType::F32, {2, 32, 32}, 7, slot);
  EXPECT_NE(st.message().find("unknown state tensor 'state.3.S'"), std::string::npos);
}

#include "mk/runtime/Roofline.h"

TEST(Roofline, MatchesTheSpecTable) {
  // Spec, "Cost per token": 241.0 MB without the MLA cache; the cache adds
  // 2.4 / 9.4 MB at context 2048 / 8192.
  BlockConfig cfg;
  TokenBytes b = bytesPerToken(cfg, 2048);
  EXPECT_NEAR((b.weights + b.fixedState) / 1e6, 241.0, 1.0);
  EXPECT_NEAR(b.caches / 1e6, 2.4, 0.1);
  EXPECT_NEAR(bytesPerToken(cfg, 8192).caches / 1e6, 9.4, 0.1);
}
