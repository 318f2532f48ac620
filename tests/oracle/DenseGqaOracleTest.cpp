//===- DenseGqaOracleTest.cpp - The dense GQA layer's oracle --------------===//
//
// Each new operation against hand-computed values, and a whole layer step
// against what its semantics force: zero weights leave the hidden state
// unchanged and append zero rows; a one-row cache returns its value row;
// query heads read their group's kv head.
//
//===----------------------------------------------------------------------===//

#include "mk/BlockSpec.h"
#include "mk/DenseGqaOracle.h"
#include "mk/Oracle.h"
#include "mk/TestData.h"

#include "OracleTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mk;
using namespace mk::oracle;

namespace {

using mk::oracle::test_util::bf;

TEST(DenseGqaOracle, ConfigValidation) {
  DenseGqaConfig c;
  EXPECT_EQ(validateDenseGqaConfig(c), "");
  c.kvHeads = 5;
  EXPECT_NE(validateDenseGqaConfig(c).find("multiple of kv_heads"), std::string::npos);
  c = DenseGqaConfig();
  c.headDim = 127;
  EXPECT_NE(validateDenseGqaConfig(c).find("even"), std::string::npos);
  c = DenseGqaConfig();
  c.group = 96;
  EXPECT_NE(validateDenseGqaConfig(c).find("group"), std::string::npos);
  c = DenseGqaConfig();
  c.inter = 0;
  EXPECT_NE(validateDenseGqaConfig(c).find("positive"), std::string::npos);
}

TEST(DenseGqaOracle, ConfigFromJson) {
  DenseGqaConfig c;
  EXPECT_EQ(parseDenseGqaConfig(R"({"hidden": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128,
      "inter": 12288, "rope_theta": 1000000, "group": 128, "layers": 36})",
                                c),
            "");
  EXPECT_EQ(c.hidden, 4096);
  EXPECT_EQ(c.kvHeads, 8);
  EXPECT_EQ(c.layers, 36);
  EXPECT_EQ(c.ropeTheta, 1e6);
  EXPECT_EQ(c.eps, 1e-6f); // the default
  EXPECT_EQ(parseDenseGqaConfig(R"({"hidden": 256, "heads": 4, "kv_heads": 2, "head_dim": 64,
      "inter": 512, "rope_theta": 1e6, "eps": 1e-5, "group": 64, "layers": 2})",
                                c),
            "");
  EXPECT_EQ(c.eps, 1e-5f);
  for (auto [text, why] :
       {std::pair<const char *, const char *>{R"({"hidden": 256})", "missing key 'heads'"},
        {R"({"hidden": 256, "heads": 4, "kv_heads": 2, "head_dim": 64, "inter": 512,
            "rope_theta": 1e6, "group": 64, "layers": 2, "bias": true})",
         "unknown key 'bias'"},
        {R"({"hidden": 256.5, "heads": 4, "kv_heads": 2, "head_dim": 64, "inter": 512,
            "rope_theta": 1e6, "group": 64, "layers": 2})",
         "'hidden' must be an integer"},
        {R"({"hidden": 256, "heads": 4, "kv_heads": 3, "head_dim": 64, "inter": 512,
            "rope_theta": 1e6, "group": 64, "layers": 2})",
         "must be a multiple of kv_heads"},
        {R"([1, 2])", "must be a JSON object"},
        {R"({"hidden": )", "line 1"}}) {
    const std::string err = parseDenseGqaConfig(text, c);
    EXPECT_NE(err.find(why), std::string::npos) << text << " -> " << err;
  }
}

TEST(DenseGqaOracle, RotateHalfPairsIWithIPlusHalf) {
  // Position 0 is the identity.
  std::vector<BFloat16> x = bf({1, 2, 3, 4}), y = x;
  ropeRotateHalf(y.data(), 4, 0, 10000.0);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(y[i].toFloat(), x[i].toFloat());
  // dim 4: pair 0 is (x0, x2) at angle pos, pair 1 is (x1, x3) at pos/100.
  y = x;
  ropeRotateHalf(y.data(), 4, 1, 10000.0);
  const float c0 = float(std::cos(1.0)), s0 = float(std::sin(1.0));
  const float c1 = float(std::cos(0.01)), s1 = float(std::sin(0.01));
  EXPECT_EQ(y[0].toFloat(), BFloat16(1 * c0 - 3 * s0).toFloat());
  EXPECT_EQ(y[2].toFloat(), BFloat16(3 * c0 + 1 * s0).toFloat());
  EXPECT_EQ(y[1].toFloat(), BFloat16(2 * c1 - 4 * s1).toFloat());
  EXPECT_EQ(y[3].toFloat(), BFloat16(4 * c1 + 2 * s1).toFloat());
}

