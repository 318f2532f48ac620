//===- Jit.cpp - Spec in, ready session out, in one process ---------------===//
//
// The pipeline is the registered one (PipelineStages.h): this file only runs
// its stages on an in-memory module, with JitOptions turned into the options
// of the passes that own them, and hands the emitter's product to the
// runtime. It holds no pass list of its own, so a stage or pass added to the
// pipeline is picked up here as it is by mkc.
//
//===----------------------------------------------------------------------===//

#include "Jit/Jit.h"

#include "Emitter/CudaEmitter.h"
#include "Frontend/GraphBuilder.h"
#include "Pipeline/InitAll.h"
#include "Pipeline/PipelineStages.h"
#include "mk/BlockSpec.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <mutex>

using namespace mlir;
using mk::rt::ErrorCode;
using mk::rt::Status;

namespace {

/// The stage whose product is the kernel source and manifest.
constexpr llvm::StringLiteral kCudaStage = "cuda";

/// The registries are filled by idempotent hooks that are not thread-safe on
/// their own; JIT callers may compile from several threads.
void registerOnce() {
  static std::once_flag once;
  std::call_once(once, [] { mk::registerAllPipelineStages(); });
}

/// "<name>: " for the frontend's name locations, "file:line:col: " for IR
/// read from a file, nothing otherwise.
std::string where(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str() + ": ";
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().str() + ":" + std::to_string(file.getLine()) +
            ":" + std::to_string(file.getColumn()) + ": ");
  return "";
}

/// Collects error diagnostics of the context as text (they would otherwise go
/// to stderr, which an embedding process may not watch).
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(MLIRContext &ctx)
      : handler(&ctx, [this](Diagnostic &d) {
          if (d.getSeverity() != DiagnosticSeverity::Error)
            return success();
          llvm::raw_string_ostream os(text);
          if (!text.empty())
            os << "; ";
          os << where(d.getLocation()) << d;
          for (const Diagnostic &note : d.getNotes())
            os << " (note: " << note << ")";
          return success();
        }) {}

  const std::string &str() const { return text; }

private:
  std::string text;
  ScopedDiagnosticHandler handler;
};

bool isIdentifier(llvm::StringRef s) {
  if (s.empty() || !(std::isalpha((unsigned char)s[0]) || s[0] == '_'))
    return false;
  for (char c : s)
    if (!(std::isalnum((unsigned char)c) || c == '_'))
      return false;
  return true;
}

/// JitOptions as pass options, by pass argument ("schedule-partition-work"
/// -> "target-sms=132"), in MLIR's textual pass-option syntax.
mk::PassOptionMap passOptionsFor(const mk::jit::JitOptions &o) {
  mk::PassOptionMap options;
  auto add = [&](const char *pass, const std::string &opt) {
    std::string &s = options[pass];
    s += (s.empty() ? "" : " ") + opt;
  };
  if (!o.kernelName.empty())
    add("schedule-form-phases", "kernel-name=" + o.kernelName);
  if (o.debugCapture)
    add("schedule-form-phases", "debug-capture=true");
  if (o.targetSms > 0)
    add("schedule-partition-work", "target-sms=" + std::to_string(o.targetSms));
  if (!o.arithmetic.empty())
    add("schedule-tile-weights", "arithmetic=" + o.arithmetic);
  return options;
}

} // namespace

Status mk::jit::compileSpecToSource(const BlockConfig &cfg,
                                    const JitOptions &opts,
                                    rt::KernelSource &out) {
  std::string why = cfg.validate();
  if (!why.empty())
    return rt::makeError(ErrorCode::InvalidArgument,
                         "block config '" + cfg.name + "': " + why);
  if (!opts.kernelName.empty() && !isIdentifier(opts.kernelName))
    return rt::makeError(ErrorCode::InvalidArgument,
                         "kernel name '" + opts.kernelName +
                             "' is not a C identifier");
  if (opts.targetSms < 0)
    return rt::makeError(ErrorCode::InvalidArgument,
                         "targetSms must be >= 0, got " +
                             std::to_string(opts.targetSms));
  if (!opts.arithmetic.empty() &&
      !llvm::is_contained({"folded", "scaled", "exact", "int8"}, opts.arithmetic))
    return rt::makeError(ErrorCode::InvalidArgument,
                         "arithmetic must be folded, scaled, exact or int8, got '" +
                             opts.arithmetic + "'");

  registerOnce();
  int last = getPipelineStageIndex(kCudaStage);
  if (last < 0)
    return rt::makeError(ErrorCode::Compile,
                         "the pipeline has no 'cuda' stage (was the Emitter "
                         "component left out of the build?)");

  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext ctx(registry);
  // One module, module-level passes: a thread pool per compile buys nothing.
  ctx.disableMultithreading();
  // Errors name the op's location; the whole op ("see current operation")
  // would make the message the size of the kernel.
  ctx.printOpOnDiagnostic(false);
  DiagnosticCollector diags(ctx);

  OwningOpRef<ModuleOp> module = buildGraphModule(ctx, cfg, &why);
  if (!module)
    return rt::makeError(ErrorCode::InvalidArgument,
                         "block config '" + cfg.name + "': " + why);
  if (failed(verify(*module)))
    return rt::makeError(ErrorCode::Compile,
                         "internal error: the frontend built invalid IR: " +
                             diags.str());

  PassOptionMap passOptions = passOptionsFor(opts);
  std::set<std::string> applied;
  llvm::ArrayRef<PipelineStage> stages = getPipelineStages();
  for (int i = 0; i <= last; ++i) {
    const PipelineStage &stage = stages[i];
    if (!stage.addPasses)
      continue;
    PassManager pm(&ctx, ModuleOp::getOperationName());
    stage.addPasses(pm);
    std::string error;
    if (failed(applyPassOptions(pm, passOptions, applied, error)))
      return rt::makeError(ErrorCode::InvalidArgument, error);
    if (failed(pm.run(*module)))
      return rt::makeError(ErrorCode::Compile, "stage '" + stage.name +
                                                   "' failed for '" + cfg.name +
                                                   "': " + diags.str());
  }
  // An option whose pass is gone from the pipeline would otherwise be
  // silently ignored.
  for (const auto &kv : passOptions)
    if (!applied.count(kv.first))
      return rt::makeError(ErrorCode::Compile, "pass '" + kv.first +
                                                   "' is not in the pipeline: "
                                                   "cannot apply '" +
                                                   kv.second + "'");

  emitter::EmittedKernel k;
  if (failed(emitter::emitModule(*module, k)))
    return rt::makeError(ErrorCode::Compile, "CUDA emission failed for '" +
                                                 cfg.name +
                                                 "': " + diags.str());
  out.source = std::move(k.source);
  out.manifestText = std::move(k.manifest);
  out.sourceName = k.name + ".cu";
  return Status::ok();
}

