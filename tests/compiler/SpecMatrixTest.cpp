//===- SpecMatrixTest.cpp - Spec variants: compiled, or refused clearly ---===//
//
// A generated matrix of block specs around the tiny one (layer patterns,
// depths, expert counts, head sizes, group sizes, odd dimensions). Each
// variant either goes through mkc's whole pipeline and its kernel compiles
// with NVRTC for sm_90 and sm_120 (no error, no warning, no spill in any
// template, the kernel body within its limit), or is refused before any
// CUDA is written, with one line that names what to change. Never: a crash,
// an emitted kernel that NVRTC rejects, or a silent success with no kernel.
//
//===----------------------------------------------------------------------===//

#include "Pipeline/Driver.h"

#include "mk/runtime/Manifest.h"

#include "NvrtcCheck.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

namespace {

/// One variant: overrides of the tiny spec's config keys (JSON values), its
/// layer pattern, and what must happen: "" = compiles, else a substring of
/// the one-line refusal.
struct Variant {
  const char *name;
  std::map<std::string, std::string> overrides;
  std::vector<std::string> pattern;
  const char *refusal = "";
};

/// How gtest (and ctest's test list) shows a variant: by its name.
void PrintTo(const Variant &v, std::ostream *os) { *os << v.name; }

std::string specText(const Variant &v) {
  std::map<std::string, std::string> c = {
      {"hidden", "256"},     {"kda_heads", "2"},        {"kda_head_dim", "32"},
      {"short_conv", "4"},   {"mla_heads", "2"},        {"kv_lora", "128"},
      {"qk_nope", "32"},     {"qk_rope", "16"},         {"v_head", "32"},
      {"rope_theta", "10000"}, {"n_experts", "8"},      {"n_active", "2"},
      {"n_shared", "1"},     {"moe_inter", "128"},      {"routed_scaling", "2.446"},
      {"group", "32"},       {"eps", "1e-6"}};
  for (const auto &[k, val] : v.overrides)
    c[k] = val;
  std::ostringstream s;
  s << "{\n  \"name\": \"" << v.name << "\",\n  \"config\": {";
  bool first = true;
  for (const auto &[k, val] : c) {
    s << (first ? "" : ",") << "\n    \"" << k << "\": " << val;
    first = false;
  }
  s << "\n  },\n  \"pattern\": [";
  for (size_t i = 0; i < v.pattern.size(); ++i)
    s << (i ? ", " : "") << "\"" << v.pattern[i] << "\"";
  s << "]\n}\n";
  return s.str();
}

std::string slurp(const std::string &path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class SpecMatrix : public testing::TestWithParam<Variant> {};

TEST_P(SpecMatrix, CompilesOrIsRefusedClearly) {
  const Variant &v = GetParam();
  const std::string dir = std::string(MK_TEST_TMPDIR) + "/spec-matrix/" + v.name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string specPath = dir + "/spec.json";
  std::ofstream(specPath) << specText(v);
  mk::DriverOptions o;
  o.inputPath = specPath;
  o.emit = "cuda";
  o.outputPath = dir + "/out";
  std::string out, err;
  llvm::raw_string_ostream os(out), es(err);
  const int rc = mk::runDriver(o, os, es);
  const std::string kernel = std::string("mk_") + v.name;
  const std::string source = o.outputPath + "/" + kernel + ".cu";
  if (*v.refusal) {
    EXPECT_NE(rc, 0) << "accepted a spec that must be refused";
    const std::string msg = es.str();
    EXPECT_NE(msg.find("mkc: error: "), std::string::npos) << msg;
    EXPECT_NE(msg.find(v.refusal), std::string::npos) << msg;
    EXPECT_EQ(std::count(msg.begin(), msg.end(), '\n'), 1) << "one line: " << msg;
    EXPECT_FALSE(std::filesystem::exists(source)) << "a refused spec left a kernel behind";
    return;
  }
  ASSERT_EQ(rc, 0) << es.str();
  mk::rt::Manifest m;
  mk::rt::Status s = mk::rt::parseManifest(slurp(o.outputPath + "/" + kernel + ".manifest.json"), m);
  ASSERT_TRUE(s.isOk()) << s.message();
  const std::string src = slurp(source);
  ASSERT_FALSE(src.empty());
  // Every variant's body is held to mk::test::kBodySpillBytes, the 12-layer
  // one included (it reloaded 320 B on sm_90 until a GEMV group's segments
  // shared one call site).
  mk::test::compileAndCheck(src, kernel, "sm_90", mk::test::SpillRule::Strict);
  mk::test::compileAndCheck(src, kernel, "sm_120", mk::test::SpillRule::Strict);
}

using P = std::vector<std::string>;
const Variant kVariants[] = {
    // Layer patterns and depths.
    {"kda_only", {}, P{"K"}},
    {"mla_only", {}, P{"M"}},
    {"mla_kda", {}, P{"M", "K"}},
    {"alternating6", {}, P{"K", "M", "K", "M", "K", "M"}},
    {"deep12", {}, P{"K", "K", "K", "M", "K", "K", "K", "M", "K", "K", "K", "M"}},
    {"long_names", {}, P{"kda", "mla"}},
    // Experts.
    {"experts4_top1", {{"n_experts", "4"}, {"n_active", "1"}}, P{"K", "M"}},
    {"experts16_top4", {{"n_experts", "16"}, {"n_active", "4"}}, P{"K", "M"}},
    {"experts64_top8", {{"n_experts", "64"}, {"n_active", "8"}}, P{"K", "M"}},
    {"no_shared", {{"n_shared", "0"}}, P{"K", "M"}},
    {"shared2", {{"n_shared", "2"}}, P{"K", "M"}},
    {"all_active", {{"n_experts", "4"}, {"n_active", "4"}}, P{"K", "M"}},
    {"moe_inter256", {{"moe_inter", "256"}}, P{"K", "M"}},
    // Heads.
    {"kda_heads4", {{"kda_heads", "4"}}, P{"K", "M"}},
    {"kda_head_dim64", {{"kda_head_dim", "64"}}, P{"K", "M"}},
    {"mla_heads4", {{"mla_heads", "4"}}, P{"K", "M"}},
    {"mla_heads8", {{"mla_heads", "8"}}, P{"K", "M"}},
    {"kv_lora256", {{"kv_lora", "256"}}, P{"K", "M"}},
    {"v_head64", {{"v_head", "64"}}, P{"K", "M"}},
    {"qk_rope32", {{"qk_rope", "32"}}, P{"K", "M"}},
    {"short_conv3", {{"short_conv", "3"}}, P{"K", "M"}},
    // Groups and widths.
    {"group64", {{"group", "64"}}, P{"K", "M"}},
    {"group128_hidden512", {{"group", "128"}, {"hidden", "512"}, {"moe_inter", "256"},
                            {"kv_lora", "256"}, {"kda_head_dim", "64"}, {"v_head", "64"}},
     P{"K", "M"}},
    {"hidden512", {{"hidden", "512"}}, P{"K", "M"}},
    {"hidden1024", {{"hidden", "1024"}, {"moe_inter", "512"}}, P{"K", "M"}},
    // Wide enough that the GEMV tiles' weight ring drops to 2 stages to fit
    // sm_120's 99 KB (EmitterNvrtc.WideSpecTakesTheShallowRing checks which).
    {"hidden4096_inter2048", {{"hidden", "4096"}, {"moe_inter", "2048"}, {"group", "64"}},
     P{"K", "M"}},
    // Mixtral's expert width: the MoE down tasks stage at most 4096 rows of
    // their input (split-K slices), so the work area does not grow with it.
    {"mixtral_inter14336", {{"hidden", "4096"}, {"moe_inter", "14336"}, {"group", "64"}},
     P{"K", "M"}},
    // Too wide even so: the refusal names what takes the shared memory.
    {"hidden16384", {{"hidden", "16384"}, {"moe_inter", "2048"}, {"group", "64"}}, P{"K", "M"},
     "the largest task's work area"},
    // Refused with a message that says what to change.
    {"odd_group", {{"group", "33"}}, P{"K", "M"}, "'group' must be even"},
    {"group_not_dividing", {{"group", "96"}}, P{"K", "M"}, "is not divisible by the group size 96"},
    {"top_k_too_big", {{"n_active", "9"}}, P{"K", "M"}, "exceeds 'n_experts'"},
    {"zero_hidden", {{"hidden", "0"}}, P{"K", "M"}, "'hidden' must be positive"},
    {"odd_rope", {{"qk_rope", "15"}}, P{"K", "M"}, "'qk_rope' must be even"},
    {"conv1", {{"short_conv", "1"}}, P{"K", "M"}, "'short_conv' must be >= 2"},
    {"no_layers", {}, P{}, "'pattern' must list at least one layer"},
    {"bad_layer", {}, P{"K", "X"}, "unknown layer kind"},
    {"negative_shared", {{"n_shared", "-1"}}, P{"K", "M"}, "'n_shared' must be >= 0"},
};

INSTANTIATE_TEST_SUITE_P(Variants, SpecMatrix, testing::ValuesIn(kVariants),
                         [](const testing::TestParamInfo<Variant> &i) {
                           return std::string(i.param.name);
                         });

} // namespace
