//===- PhaseBandsTest.cpp - Phases grouped into layer bands ---------------===//

#include "mk/runtime/PhaseBands.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <string>
#include <vector>

using namespace mk::rt;

namespace {

/// Two KDA layers and one MLA layer, each with an MoE part, then the
/// whole model's tail: the released model's phase names, shortened.
std::vector<std::string> names() {
  return {"blocks.0.attn_norm",   "blocks.0.attn.gated_delta", "blocks.0.attn.o_proj",
          "blocks.0.moe_norm",    "blocks.0.moe.experts.down", "blocks.1.attn_norm",
          "blocks.1.attn.gated_delta", "blocks.1.attn.o_proj", "blocks.1.moe_norm",
          "blocks.1.moe.experts.down", "blocks.12.attn_norm", "blocks.12.attn.attention",
          "blocks.12.moe_norm",   "blocks.12.moe.experts.down", "final_norm", "argmax"};
}

TEST(PhaseBands, LayersSplitIntoAttentionAndFeedForwardParts) {
  const std::vector<PhaseBand> b = phaseBands(names());
  ASSERT_EQ(b.size(), 8u);
  EXPECT_EQ(b[0].layer, 0);
  EXPECT_EQ(b[0].kind, "attn_norm > attn.gated_delta > attn.o_proj");
  EXPECT_EQ(b[0].phases, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(b[1].kind, "moe_norm > moe.experts.down");
  EXPECT_EQ(b[1].phases, (std::vector<int>{3, 4}));
  EXPECT_EQ(b[2].layer, 1);
  EXPECT_EQ(b[2].kind, b[0].kind);
  EXPECT_EQ(b[4].layer, 12);
  EXPECT_EQ(b[4].kind, "attn_norm > attn.attention");
  EXPECT_EQ(b[6].layer, -1);
  EXPECT_EQ(b[6].kind, "final_norm");
  EXPECT_EQ(b[6].phases, (std::vector<int>{14}));
  EXPECT_EQ(b[7].kind, "argmax");
}

TEST(PhaseBands, NamesThatAreNoLayerStandAlone) {
  // No digits, no dot after them, nothing after the dot, or a leading zero:
  // not a layer's.
  const std::vector<PhaseBand> b =
      phaseBands({"blocks.x.attn_norm", "blocks.3", "blocks.3.", "blocks.3.attn_norm"});
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(phaseBands({"blocks.007.attn_norm"}).front().layer, -1);
  EXPECT_EQ(b[0].layer, -1);
  EXPECT_EQ(b[1].layer, -1);
  EXPECT_EQ(b[2].layer, -1);
  EXPECT_EQ(b[3].layer, 3);
  EXPECT_EQ(b[3].kind, "attn_norm");
  // Two layers' FFN parts back to back (a layer without attention phases)
  // stay two bands.
  const std::vector<PhaseBand> f = phaseBands({"blocks.0.mlp_norm", "blocks.1.mlp_norm"});
  EXPECT_EQ(f.size(), 2u);
}

TEST(PhaseBands, KindsSummedOverTheirBands) {
  // Spans 1..16 us; floors a tenth of them.
  std::vector<double> span, floor;
  for (int i = 0; i < 16; ++i) {
    span.push_back(i + 1);
    floor.push_back((i + 1) * 0.1);
  }
  const std::vector<BandKindSummary> k = summarizeBands(phaseBands(names()), span, floor);
  ASSERT_EQ(k.size(), 5u);
  // The KDA attention part: layer 0 (1+2+3 = 6) and layer 1 (6+7+8 = 21).
  EXPECT_EQ(k[0].kind, "attn_norm > attn.gated_delta > attn.o_proj");
  EXPECT_EQ(k[0].count, 2);
  EXPECT_DOUBLE_EQ(k[0].meanUs, 13.5);
  EXPECT_DOUBLE_EQ(k[0].minUs, 6);
  EXPECT_DOUBLE_EQ(k[0].maxUs, 21);
  EXPECT_DOUBLE_EQ(k[0].totalUs, 27);
  EXPECT_NEAR(k[0].meanFloorUs, 1.35, 1e-12);
  // The MoE part of all three layers: 4+5, 9+10, 13+14.
  EXPECT_EQ(k[1].kind, "moe_norm > moe.experts.down");
  EXPECT_EQ(k[1].count, 3);
  EXPECT_DOUBLE_EQ(k[1].totalUs, 55);
  EXPECT_EQ(k[2].kind, "attn_norm > attn.attention");
  EXPECT_EQ(k[2].count, 1);
  EXPECT_DOUBLE_EQ(k[2].meanUs, 11 + 12);
  EXPECT_EQ(k[3].kind, "final_norm");
  EXPECT_EQ(k[4].kind, "argmax");
  double total = 0;
  for (const BandKindSummary &s : k)
    total += s.totalUs;
  EXPECT_DOUBLE_EQ(total, 16 * 17 / 2);
}

TEST(PhaseBands, NoFloorsOrMismatchedSizes) {
  const std::vector<double> span(16, 1.0);
  const std::vector<BandKindSummary> k = summarizeBands(phaseBands(names()), span, {});
  ASSERT_FALSE(k.empty());
  EXPECT_EQ(k[0].meanFloorUs, 0);
  EXPECT_TRUE(summarizeBands(phaseBands(names()), span, std::vector<double>(3, 1.0)).empty());
  EXPECT_TRUE(summarizeBands(phaseBands(names()), std::vector<double>(4, 1.0), {}).empty());
  EXPECT_TRUE(summarizeBands(phaseBands(names()), std::vector<double>(17, 1.0), {}).empty());
}

TEST(PhaseBands, ANanSpanMarksItsKind) {
  std::vector<double> span(16, 1.0);
  span[6] = std::numeric_limits<double>::quiet_NaN(); // layer 1's gated delta
  const std::vector<BandKindSummary> k = summarizeBands(phaseBands(names()), span, {});
  ASSERT_EQ(k.size(), 5u);
  EXPECT_TRUE(std::isnan(k[0].meanUs));
  EXPECT_TRUE(std::isnan(k[0].minUs));
  EXPECT_TRUE(std::isnan(k[0].maxUs));
  EXPECT_DOUBLE_EQ(k[1].meanUs, 2.0); // the MoE parts are untouched
}

} // namespace
