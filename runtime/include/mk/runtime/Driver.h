//===- Driver.h - The CUDA driver API, loaded at run time --------*- C++ -*-===//
//
// The runtime never links libcuda: it dlopen()s "libcuda.so.1" (or
// $MK_CUDA_DRIVER_LIB) the first time a device is needed and resolves every
// entry point through cuGetProcAddress, so that the library, its tools and its
// CPU-side tests build and run on machines with no GPU or driver, and a
// missing driver is a Status (ErrorCode::NoDriver), not a crash at load time.
// cuda.h is included for its types only.
//
//===----------------------------------------------------------------------===//

#ifndef MK_RUNTIME_DRIVER_H
#define MK_RUNTIME_DRIVER_H

#include "mk/runtime/Status.h"

#include <cuda.h>

namespace mk {
namespace rt {

#define MK_DRIVER_FUNCTIONS(X)                                                 \
  X(cuInit)                                                                    \
  X(cuDriverGetVersion)                                                        \
  X(cuGetErrorString)                                                          \
  X(cuGetErrorName)                                                            \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetName)                                                           \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDeviceTotalMem)                                                          \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuDevicePrimaryCtxRelease)                                                 \
  X(cuCtxSetCurrent)                                                           \
  X(cuCtxGetCurrent)                                                           \
  X(cuModuleLoadData)                                                          \
  X(cuModuleUnload)                                                            \
  X(cuModuleGetFunction)                                                       \
  X(cuModuleGetGlobal)                                                         \
  X(cuFuncSetAttribute)                                                        \
  X(cuFuncGetAttribute)                                                        \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                               \
  X(cuLaunchCooperativeKernel)                                                 \
  X(cuMemAlloc)                                                                \
  X(cuMemFree)                                                                 \
  X(cuMemsetD8)                                                                \
  X(cuMemsetD8Async)                                                           \
  X(cuMemcpyHtoD)                                                              \
  X(cuMemcpyDtoH)                                                              \
  X(cuMemcpyDtoD)                                                              \
  X(cuMemcpyHtoDAsync)                                                         \
  X(cuMemcpyDtoHAsync)                                                         \
  X(cuMemGetAddressRange)                                                      \
  X(cuStreamSynchronize)                                                       \
  X(cuEventCreate)                                                             \
  X(cuEventDestroy)                                                            \
  X(cuEventRecord)                                                             \
  X(cuEventSynchronize)                                                        \
  X(cuEventElapsedTime)

/// Function pointers of the driver API; the types are cuda.h's, so a call
/// site reads like a direct call: `drv.cuMemAlloc(&p, n)`.
struct DriverApi {
#define MK_DRIVER_MEMBER(fn) decltype(&::fn) fn = nullptr;
  MK_DRIVER_FUNCTIONS(MK_DRIVER_MEMBER)
#undef MK_DRIVER_MEMBER
  int driverVersion = 0;
};

/// Loads and initializes the driver once per process (thread-safe). Returns
/// the table, or nullptr with `status` set to a NoDriver error that says what
/// was tried ("cannot load libcuda.so.1: ...; is an NVIDIA driver
/// installed?"). A failure is remembered: later calls fail the same way.
const DriverApi *loadDriver(Status *status);

/// Turns a CUresult into a Status naming the call: "cuMemAlloc(1048576):
/// CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
Status cuCheck(CUresult r, const char *what);
Status cuCheck(CUresult r, const std::string &what);

} // namespace rt
} // namespace mk

#endif // MK_RUNTIME_DRIVER_H
