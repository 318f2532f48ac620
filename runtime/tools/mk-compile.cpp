//===- mk-compile.cpp - Kernels into the NVRTC cache, ahead of time -------===//
//
//   mk-compile --arch sm_90 [--cache-dir DIR] [--option OPT]... KERNEL_DIR...
//
// Compiles generated kernel directories (mkc --emit=cuda output) with NVRTC
// for an architecture and stores each CUBIN in the kernel cache, exactly as
// a session on a GPU of that architecture would: same sources, embedded
// templates, options ($MK_NVRTC_OPTIONS included) and so the same cache key.
// No GPU or driver is needed, so a machine without one (an image build, a CI
// job) can fill the cache that the GPU machine then reads: its first launch
// skips the compile. A kernel already in the cache is reported, not rebuilt.
// Exit status 1 if any kernel fails to read, compile (NVRTC's log on
// stderr) or be stored in the cache, 2 on a malformed command line.
//
//===----------------------------------------------------------------------===//

#include "mk/runtime/Kernel.h"
#include "mk/runtime/KernelCache.h"

#include "ToolOptions.h"

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

using namespace mk::rt;

int main(int argc, char **argv) {
  std::string arch, cacheDir;
  std::vector<std::string> dirs, options;
  bool lineInfo = false;
  CLI::App app{"Compiles kernel directories with NVRTC into the kernel cache, without a GPU",
               "mk-compile"};
  app.add_option("--arch", arch, "target architecture, as a device of it reports it: sm_90, sm_120, ...")
      ->required()
      ->check([](const std::string &a) {
        return a.rfind("sm_", 0) == 0 && a.size() > 3 &&
                       a.find_first_not_of("0123456789", 3) == std::string::npos
                   ? std::string()
                   : "expected sm_<digits>, e.g. sm_90";
      });
  app.add_option("--cache-dir", cacheDir,
                 "kernel cache directory (default: the runtime's: $MK_CACHE_DIR, else "
                 "$XDG_CACHE_HOME/megakernel, else ~/.cache/megakernel)");
  app.add_option("--option", options,
                 "an NVRTC option the consumer adds too (e.g. -DMK_PHASE_TIMING for "
                 "mk-bench --phase-timing); repeatable");
  app.add_flag("--lineinfo", lineInfo, "compile with -lineinfo, as profiling builds do");
  app.add_option("kernel-dirs", dirs, "kernel directories")
      ->required()
      ->check(CLI::ExistingDirectory);
  if (int code = mk::tools::parseOrExitCode(app, argc, argv); code >= 0)
    return code;

  KernelBuildOptions bo;
  bo.compile.arch = arch;
  bo.compile.extraOptions = options;
  bo.compile.lineInfo = lineInfo;
  bo.cacheDir = cacheDir;
  std::printf("cache %s, %s\n", (cacheDir.empty() ? KernelCache::defaultDir() : cacheDir).c_str(),
              arch.c_str());
  int failures = 0;
  for (const std::string &dir : dirs) {
    const auto start = std::chrono::steady_clock::now();
    std::shared_ptr<Kernel> kernel;
    Status st = buildKernelFromDir(dir, arch, bo, kernel);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!st.isOk()) {
      std::fprintf(stderr, "mk-compile: %s: %s\n", dir.c_str(), st.toString().c_str());
      ++failures;
      continue;
    }
    // Filling the cache is the point: an entry that did not get written
    // (the session only notes it) is a failure here.
    std::string stored;
    if (KernelCache(cacheDir).lookup(kernel->cacheKey(), stored) != KernelCache::LookupResult::Hit) {
      std::fprintf(stderr, "mk-compile: %s: compiled, but not stored in the cache%s%s\n",
                   dir.c_str(), kernel->cacheNote().empty() ? "" : ": ",
                   kernel->cacheNote().c_str());
      ++failures;
      continue;
    }
    std::printf("%s: %s %s (%zu bytes, %.1f s)%s%s\n", dir.c_str(),
                kernel->fromCache() ? "in the cache as" : "compiled into",
                kernel->cacheKey().c_str(), kernel->cubin().size(), s,
                kernel->cacheNote().empty() ? "" : "; ", kernel->cacheNote().c_str());
  }
  return failures ? 1 : 0;
}
