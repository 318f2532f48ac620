//===- NvrtcTest.cpp - Compiling kernels without a GPU --------------------===//

#include "ScopedTempDir.h"
#include "TestKernels.h"
#include "mk/runtime/Kernel.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

using namespace mk;
using namespace mk::rt;

namespace {

const char *kSmallKernel = R"(
#include "mk/test_header.cuh"
extern "C" __global__ void scale(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = twice(x[i]);
}
)";

std::vector<EmbeddedHeader> smallHeaders() {
  return {{"mk/test_header.cuh",
           "#pragma once\n__device__ inline float twice(float v) { return 2.f * v; }\n"}};
}

bool supports(int cc) {
  std::vector<int> archs = nvrtcSupportedArchs();
  return std::find(archs.begin(), archs.end(), cc) != archs.end();
}


/// Whether this build embeds the device templates (mk/megakernel.cuh).
bool templatesEmbedded() {
  for (const EmbeddedHeader &h : embeddedTemplates())
    if (h.includeName == "mk/megakernel.cuh")
      return true;
  return false;
}

/// Writes the stub kernel of `cfg` into `dir` as mkc writes one; returns
/// `dir`.
std::string writeStubKernelDir(const BlockConfig &cfg, const std::string &dir) {
  std::ofstream(dir + "/mk_test_stub.manifest.json") << mk::testing::makeManifest(cfg);
  std::ofstream(dir + "/mk_test_stub.cu") << mk::testing::makeStubKernelSource(cfg);
  return dir;
}

} // namespace

TEST(Nvrtc, VersionAndArchitectures) {
  EXPECT_GE(nvrtcVersionNumber(), 11000);
  EXPECT_FALSE(nvrtcSupportedArchs().empty());
  EXPECT_EQ(archForComputeCapability(9, 0), "sm_90");
  EXPECT_EQ(archForComputeCapability(12, 0), "sm_120");
}

TEST(Nvrtc, OptionsAreTheDocumentedOnes) {
  CompileOptions o;
  o.arch = "sm_90";
  o.cudaRoot = "/nonexistent-cuda";
  o.extraOptions = {"-DFOO=1"};
  std::vector<std::string> opts = nvrtcOptions(o);
  ASSERT_EQ(opts.size(), 4u); // no -I for include dirs that do not exist
  EXPECT_EQ(opts[0], "-arch=sm_90");
  EXPECT_EQ(opts[1], "-std=c++17");
  EXPECT_EQ(opts[2], "-default-device");
  EXPECT_EQ(opts[3], "-DFOO=1");
}

TEST(Nvrtc, EnvironmentOptionsComeLast) {
  CompileOptions o;
  o.arch = "sm_90";
  o.cudaRoot = "/nonexistent-cuda";
  ASSERT_EQ(::setenv("MK_NVRTC_OPTIONS", " -DMK_GEMV_SIMT  -DMK_SPIN_NS=64 ", 1), 0);
  std::vector<std::string> opts = nvrtcOptions(o);
  ::unsetenv("MK_NVRTC_OPTIONS");
  ASSERT_EQ(opts.size(), 5u);
  EXPECT_EQ(opts[3], "-DMK_GEMV_SIMT");
  EXPECT_EQ(opts[4], "-DMK_SPIN_NS=64");
  EXPECT_EQ(nvrtcOptions(o).size(), 3u);
}

TEST(Nvrtc, CompilesASmallKernelForHopperAndBlackwell) {
  for (int cc : {90, 120}) {
    if (!supports(cc)) {
      ADD_FAILURE() << "this NVRTC cannot target sm_" << cc;
      continue;
    }
    CompileOptions o;
    o.arch = "sm_" + std::to_string(cc);
    std::string cubin, log;
    Status st = compileWithNvrtc(kSmallKernel, "small.cu", smallHeaders(),
                                 nvrtcOptions(o), cubin, log);
    ASSERT_TRUE(st.isOk()) << st.toString();
    ASSERT_GT(cubin.size(), 4u);
    EXPECT_EQ(cubin.substr(1, 3), "ELF");
  }
}

