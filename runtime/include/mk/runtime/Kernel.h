//===- Kernel.h - A generated kernel, compiled for one architecture -*- C++ -*-===//
//
// A Kernel is the manifest plus the CUBIN NVRTC made of the source for one
// architecture. Compiling needs no GPU (the architecture is a parameter), so
// the CPU-side tests compile kernels too; loading the CUBIN into a context is
// the Session's business.
//
//===----------------------------------------------------------------------===//

#ifndef MK_RUNTIME_KERNEL_H
#define MK_RUNTIME_KERNEL_H

#include "mk/runtime/KernelCache.h"
#include "mk/runtime/Manifest.h"
#include "mk/runtime/Nvrtc.h"

#include <memory>
#include <string>

namespace mk {
namespace rt {

/// What the compiler wrote: the manifest text and the CUDA source.
struct KernelSource {
  std::string manifestText;
  std::string source;
  /// Used in diagnostics and as NVRTC's program name.
  std::string sourceName = "kernel.cu";
};

/// Reads `<dir>/<name>.manifest.json` and the source it names. `name` empty:
/// the directory must hold exactly one *.manifest.json.
Status readKernelDir(const std::string &dir, const std::string &name,
                     KernelSource &out);

struct KernelBuildOptions {
  CompileOptions compile;
  /// Use the on-disk cache (KernelCache::defaultDir() unless cacheDir is set).
  bool useCache = true;
  std::string cacheDir;
  /// Extra headers handed to NVRTC (override embedded ones of the same name).
  std::vector<EmbeddedHeader> headers;
  /// Add kernelHeaders() (templates/*.cuh and the libc shims).
  bool useEmbeddedTemplates = true;
};

class Kernel {
public:
  /// Parses the manifest and compiles (or fetches from the cache) for
  /// `opts.compile.arch`, which must be set.
  static Status build(const KernelSource &src, const KernelBuildOptions &opts,
                      std::shared_ptr<Kernel> &out);

  const Manifest &manifest() const { return manifest_; }
  const std::string &manifestText() const { return manifestText_; }
  const std::string &cubin() const { return cubin_; }
  const std::string &arch() const { return arch_; }
  const std::string &cacheKey() const { return cacheKey_; }
  /// True when the CUBIN came from the cache.
  bool fromCache() const { return fromCache_; }
  /// NVRTC's log (empty on a cache hit), and why a cache entry was rejected.
  const std::string &compileLog() const { return log_; }
  const std::string &cacheNote() const { return cacheNote_; }

private:
  Manifest manifest_;
  std::string manifestText_;
  std::string cubin_, arch_, cacheKey_, log_, cacheNote_;
  bool fromCache_ = false;
};

/// readKernelDir(dir, "") then Kernel::build for `arch` (e.g. the device's
/// Device::arch()), with the rest of `opts` (cache, extra options).
Status buildKernelFromDir(const std::string &dir, const std::string &arch,
                          KernelBuildOptions opts, std::shared_ptr<Kernel> &out);

} // namespace rt
} // namespace mk

#endif // MK_RUNTIME_KERNEL_H
