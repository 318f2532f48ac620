//===- CApiArgumentTest.cpp - The C API against bad arguments, no driver --===//
//
// Runs in mk-runtime-nodriver-tests (NoDriverTest.cpp points the driver at a
// missing library), so no device or session can exist: every mk.h function
// is called with null pointers and bad values, and each must return an error
// code with a message from mk_last_error(), leave its outputs untouched, and
// not crash. Functions that need a live session (all mk_session_* past the
// null check) or device (mk_device_info past the null check) are exercised
// only on their null-handle paths here; a non-null but invalid handle
// cannot be detected by the API (it is an opaque pointer).
//
//===----------------------------------------------------------------------===//

#include "ScopedTempDir.h"
#include "TestKernels.h"
#include "mk/runtime/mk.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <unistd.h>

namespace {

std::string lastError() { return mk_last_error(); }

/// Expects `st` to be `code` with a message containing `fragment`, and a
/// message different from the one before the call (each failure sets it).
#define EXPECT_FAILS(call, code, fragment)                                     \
  do {                                                                         \
    mk_status st_ = (call);                                                    \
    EXPECT_EQ(st_, code) << #call << ": " << lastError();                      \
    EXPECT_NE(lastError().find(fragment), std::string::npos)                   \
        << #call << ": message \"" << lastError() << "\" lacks \""             \
        << (fragment) << "\"";                                                 \
  } while (0)

// A sentinel the API must not overwrite on failure.
template <typename T> T *sentinel() {
  return reinterpret_cast<T *>(uintptr_t(0x5e5e5e5e));
}

struct TempDir : mk::testing::ScopedTempDir {
  TempDir() : ScopedTempDir("mk-capi-args-") {}
  void write(const std::string &name, const std::string &text) const {
    std::ofstream(path() + "/" + name) << text;
  }
};

const int64_t kShape[] = {256};
const char *const kNames[] = {"state.1.S"};
const uint64_t kPtrs[] = {0x1000};
const char *const kDtypes[] = {"f32"};
const int64_t *const kShapes[] = {kShape};
const int kNdims[] = {1};

} // namespace

TEST(CApiArguments, VersionAndErrorAccessor) {
  EXPECT_EQ(mk_api_version(), 1);
  ASSERT_NE(mk_last_error(), nullptr);
}

// The Hugging Face config importer needs no device: it works without a
// driver, and refuses bad arguments and configs in one message, leaving its
// outputs untouched.
TEST(CApiArguments, SpecFromHfConfig) {
  const char *spec = "untouched", *notes = "untouched";
  EXPECT_FAILS(mk_spec_from_hf_config(nullptr, 1, 0, nullptr, &spec, &notes),
               MK_ERR_INVALID_ARGUMENT, "required");
  EXPECT_FAILS(mk_spec_from_hf_config("{}", 1, 0, nullptr, nullptr, &notes),
               MK_ERR_INVALID_ARGUMENT, "required");
  EXPECT_FAILS(mk_spec_from_hf_config("{}", 1, -1, nullptr, &spec, &notes),
               MK_ERR_INVALID_ARGUMENT, "group must be > 0");
  EXPECT_FAILS(mk_spec_from_hf_config("{", 1, 0, nullptr, &spec, &notes),
               MK_ERR_INVALID_ARGUMENT, "config.json: line 1");
  EXPECT_FAILS(mk_spec_from_hf_config("{\"model_type\": \"llama\"}", 1, 0, nullptr, &spec,
                                      &notes),
               MK_ERR_INVALID_ARGUMENT, "dense GQA decoder");
  EXPECT_STREQ(spec, "untouched");
  EXPECT_STREQ(notes, "untouched");
  std::ifstream in(std::string(MK_SOURCE_DIR) + "/examples/hf/kimi_linear_48b_a3b.config.json");
  std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(config.empty());
  // A difference the family cannot express (a tied LM head) is refused
  // unless as_unit.
  const std::string tied = "\"tie_word_embeddings\": false";
  std::string tiedConfig = config;
  ASSERT_NE(tiedConfig.find(tied), std::string::npos);
  tiedConfig.replace(tiedConfig.find(tied), tied.size(), "\"tie_word_embeddings\": true");
  EXPECT_FAILS(mk_spec_from_hf_config(tiedConfig.c_str(), 0, 0, nullptr, &spec, &notes),
               MK_ERR_INVALID_ARGUMENT, "tie_word_embeddings = true");
  ASSERT_EQ(mk_spec_from_hf_config(tiedConfig.c_str(), 1, 64, "kl", &spec, &notes), MK_OK)
      << lastError();
  EXPECT_NE(std::string(spec).find("\"name\": \"kl\""), std::string::npos) << spec;
  EXPECT_NE(std::string(spec).find("\"group\": 64"), std::string::npos) << spec;
  EXPECT_NE(std::string(notes).find("not represented: tie_word_embeddings"), std::string::npos)
      << notes;
  EXPECT_NE(std::string(spec).find("\"mla_rotary\": false"), std::string::npos) << spec;
}