TEST(Nvrtc, CompileErrorsQuoteTheLog) {
  CompileOptions o;
  o.arch = "sm_90";
  std::string cubin, log;
  Status st = compileWithNvrtc("extern \"C\" __global__ void k() { undefined_fn(); }",
                               "broken.cu", {}, nvrtcOptions(o), cubin, log);
  ASSERT_FALSE(st.isOk());
  EXPECT_EQ(st.code(), ErrorCode::Compile);
  EXPECT_NE(st.message().find("undefined_fn"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("broken.cu"), std::string::npos);
}

TEST(Nvrtc, EmbeddedTemplatesAreThere) {
  // Every templates/*.cuh, named mk/<file>.cuh.
  for (const EmbeddedHeader &h : embeddedTemplates()) {
    EXPECT_EQ(h.includeName.rfind("mk/", 0), 0u) << h.includeName;
    EXPECT_FALSE(h.text.empty()) << h.includeName;
  }
}

TEST(Nvrtc, EmbeddedTemplatesCompileUnderNvrtc) {
  if (!templatesEmbedded())
    GTEST_SKIP() << "templates/megakernel.cuh not embedded in this build";
  CompileOptions o;
  o.arch = "sm_90";
  std::string cubin, log;
  Status st = compileWithNvrtc(
      "#include \"mk/megakernel.cuh\"\nextern \"C\" __global__ void k() {}\n",
      "all_templates.cu", kernelHeaders(), nvrtcOptions(o), cubin, log);
  EXPECT_TRUE(st.isOk()) << st.toString();
}

// The opt-in variants (MK_NVRTC_OPTIONS) must compile under NVRTC too, for
// both target architectures.
TEST(Nvrtc, TemplateVariantsCompileUnderNvrtc) {
  if (!templatesEmbedded())
    GTEST_SKIP() << "templates/megakernel.cuh not embedded in this build";
  // The SIMT variants, the relaxed polls of counters and barriers, the
  // serial polls of the router's logits, and the packed exact tile's and the
  // bf16 rows' opt-in forms (docs/runtime.md lists them).
  const std::vector<std::vector<std::string>> variants = {
      {"-DMK_GEMV_SIMT", "-DMK_SPIN_NS=64", "-DMK_MLA_ATTENTION_SIMT", "-DMK_POLL_RELAXED",
       "-DMK_POLL_SERIAL"},
      {"-DMK_GEMV_NO_AHEAD", "-DMK_ROWS_ONE_WARP", "-DMK_WEIGHTS_EVICT_NORMAL",
       "-DMK_WEIGHT_LOADS_EVICT_NORMAL"}};
  for (const std::vector<std::string> &options : variants)
    for (const char *arch : {"sm_90", "sm_120"}) {
      CompileOptions o;
      o.arch = arch;
      o.extraOptions = options;
      std::string cubin, log;
      Status st = compileWithNvrtc(
          "#include \"mk/megakernel.cuh\"\n"
          "extern \"C\" __global__ void k(const float *x, const uint8_t *w,\n"
          "    const mk::bf16 *s, const mk::bf16 *z, float *y, mk::bf16 *h, unsigned *sync) {\n"
          "  extern __shared__ float smem[];\n"
          "  mk::counter_wait(sync, 0, 1u);\n"
          "  mk::grid_barrier(sync);\n"
          "  mk::w4a16_gemv_tile<256, 64, 128>(x, w, s, z, 1024, 0, 64, 0, 2304,\n"
          "      smem, mk::EpiAtomicAddF32{y, 1.f, 0});\n"
          "  mk::w4a16_gemv_tile<256, 128, 128, mk::EpiAtomicAddF32, false, mk::kOrderMma>(\n"
          "      x, w, s, z, 128, 0, 128, 0, 2304, smem, mk::EpiAtomicAddF32{y, 1.f, 0});\n"
          "  mk::bf16_rows_gemv<256>(x, s, 2304, 0, 1, h);\n"
          "  mk::block_residual<256>(h, y, 2304, smem, h);\n"
          "  mk::block_rmsnorm<256>(smem, s, 2304, 1e-6f, smem, smem + 2304);\n"
          "}\n",
          "variants.cu", kernelHeaders(), nvrtcOptions(o), cubin, log);
      EXPECT_TRUE(st.isOk()) << arch << " " << options.front() << ": " << st.toString() << "\n"
                             << log;
      EXPECT_FALSE(cubin.empty()) << arch;
    }
}

TEST(Kernel, BuildUsesTheCacheAndRecoversFromCorruption) {
  BlockConfig cfg = mk::testing::tinyConfig();
  KernelSource src;
  src.manifestText = mk::testing::makeManifest(cfg);
  src.source = mk::testing::makeStubKernelSource(cfg);
  src.sourceName = "mk_test_stub.cu";
  KernelBuildOptions opts;
  opts.compile.arch = "sm_90";
  mk::testing::ScopedTempDir cacheDir("mk-nvrtc-test-");
  opts.cacheDir = cacheDir.path();

  std::shared_ptr<Kernel> k1, k2, k3;
  ASSERT_TRUE(Kernel::build(src, opts, k1).isOk());
  EXPECT_FALSE(k1->fromCache());
  EXPECT_EQ(k1->manifest().kernel, "mk_test_stub");
  ASSERT_TRUE(Kernel::build(src, opts, k2).isOk());
  EXPECT_TRUE(k2->fromCache());
  EXPECT_EQ(k1->cubin(), k2->cubin());
  EXPECT_EQ(k1->cacheKey(), k2->cacheKey());

  // Truncate the entry: the next build notices, recompiles and rewrites it.
  std::string path = KernelCache(opts.cacheDir).pathFor(k1->cacheKey());
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << "MKCACHE1 " << k1->cacheKey() << " 99999 0\npartial";
  }
  ASSERT_TRUE(Kernel::build(src, opts, k3).isOk());
  EXPECT_FALSE(k3->fromCache());
  EXPECT_NE(k3->cacheNote().find("corrupt"), std::string::npos);
  EXPECT_EQ(k3->cubin(), k1->cubin());
  std::shared_ptr<Kernel> k4;
  ASSERT_TRUE(Kernel::build(src, opts, k4).isOk());
  EXPECT_TRUE(k4->fromCache());

  // Another architecture is another entry.
  opts.compile.arch = "sm_120";
  std::shared_ptr<Kernel> k5;
  ASSERT_TRUE(Kernel::build(src, opts, k5).isOk());
  EXPECT_FALSE(k5->fromCache());
  EXPECT_NE(k5->cacheKey(), k1->cacheKey());
}

