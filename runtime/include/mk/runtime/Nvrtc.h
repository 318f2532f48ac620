//===- Nvrtc.h - Compiling kernels with NVRTC --------------------*- C++ -*-===//
//
// NVRTC needs no GPU: kernels compile for any architecture it supports, which
// is how the CPU-side tests check that generated code compiles for sm_90 and
// sm_120. The output is a CUBIN for exactly one real architecture.
//
//===----------------------------------------------------------------------===//

#ifndef MK_RUNTIME_NVRTC_H
#define MK_RUNTIME_NVRTC_H

#include "mk/runtime/Status.h"
#include "mk/runtime/Templates.h"

#include <string>
#include <vector>

namespace mk {
namespace rt {

struct CompileOptions {
  /// "sm_90", "sm_120", ...; empty means "the device's" (Kernel fills it in).
  std::string arch;
  /// The CUDA toolkit whose include/ and include/cccl/ are searched. Empty:
  /// $MK_CUDA_ROOT, else $CUDA_HOME, else the build's MK_CUDA_ROOT.
  std::string cudaRoot;
  /// Appended after the runtime's own options.
  std::vector<std::string> extraOptions;
  /// -lineinfo, for profilers.
  bool lineInfo = false;
};

/// The CUDA root that CompileOptions{cudaRoot=""} resolves to.
std::string defaultCudaRoot();

/// The full NVRTC option list for `opts`: -arch=sm_XY, -std=c++17,
/// -default-device, -I for the toolkit's include dirs that exist, then the
/// extra options. Deterministic: it is part of the cache key.
std::vector<std::string> nvrtcOptions(const CompileOptions &opts);

/// NVRTC's version as major * 1000 + minor * 10 (12080 for 12.8).
int nvrtcVersionNumber();
/// Architectures this NVRTC can compile for, as compute capabilities (90, 120).
std::vector<int> nvrtcSupportedArchs();

/// "sm_<major><minor>".
std::string archForComputeCapability(int major, int minor);

/// Compiles `source` (named `name` in diagnostics) with `headers` available
/// to #include. On success `cubin` holds the CUBIN; `log` gets NVRTC's log
/// either way (warnings included). A compile error's Status quotes the log.
Status compileWithNvrtc(const std::string &source, const std::string &name,
                        const std::vector<EmbeddedHeader> &headers,
                        const std::vector<std::string> &options,
                        std::string &cubin, std::string &log);

} // namespace rt
} // namespace mk

#endif // MK_RUNTIME_NVRTC_H
