//===- JitTest.cpp - The embedded JIT: spec in, session out ---------------===//
//
// mk::jit compiles block specs in-process: the source and manifest must be
// exactly what mkc writes, the manifest must satisfy the runtime's parser and
// the tensor catalogue, NVRTC must take the source (sm_90, no device), and
// every failure must come back as a Status: bad specs with the spec reader's
// message, a missing driver as NoDriver. On a GPU, one JIT session step
// agrees with the oracle; without one that test skips.
//
//===----------------------------------------------------------------------===//

#include "Jit/Jit.h"
#include "Pipeline/Driver.h"

#include "GpuTestSupport.h" // tests/gpu: oracle helpers, MK_REQUIRE_GPU

#include "mk/BlockSpec.h"
#include "mk/runtime/Manifest.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace mk;
using namespace mk::rt;

namespace {

std::string sourcePath(const std::string &rel) {
  return std::string(MK_SOURCE_DIR) + "/" + rel;
}

const std::string kTiny = "examples/specs/tiny.json";
const std::string kKimi = "examples/kimi_linear_w4a16.json";

/// A cache directory of this test binary only, emptied first, so builds
/// really run NVRTC.
std::string freshCacheDir(const std::string &name) {
  std::string dir = std::string(MK_TEST_TMPDIR) + "/jit-cache-" + name;
  std::string cmd = "rm -rf '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir;
}

/// What `mkc SPEC --emit=cuda -o -` prints: the source, a marker, the
/// manifest (EmitterStage.cpp).
std::string mkcStdout(const std::string &spec) {
  DriverOptions o;
  o.inputPath = sourcePath(spec);
  o.emit = "cuda";
  std::string out, err;
  llvm::raw_string_ostream os(out), es(err);
  EXPECT_EQ(runDriver(o, os, es), 0) << es.str();
  os.flush();
  return out;
}

/// The manifest parses and its weight / state params are the catalogue's,
/// in its order (names, dtypes, shapes; caches with a -1 row dimension).
void checkManifest(const KernelSource &src, const std::string &kernel,
                   Manifest &m) {
  Status st = parseManifest(src.manifestText, m);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_EQ(m.kernel, kernel);
  EXPECT_EQ(src.sourceName, kernel + ".cu");
  EXPECT_NE(src.source.find("extern \"C\" __global__"), std::string::npos);
  EXPECT_NE(src.source.find(kernel + "("), std::string::npos);

  std::vector<TensorDesc> weights = parameterTensors(m.config);
  std::vector<TensorDesc> state = stateTensors(m.config, -1);
  std::vector<const ManifestParam *> w, in, out;
  for (const ManifestParam &p : m.params) {
    if (p.role == ParamRole::Weight)
      w.push_back(&p);
    else if (p.role == ParamRole::StateIn)
      in.push_back(&p);
    else if (p.role == ParamRole::StateOut)
      out.push_back(&p);
  }
  ASSERT_EQ(w.size(), weights.size());
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(w[i]->name, weights[i].name);
    EXPECT_EQ(w[i]->dtype, weights[i].dtype) << weights[i].name;
    EXPECT_EQ(w[i]->shape, weights[i].shape) << weights[i].name;
  }
  for (const auto *side : {&in, &out}) {
    ASSERT_EQ(side->size(), state.size());
    for (size_t i = 0; i < state.size(); ++i) {
      EXPECT_EQ((*side)[i]->name, state[i].name);
      EXPECT_EQ((*side)[i]->dtype, state[i].dtype) << state[i].name;
      EXPECT_EQ((*side)[i]->shape, state[i].shape) << state[i].name;
    }
  }
}

/// In-process compile of `spec`: identical to mkc's output, manifest checked.
void checkInProcess(const std::string &spec, const std::string &kernel,
                    KernelSource &src) {
  Status st = jit::compileSpecFile(sourcePath(spec), {}, src);
  ASSERT_TRUE(st.isOk()) << st.toString();
  ASSERT_FALSE(src.source.empty());
  EXPECT_EQ(mkcStdout(spec), src.source + "\n// ---- " + kernel +
                                 ".manifest.json ----\n" + src.manifestText)
      << "the in-process pipeline and mkc disagree";
  Manifest m;
  checkManifest(src, kernel, m);
  std::printf("%s: %zu bytes of source, %lld phases, %lld grid barriers\n",
              kernel.c_str(), src.source.size(), (long long)m.phases,
              (long long)m.gridBarriers);
}

} // namespace

TEST(Jit, TinySpecInProcess) {
  KernelSource src;
  checkInProcess(kTiny, "mk_tiny", src);
}