TEST(DenseGqaOracle, AttentionReadsTheGroupsKvHead) {
  // 4 query heads, 2 kv heads of dim 2, one cache row: each head's output
  // is its group's value row (softmax over one row is 1).
  std::vector<BFloat16> q = bf({1, 0, 0, 1, 5, 5, -1, 2});
  std::vector<BFloat16> k = bf({0.5f, 0.5f, 1, -1}), v = bf({1, 2, -3, 4});
  std::vector<BFloat16> o(8);
  gqaAttention(q.data(), k.data(), v.data(), 1, 4, 2, 2, o.data());
  const float want[8] = {1, 2, 1, 2, -3, 4, -3, 4};
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(o[i].toFloat(), want[i]) << i;
  // Two rows, one kv head: score = q.k / sqrt(2); head 0 scores (1, 0) and
  // averages the values with softmax weights.
  std::vector<BFloat16> q1 = bf({std::sqrt(2.f), 0}), k2 = bf({1, 0, 0, 1}),
                        v2 = bf({2, 0, 0, 4});
  std::vector<BFloat16> o1(2);
  gqaAttention(q1.data(), k2.data(), v2.data(), 2, 1, 1, 2, o1.data());
  const float sc0 = q1[0].toFloat() * 1.f * (1.0f / std::sqrt(2.f)); // q1[0] is bf16(sqrt 2)
  const float e0 = 1.f, e1 = std::exp(0.f - sc0), p0 = e0 / (e0 + e1), p1 = e1 / (e0 + e1);
  EXPECT_EQ(o1[0].toFloat(), BFloat16(p0 * 2).toFloat());
  EXPECT_EQ(o1[1].toFloat(), BFloat16(p1 * 4).toFloat());
}

/// A small layer's weights: norms ones, W4A16 linears N(0, stddev) quantized
/// (stddev 0: all zero).
TensorMap smallWeights(const DenseGqaConfig &c, double stddev, uint64_t seed) {
  return makeRandomDenseGqaWeights(c, seed, stddev, /*normStddev=*/0.0);
}

DenseGqaConfig small() {
  DenseGqaConfig c;
  c.hidden = 64;
  c.heads = 4;
  c.kvHeads = 2;
  c.headDim = 16;
  c.inter = 96;
  c.group = 32;
  c.layers = 1;
  return c;
}

std::vector<BFloat16> randomBf16(uint64_t seed, const std::string &name, int64_t n, double sd) {
  std::vector<BFloat16> v(static_cast<size_t>(n));
  testdata::fillNormalBf16(testdata::streamFor(seed, name), 0, n, sd, v.data());
  return v;
}

TEST(DenseGqaOracle, ZeroWeightsLeaveTheHiddenAndAppendZeroRows) {
  const DenseGqaConfig c = small();
  ASSERT_EQ(validateDenseGqaConfig(c), "");
  TensorMap weights = smallWeights(c, 0.0, 1);
  DenseGqaLayerWeights w = denseGqaLayerWeights(c, weights, 0);
  const int64_t ctx = 5, kvd = c.kvHeads * c.headDim;
  std::vector<BFloat16> x = randomBf16(3, "x", c.hidden, 0.25);
  std::vector<BFloat16> kc = randomBf16(3, "k", ctx * kvd, 1.0), vc = randomBf16(3, "v", ctx * kvd, 1.0);
  const std::vector<BFloat16> k0 = kc, v0 = vc;
  std::vector<BFloat16> y = denseGqaLayerStep(c, w, x, kc, vc, ctx);
  ASSERT_EQ(y.size(), x.size());
  for (int64_t i = 0; i < c.hidden; ++i)
    EXPECT_EQ(y[i].toFloat(), x[i].toFloat()) << i;
  ASSERT_EQ(kc.size(), static_cast<size_t>((ctx + 1) * kvd));
  ASSERT_EQ(vc.size(), kc.size());
  for (int64_t i = 0; i < ctx * kvd; ++i) {
    EXPECT_EQ(kc[i].toFloat(), k0[i].toFloat());
    EXPECT_EQ(vc[i].toFloat(), v0[i].toFloat());
  }
  for (int64_t i = ctx * kvd; i < (ctx + 1) * kvd; ++i) {
    EXPECT_EQ(kc[i].toFloat(), 0.0f);
    EXPECT_EQ(vc[i].toFloat(), 0.0f);
  }
}

