//===- Driver.cpp - The CUDA driver API, loaded at run time ---------------===//

#include "mk/runtime/Driver.h"

#include <cstdlib>
#include <dlfcn.h>
#include <mutex>
#include <string>

namespace mk {
namespace rt {

namespace {

struct LoadedDriver {
  DriverApi api;
  Status status;
  void *handle = nullptr;
};

LoadedDriver *loadOnce() {
  auto *d = new LoadedDriver(); // lives for the process: the driver must too
  const char *env = std::getenv("MK_CUDA_DRIVER_LIB");
  std::string lib = (env && *env) ? env : "libcuda.so.1";
  d->handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!d->handle) {
    const char *why = dlerror();
    d->status = makeError(ErrorCode::NoDriver,
                          "cannot load the CUDA driver " + lib + ": " +
                              (why ? why : "unknown reason") +
                              " (is an NVIDIA driver installed?)");
    return d;
  }
  // cuGetProcAddress resolves each name to the ABI version that cuda.h's
  // CUDA_VERSION describes (cuMemAlloc -> cuMemAlloc_v2 and so on), which is
  // exactly the type the table's members were declared with.
  using GetProc = CUresult(CUDAAPI *)(const char *, void **, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult *);
  auto getProc =
      reinterpret_cast<GetProc>(dlsym(d->handle, "cuGetProcAddress_v2"));
  if (!getProc) {
    d->status = makeError(ErrorCode::NoDriver,
                          lib + " has no cuGetProcAddress_v2: the driver is "
                                "too old for this runtime (need CUDA 12+)");
    return d;
  }
  auto initFn = reinterpret_cast<decltype(&::cuInit)>(dlsym(d->handle, "cuInit"));
  if (!initFn) {
    d->status = makeError(ErrorCode::NoDriver, lib + " has no cuInit");
    return d;
  }
  CUresult r = initFn(0);
  if (r != CUDA_SUCCESS) {
    d->status = makeError(ErrorCode::NoDriver,
                          "cuInit failed with CUresult " + std::to_string(r) +
                              " (no usable GPU, or the driver is broken)");
    return d;
  }
  int version = 0;
  auto verFn = reinterpret_cast<decltype(&::cuDriverGetVersion)>(
      dlsym(d->handle, "cuDriverGetVersion"));
  if (verFn)
    verFn(&version);
  d->api.driverVersion = version;
  int askVersion = version < CUDA_VERSION ? version : CUDA_VERSION;
  std::string missing;
#define MK_RESOLVE(fn)                                                         \
  {                                                                            \
    void *p = nullptr;                                                         \
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SUCCESS;            \
    if (getProc(#fn, &p, askVersion, CU_GET_PROC_ADDRESS_DEFAULT, &q) !=       \
            CUDA_SUCCESS ||                                                    \
        !p)                                                                    \
      missing += std::string(missing.empty() ? "" : ", ") + #fn;               \
    d->api.fn = reinterpret_cast<decltype(d->api.fn)>(p);                      \
  }
  MK_DRIVER_FUNCTIONS(MK_RESOLVE)
#undef MK_RESOLVE
  if (!missing.empty())
    d->status = makeError(ErrorCode::NoDriver,
                          "the CUDA driver (version " + std::to_string(version) +
                              ") lacks: " + missing);
  return d;
}

} // namespace

const DriverApi *loadDriver(Status *status) {
  static std::once_flag once;
  static LoadedDriver *loaded = nullptr;
  std::call_once(once, [] { loaded = loadOnce(); });
  if (!loaded->status.isOk()) {
    if (status)
      *status = loaded->status;
    return nullptr;
  }
  if (status)
    *status = Status::ok();
  return &loaded->api;
}

Status cuCheck(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS)
    return Status::ok();
  std::string msg = std::string(what) + ": ";
  Status st;
  const DriverApi *drv = loadDriver(&st);
  const char *name = nullptr, *desc = nullptr;
  if (drv) {
    drv->cuGetErrorName(r, &name);
    drv->cuGetErrorString(r, &desc);
  }
  msg += name ? name : ("CUresult " + std::to_string(int(r)));
  if (desc)
    msg += std::string(" (") + desc + ")";
  return makeError(ErrorCode::Cuda, msg);
}

Status cuCheck(CUresult r, const std::string &what) {
  return cuCheck(r, what.c_str());
}

} // namespace rt
} // namespace mk
