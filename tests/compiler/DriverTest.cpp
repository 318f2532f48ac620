//===- DriverTest.cpp - mkc's library entry point on bad input ------------===//
//
// Every bad input gives exactly one line "mkc: error: <file>: <message>" and
// status 1, through mk::runDriver (what mkc's main calls).
//
//===----------------------------------------------------------------------===//

#include "Pipeline/Driver.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace {

std::string inputPath(const std::string &name) {
  return std::string(MK_SOURCE_DIR) + "/tests/lit/mkc/Inputs/" + name;
}

struct Result {
  int status;
  std::string out, err;
};

Result run(const std::string &path, const std::string &emit = "graph",
           const std::string &passOption = "") {
  mk::DriverOptions options;
  options.inputPath = path;
  options.emit = emit;
  std::string error;
  if (!passOption.empty() &&
      !mk::addPassOption(passOption, options.passOptions, error))
    ADD_FAILURE() << error;
  Result r;
  llvm::raw_string_ostream out(r.out), err(r.err);
  r.status = mk::runDriver(options, out, err);
  out.flush();
  err.flush();
  return r;
}

void expectOneLineError(const std::string &path, const std::string &needle) {
  SCOPED_TRACE(path);
  Result r = run(path);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("mkc: error: " + path + ": ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

TEST(Driver, MalformedJsonHasLineAndColumn) {
  expectOneLineError(inputPath("malformed.json"),
                     "line 4, column 19: expected a string key");
  expectOneLineError(inputPath("empty.json"), "line 1, column 1:");
}

TEST(Driver, UnknownKeysAndLayerKinds) {
  expectOneLineError(inputPath("unknown-key.json"),
                     "unknown config key 'hiden'");
  expectOneLineError(inputPath("unknown-layer.json"),
                     "unknown layer kind \"X\"");
}

TEST(Driver, MissingWrongOrContradictoryDimensions) {
  expectOneLineError(inputPath("missing-key.json"),
                     "missing required key 'kv_lora'");
  expectOneLineError(inputPath("wrong-type.json"),
                     "config key 'hidden' must be an integer");
  expectOneLineError(inputPath("zero-dim.json"),
                     "'kda_heads' must be positive");
  expectOneLineError(inputPath("topk-exceeds-experts.json"),
                     "'n_active' (16) exceeds 'n_experts' (8)");
  expectOneLineError(inputPath("group-mismatch.json"),
                     "is not divisible by the group size 48");
}

TEST(Driver, UnreadableFiles) {
  std::string missing = std::string(MK_TEST_TMPDIR) + "/no-such-spec.json";
  expectOneLineError(missing, "cannot open");
  expectOneLineError(std::string(MK_TEST_TMPDIR) + "/no-such-ir.mlir",
                     "cannot open");
  expectOneLineError(std::string(MK_TEST_TMPDIR), "is a directory");
}

TEST(Driver, UnknownStage) {
  Result r = run(std::string(MK_SOURCE_DIR) + "/examples/specs/tiny.json",
                 "no-such-stage");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("mkc: error: unknown stage 'no-such-stage'"),
            std::string::npos)
      << r.err;
}

// Errors of the passes and the emitter have the spec reader's form too: one
// line naming the file, with the op's location, no op dump.
TEST(Driver, PipelineErrorsAreOneLine) {
  std::string tiny = std::string(MK_SOURCE_DIR) + "/examples/specs/tiny.json";
  for (auto [option, needle] :
       {// Was a floating-point exception (a division by the SM count).
        std::pair{"schedule-partition-work=target-sms=0",
                  "tiny: schedule-partition-work: target-sms must be in 1..1024"},
        // Was a verifier error after the pass, with the whole kernel.
        std::pair{"schedule-form-phases=threads=48",
                  "tiny: schedule-form-phases: threads must be a multiple of 32"},
        // The emitter's refusal.
        std::pair{"schedule-form-phases=max-shared-bytes=1024",
                  "tiny.decode_step: kernel @mk_tiny needs"}}) {
    SCOPED_TRACE(option);
    Result r = run(tiny, "cuda", option);
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("mkc: error: " + tiny + ": ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  }
}

TEST(Driver, GoodSpecPrintsGraphIR) {
  Result r = run(std::string(MK_SOURCE_DIR) + "/examples/kimi_linear_w4a16.json");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_NE(r.out.find("module @kimi_linear_w4a16"), std::string::npos);
  EXPECT_NE(r.out.find("func.func @decode_step"), std::string::npos);
}

} // namespace

// Compile time grows about linearly with depth: a 512-layer spec (the tiny
// one's K,K,K,M pattern x 128) compiles to CUDA in a few seconds. Session 4
// measured 7 s for 512 layers before the schedule verifier, phase formation
// and barrier conversion stopped pairing every task (or buffer) with every
// other one, ~3 s after (and ~40 s was the trend of the quadratic passes).
TEST(Driver, CompileTimeIsNearLinearInDepth) {
  std::ifstream in(std::string(MK_SOURCE_DIR) + "/examples/specs/tiny.json");
  std::string spec((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string small = "\"pattern\": [\"K\", \"K\", \"K\", \"M\"]";
  const size_t at = spec.find(small);
  ASSERT_NE(at, std::string::npos) << "tiny.json's pattern changed";
  std::string pattern = "\"pattern\": [";
  for (int i = 0; i < 128; ++i)
    pattern += std::string(i ? ", " : "") + "\"K\", \"K\", \"K\", \"M\"";
  spec.replace(at, small.size(), pattern + "]");
  const std::string dir = ::testing::TempDir() + "/mk_deep_spec";
  std::string cmd = "mkdir -p '" + dir + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string path = dir + "/deep512.json";
  std::ofstream(path) << spec;
  mk::DriverOptions options;
  options.inputPath = path;
  options.emit = "cuda";
  options.outputPath = dir + "/out";
  std::string out, err;
  llvm::raw_string_ostream os(out), es(err);
  const auto t0 = std::chrono::steady_clock::now();
  const int status = mk::runDriver(options, os, es);
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  es.flush();
  EXPECT_EQ(status, 0) << err;
  std::printf("[ info ] 512 layers: %.2f s\n", s);
  EXPECT_LT(s, 20.0) << "compile time of a 512-layer spec";
}
