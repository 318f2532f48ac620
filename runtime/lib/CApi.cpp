//===- CApi.cpp - C API of the megakernel runtime -------------------------===//

#include "mk/runtime/mk.h"

#include "mk/BlockSpec.h"
#include "mk/HfConfig.h"
#include "mk/runtime/Session.h"

#include <algorithm>
#include <functional>
#include <cstring>
#include <memory>
#include <new>

using namespace mk;
using namespace mk::rt;

struct mk_device {
  std::shared_ptr<Device> dev;
};
struct mk_kernel {
  std::shared_ptr<Kernel> kernel;
};
struct mk_session {
  std::unique_ptr<Session> session;
};

namespace {
thread_local std::string lastError;

mk_status report(const Status &st) {
  if (st.isOk())
    return MK_OK;
  lastError = st.message();
  return static_cast<mk_status>(st.code());
}

mk_status invalid(const std::string &msg) {
  return report(makeError(ErrorCode::InvalidArgument, msg));
}

/// Runs `f` (returning Status), turning a C++ exception into an error so
/// that nothing unwinds through the C boundary.
template <typename F> mk_status guarded(F &&f) {
  try {
    return report(f());
  } catch (const std::bad_alloc &) {
    return report(makeError(ErrorCode::InvalidArgument, "out of host memory"));
  } catch (const std::exception &e) {
    return report(makeError(ErrorCode::InvalidArgument, e.what()));
  }
}

Status toShape(const int64_t *shape, int ndim, std::vector<int64_t> &out) {
  if (ndim < 0 || (ndim > 0 && !shape))
    return makeError(ErrorCode::InvalidArgument, "bad shape");
  out.assign(shape, shape + ndim);
  return Status::ok();
}

Status toDType(const char *s, DType &out) {
  if (!s || !parseDType(s, out))
    return makeError(ErrorCode::Binding,
                     std::string("unknown dtype '") + (s ? s : "(null)") +
                         "' (u8, bf16, f32, i32)");
  return Status::ok();
}

Status toTensors(int n, const char *const *names, const uint64_t *ptrs,
                 const char *const *dtypes, const int64_t *const *shapes,
                 const int *ndims, std::vector<DeviceTensor> &out) {
  if (n < 0 || (n > 0 && (!names || !ptrs || !dtypes || !shapes || !ndims)))
    return makeError(ErrorCode::InvalidArgument, "null tensor arrays");
  out.clear();
  for (int i = 0; i < n; ++i) {
    DeviceTensor t;
    if (!names[i])
      return makeError(ErrorCode::InvalidArgument, "null tensor name");
    t.name = names[i];
    t.ptr = CUdeviceptr(ptrs[i]);
    MK_RETURN_IF_ERROR(toDType(dtypes[i], t.dtype));
    MK_RETURN_IF_ERROR(toShape(shapes[i], ndims[i], t.shape));
    out.push_back(std::move(t));
  }
  return Status::ok();
}

void copyName(const std::string &s, char *buf, size_t size) {
  if (!buf || size == 0)
    return;
  size_t n = std::min(s.size(), size - 1);
  std::memcpy(buf, s.data(), n);
  buf[n] = 0;
}

mk_status buildKernel(const mk_device *dev, const KernelSource &src,
                      const char *arch, const char *cacheDir, int useCache,
                      mk_kernel **out) {
  KernelBuildOptions opts;
  if (arch && *arch)
    opts.compile.arch = arch;
  else if (dev)
    opts.compile.arch = dev->dev->arch();
  else
    return invalid("no architecture: pass a device or an arch such as sm_90");
  if (cacheDir)
    opts.cacheDir = cacheDir;
  opts.useCache = useCache != 0;
  std::shared_ptr<Kernel> k;
  Status st = Kernel::build(src, opts, k);
  if (!st.isOk())
    return report(st);
  *out = new mk_kernel{std::move(k)};
  return MK_OK;
}
} // namespace

