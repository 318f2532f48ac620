//===- Driver.cpp - The mkc driver as a library ---------------------------===//

#include "Pipeline/Driver.h"

#include "Frontend/GraphBuilder.h"
#include "Pipeline/InitAll.h"
#include "Pipeline/PipelineStages.h"
#include "mk/BlockSpec.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
using namespace mk;

OwningOpRef<ModuleOp> mk::loadInput(MLIRContext &ctx, llvm::StringRef path,
                                    std::string &error) {
  if (llvm::sys::fs::is_directory(path)) {
    error = (path + ": is a directory, not a block spec or .mlir file").str();
    return nullptr;
  }
  if (path.ends_with(".mlir")) {
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
        llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
    if (!buffer) {
      error = (path + ": cannot open: " + buffer.getError().message()).str();
      return nullptr;
    }
    ParserConfig config(&ctx);
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
        (*buffer)->getBuffer(), config, path);
    if (!module)
      error = (path + ": cannot parse the IR (see the diagnostics above)").str();
    return module;
  }

  // Anything else is a block spec; the spec reader names the file itself.
  BlockConfig cfg;
  if (!loadBlockSpecFile(path.str(), cfg, error))
    return nullptr;
  std::string why;
  OwningOpRef<ModuleOp> module = buildGraphModule(ctx, cfg, &why);
  if (!module) {
    error = (path + ": " + why).str();
    return nullptr;
  }
  if (failed(verify(*module))) {
    error = (path + ": internal error: the frontend built invalid IR (see "
                    "the diagnostics above)")
                .str();
    return nullptr;
  }
  return module;
}

/// Writes `module` to `path` ("-" = `out`).
static LogicalResult writeModule(ModuleOp module, llvm::StringRef path,
                                 llvm::raw_ostream &out, std::string &error) {
  if (path == "-") {
    module.print(out);
    out << "\n";
    return success();
  }
  std::unique_ptr<llvm::ToolOutputFile> file = openOutputFile(path, &error);
  if (!file) {
    error = (path + ": cannot write: " + error).str();
    return failure();
  }
  module.print(file->os());
  file->os() << "\n";
  file->keep();
  return success();
}

static std::string stageNames() {
  std::string names;
  for (const PipelineStage &s : getPipelineStages())
    names += (names.empty() ? "" : ", ") + s.name;
  return names;
}

int mk::runDriver(const DriverOptions &opt, llvm::raw_ostream &out,
                  llvm::raw_ostream &errs, PassManagerHook configure) {
  auto fail = [&](const std::string &message) {
    errs << opt.toolName << ": error: " << message << "\n";
    errs.flush();
    return 1;
  };

  registerAllPipelineStages();
  int last = getPipelineStageIndex(opt.emit);
  if (last < 0)
    return fail("unknown stage '" + opt.emit +
                "' for --emit (stages: " + stageNames() + ")");
  if (opt.inputPath.empty())
    return fail("no input file (a block spec .json or an .mlir file)");

  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext ctx(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &ctx, errs);

  std::string error;
  OwningOpRef<ModuleOp> module = loadInput(ctx, opt.inputPath, error);
  if (!module)
    return fail(error);
  if (opt.debugCapture)
    (*module)->setAttr("mk.debug_capture", UnitAttr::get(&ctx));

  if (!opt.dumpDir.empty()) {
    if (std::error_code ec = llvm::sys::fs::create_directories(opt.dumpDir))
      return fail(opt.dumpDir + ": cannot create the dump directory: " +
                  ec.message());
  }

  llvm::ArrayRef<PipelineStage> stages = getPipelineStages();
  // Every pass option must reach its pass before anything runs.
  {
    std::set<std::string> applied;
    for (int i = 0; i <= last; ++i)
      if (stages[i].addPasses) {
        PassManager probe(&ctx, ModuleOp::getOperationName());
        stages[i].addPasses(probe);
        if (failed(applyPassOptions(probe, opt.passOptions, applied, error)))
          return fail(error);
      }
    for (const auto &kv : opt.passOptions)
      if (!applied.count(kv.first))
        return fail("--pass-option: no pass '" + kv.first +
                    "' in the pipeline up to stage '" + opt.emit + "'");
  }
  for (int i = 0; i <= last; ++i) {
    const PipelineStage &stage = stages[i];
    if (stage.addPasses) {
      PassManager pm(&ctx, ModuleOp::getOperationName());
      stage.addPasses(pm);
      std::set<std::string> applied;
      if (failed(applyPassOptions(pm, opt.passOptions, applied, error)))
        return fail(error);
      if (configure && failed(configure(pm)))
        return fail("cannot apply the pass manager options");
      if (failed(pm.run(*module)))
        return fail(opt.inputPath + ": stage '" + stage.name +
                    "' failed (see the diagnostics above)");
    }
    if (!opt.dumpDir.empty()) {
      llvm::SmallString<256> path(opt.dumpDir);
      llvm::sys::path::append(path, llvm::formatv("{0:d2}-{1}.mlir", i,
                                                  stage.name)
                                        .str());
      if (failed(writeModule(*module, path, out, error)))
        return fail(error);
    }
  }

  const PipelineStage &target = stages[last];
  if (target.emit) {
    EmitOptions emitOptions;
    emitOptions.outputPath = opt.outputPath;
    emitOptions.stdoutStream = &out;
    if (failed(target.emit(*module, emitOptions, error)))
      return fail(error.empty() ? opt.inputPath + ": emitting stage '" +
                                      target.name + "' failed"
                                : error);
    return 0;
  }
  if (failed(writeModule(*module, opt.outputPath, out, error)))
    return fail(error);
  return 0;
}