TEST(DenseGqaOracle, RandomLayerStepIsDeterministicAndNormsTheKeys) {
  const DenseGqaConfig c = small();
  TensorMap weights = smallWeights(c, 0.02, 7);
  DenseGqaLayerWeights w = denseGqaLayerWeights(c, weights, 0);
  const int64_t ctx = 9, kvd = c.kvHeads * c.headDim;
  std::vector<BFloat16> x = randomBf16(5, "x", c.hidden, 0.25);
  std::vector<BFloat16> kc = randomBf16(5, "k", ctx * kvd, 1.0), vc = randomBf16(5, "v", ctx * kvd, 1.0);
  std::vector<BFloat16> kc2 = kc, vc2 = vc;
  std::vector<BFloat16> y = denseGqaLayerStep(c, w, x, kc, vc, ctx);
  std::vector<BFloat16> y2 = denseGqaLayerStep(c, w, x, kc2, vc2, ctx);
  bool changed = false;
  for (int64_t i = 0; i < c.hidden; ++i) {
    ASSERT_TRUE(std::isfinite(y[i].toFloat()));
    EXPECT_EQ(y[i].toFloat(), y2[i].toFloat());
    changed = changed || y[i].toFloat() != x[i].toFloat();
  }
  EXPECT_TRUE(changed);
  // The appended key rows went through an RMSNorm with unit weights, then a
  // rotation: each head's row has mean square ~1 (bf16 roundings aside).
  for (int64_t g = 0; g < c.kvHeads; ++g) {
    double ss = 0;
    for (int64_t i = 0; i < c.headDim; ++i) {
      const float v = kc[ctx * kvd + g * c.headDim + i].toFloat();
      ss += double(v) * v;
    }
    EXPECT_NEAR(ss / c.headDim, 1.0, 0.02) << g;
  }
}

} // namespace

// The block compiler's oracle (oracleStep over a BlockConfig, what the GPU
// tests compare kernels with) on a `dense_gqa` spec against the dense
// family's own oracle: the same weights and caches give the same bits.
TEST(DenseGqaOracle, BlockOracleOnADenseSpecIsTheDenseOracle) {
  BlockConfig cfg;
  std::string err;
  ASSERT_TRUE(parseBlockSpec(R"({"name": "t", "family": "dense_gqa", "config": {
      "hidden": 128, "heads": 4, "kv_heads": 2, "head_dim": 64, "inter": 192,
      "rope_theta": 1000000, "eps": 1e-6, "group": 32, "layers": 2}})",
                             cfg, err))
      << err;
  DenseGqaConfig c;
  c.hidden = 128;
  c.heads = 4;
  c.kvHeads = 2;
  c.headDim = 64;
  c.inter = 192;
  c.group = 32;
  c.layers = 2;
  const TensorMap w = makeRandomWeights(cfg, 5);
  const int64_t ctx = 9;
  DecodeState state = makeRandomState(cfg, ctx, 6);
  std::vector<std::vector<BFloat16>> kc(2), vc(2);
  for (int64_t l = 0; l < 2; ++l) {
    const HostTensor &k = state.tensors.at(statePrefix(l) + ".k_cache");
    const HostTensor &v = state.tensors.at(statePrefix(l) + ".v_cache");
    ASSERT_EQ(k.desc.shape, (std::vector<int64_t>{ctx, 2, 64}));
    kc[l].assign(k.bf16(), k.bf16() + k.desc.numel());
    vc[l].assign(v.bf16(), v.bf16() + v.desc.numel());
  }
  const std::vector<BFloat16> x = makeRandomHidden(cfg, 7);
  const std::vector<BFloat16> dense = denseGqaStep(c, w, x, kc, vc, ctx);
  const std::vector<BFloat16> block = oracleStep(cfg, w, state, x);
  ASSERT_EQ(block.size(), dense.size());
  for (size_t i = 0; i < dense.size(); ++i)
    ASSERT_EQ(block[i].bits, dense[i].bits) << "hidden " << i;
  EXPECT_EQ(state.ctxLen, ctx + 1);
  for (int64_t l = 0; l < 2; ++l) {
    const HostTensor &k = state.tensors.at(statePrefix(l) + ".k_cache");
    const HostTensor &v = state.tensors.at(statePrefix(l) + ".v_cache");
    ASSERT_EQ(k.desc.numel(), int64_t(kc[l].size()));
    for (int64_t i = 0; i < k.desc.numel(); ++i) {
      ASSERT_EQ(k.bf16()[i].bits, kc[l][i].bits) << "layer " << l << " key " << i;
      ASSERT_EQ(v.bf16()[i].bits, vc[l][i].bits) << "layer " << l << " value " << i;
    }
  }
}
