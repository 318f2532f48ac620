//===- GpuTestSupport.h - Shared pieces of the GPU tests ---------*- C++ -*-===//
//
// Every GPU test skips where there is no driver or GPU. Compiled kernels come
// from $MK_KERNELS_DIR (one subdirectory per kernel: kimi_linear_w4a16/,
// tiny/); on a machine WITH a GPU a missing kernel is a failure that says how
// to provide it.
//
//===----------------------------------------------------------------------===//

#ifndef MK_TESTS_GPU_GPUTESTSUPPORT_H
#define MK_TESTS_GPU_GPUTESTSUPPORT_H

#include "mk/Oracle.h"
#include "mk/runtime/Session.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <sys/stat.h>

namespace mk {
namespace testing {

/// The device, or nullptr with `why` set (no driver, no GPU).
inline std::shared_ptr<rt::Device> gpuOrNull(std::string &why) {
  static std::shared_ptr<rt::Device> dev;
  static std::string reason;
  static bool tried = false;
  if (!tried) {
    tried = true;
    int n = 0;
    rt::Status st = rt::Device::count(n);
    if (!st.isOk())
      reason = st.message();
    else if (n == 0)
      reason = "no CUDA device";
    else if (!(st = rt::Device::open(0, dev)).isOk())
      reason = st.message();
  }
  why = reason;
  return dev;
}

#define MK_REQUIRE_GPU(dev)                                                    \
  std::string mkWhy_;                                                          \
  std::shared_ptr<::mk::rt::Device> dev = ::mk::testing::gpuOrNull(mkWhy_);    \
  if (!dev)                                                                    \
  GTEST_SKIP() << "no GPU: " << mkWhy_

/// Compiles $MK_KERNELS_DIR/<name>/ for the device. Empty status message and
/// null kernel never happen together: on failure the Status says what to do.
inline rt::Status loadTestKernel(const std::shared_ptr<rt::Device> &dev,
                                 const std::string &name,
                                 std::shared_ptr<rt::Kernel> &out) {
  static std::map<std::string, std::shared_ptr<rt::Kernel>> cache;
  if (cache.count(name)) {
    out = cache[name];
    return rt::Status::ok();
  }
  const char *root = std::getenv("MK_KERNELS_DIR");
  if (!root || !*root)
    return rt::makeError(
        rt::ErrorCode::Io,
        "MK_KERNELS_DIR is not set: point it at a directory holding one "
        "subdirectory per generated kernel (kimi_linear_w4a16/, tiny/), each "
        "the output of `mkc SPEC --emit=cuda -o DIR`");
  std::string dir = std::string(root) + "/" + name;
  struct stat st;
  if (stat(dir.c_str(), &st) != 0)
    return rt::makeError(rt::ErrorCode::Io,
                         "kernel directory " + dir +
                             " does not exist: generate it with `mkc "
                             "examples/...json --emit=cuda -o " + dir + "`");
  MK_RETURN_IF_ERROR(rt::buildKernelFromDir(dir, dev->arch(), {}, out));
  cache[name] = out;
  return rt::Status::ok();
}

inline rt::Status bindAllWeights(rt::Session &s, const TensorMap &weights) {
  return s.bindWeightsHost(weights);
}

/// Makes the session's state equal to `state` (context length included).
inline rt::Status writeState(rt::Session &s, const DecodeState &state) {
  return s.loadStateHost(state.tensors, state.ctxLen);
}

/// The session's state as host tensors (contextLength() cache rows).
inline rt::Status readState(rt::Session &s, DecodeState &out) {
  out.tensors.clear();
  out.ctxLen = s.contextLength();
  for (const TensorDesc &d : stateTensors(s.manifest().config, out.ctxLen)) {
    HostTensor t(d);
    MK_RETURN_IF_ERROR(s.readStateHost(d.name, t.data.data(), t.data.size()));
    out.tensors[d.name] = std::move(t);
  }
  return rt::Status::ok();
}

/// Fills the cache rows [ctxLen, capacity) with 0xff bytes (bf16 NaN), so a
/// kernel that fails to write the new row is caught.
inline rt::Status poisonFreeCacheRows(rt::Session &s) {
  const rt::DriverApi &drv = s.device()->driver();
  for (const rt::StateSlot &slot : s.stateSlots()) {
    if (!slot.isCache)
      continue;
    CUdeviceptr p = 0;
    MK_RETURN_IF_ERROR(s.statePointer(slot.desc.name, p));
    size_t off = size_t(slot.bytesFor(s.contextLength()));
    size_t n = size_t(slot.bytesFor(s.capacity())) - off;
    if (n)
      MK_RETURN_IF_ERROR(rt::cuCheck(drv.cuMemsetD8(p + off, 0xff, n), "poison"));
  }
  return rt::Status::ok();
}

inline std::vector<float> bf16ToFloat(const std::vector<BFloat16> &v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    f[i] = v[i].toFloat();
  return f;
}

inline bool allFinite(const std::vector<float> &v) {
  for (float x : v)
    if (!std::isfinite(x))
      return false;
  return true;
}

inline double cosine(const std::vector<float> &a, const std::vector<float> &b) {
  if (a.size() != b.size())
    return -2;
  return cosineSimilarity(a.data(), b.data(), a.size());
}

/// Floats of rows [row0, row1) of a cache tensor [rows, ...] (a row: every
/// element after the leading dimension).
inline std::vector<float> cacheRows(const HostTensor &t, int64_t row0,
                                    int64_t row1) {
  std::vector<float> all = t.toFloat();
  int64_t width = 1;
  for (size_t i = 1; i < t.desc.shape.size(); ++i)
    width *= t.desc.shape[i];
  return std::vector<float>(all.begin() + row0 * width,
                            all.begin() + row1 * width);
}

/// Whether state tensor `name` of `cfg` is a cache (its rows are the
/// context: -1 in the catalogue).
inline bool isCacheState(const BlockConfig &cfg, const std::string &name) {
  for (const TensorDesc &t : stateTensors(cfg, -1))
    if (t.name == name)
      return !t.shape.empty() && t.shape[0] < 0;
  return false;
}

/// A device buffer holding a bf16 vector.
inline rt::Status uploadHidden(const std::shared_ptr<rt::Device> &dev,
                               const std::vector<BFloat16> &h,
                               rt::DeviceBuffer &buf) {
  if (!buf || buf.bytes() != h.size() * 2)
    MK_RETURN_IF_ERROR(rt::DeviceBuffer::allocate(dev, h.size() * 2, buf));
  return rt::cuCheck(dev->driver().cuMemcpyHtoD(buf.ptr(), h.data(), h.size() * 2),
                     "upload hidden");
}

inline rt::Status downloadHidden(const std::shared_ptr<rt::Device> &dev,
                                 const rt::DeviceBuffer &buf,
                                 std::vector<BFloat16> &h) {
  h.resize(buf.bytes() / 2);
  // Callers synchronize the session's stream first. (No cuCtxSynchronize:
  // cuGetProcAddress at CUDA 13 resolves it to cuCtxSynchronize_v2, which
  // takes a context argument that cuda.h's declaration does not have.)
  return rt::cuCheck(dev->driver().cuMemcpyDtoH(h.data(), buf.ptr(), buf.bytes()),
                     "download hidden");
}

} // namespace testing
} // namespace mk

#define MK_ASSERT_OK(expr)                                                     \
  do {                                                                         \
    ::mk::rt::Status mkSt_ = (expr);                                           \
    ASSERT_TRUE(mkSt_.isOk()) << #expr << ": " << mkSt_.toString();            \
  } while (0)

#endif // MK_TESTS_GPU_GPUTESTSUPPORT_H