extern "C" {

const char *mk_last_error(void) { return lastError.c_str(); }
int mk_api_version(void) { return 1; }

mk_status mk_spec_from_hf_config(const char *config_json, int as_unit, int64_t group,
                                 const char *name, const char **spec_json,
                                 const char **notes) {
  if (!config_json || !spec_json || !notes)
    return invalid("mk_spec_from_hf_config: config_json, spec_json and notes are required");
  if (group < 0)
    return invalid("group must be > 0 (0: from the config), got " + std::to_string(group));
  return guarded([&] {
    thread_local std::string specText, noteText;
    HfImportOptions o;
    o.asUnit = as_unit != 0;
    o.group = group;
    o.name = name ? name : "";
    HfImport imported;
    std::string error;
    if (!importHfConfig(config_json, o, imported, error))
      return makeError(ErrorCode::InvalidArgument, "config.json: " + error);
    specText = blockConfigToJson(imported.config);
    noteText.clear();
    for (const std::string &n : imported.notes)
      noteText += n + "\n";
    *spec_json = specText.c_str();
    *notes = noteText.c_str();
    return Status::ok();
  });
}

mk_status mk_device_count(int *count) {
  if (!count)
    return invalid("null count");
  return guarded([&] { return Device::count(*count); });
}

mk_status mk_device_open(int ordinal, mk_device **out) {
  if (!out)
    return invalid("null out");
  return guarded([&] {
    std::shared_ptr<Device> d;
    MK_RETURN_IF_ERROR(Device::open(ordinal, d));
    *out = new mk_device{std::move(d)};
    return Status::ok();
  });
}

mk_status mk_device_info(const mk_device *dev, int *ccMajor, int *ccMinor,
                         int *sms, char *name, size_t nameSize) {
  if (!dev)
    return invalid("null device");
  if (ccMajor)
    *ccMajor = dev->dev->computeMajor();
  if (ccMinor)
    *ccMinor = dev->dev->computeMinor();
  if (sms)
    *sms = dev->dev->multiprocessors();
  copyName(dev->dev->name(), name, nameSize);
  return MK_OK;
}

void mk_device_destroy(mk_device *dev) { delete dev; }

mk_status mk_kernel_load_dir(const mk_device *dev, const char *dir,
                             const char *kernelName, const char *arch,
                             const char *cacheDir, int useCache,
                             mk_kernel **out) {
  if (!dir || !out)
    return invalid("null dir or out");
  try {
    KernelSource src;
    Status st = readKernelDir(dir, kernelName ? kernelName : "", src);
    if (!st.isOk())
      return report(st);
    return buildKernel(dev, src, arch, cacheDir, useCache, out);
  } catch (const std::exception &e) {
    return invalid(e.what());
  }
}

mk_status mk_kernel_from_strings(const mk_device *dev, const char *source,
                                 const char *manifest, const char *arch,
                                 const char *cacheDir, int useCache,
                                 mk_kernel **out) {
  if (!source || !manifest || !out)
    return invalid("null source, manifest or out");
  try {
    KernelSource src;
    src.source = source;
    src.manifestText = manifest;
    return buildKernel(dev, src, arch, cacheDir, useCache, out);
  } catch (const std::exception &e) {
    return invalid(e.what());
  }
}

const char *mk_kernel_manifest(const mk_kernel *k) {
  return k ? k->kernel->manifestText().c_str() : "";
}
int mk_kernel_from_cache(const mk_kernel *k) {
  return k && k->kernel->fromCache() ? 1 : 0;
}
void mk_kernel_destroy(mk_kernel *k) { delete k; }

mk_status mk_session_create(mk_device *dev, const mk_kernel *k,
                            int64_t capacity, mk_session **out) {
  if (!dev || !k || !out)
    return invalid("null device, kernel or out");
  return guarded([&] {
    SessionOptions opts;
    if (capacity > 0)
      opts.cacheCapacity = capacity;
    std::unique_ptr<Session> s;
    MK_RETURN_IF_ERROR(Session::create(dev->dev, k->kernel, opts, s));
    *out = new mk_session{std::move(s)};
    return Status::ok();
  });
}

void mk_session_destroy(mk_session *s) { delete s; }

#define MK_NEED_SESSION()                                                      \
  if (!s)                                                                      \
  return invalid("null session")

mk_status mk_session_set_stream(mk_session *s, uint64_t stream) {
  MK_NEED_SESSION();
  s->session->setStream(reinterpret_cast<CUstream>(stream));
  return MK_OK;
}

mk_status mk_session_grid(const mk_session *s, int *grid, int *tpb) {
  MK_NEED_SESSION();
  if (grid)
    *grid = s->session->launchConfig().grid;
  if (tpb)
    *tpb = s->session->launchConfig().threadsPerBlock;
  return MK_OK;
}

mk_status mk_session_bind_weight_host(mk_session *s, const char *name,
                                      const void *data, const char *dtype,
                                      const int64_t *shape, int ndim) {
  MK_NEED_SESSION();
  if (!name)
    return invalid("null name");
  return guarded([&] {
    DType dt;
    std::vector<int64_t> sh;
    MK_RETURN_IF_ERROR(toDType(dtype, dt));
    MK_RETURN_IF_ERROR(toShape(shape, ndim, sh));
    return s->session->bindWeightHost(name, data, dt, sh);
  });
}

mk_status mk_session_bind_weight_device(mk_session *s, const char *name,
                                        uint64_t ptr, const char *dtype,
                                        const int64_t *shape, int ndim) {
  MK_NEED_SESSION();
  if (!name)
    return invalid("null name");
  return guarded([&] {
    DeviceTensor t;
    t.name = name;
    t.ptr = CUdeviceptr(ptr);
    MK_RETURN_IF_ERROR(toDType(dtype, t.dtype));
    MK_RETURN_IF_ERROR(toShape(shape, ndim, t.shape));
    return s->session->bindWeightDevice(t);
  });
}

mk_status mk_session_bind_safetensors(mk_session *s, const char *path,
                                      int *bound) {
  MK_NEED_SESSION();
  if (!path)
    return invalid("null path");
  return guarded([&] { return s->session->bindSafetensors(path, bound); });
}

mk_status mk_session_unbound_weights(const mk_session *s, int *count,
                                     char *first, size_t firstSize) {
  MK_NEED_SESSION();
  std::vector<std::string> names = s->session->unboundWeights();
  if (count)
    *count = int(names.size());
  copyName(names.empty() ? "" : names[0], first, firstSize);
  return MK_OK;
}

mk_status mk_session_context_length(const mk_session *s, int64_t *ctx,
                                    int64_t *capacity) {
  MK_NEED_SESSION();
  if (ctx)
    *ctx = s->session->contextLength();
  if (capacity)
    *capacity = s->session->capacity();
  return MK_OK;
}

mk_status mk_session_set_context_length(mk_session *s, int64_t rows) {
  MK_NEED_SESSION();
  return guarded([&] { return s->session->setContextLength(rows); });
}

mk_status mk_session_reserve(mk_session *s, int64_t rows) {
  MK_NEED_SESSION();
  return guarded([&] { return s->session->reserve(rows); });
}

mk_status mk_session_zero_state(mk_session *s) {
  MK_NEED_SESSION();
  return guarded([&] { return s->session->zeroState(); });
}

mk_status mk_session_write_state_host(mk_session *s, const char *name,
                                      const void *data, const char *dtype,
                                      const int64_t *shape, int ndim) {
  MK_NEED_SESSION();
  if (!name)
    return invalid("null name");
  return guarded([&] {
    DType dt;
    std::vector<int64_t> sh;
    MK_RETURN_IF_ERROR(toDType(dtype, dt));
    MK_RETURN_IF_ERROR(toShape(shape, ndim, sh));
    return s->session->writeStateHost(name, data, dt, sh);
  });
}

mk_status mk_session_read_state_host(mk_session *s, const char *name,
                                     void *data, size_t bytes) {
  MK_NEED_SESSION();
  if (!name || (!data && bytes))
    return invalid("null name or buffer");
  return guarded([&] { return s->session->readStateHost(name, data, bytes); });
}

mk_status mk_session_state_pointer(const mk_session *s, const char *name,
                                   uint64_t *ptr) {
  MK_NEED_SESSION();
  if (!name || !ptr)
    return invalid("null name or ptr");
  return guarded([&] {
    CUdeviceptr p = 0;
    MK_RETURN_IF_ERROR(s->session->statePointer(name, p));
    *ptr = uint64_t(p);
    return Status::ok();
  });
}

mk_status mk_session_set_state_storage(mk_session *s, int n,
                                       const char *const *names,
                                       const uint64_t *ptrs,
                                       const char *const *dtypes,
                                       const int64_t *const *shapes,
                                       const int *ndims, int64_t capacity) {
  MK_NEED_SESSION();
  return guarded([&] {
    std::vector<DeviceTensor> ts;
    MK_RETURN_IF_ERROR(toTensors(n, names, ptrs, dtypes, shapes, ndims, ts));
    return s->session->setStateStorage(ts, capacity);
  });
}

mk_status mk_session_use_owned_storage(mk_session *s) {
  MK_NEED_SESSION();
  return guarded([&] { return s->session->useOwnedStorage(); });
}

mk_status mk_session_adopt_state(mk_session *s, int n, const char *const *names,
                                 const uint64_t *ptrs,
                                 const char *const *dtypes,
                                 const int64_t *const *shapes, const int *ndims,
                                 int64_t ctxLen) {
  MK_NEED_SESSION();
  return guarded([&] {
    std::vector<DeviceTensor> ts;
    MK_RETURN_IF_ERROR(toTensors(n, names, ptrs, dtypes, shapes, ndims, ts));
    return s->session->adoptState(ts, ctxLen);
  });
}

mk_status mk_session_step(mk_session *s, uint64_t in, uint64_t out) {
  MK_NEED_SESSION();
  return guarded([&] {
    return s->session->step(CUdeviceptr(in), CUdeviceptr(out));
  });
}

mk_status mk_session_step_host(mk_session *s, const uint16_t *in,
                               uint16_t *out) {
  MK_NEED_SESSION();
  return guarded([&] { return s->session->stepHost(in, out); });
}

mk_status mk_session_step_token(mk_session *s, int32_t token, uint64_t next_token) {
  MK_NEED_SESSION();
  return guarded([&] { return s->session->stepToken(token, CUdeviceptr(next_token)); });
}

mk_status mk_session_step_token_host(mk_session *s, int32_t token, int32_t *next) {
  MK_NEED_SESSION();
  return guarded([&] { return s->session->stepTokenHost(token, next); });
}

mk_status mk_session_logits(const mk_session *s, uint64_t *ptr, int64_t *count) {
  MK_NEED_SESSION();
  if (!ptr || !count)
    return invalid("null ptr or count");
  *ptr = uint64_t(s->session->logits());
  *count = *ptr ? s->session->manifest().config.vocab : 0;
  return MK_OK;
}

mk_status mk_session_read_logits_host(mk_session *s, uint16_t *out, int64_t count) {
  MK_NEED_SESSION();
  const int64_t vocab = s->session->manifest().config.vocab;
  if (count != vocab)
    return invalid("logits: count " + std::to_string(count) + ", the kernel has " +
                   std::to_string(vocab));
  return guarded([&] { return s->session->readLogitsHost(out); });
}

mk_status mk_session_synchronize(mk_session *s) {
  MK_NEED_SESSION();
  return guarded([&] { return s->session->synchronize(); });
}

/// *medianMs = the median of the step times `time` fills (one of the
/// session's timing calls).
static mk_status medianStepTime(float *medianMs,
                                const std::function<Status(std::vector<float> &)> &time) {
  if (!medianMs)
    return invalid("null median_ms");
  return guarded([&] {
    std::vector<float> ms;
    MK_RETURN_IF_ERROR(time(ms));
    std::sort(ms.begin(), ms.end());
    *medianMs = ms[ms.size() / 2];
    return Status::ok();
  });
}

mk_status mk_session_time_steps(mk_session *s, uint64_t in, uint64_t out,
                                int warmup, int iters, float *medianMs) {
  MK_NEED_SESSION();
  return medianStepTime(medianMs, [&](std::vector<float> &ms) {
    return s->session->timeSteps(CUdeviceptr(in), CUdeviceptr(out), warmup, iters, ms);
  });
}

mk_status mk_session_time_token_steps(mk_session *s, int32_t token, uint64_t next_token,
                                      int warmup, int iters, float *medianMs) {
  MK_NEED_SESSION();
  return medianStepTime(medianMs, [&](std::vector<float> &ms) {
    return s->session->timeTokenSteps(token, CUdeviceptr(next_token), warmup, iters, ms);
  });
}

uint64_t mk_session_launch_count(const mk_session *s) {
  return s ? s->session->launchCount() : 0;
}

mk_status mk_session_read_capture(mk_session *s, const char *name, void *data,
                                  size_t bytes) {
  MK_NEED_SESSION();
  if (!name || (!data && bytes))
    return invalid("null name or buffer");
  return guarded([&] {
    std::vector<uint8_t> buf;
    MK_RETURN_IF_ERROR(s->session->readCapture(name, buf));
    if (buf.size() != bytes)
      return makeError(ErrorCode::InvalidArgument,
                       "capture '" + std::string(name) + "' has " +
                           std::to_string(buf.size()) + " bytes, buffer " +
                           std::to_string(bytes));
    std::memcpy(data, buf.data(), bytes);
    return Status::ok();
  });
}

} // extern "C"