TEST(CApiArguments, Devices) {
  EXPECT_FAILS(mk_device_count(nullptr), MK_ERR_INVALID_ARGUMENT, "null count");
  int n = 77;
  EXPECT_FAILS(mk_device_count(&n), MK_ERR_NO_DRIVER, "CUDA driver");
  EXPECT_EQ(n, 77);
  EXPECT_FAILS(mk_device_open(0, nullptr), MK_ERR_INVALID_ARGUMENT, "null out");
  for (int ordinal : {0, -1, 1 << 30}) {
    mk_device *d = sentinel<mk_device>();
    EXPECT_FAILS(mk_device_open(ordinal, &d), MK_ERR_NO_DRIVER, "CUDA driver");
    EXPECT_EQ(d, sentinel<mk_device>());
  }
  int major = 5, minor = 6, sms = 7;
  char name[8] = "keep";
  EXPECT_FAILS(mk_device_info(nullptr, &major, &minor, &sms, name, sizeof name),
               MK_ERR_INVALID_ARGUMENT, "null device");
  EXPECT_FAILS(mk_device_info(nullptr, nullptr, nullptr, nullptr, nullptr, 0),
               MK_ERR_INVALID_ARGUMENT, "null device");
  EXPECT_EQ(major, 5);
  EXPECT_EQ(minor, 6);
  EXPECT_EQ(sms, 7);
  EXPECT_STREQ(name, "keep");
  mk_device_destroy(nullptr);
}

TEST(CApiArguments, KernelFromStrings) {
  const std::string manifest =
      mk::testing::makeManifest(mk::testing::tinyConfig());
  mk_kernel *k = sentinel<mk_kernel>();
  EXPECT_FAILS(mk_kernel_from_strings(nullptr, nullptr, manifest.c_str(),
                                      "sm_90", nullptr, 0, &k),
               MK_ERR_INVALID_ARGUMENT, "null source");
  EXPECT_FAILS(mk_kernel_from_strings(nullptr, "", nullptr, "sm_90", nullptr,
                                      0, &k),
               MK_ERR_INVALID_ARGUMENT, "manifest");
  EXPECT_FAILS(mk_kernel_from_strings(nullptr, "", manifest.c_str(), "sm_90",
                                      nullptr, 0, nullptr),
               MK_ERR_INVALID_ARGUMENT, "out");
  // No device and no architecture.
  EXPECT_FAILS(mk_kernel_from_strings(nullptr, "", manifest.c_str(), nullptr,
                                      nullptr, 0, &k),
               MK_ERR_INVALID_ARGUMENT, "architecture");
  EXPECT_FAILS(mk_kernel_from_strings(nullptr, "", manifest.c_str(), "",
                                      nullptr, 0, &k),
               MK_ERR_INVALID_ARGUMENT, "architecture");
  // Malformed manifests are manifest errors, before any compiling.
  for (const char *bad :
       {"", "{", "[]", "null", "{\"format\": 1}", "{\"format\": \"mk-manifest-1\"}"}) {
    SCOPED_TRACE(bad);
    EXPECT_FAILS(mk_kernel_from_strings(nullptr, "", bad, "sm_90", nullptr, 0,
                                        &k),
                 MK_ERR_MANIFEST, "");
    EXPECT_FALSE(lastError().empty());
  }
  std::string wrongThreads = manifest;
  wrongThreads.replace(wrongThreads.find("\"threads_per_block\": 128"),
                       std::strlen("\"threads_per_block\": 128"),
                       "\"threads_per_block\": 4096");
  EXPECT_FAILS(mk_kernel_from_strings(nullptr, "", wrongThreads.c_str(),
                                      "sm_90", nullptr, 0, &k),
               MK_ERR_MANIFEST, "threads_per_block");
  EXPECT_EQ(k, sentinel<mk_kernel>());

  // Accessors and destroy on null.
  EXPECT_STREQ(mk_kernel_manifest(nullptr), "");
  EXPECT_EQ(mk_kernel_from_cache(nullptr), 0);
  mk_kernel_destroy(nullptr);
}