TEST(Kernel, ReadKernelDir) {
  BlockConfig cfg = mk::testing::tinyConfig();
  mk::testing::ScopedTempDir tmp("mk-nvrtc-test-");
  std::string dir = writeStubKernelDir(cfg, tmp.path());
  KernelSource src;
  Status st = readKernelDir(dir, "", src);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_EQ(src.sourceName, "mk_test_stub.cu");
  EXPECT_NE(src.source.find("mk_test_stub"), std::string::npos);

  st = readKernelDir(dir, "other", src);
  EXPECT_EQ(st.code(), ErrorCode::Io);
  st = readKernelDir(dir + "/nope", "", src);
  EXPECT_EQ(st.code(), ErrorCode::Io);

  // A broken manifest is reported with its path.
  std::ofstream(dir + "/mk_test_stub.manifest.json") << "{\"format\": 1}";
  st = readKernelDir(dir, "", src);
  EXPECT_EQ(st.code(), ErrorCode::Manifest);
  EXPECT_NE(st.message().find("mk_test_stub.manifest.json"), std::string::npos);
}

TEST(Kernel, BuildFromDirForAnArchitecture) {
  BlockConfig cfg = mk::testing::tinyConfig();
  mk::testing::ScopedTempDir tmp("mk-nvrtc-test-");
  std::string dir = writeStubKernelDir(cfg, tmp.path());
  KernelBuildOptions opts;
  opts.useCache = false;
  std::shared_ptr<Kernel> k;
  Status st = buildKernelFromDir(dir, "sm_90", opts, k);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_EQ(k->arch(), "sm_90");
  EXPECT_FALSE(k->cubin().empty());
  EXPECT_EQ(buildKernelFromDir(dir + "/nope", "sm_90", opts, k).code(), ErrorCode::Io);
  EXPECT_EQ(buildKernelFromDir(dir, "", opts, k).code(), ErrorCode::InvalidArgument);
}

TEST(Kernel, NeedsAnArchitecture) {
  BlockConfig cfg = mk::testing::tinyConfig();
  KernelSource src;
  src.manifestText = mk::testing::makeManifest(cfg);
  src.source = mk::testing::makeStubKernelSource(cfg);
  KernelBuildOptions opts;
  opts.useCache = false;
  std::shared_ptr<Kernel> k;
  EXPECT_EQ(Kernel::build(src, opts, k).code(), ErrorCode::InvalidArgument);
}
