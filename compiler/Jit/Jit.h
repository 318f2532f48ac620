//===- Jit.h - Spec in, ready session out, in one process -------*- C++ -*-===//
//
// The embedded JIT: the compiler pipeline and the runtime linked together, so
// that one call turns a block spec into a Session ready for weights:
//
//   std::unique_ptr<mk::rt::Session> s;
//   mk::rt::Status st =
//       mk::jit::createSession(nullptr, "spec.json", {}, {}, s);
//
// runs every pipeline stage up to "cuda" on an in-memory module (no files,
// no mkc process), hands the source and manifest to rt::Kernel::build (NVRTC
// or the on-disk cache) and creates the session. This library is the only
// place where the compiler and the runtime meet; both keep building without
// the other.
//
// The API speaks the runtime's Status: no MLIR type crosses it. Failures of
// the pipeline come back as ErrorCode::Compile with the compiler's
// diagnostics in the message.
//
//===----------------------------------------------------------------------===//

#ifndef MK_JIT_JIT_H
#define MK_JIT_JIT_H

#include "mk/BlockConfig.h"
#include "mk/runtime/Device.h"
#include "mk/runtime/Kernel.h"
#include "mk/runtime/Session.h"
#include "mk/runtime/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mk {
namespace jit {

struct JitOptions {
  //===--- Compiler (passed to the pipeline's pass options) ---------------===//
  /// The kernel's symbol (schedule-form-phases kernel-name); empty:
  /// "mk_<spec name>".
  std::string kernelName;
  /// Emit a debug_capture kernel: each phase's intermediates go to the debug
  /// arena (schedule-form-phases debug-capture; Session::readCapture).
  bool debugCapture = false;
  /// Concurrent blocks the work is balanced for (schedule-partition-work
  /// target-sms). 0: the pass default for compileSpecToSource /
  /// compileSpecFile; in createSession, the device's SM count x
  /// kBlocksPerSm.
  int64_t targetSms = 0;
  /// The packed tiles' arithmetic (schedule-tile-weights arithmetic):
  /// "folded", "scaled", "exact" (the spec's per-weight bf16 rounding) or
  /// "int8"; empty: the pass default (folded).
  std::string arithmetic;

  //===--- NVRTC and the cache (rt::KernelBuildOptions) ------------------===//
  /// Use the on-disk CUBIN cache; `cacheDir` empty is its default directory
  /// ($MK_CACHE_DIR, $XDG_CACHE_HOME/megakernel, ~/.cache/megakernel).
  bool useCache = true;
  std::string cacheDir;
  /// Appended to the runtime's NVRTC options (e.g. "-DMK_GEMV_SIMT").
  std::vector<std::string> nvrtcOptions;
};

/// Blocks per SM the emitted kernel is sized for (256 threads, register and
/// shared memory use that fit two blocks per SM; see the target-sms option of
/// schedule-partition-work). Only used to derive targetSms from a device.
inline constexpr int64_t kBlocksPerSm = 2;

/// Runs the whole pipeline in-process up to the "cuda" stage and returns the
/// kernel's source and manifest (sourceName "<kernel>.cu"). Nothing is
/// written to disk. An invalid `cfg` is InvalidArgument; a failing stage is
/// Compile, naming the stage and quoting the compiler's diagnostics.
rt::Status compileSpecToSource(const BlockConfig &cfg, const JitOptions &opts,
                               rt::KernelSource &out);

/// Same, from a block spec file. An unreadable file is Io, a malformed spec
/// InvalidArgument, each with the spec reader's one-line message
/// ("<path>: line L, column C: ...").
rt::Status compileSpecFile(const std::string &specPath, const JitOptions &opts,
                           rt::KernelSource &out);

/// Compiles `src` with NVRTC (or fetches it from the cache) for `arch`
/// ("sm_90"): no device is needed. Empty `arch` is InvalidArgument.
rt::Status buildKernel(const rt::KernelSource &src, const JitOptions &opts,
                       const std::string &arch,
                       std::shared_ptr<rt::Kernel> &out);

/// Same, for `dev`'s architecture.
rt::Status buildKernel(const rt::KernelSource &src, const JitOptions &opts,
                       const rt::Device &dev, std::shared_ptr<rt::Kernel> &out);

/// The one call: compiles the spec for `dev` (targetSms from the device
/// unless set), builds the kernel and creates a session with `sessionOpts`.
/// `dev` null opens device 0 first, so a machine without a driver gets
/// NoDriver before any compilation. Weights are bound by the caller
/// (bindSafetensors, bindWeightHost, bindWeightDevice).
rt::Status createSession(const std::shared_ptr<rt::Device> &dev,
                         const std::string &specPath, const JitOptions &opts,
                         const rt::SessionOptions &sessionOpts,
                         std::unique_ptr<rt::Session> &out);
rt::Status createSession(const std::shared_ptr<rt::Device> &dev,
                         const BlockConfig &cfg, const JitOptions &opts,
                         const rt::SessionOptions &sessionOpts,
                         std::unique_ptr<rt::Session> &out);

} // namespace jit
} // namespace mk

#endif // MK_JIT_JIT_H