TEST(CApiArguments, KernelLoadDir) {
  mk_kernel *k = sentinel<mk_kernel>();
  EXPECT_FAILS(mk_kernel_load_dir(nullptr, nullptr, nullptr, "sm_90", nullptr,
                                  0, &k),
               MK_ERR_INVALID_ARGUMENT, "null dir");
  EXPECT_FAILS(mk_kernel_load_dir(nullptr, "/tmp", nullptr, "sm_90", nullptr,
                                  0, nullptr),
               MK_ERR_INVALID_ARGUMENT, "out");
  EXPECT_FAILS(mk_kernel_load_dir(nullptr, "/nonexistent/mk-kernels", nullptr,
                                  "sm_90", nullptr, 0, &k),
               MK_ERR_IO, "/nonexistent/mk-kernels");

  TempDir dir;
  // An empty directory: no manifest.
  EXPECT_FAILS(mk_kernel_load_dir(nullptr, dir.path().c_str(), nullptr, "sm_90",
                                  nullptr, 0, &k),
               MK_ERR_IO, "0 *.manifest.json");
  // A named kernel that is not there.
  EXPECT_FAILS(mk_kernel_load_dir(nullptr, dir.path().c_str(), "missing",
                                  "sm_90", nullptr, 0, &k),
               MK_ERR_IO, "missing.manifest.json");
  // A malformed manifest: the error names the file.
  dir.write("a.manifest.json", "{ \"format\": ");
  EXPECT_FAILS(mk_kernel_load_dir(nullptr, dir.path().c_str(), nullptr, "sm_90",
                                  nullptr, 0, &k),
               MK_ERR_MANIFEST, "a.manifest.json: not valid JSON");
  // Two manifests and no name: ambiguous.
  dir.write("b.manifest.json",
            mk::testing::makeManifest(mk::testing::tinyConfig()));
  EXPECT_FAILS(mk_kernel_load_dir(nullptr, dir.path().c_str(), nullptr, "sm_90",
                                  nullptr, 0, &k),
               MK_ERR_IO, "2 *.manifest.json");
  // A valid manifest whose source file is missing.
  EXPECT_FAILS(mk_kernel_load_dir(nullptr, dir.path().c_str(), "b", "sm_90",
                                  nullptr, 0, &k),
               MK_ERR_IO, "mk_test_stub.cu");
  EXPECT_EQ(k, sentinel<mk_kernel>());
}

