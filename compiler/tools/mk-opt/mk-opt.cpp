//===- mk-opt.cpp - MLIR optimizer driver for the megakernel compiler -----===//
//
// mlir-opt with every dialect and pass of the compiler registered, for lit
// tests. Each pipeline stage is also a pass pipeline, `--mk-to-<stage>`,
// running every stage up to and including it.
//
//===----------------------------------------------------------------------===//

#include "Pipeline/InitAll.h"
#include "Pipeline/PipelineStages.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"

int main(int argc, char **argv) {
  // --version: this project's version, as mkc prints it.
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "mk-opt (megakernel) " MK_VERSION "\n  LLVM/MLIR " LLVM_VERSION_STRING
          "\n";
  });
  mk::registerAllPasses();
  mk::registerAllPipelineStages();
  for (const mk::PipelineStage &stage : mk::getPipelineStages()) {
    std::string name = stage.name;
    mlir::registerPassPipeline(
        "mk-to-" + name,
        "Run the compiler pipeline up to the '" + name + "' stage",
        [name](mlir::OpPassManager &pm, llvm::StringRef,
               llvm::function_ref<mlir::LogicalResult(const llvm::Twine &)>) {
          mk::buildPipelineUpTo(pm, name);
          return mlir::success();
        },
        [](llvm::function_ref<void(const mlir::detail::PassOptions &)>) {});
  }
  mlir::DialectRegistry registry;
  mk::registerAllDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "megakernel compiler optimizer\n", registry));
}
