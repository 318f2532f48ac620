//===- Driver.cpp - The mkc driver as a library ---------------------------===//

#include "Pipeline/Driver.h"

#include "llvm/Support/CommandLine.h"

#include "Frontend/GraphBuilder.h"
#include "Pipeline/InitAll.h"
#include "Pipeline/IrPrecheck.h"
#include "Pipeline/PipelineStages.h"
#include "mk/BlockSpec.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
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
    // Refused before MLIR 19's parser sees it (IrPrecheck.h says why).
    if (std::string why = checkValuesInsideFunctions((*buffer)->getBuffer(), path);
        !why.empty()) {
      error = why;
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

/// Prints `stage`'s header (as `// ` lines), then `module`.
static void printStageIR(ModuleOp module, const PipelineStage &stage, llvm::raw_ostream &os) {
  if (stage.header) {
    SmallVector<StringRef> lines;
    const std::string text = stage.header(module);
    StringRef(text).rtrim('\n').split(lines, '\n');
    for (StringRef line : lines)
      os << "// " << line << "\n";
  }
  module.print(os);
  os << "\n";
}

/// Writes `module`, the IR of `stage`, to `path` ("-" = `out`).
static LogicalResult writeModule(ModuleOp module, const PipelineStage &stage,
                                 llvm::StringRef path, llvm::raw_ostream &out,
                                 std::string &error) {
  if (path == "-") {
    printStageIR(module, stage, out);
    return success();
  }
  std::unique_ptr<llvm::ToolOutputFile> file = openOutputFile(path, &error);
  if (!file) {
    error = (path + ": cannot write: " + error).str();
    return failure();
  }
  printStageIR(module, stage, file->os());
  file->keep();
  return success();
}

/// Where diagnostic `loc` points, for "<tool>: error: <where>: <message>":
/// "file:line:col" for IR read from a file, else the input file and the
/// name of the op if it has one (the frontend names ops after the spec's
/// layers and weights: "tiny.blocks.3.attn.attention").
static std::string diagnosticWhere(Location loc, llvm::StringRef inputPath) {
  if (auto file = loc->findInstanceOf<FileLineColLoc>())
    return llvm::formatv("{0}:{1}:{2}", file.getFilename().getValue(),
                         file.getLine(), file.getColumn());
  if (auto name = loc->findInstanceOf<NameLoc>())
    return (inputPath + ": " + name.getName().getValue()).str();
  return inputPath.str();
}

static llvm::StringRef severityName(DiagnosticSeverity severity) {
  switch (severity) {
  case DiagnosticSeverity::Error:
    return "error";
  case DiagnosticSeverity::Warning:
    return "warning";
  case DiagnosticSeverity::Note:
    return "note";
  case DiagnosticSeverity::Remark:
    return "remark";
  }
  llvm_unreachable("unknown diagnostic severity");
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
  // Diagnostics of the parser, verifiers, passes and emitter are lines of
  // the driver's own form, "<tool>: error: <where>: <message>", with their
  // notes as "<tool>: note: ..." lines; the op a diagnostic is on is not
  // printed with it ("see current operation: <the whole kernel>") unless
  // the user asked for it (--mlir-print-op-on-diagnostic, where registered).
  {
    const auto &cl = llvm::cl::getRegisteredOptions();
    auto it = cl.find("mlir-print-op-on-diagnostic");
    if (it == cl.end() || it->second->getNumOccurrences() == 0)
      ctx.printOpOnDiagnostic(false);
  }
  int errors = 0;
  ScopedDiagnosticHandler diagHandler(&ctx, [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error)
      ++errors;
    auto print = [&](const Diagnostic &d) {
      errs << opt.toolName << ": " << severityName(d.getSeverity()) << ": "
           << diagnosticWhere(d.getLocation(), opt.inputPath) << ": " << d
           << "\n";
    };
    print(d);
    for (const Diagnostic &note : d.getNotes())
      print(note);
    errs.flush();
    return success();
  });

  std::string error;
  mlir::TimingScope loadTiming;
  if (opt.timing)
    loadTiming = opt.timing->nest("load input");
  OwningOpRef<ModuleOp> module = loadInput(ctx, opt.inputPath, error);
  loadTiming.stop();
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
  // Writes the IR after stage `i` to the dump directory, if there is one.
  auto dump = [&](int i) -> LogicalResult {
    if (opt.dumpDir.empty())
      return success();
    llvm::SmallString<256> path(opt.dumpDir);
    llvm::sys::path::append(
        path, llvm::formatv("{0:d2}-{1}.mlir", i, stages[i].name).str());
    return writeModule(*module, stages[i], path, out, error);
  };
  const PipelineStage &target = stages[last];
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
      if (opt.timing)
        pm.enableTiming(*opt.timing);
      pm.enableVerifier(opt.verifyEach);
      // The passes' diagnostics say why; a stage failing without one is
      // still an error line.
      int before = errors;
      if (failed(pm.run(*module)))
        return errors > before ? 1
                               : fail(opt.inputPath + ": stage '" +
                                      stage.name + "' failed");
    }
    // The target's IR is dumped once its product is written: a failed
    // emission leaves no dump that looks like a finished stage.
    if (!(i == last && target.emit) && failed(dump(i)))
      return fail(error);
  }

  if (target.emit) {
    EmitOptions emitOptions;
    emitOptions.outputPath = opt.outputPath;
    emitOptions.stdoutStream = &out;
    int before = errors;
    mlir::TimingScope emitTiming;
    if (opt.timing)
      emitTiming = opt.timing->nest("emit (" + target.name + ")");
    if (failed(target.emit(*module, emitOptions, error))) {
      if (!error.empty())
        return fail(error);
      return errors > before ? 1
                             : fail(opt.inputPath + ": emitting stage '" +
                                    target.name + "' failed");
    }
    if (failed(dump(last)))
      return fail(error);
    return 0;
  }
  if (failed(writeModule(*module, target, opt.outputPath, out, error)))
    return fail(error);
  return 0;
}
