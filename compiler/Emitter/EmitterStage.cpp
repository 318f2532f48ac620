//===- EmitterStage.cpp - The "cuda" pipeline stage -----------------------===//
//
// `mkc SPEC --emit=cuda -o DIR` writes DIR/<kernel>.cu and
// DIR/<kernel>.manifest.json; with `-o -` both go to stdout (the manifest
// after the source, as a comment-free JSON document following a marker line).
//
//===----------------------------------------------------------------------===//

#include "Emitter/CudaEmitter.h"
#include "Pipeline/PipelineStages.h"
#include "Transforms/Passes.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using mk::emitter::EmittedKernel;

static bool writeFile(const std::string &path, const std::string &text,
                      std::string &error) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_Text);
  if (ec) {
    error = "cannot write " + path + ": " + ec.message();
    return false;
  }
  os << text;
  return true;
}

void mk::emitter::registerEmitterPipelineStages() {
  PipelineStage s;
  s.name = "cuda";
  s.summary = "one cooperative CUDA kernel (<kernel>.cu) and its manifest "
              "(<kernel>.manifest.json); -o names a directory";
  s.addPasses = nullptr;
  // Its IR (--dump-dir) is the schedule module the kernel comes from,
  // headed by the same summary as the schedule stage's.
  s.header = mk::schedule::scheduleSummary;
  s.emit = [](ModuleOp module, const EmitOptions &options,
              std::string &error) -> LogicalResult {
    EmittedKernel k;
    // The emitter's diagnostics on the IR say why.
    if (failed(emitModule(module, k)))
      return failure();
    if (options.outputPath.empty() || options.outputPath == "-") {
      llvm::raw_ostream &os =
          options.stdoutStream ? *options.stdoutStream : llvm::outs();
      os << k.source << "\n// ---- " << k.name << ".manifest.json ----\n"
         << k.manifest;
      return success();
    }
    if (std::error_code ec =
            llvm::sys::fs::create_directories(options.outputPath)) {
      error = "cannot create directory " + options.outputPath + ": " +
              ec.message();
      return failure();
    }
    llvm::SmallString<256> cu(options.outputPath), mf(options.outputPath);
    llvm::sys::path::append(cu, k.name + ".cu");
    llvm::sys::path::append(mf, k.name + ".manifest.json");
    if (!writeFile(cu.str().str(), k.source, error))
      return failure();
    if (!writeFile(mf.str().str(), k.manifest, error)) {
      // A kernel without its manifest is not a product.
      llvm::sys::fs::remove(cu);
      return failure();
    }
    return success();
  };
  registerPipelineStage(std::move(s));
}
