//===- JitCApiTest.cpp - libmk_jit_c's C API (mk_jit.h) -------------------===//
//
// The compiler behind a C call, as ctypes uses it: what it writes, and
// that every bad argument is a status with a one-line message, with nothing
// left behind. No GPU needed.
//
//===----------------------------------------------------------------------===//

#include "mk_jit.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace fs = std::filesystem;

namespace {
std::string readText(const fs::path &p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
const std::string kTiny = readText(fs::path(MK_SOURCE_DIR) / "examples/specs/tiny.json");
fs::path scratch(const std::string &name) {
  fs::path p = fs::path(MK_TEST_TMPDIR) / ("jit-capi-" + name);
  fs::remove_all(p);
  return p;
}
} // namespace

TEST(JitCApi, WritesTheKernelDirectory) {
  fs::path dir = scratch("tiny");
  ASSERT_EQ(mk_jit_compile_spec(kTiny.c_str(), dir.c_str(), nullptr, 0), 0) << mk_jit_last_error();
  EXPECT_STREQ(mk_jit_last_error(), "");
  EXPECT_TRUE(fs::exists(dir / "mk_tiny.cu"));
  const std::string manifest = readText(dir / "mk_tiny.manifest.json");
  EXPECT_NE(manifest.find("\"kernel\": \"mk_tiny\""), std::string::npos);
  // The options reach the pipeline: a kernel name of the caller's choice.
  fs::path named = scratch("named");
  ASSERT_EQ(mk_jit_compile_spec(kTiny.c_str(), named.c_str(), "my_kernel", 16), 0)
      << mk_jit_last_error();
  EXPECT_TRUE(fs::exists(named / "my_kernel.cu"));
  EXPECT_TRUE(fs::exists(named / "my_kernel.manifest.json"));
}

TEST(JitCApi, BadArgumentsAreStatuses) {
  fs::path dir = scratch("bad");
  EXPECT_EQ(mk_jit_compile_spec(nullptr, dir.c_str(), nullptr, 0), 1);
  EXPECT_NE(std::string(mk_jit_last_error()).find("spec_json is NULL"), std::string::npos);
  EXPECT_EQ(mk_jit_compile_spec(kTiny.c_str(), "", nullptr, 0), 1);
  EXPECT_NE(std::string(mk_jit_last_error()).find("out_dir"), std::string::npos);
  EXPECT_EQ(mk_jit_compile_spec(kTiny.c_str(), dir.c_str(), nullptr, -1), 1);
  EXPECT_NE(std::string(mk_jit_last_error()).find("target_sms must be >= 0, got -1"),
            std::string::npos);
  EXPECT_EQ(mk_jit_compile_spec(kTiny.c_str(), dir.c_str(), "not an identifier", 0), 1);
  EXPECT_NE(std::string(mk_jit_last_error()).find("is not a C identifier"), std::string::npos);
  // The spec reader's located message.
  EXPECT_EQ(mk_jit_compile_spec("{\"name\": \"x\",\n \"config\": 3}", dir.c_str(), nullptr, 0), 1);
  EXPECT_NE(std::string(mk_jit_last_error()).find("spec: line 2"), std::string::npos)
      << mk_jit_last_error();
  EXPECT_FALSE(fs::exists(dir)) << "a refused spec must leave nothing behind";
}

// The packed tiles' arithmetic: the unit's kernel with the spec's exact
// rounding (kOrderMma) and by default the folded form (kOrderMmaFolded);
// an unknown one is refused by name and writes nothing.
TEST(JitCApi, ArithmeticReachesTheEmitter) {
  const std::string unit = readText(fs::path(MK_SOURCE_DIR) / "examples/kimi_linear_w4a16.json");
  fs::path exact = scratch("exact"), dflt = scratch("default"), bad = scratch("fp8");
  ASSERT_EQ(mk_jit_compile_spec_with(unit.c_str(), exact.c_str(), nullptr, 0, "exact"), 0)
      << mk_jit_last_error();
  ASSERT_EQ(mk_jit_compile_spec_with(unit.c_str(), dflt.c_str(), nullptr, 0, nullptr), 0)
      << mk_jit_last_error();
  const std::string e = readText(exact / "mk_kimi_linear_w4a16.cu");
  const std::string d = readText(dflt / "mk_kimi_linear_w4a16.cu");
  EXPECT_NE(e.find("mk::kOrderMma>"), std::string::npos);
  EXPECT_EQ(e.find("mk::kOrderMmaFolded"), std::string::npos);
  EXPECT_NE(d.find("mk::kOrderMmaFolded>"), std::string::npos);
  EXPECT_EQ(mk_jit_compile_spec_with(unit.c_str(), bad.c_str(), nullptr, 0, "fp8"), 1);
  EXPECT_NE(std::string(mk_jit_last_error()).find("arithmetic must be folded, scaled, exact or "
                                                  "int8, got 'fp8'"),
            std::string::npos)
      << mk_jit_last_error();
  EXPECT_FALSE(fs::exists(bad));
}

TEST(JitCApi, UnwritableDirectoryIsAnIoError) {
  EXPECT_EQ(mk_jit_compile_spec(kTiny.c_str(), "/proc/mk-jit-capi-test/out", nullptr, 0), 9);
  EXPECT_NE(std::string(mk_jit_last_error()).find("cannot create directory"), std::string::npos)
      << mk_jit_last_error();
}

TEST(JitCApi, VersionIsTheProjects) { EXPECT_STREQ(mk_jit_version(), MK_VERSION); }
