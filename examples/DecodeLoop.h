//===- DecodeLoop.h - The decode loop both C++ examples share ---*- C++ -*-===//
//
// Given a ready session: bind weights (a safetensors file, or the spec's
// random test weights), load a random state of `ctx` tokens, then decode
// `warmup` + `tokens` tokens, each output feeding the next step, timing every
// timed step with CUDA events (device pointers in and out: one cooperative
// launch per step, nothing else).
//
//===----------------------------------------------------------------------===//

#ifndef MK_EXAMPLES_DECODELOOP_H
#define MK_EXAMPLES_DECODELOOP_H

#include "mk/Oracle.h"
#include "mk/runtime/Session.h"

#include <cmath>
#include <utility>
#include <vector>

namespace mk::examples {

struct DecodeResult {
  std::vector<float> msPerToken; // one per timed step, in order
  double lastHiddenNorm = 0;     // |hidden| after the last step
};

inline rt::Status decodeTokens(rt::Session &s, const std::string &weightsPath,
                               uint64_t seed, int64_t ctx, int warmup, int tokens,
                               DecodeResult &result) {
  using namespace mk::rt;
  const BlockConfig &cfg = s.manifest().config;
  if (!weightsPath.empty())
    MK_RETURN_IF_ERROR(s.bindSafetensors(weightsPath));
  else
    MK_RETURN_IF_ERROR(s.bindWeightsHost(makeRandomWeights(cfg, seed)));
  MK_RETURN_IF_ERROR(s.loadStateHost(makeRandomState(cfg, ctx, seed + 1).tensors, ctx));

  const std::shared_ptr<Device> &dev = s.device();
  const DriverApi &drv = dev->driver();
  std::vector<BFloat16> hidden = makeRandomHidden(cfg, seed + 2);
  const size_t bytes = hidden.size() * 2;
  DeviceBuffer a, b;
  MK_RETURN_IF_ERROR(DeviceBuffer::allocate(dev, bytes, a));
  MK_RETURN_IF_ERROR(DeviceBuffer::allocate(dev, bytes, b));
  MK_RETURN_IF_ERROR(cuCheck(drv.cuMemcpyHtoD(a.ptr(), hidden.data(), bytes), "upload"));
  std::vector<CUevent> ev(size_t(tokens) + 1, nullptr);
  Status st;
  for (CUevent &e : ev)
    if (st.isOk())
      st = cuCheck(drv.cuEventCreate(&e, 0), "cuEventCreate");
  CUdeviceptr in = a.ptr(), out = b.ptr();
  for (int i = 0; st.isOk() && i < warmup; ++i) {
    st = s.step(in, out);
    std::swap(in, out);
  }
  if (st.isOk())
    st = cuCheck(drv.cuEventRecord(ev[0], s.stream()), "cuEventRecord");
  for (int i = 0; st.isOk() && i < tokens; ++i) {
    st = s.step(in, out);
    if (st.isOk())
      st = cuCheck(drv.cuEventRecord(ev[size_t(i) + 1], s.stream()), "cuEventRecord");
    std::swap(in, out);
  }
  if (st.isOk())
    st = s.synchronize();
  result.msPerToken.assign(size_t(tokens), 0.f);
  for (int i = 0; st.isOk() && i < tokens; ++i)
    st = cuCheck(drv.cuEventElapsedTime(&result.msPerToken[size_t(i)], ev[size_t(i)],
                                        ev[size_t(i) + 1]),
                 "cuEventElapsedTime");
  for (CUevent e : ev)
    if (e)
      drv.cuEventDestroy(e);
  MK_RETURN_IF_ERROR(st);
  std::vector<uint16_t> last(hidden.size());
  MK_RETURN_IF_ERROR(cuCheck(drv.cuMemcpyDtoH(last.data(), in, bytes), "download"));
  double norm = 0;
  for (uint16_t bits : last) {
    const float f = BFloat16::fromBits(bits).toFloat();
    norm += double(f) * f;
  }
  result.lastHiddenNorm = std::sqrt(norm);
  return Status::ok();
}

} // namespace mk::examples

#endif // MK_EXAMPLES_DECODELOOP_H
