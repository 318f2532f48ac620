//===- CuptiLaunchCounter.h - Count GPU work with CUPTI ---------*- C++ -*-===//
//
// The proof of "one launch per token": CUPTI's activity API records every
// kernel, memcpy and memset the GPU executes in this process, whoever issued
// it. libcupti is loaded at run time (dlopen), like the driver, so the tests
// build anywhere; where it cannot be loaded the launch-count tests skip.
//
//===----------------------------------------------------------------------===//

#ifndef MK_TESTS_GPU_CUPTILAUNCHCOUNTER_H
#define MK_TESTS_GPU_CUPTILAUNCHCOUNTER_H

#include <cupti_activity.h>

#include <atomic>
#include <cstdlib>
#include <dlfcn.h>
#include <string>
#include <vector>

namespace mk {
namespace testing {

class CuptiLaunchCounter {
public:
  struct Counts {
    long kernels = 0, memcpys = 0, memsets = 0;
  };

  /// Loads libcupti and enables kernel, memcpy and memset records. Returns
  /// false (with `why`) where CUPTI is unavailable.
  static bool start(std::string &why) {
    Api &a = api();
    if (!a.load(why))
      return false;
    if (a.enabled)
      return true;
    if (a.registerCallbacks(&bufferRequested, &bufferCompleted) != CUPTI_SUCCESS) {
      why = "cuptiActivityRegisterCallbacks failed";
      return false;
    }
    for (CUpti_ActivityKind k :
         {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
          CUPTI_ACTIVITY_KIND_MEMSET})
      if (a.enable(k) != CUPTI_SUCCESS) {
        why = "cuptiActivityEnable failed (profiling not permitted here?)";
        return false;
      }
    a.enabled = true;
    return true;
  }

  /// Delivers every record so far and clears the counts.
  static void reset() {
    api().flushAll(1);
    counts().kernels = counts().memcpys = counts().memsets = 0;
  }

  /// Records of everything completed since reset(); synchronize first.
  static Counts read() {
    api().flushAll(1);
    Counts c;
    c.kernels = counts().kernels.load();
    c.memcpys = counts().memcpys.load();
    c.memsets = counts().memsets.load();
    return c;
  }

private:
  struct AtomicCounts {
    std::atomic<long> kernels{0}, memcpys{0}, memsets{0};
  };
  static AtomicCounts &counts() {
    static AtomicCounts c;
    return c;
  }

  struct Api {
    void *lib = nullptr;
    bool tried = false, enabled = false;
    std::string loadError;
    CUptiResult (*registerCallbacks)(CUpti_BuffersCallbackRequestFunc,
                                     CUpti_BuffersCallbackCompleteFunc) = nullptr;
    CUptiResult (*enable)(CUpti_ActivityKind) = nullptr;
    CUptiResult (*flushAll)(uint32_t) = nullptr;
    CUptiResult (*nextRecord)(uint8_t *, size_t, CUpti_Activity **) = nullptr;

    bool load(std::string &why) {
      if (tried) {
        why = loadError;
        return lib != nullptr;
      }
      tried = true;
      std::vector<std::string> candidates;
      if (const char *e = std::getenv("MK_CUPTI_LIB"))
        candidates.push_back(e);
      for (const char *rootVar : {"MK_CUDA_ROOT", "CUDA_HOME"})
        if (const char *r = std::getenv(rootVar)) {
          candidates.push_back(std::string(r) + "/lib64/libcupti.so");
          candidates.push_back(std::string(r) + "/extras/CUPTI/lib64/libcupti.so");
        }
      candidates.push_back("/usr/local/cuda/lib64/libcupti.so");
      candidates.push_back("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so");
      candidates.push_back("libcupti.so");
      candidates.push_back("libcupti.so.13");
      candidates.push_back("libcupti.so.12");
      for (const std::string &c : candidates)
        if ((lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)))
          break;
      if (!lib) {
        loadError = "libcupti not found (set MK_CUPTI_LIB)";
        why = loadError;
        return false;
      }
      registerCallbacks = reinterpret_cast<decltype(registerCallbacks)>(
          dlsym(lib, "cuptiActivityRegisterCallbacks"));
      enable = reinterpret_cast<decltype(enable)>(dlsym(lib, "cuptiActivityEnable"));
      flushAll =
          reinterpret_cast<decltype(flushAll)>(dlsym(lib, "cuptiActivityFlushAll"));
      nextRecord = reinterpret_cast<decltype(nextRecord)>(
          dlsym(lib, "cuptiActivityGetNextRecord"));
      if (!registerCallbacks || !enable || !flushAll || !nextRecord) {
        lib = nullptr;
        loadError = "libcupti lacks the activity API";
        why = loadError;
        return false;
      }
      return true;
    }
  };
  static Api &api() {
    static Api a;
    return a;
  }

  static void CUPTIAPI bufferRequested(uint8_t **buffer, size_t *size,
                                       size_t *maxRecords) {
    const size_t bytes = 1 << 20;
    *buffer = static_cast<uint8_t *>(aligned_alloc(8, bytes));
    *size = bytes;
    *maxRecords = 0;
  }

  static void CUPTIAPI bufferCompleted(CUcontext, uint32_t, uint8_t *buffer,
                                       size_t, size_t validSize) {
    CUpti_Activity *rec = nullptr;
    while (api().nextRecord(buffer, validSize, &rec) == CUPTI_SUCCESS) {
      switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        ++counts().kernels;
        break;
      case CUPTI_ACTIVITY_KIND_MEMCPY:
        ++counts().memcpys;
        break;
      case CUPTI_ACTIVITY_KIND_MEMSET:
        ++counts().memsets;
        break;
      default:
        break;
      }
    }
    free(buffer);
  }
};

} // namespace testing
} // namespace mk

#endif // MK_TESTS_GPU_CUPTILAUNCHCOUNTER_H
