//===- PipelineStages.h - Named stages of the compiler pipeline -*- C++ -*-===//
//
// The pipeline is a sequence of named stages ("graph", then e.g. "schedule",
// "cuda"). `mkc --emit=<stage>` runs every stage up to and including the named
// one. A stage adds passes to the module-level pass manager and, if its
// product is not IR (CUDA source and a manifest), an emit function that
// writes that product instead of the printed module.
//
// Components register their stages from a STAGE_HOOKS function (see
// compiler/cmake/MKCompiler.cmake); the order of registration is the order of
// the pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef MK_PIPELINE_PIPELINESTAGES_H
#define MK_PIPELINE_PIPELINESTAGES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <map>
#include <set>
#include <string>

namespace mk {

/// What a terminal stage's emit function is asked to produce.
struct EmitOptions {
  /// `-o`: a file or directory (the stage decides); "-" means stdout.
  std::string outputPath = "-";
  /// Where "-" goes.
  llvm::raw_ostream *stdoutStream = nullptr;
};

struct PipelineStage {
  /// Name used by --emit and --dump-dir files ("graph", "schedule", ...).
  std::string name;
  /// One line for --help / --list-stages.
  std::string summary;
  /// Adds the passes that take the IR of the previous stage to this one's.
  /// May be null (the "graph" stage is produced by the frontend).
  std::function<void(mlir::OpPassManager &pm)> addPasses;
  /// Optional: when this stage is the --emit target, called after its passes
  /// instead of printing the module. Errors are reported as diagnostics on
  /// the module (the driver prints them) or as a failure with `error` set.
  std::function<mlir::LogicalResult(mlir::ModuleOp module,
                                    const EmitOptions &options,
                                    std::string &error)>
      emit;
  /// Optional: text printed as `// ` comment lines before the module
  /// wherever this stage's IR is written (stdout, -o, --dump-dir), e.g. the
  /// schedule's summary; the IR stays valid input to mkc and mk-opt.
  std::function<std::string(mlir::ModuleOp module)> header;
};

/// Appends `stage` to the pipeline. A stage whose name is already registered
/// is ignored (registration hooks may run twice).
void registerPipelineStage(PipelineStage stage);

/// Every registered stage, in pipeline order.
llvm::ArrayRef<PipelineStage> getPipelineStages();

/// The stage named `name`, or null.
const PipelineStage *lookupPipelineStage(llvm::StringRef name);

/// Index of `name` in the pipeline, or -1.
int getPipelineStageIndex(llvm::StringRef name);

/// Adds the passes of every stage up to and including `lastStage` to `pm`
/// (for mk-opt's `--mk-pipeline-to-<stage>`). Returns false if unknown.
bool buildPipelineUpTo(mlir::OpPassManager &pm, llvm::StringRef lastStage);

/// Options of individual pipeline passes, by pass argument, in MLIR's textual
/// pass-option syntax: {"schedule-form-phases": "threads=512"}.
using PassOptionMap = std::map<std::string, std::string>;

/// Parses "PASS=OPTIONS" (mkc's --pass-option) into `options`, appending to
/// what PASS already has. False, with `error` set, if malformed.
bool addPassOption(llvm::StringRef spec, PassOptionMap &options, std::string &error);

/// Applies `options` to the passes of `pm` they name and records those pass
/// names in `applied`. Fails (with `error` naming the pass) on an option the
/// pass does not accept.
mlir::LogicalResult applyPassOptions(mlir::OpPassManager &pm, const PassOptionMap &options,
                                     std::set<std::string> &applied, std::string &error);

} // namespace mk

#endif // MK_PIPELINE_PIPELINESTAGES_H
