//===- Driver.h - The mkc driver as a library -------------------*- C++ -*-===//
//
// Everything mkc does, callable without a command line (the gtests drive bad
// inputs through it): load a block spec or an .mlir file, run the pipeline's
// stages up to the requested one, dump IR per stage, write the result.
//
//===----------------------------------------------------------------------===//

#ifndef MK_PIPELINE_DRIVER_H
#define MK_PIPELINE_DRIVER_H

#include "Pipeline/PipelineStages.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mk {

struct DriverOptions {
  /// A block spec (JSON) or, if it ends in ".mlir", IR of any stage.
  std::string inputPath;
  /// The last stage to run (see PipelineStages.h).
  std::string emit = "graph";
  /// Where the result goes; "-" is `out`.
  std::string outputPath = "-";
  /// If set, writes the IR after every stage to DIR/NN-<stage>.mlir.
  std::string dumpDir;
  /// Name used as the prefix of error lines ("mkc").
  std::string toolName = "mkc";
  /// `--debug-capture`: marks the input module with the `mk.debug_capture`
  /// unit attribute, which schedule-form-phases turns into a debug_capture
  /// kernel (intermediates written to the debug arena, docs/kernel-abi.md).
  bool debugCapture = false;
  /// `--pass-option=PASS=OPTIONS`: options of passes of the pipeline (e.g.
  /// schedule-form-phases=threads=512). Naming a pass that the stages run do
  /// not contain is an error.
  PassOptionMap passOptions;
  /// `--verify-each` (default on): verify the IR after every pass, as
  /// mlir-opt does; the input is verified as it is loaded either way.
  bool verifyEach = true;
  /// If set (mkc's --mlir-timing), the time of the input's loading, of every
  /// stage's passes and of the emission is recorded under this scope.
  mlir::TimingScope *timing = nullptr;
};

/// Called on each stage's pass manager before it runs (mkc applies MLIR's
/// pass-manager command-line options here, e.g. --mlir-print-ir-after-all).
using PassManagerHook = llvm::function_ref<mlir::LogicalResult(mlir::PassManager &)>;

/// Runs the driver. Returns 0 on success and 1 on any error, reported to
/// `errs` as "<tool>: error: <file>: <message>"; diagnostics on the IR
/// (parser, verifiers, passes, emitter) as "<tool>: error: <where>:
/// <message>", <where> being file:line:col for IR read from a file, else the
/// file and the op's name, without the op itself. A stage that fails leaves
/// no output and no dump of its own. Never aborts on bad input.
int runDriver(const DriverOptions &options, llvm::raw_ostream &out,
              llvm::raw_ostream &errs, PassManagerHook configure = {});

/// Loads `path` (block spec or .mlir) into `ctx` as graph-level IR, verified.
/// On failure returns null and sets `error` to one line ("<file>: <message>");
/// MLIR diagnostics go to the context's handlers.
mlir::OwningOpRef<mlir::ModuleOp> loadInput(mlir::MLIRContext &ctx,
                                            llvm::StringRef path,
                                            std::string &error);

} // namespace mk

#endif // MK_PIPELINE_DRIVER_H