Status mk::jit::compileSpecFile(const std::string &specPath,
                                const JitOptions &opts, rt::KernelSource &out) {
  // The reader names the file and the problem; only the code is ours to pick.
  if (!std::ifstream(specPath))
    return rt::makeError(ErrorCode::Io,
                         specPath + ": cannot open: " + std::strerror(errno));
  BlockConfig cfg;
  std::string error;
  if (!loadBlockSpecFile(specPath, cfg, error))
    return rt::makeError(ErrorCode::InvalidArgument, error);
  return compileSpecToSource(cfg, opts, out);
}

Status mk::jit::buildKernel(const rt::KernelSource &src, const JitOptions &opts,
                            const std::string &arch,
                            std::shared_ptr<rt::Kernel> &out) {
  if (arch.empty())
    return rt::makeError(ErrorCode::InvalidArgument,
                         "buildKernel: no target architecture (e.g. sm_90)");
  rt::KernelBuildOptions bo;
  bo.compile.arch = arch;
  bo.compile.extraOptions = opts.nvrtcOptions;
  bo.useCache = opts.useCache;
  bo.cacheDir = opts.cacheDir;
  return rt::Kernel::build(src, bo, out);
}

Status mk::jit::buildKernel(const rt::KernelSource &src, const JitOptions &opts,
                            const rt::Device &dev,
                            std::shared_ptr<rt::Kernel> &out) {
  return buildKernel(src, opts, dev.arch(), out);
}

namespace {

/// `dev`, or device 0 when null (NoDriver without a driver).
Status deviceOrFirst(const std::shared_ptr<mk::rt::Device> &dev,
                     std::shared_ptr<mk::rt::Device> &out) {
  if (dev) {
    out = dev;
    return Status::ok();
  }
  return mk::rt::Device::open(0, out);
}

Status sessionFromSource(const std::shared_ptr<mk::rt::Device> &dev,
                         const mk::rt::KernelSource &src,
                         const mk::jit::JitOptions &opts,
                         const mk::rt::SessionOptions &sessionOpts,
                         std::unique_ptr<mk::rt::Session> &out) {
  std::shared_ptr<mk::rt::Kernel> kernel;
  MK_RETURN_IF_ERROR(mk::jit::buildKernel(src, opts, *dev, kernel));
  return mk::rt::Session::create(dev, kernel, sessionOpts, out);
}

/// `opts` with targetSms taken from the device when unset.
mk::jit::JitOptions forDevice(const mk::rt::Device &dev,
                              mk::jit::JitOptions opts) {
  if (opts.targetSms == 0 && dev.multiprocessors() > 0)
    opts.targetSms = int64_t(dev.multiprocessors()) * mk::jit::kBlocksPerSm;
  return opts;
}

/// The device (or the first one), options for it, `compile(options, src)`,
/// then a session over the source: what both createSession overloads do.
template <class Compile>
Status createSessionWith(const std::shared_ptr<mk::rt::Device> &dev,
                         const mk::jit::JitOptions &opts,
                         const mk::rt::SessionOptions &sessionOpts,
                         std::unique_ptr<mk::rt::Session> &out, Compile compile) {
  std::shared_ptr<mk::rt::Device> d;
  MK_RETURN_IF_ERROR(deviceOrFirst(dev, d));
  mk::jit::JitOptions o = forDevice(*d, opts);
  mk::rt::KernelSource src;
  MK_RETURN_IF_ERROR(compile(o, src));
  return sessionFromSource(d, src, o, sessionOpts, out);
}

} // namespace

Status mk::jit::createSession(const std::shared_ptr<rt::Device> &dev,
                              const std::string &specPath,
                              const JitOptions &opts,
                              const rt::SessionOptions &sessionOpts,
                              std::unique_ptr<rt::Session> &out) {
  return createSessionWith(dev, opts, sessionOpts, out,
                           [&](const JitOptions &o, rt::KernelSource &src) {
                             return compileSpecFile(specPath, o, src);
                           });
}

Status mk::jit::createSession(const std::shared_ptr<rt::Device> &dev,
                              const BlockConfig &cfg, const JitOptions &opts,
                              const rt::SessionOptions &sessionOpts,
                              std::unique_ptr<rt::Session> &out) {
  return createSessionWith(dev, opts, sessionOpts, out,
                           [&](const JitOptions &o, rt::KernelSource &src) {
                             return compileSpecToSource(cfg, o, src);
                           });
}