TEST(CApiArguments, SessionsNeedHandles) {
  mk_session *s = sentinel<mk_session>();
  EXPECT_FAILS(mk_session_create(nullptr, nullptr, 0, &s),
               MK_ERR_INVALID_ARGUMENT, "null device");
  EXPECT_FAILS(mk_session_create(nullptr, nullptr, -5, nullptr),
               MK_ERR_INVALID_ARGUMENT, "null device");
  EXPECT_EQ(s, sentinel<mk_session>());
  mk_session_destroy(nullptr);

  int grid = 3, tpb = 4, count = 5, bound = 6;
  int64_t ctx = 7, cap = 8;
  uint64_t ptr = 9;
  float ms = 1.5f;
  char first[8] = "keep";
  uint8_t buf[16] = {};
  uint16_t host[256] = {};
  const int64_t shape[] = {256};
  const std::string kNull = "null session";

  EXPECT_FAILS(mk_session_set_stream(nullptr, 0), MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_grid(nullptr, &grid, &tpb), MK_ERR_INVALID_ARGUMENT,
               kNull);
  EXPECT_FAILS(mk_session_bind_weight_host(nullptr, "blocks.0.attn_norm", buf,
                                           "bf16", shape, 1),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_bind_weight_host(nullptr, nullptr, nullptr, nullptr,
                                           nullptr, -1),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_bind_weight_device(nullptr, "blocks.0.attn_norm",
                                             0x1000, "bf16", shape, 1),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_bind_weight_device(nullptr, nullptr, 0, nullptr,
                                             nullptr, 3),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_bind_safetensors(nullptr, "/nonexistent.safetensors",
                                           &bound),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_bind_safetensors(nullptr, nullptr, nullptr),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_unbound_weights(nullptr, &count, first, sizeof first),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_context_length(nullptr, &ctx, &cap),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_set_context_length(nullptr, -1),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_reserve(nullptr, INT64_MAX), MK_ERR_INVALID_ARGUMENT,
               kNull);
  EXPECT_FAILS(mk_session_zero_state(nullptr), MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_write_state_host(nullptr, "state.1.S", buf, "f32",
                                           shape, 1),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_write_state_host(nullptr, nullptr, nullptr, "x",
                                           nullptr, 2),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_read_state_host(nullptr, "state.1.S", buf,
                                          sizeof buf),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_read_state_host(nullptr, nullptr, nullptr, 64),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_state_pointer(nullptr, "state.1.S", &ptr),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_state_pointer(nullptr, nullptr, nullptr),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_set_state_storage(nullptr, 1, kNames, kPtrs, kDtypes,
                                            kShapes, kNdims, 16),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_set_state_storage(nullptr, -1, nullptr, nullptr,
                                            nullptr, nullptr, nullptr, -1),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_use_owned_storage(nullptr), MK_ERR_INVALID_ARGUMENT,
               kNull);
  EXPECT_FAILS(mk_session_adopt_state(nullptr, 1, kNames, kPtrs, kDtypes,
                                      kShapes, kNdims, 0),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_adopt_state(nullptr, 5, nullptr, nullptr, nullptr,
                                      nullptr, nullptr, -3),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_step(nullptr, 0, 0), MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_step_host(nullptr, host, host),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_step_host(nullptr, nullptr, nullptr),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_synchronize(nullptr), MK_ERR_INVALID_ARGUMENT, kNull);
  int32_t next = 11;
  uint64_t lptr = 12;
  int64_t lcount = 13;
  EXPECT_FAILS(mk_session_step_token(nullptr, 1, 0), MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_time_token_steps(nullptr, 1, 0, 1, 10, &ms), MK_ERR_INVALID_ARGUMENT,
               kNull);
  EXPECT_FAILS(mk_session_step_token_host(nullptr, 1, &next), MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_logits(nullptr, &lptr, &lcount), MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_read_logits_host(nullptr, host, 4), MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_time_steps(nullptr, 0, 0, 1, 10, &ms),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_time_steps(nullptr, 0, 0, -1, 0, nullptr),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_read_capture(nullptr, "q", buf, sizeof buf),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_FAILS(mk_session_read_capture(nullptr, nullptr, nullptr, 4),
               MK_ERR_INVALID_ARGUMENT, kNull);
  EXPECT_EQ(mk_session_launch_count(nullptr), 0u);

  // No output was written.
  EXPECT_EQ(grid, 3);
  EXPECT_EQ(tpb, 4);
  EXPECT_EQ(count, 5);
  EXPECT_EQ(bound, 6);
  EXPECT_EQ(ctx, 7);
  EXPECT_EQ(cap, 8);
  EXPECT_EQ(ptr, 9u);
  EXPECT_EQ(ms, 1.5f);
  EXPECT_STREQ(first, "keep");
  EXPECT_EQ(next, 11);
  EXPECT_EQ(lptr, 12u);
  EXPECT_EQ(lcount, 13);
}

TEST(CApiArguments, ErrorMessageIsPerThreadAndReplaced) {
  EXPECT_FAILS(mk_device_count(nullptr), MK_ERR_INVALID_ARGUMENT, "null count");
  std::string other;
  std::thread t([&] { other = mk_last_error(); });
  t.join();
  EXPECT_EQ(other, "");
  EXPECT_FAILS(mk_session_step(nullptr, 0, 0), MK_ERR_INVALID_ARGUMENT,
               "null session");
  EXPECT_EQ(lastError().find("null count"), std::string::npos);
}