TEST(Jit, KimiLinearInProcessAndNvrtcSm90) {
  KernelSource src;
  checkInProcess(kKimi, "mk_kimi_linear_w4a16", src);
  if (HasFatalFailure())
    return;
  jit::JitOptions o;
  o.cacheDir = freshCacheDir("kimi");
  std::shared_ptr<Kernel> k;
  Status st = jit::buildKernel(src, o, "sm_90", k);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_FALSE(k->cubin().empty());
  EXPECT_FALSE(k->fromCache());
  EXPECT_EQ(k->arch(), "sm_90");
  EXPECT_EQ(k->manifest().kernel, "mk_kimi_linear_w4a16");
}

TEST(Jit, ConfigAndFileGiveTheSameKernel) {
  BlockConfig cfg;
  std::string error;
  ASSERT_TRUE(loadBlockSpecFile(sourcePath(kTiny), cfg, error)) << error;
  KernelSource a, b;
  ASSERT_TRUE(jit::compileSpecToSource(cfg, {}, a).isOk());
  ASSERT_TRUE(jit::compileSpecFile(sourcePath(kTiny), {}, b).isOk());
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.manifestText, b.manifestText);
}

TEST(Jit, TinyNvrtcSm90AndTheCache) {
  KernelSource src;
  ASSERT_TRUE(jit::compileSpecFile(sourcePath(kTiny), {}, src).isOk());
  jit::JitOptions o;
  o.cacheDir = freshCacheDir("tiny");
  std::shared_ptr<Kernel> k, again, uncached;
  Status st = jit::buildKernel(src, o, "sm_90", k);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_FALSE(k->cubin().empty());
  EXPECT_FALSE(k->fromCache());
  ASSERT_TRUE(jit::buildKernel(src, o, "sm_90", again).isOk());
  EXPECT_TRUE(again->fromCache()) << again->cacheNote();
  EXPECT_EQ(again->cubin(), k->cubin());
  o.useCache = false;
  ASSERT_TRUE(jit::buildKernel(src, o, "sm_90", uncached).isOk());
  EXPECT_FALSE(uncached->fromCache());

  st = jit::buildKernel(src, o, "", k);
  EXPECT_EQ(st.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(st.message().find("architecture"), std::string::npos);
}

TEST(Jit, OptionsReachThePasses) {
  jit::JitOptions o;
  o.kernelName = "my_decode";
  o.debugCapture = true;
  KernelSource src;
  Status st = jit::compileSpecFile(sourcePath(kTiny), o, src);
  ASSERT_TRUE(st.isOk()) << st.toString();
  Manifest m;
  checkManifest(src, "my_decode", m);
  EXPECT_TRUE(m.debugCapture);
  EXPECT_FALSE(m.captures.empty());
  EXPECT_GT(m.debugBytes, 0);

  // The partition depends on target-sms: the default (264) and 16 differ.
  KernelSource base, small;
  jit::JitOptions few;
  few.targetSms = 16;
  ASSERT_TRUE(jit::compileSpecFile(sourcePath(kKimi), {}, base).isOk());
  ASSERT_TRUE(jit::compileSpecFile(sourcePath(kKimi), few, small).isOk());
  EXPECT_NE(base.source, small.source);
  Manifest sm;
  checkManifest(small, "mk_kimi_linear_w4a16", sm);

  o = {};
  o.kernelName = "not an identifier";
  st = jit::compileSpecFile(sourcePath(kTiny), o, src);
  EXPECT_EQ(st.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(st.message().find("not an identifier"), std::string::npos);
  o = {};
  o.targetSms = -1;
  EXPECT_EQ(jit::compileSpecFile(sourcePath(kTiny), o, src).code(),
            ErrorCode::InvalidArgument);
}

TEST(Jit, BadSpecsAreStatusErrors) {
  auto expectError = [](const std::string &path, ErrorCode code,
                        const std::string &needle) {
    SCOPED_TRACE(path);
    KernelSource src;
    Status st = jit::compileSpecFile(path, {}, src);
    EXPECT_EQ(st.code(), code) << st.toString();
    // One line, naming the file and the problem, as the spec reader says it.
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
    EXPECT_EQ(st.message().rfind(path + ": ", 0), 0u) << st.message();
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
    EXPECT_TRUE(src.source.empty());
  };
  std::string inputs = sourcePath("tests/lit/mkc/Inputs/");
  expectError(inputs + "malformed.json", ErrorCode::InvalidArgument,
              "line 4, column 19: expected a string key");
  expectError(inputs + "unknown-key.json", ErrorCode::InvalidArgument,
              "unknown config key 'hiden'");
  expectError(inputs + "unknown-layer.json", ErrorCode::InvalidArgument,
              "unknown layer kind \"X\"");
  expectError(inputs + "does-not-exist.json", ErrorCode::Io, "cannot open");

  // An invalid configuration handed in directly.
  BlockConfig cfg;
  cfg.nActive = cfg.nExperts + 1;
  KernelSource src;
  Status st = jit::compileSpecToSource(cfg, {}, src);
  EXPECT_EQ(st.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(st.message().find("kimi_linear_w4a16"), std::string::npos)
      << st.message();
}

// The driver is loaded once per process, so the missing one is pointed at in
// a child process of its own (a death test in "threadsafe" style re-executes
// this binary), which then must exit normally with NoDriver.
TEST(JitNoDriver, CreateSessionReportsNoDriver) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto child = [] {
    setenv("MK_CUDA_DRIVER_LIB", "/nonexistent/libcuda-missing.so.1", 1);
    std::unique_ptr<Session> s;
    Status a = jit::createSession(nullptr, sourcePath(kTiny), {}, {}, s);
    bool ok = a.code() == ErrorCode::NoDriver && !s &&
              a.message().find("libcuda-missing") != std::string::npos;
    Status b = jit::createSession(nullptr, BlockConfig(), {}, {}, s);
    ok = ok && b.code() == ErrorCode::NoDriver && !s;
    std::fprintf(stderr, "%s | %s\n", a.toString().c_str(),
                 b.toString().c_str());
    std::exit(ok ? 0 : 1);
  };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "");
}

TEST(JitGpu, TinySessionStepMatchesTheOracle) {
  MK_REQUIRE_GPU(dev);
  jit::JitOptions o;
  o.cacheDir = std::string(MK_TEST_TMPDIR) + "/jit-cache-gpu";
  SessionOptions so;
  so.cacheCapacity = 64;
  std::unique_ptr<Session> s;
  MK_ASSERT_OK(jit::createSession(dev, sourcePath(kTiny), o, so, s));
  ASSERT_TRUE(s);
  const BlockConfig &cfg = s->manifest().config;

  TensorMap weights = makeRandomWeights(cfg, 1);
  MK_ASSERT_OK(mk::testing::bindAllWeights(*s, weights));
  const DecodeState state0 = makeRandomState(cfg, 16, 2);
  MK_ASSERT_OK(mk::testing::writeState(*s, state0));
  std::vector<BFloat16> hidden = makeRandomHidden(cfg, 3), got;
  DeviceBuffer in, out;
  MK_ASSERT_OK(mk::testing::uploadHidden(dev, hidden, in));
  MK_ASSERT_OK(DeviceBuffer::allocate(dev, hidden.size() * 2, out));
  MK_ASSERT_OK(s->step(in.ptr(), out.ptr()));
  MK_ASSERT_OK(s->synchronize());
  MK_ASSERT_OK(mk::testing::downloadHidden(dev, out, got));
  std::vector<float> gpu = mk::testing::bf16ToFloat(got);
  ASSERT_TRUE(mk::testing::allFinite(gpu));

  DecodeState st = state0;
  OracleTrace trace;
  double cos = mk::testing::cosine(gpu, mk::testing::bf16ToFloat(oracleStep(
                                            cfg, weights, st, hidden, &trace)));
  // A router near tie may be broken the other way (OracleGpuTest does the
  // same): accept the step with those experts swapped, and only that
  // (kernelTieRoutings: the spec's ties and, for a kernel declaring
  // unrounded weights, that arithmetic's too, in its window).
  std::vector<OracleOptions> alts = kernelTieRoutings(
      cfg, trace, s->manifest().packedArithmetic, OracleOptions{}, [&](const OracleOptions &o) {
        DecodeState u = state0;
        OracleTrace t;
        oracleStep(cfg, weights, u, hidden, &t, &o);
        return t;
      });
  for (const OracleOptions &alt : alts) {
    if (cos >= 0.999)
      break;
    DecodeState alternative = state0;
    double c = mk::testing::cosine(
        gpu, mk::testing::bf16ToFloat(
                 oracleStep(cfg, weights, alternative, hidden, nullptr, &alt)));
    std::printf("near-tie routing: cosine %.6f\n", c);
    cos = std::max(cos, c);
  }
  std::printf("jit tiny step vs oracle: cosine %.6f (grid %d)\n", cos,
              s->launchConfig().grid);
  EXPECT_GE(cos, 0.999);
  EXPECT_EQ(s->contextLength(), 17);
}
