//===- mk-opt.cpp - MLIR optimizer driver for the megakernel compiler -----===//
//
// mlir-opt with every dialect and pass of the compiler registered, for lit
// tests. Each pipeline stage is also a pass pipeline, `--mk-to-<stage>`,
// running every stage up to and including it. Input with an SSA value
// outside every function is refused before MLIR parses it
// (Pipeline/IrPrecheck.h: MLIR 19's parser can crash on it).
//
//===----------------------------------------------------------------------===//

#include "Pipeline/InitAll.h"
#include "Pipeline/IrPrecheck.h"
#include "Pipeline/PipelineStages.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

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
  auto [input, output] = mlir::registerAndParseCLIOptions(
      argc, argv, "megakernel compiler optimizer\n", registry);
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects())
    return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, input, output, registry));
  std::string message;
  std::unique_ptr<llvm::MemoryBuffer> file = mlir::openInputFile(input, &message);
  if (!file) {
    llvm::errs() << message << "\n";
    return 1;
  }
  const std::string why =
      mk::checkValuesInsideFunctions(file->getBuffer(), input == "-" ? "<stdin>" : input,
                                     /*severity=*/true);
  if (!why.empty()) {
    llvm::errs() << why << "\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> out = mlir::openOutputFile(output, &message);
  if (!out) {
    llvm::errs() << message << "\n";
    return 1;
  }
  if (mlir::failed(mlir::MlirOptMain(out->os(), std::move(file), registry, config)))
    return 1;
  out->keep();
  return 0;
}
