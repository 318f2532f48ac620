//===- mkc.cpp - The megakernel compiler driver ---------------------------===//
//
//   mkc SPEC.json|FILE.mlir --emit=<stage> [-o FILE|DIR] [--dump-dir DIR]
//   mkc --from-hf CONFIG.json [--hf-as-unit] [--hf-group N] [--hf-name NAME] [-o SPEC.json]
//
// Runs the pipeline up to <stage> and writes its product (IR, or for a
// terminal stage such as "cuda" whatever that stage emits). All the work is
// in mk::runDriver (compiler/Pipeline/Driver.h); this file is the command
// line. MLIR's pass-manager, context and printer options are available, e.g.
// --mlir-print-ir-after-all, --mlir-print-debuginfo, --mlir-timing.
//
//===----------------------------------------------------------------------===//

#include "Pipeline/Driver.h"
#include "Pipeline/InitAll.h"
#include "Pipeline/PipelineStages.h"

#include "mk/BlockSpec.h"
#include "mk/HfConfig.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

static std::string stageHelp() {
  std::string help = "Last pipeline stage to run and emit:";
  for (const mk::PipelineStage &s : mk::getPipelineStages())
    help += "\n    " + s.name + ": " + s.summary;
  return help;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  mk::registerAllPipelineStages();
  mk::registerAllPasses();

  cl::OptionCategory category("mkc options");
  cl::opt<std::string> input(cl::Positional, cl::desc("<spec.json|file.mlir>"),
                             cl::cat(category));
  // cl::desc keeps a StringRef: the text must outlive the option.
  static const std::string emitHelp = stageHelp();
  cl::opt<std::string> emit("emit", cl::desc(emitHelp),
                            cl::value_desc("stage"), cl::init("graph"),
                            cl::cat(category));
  cl::opt<std::string> output("o", cl::desc("Output file or directory ('-' "
                                            "is stdout)"),
                              cl::value_desc("path"), cl::init("-"),
                              cl::cat(category));
  cl::opt<std::string> dumpDir(
      "dump-dir",
      cl::desc("Write the IR after every stage to DIR/NN-<stage>.mlir"),
      cl::value_desc("dir"), cl::cat(category));
  cl::opt<bool> verifyEach(
      "verify-each",
      cl::desc("Verify the IR after every pass (default; =false saves ~40% "
               "of a very deep spec's compile time)"),
      cl::init(true), cl::cat(category));
  cl::opt<bool> debugCapture(
      "debug-capture",
      cl::desc("Emit a kernel that also writes every phase's intermediates "
               "to the debug arena (captures in the manifest)"),
      cl::cat(category));
  cl::list<std::string> passOptions(
      "pass-option",
      cl::desc("PASS=OPTIONS: options of one pass of the pipeline, in MLIR's "
               "pass-option syntax (repeatable), e.g. "
               "--pass-option=schedule-form-phases=threads=512 "
               "--pass-option=schedule-partition-work=target-sms=132"),
      cl::value_desc("pass=options"), cl::cat(category));
  cl::opt<std::string> fromHf(
      "from-hf",
      cl::desc("Write the block spec of a Hugging Face config.json (to -o, "
               "default stdout) instead of compiling; a key it cannot map is an "
               "error naming it (docs/spec-format.md)"),
      cl::value_desc("config.json"), cl::cat(category));
  cl::opt<bool> hfAsUnit(
      "hf-as-unit",
      cl::desc("With --from-hf: take the model's dimensions into the unit family "
               "even where its semantics differ (each difference printed as a note)"),
      cl::cat(category));
  cl::opt<int64_t> hfGroup(
      "hf-group",
      cl::desc("With --from-hf: the quantization group (default: the config's "
               "quantization_config.group_size, else 128)"),
      cl::value_desc("rows"), cl::init(0), cl::cat(category));
  cl::opt<std::string> hfName("hf-name",
                              cl::desc("With --from-hf: the spec's name (letters, digits, _)"),
                              cl::value_desc("name"), cl::cat(category));
  cl::opt<bool> listStages("list-stages",
                           cl::desc("Print the pipeline's stages and exit"),
                           cl::cat(category));

  // --version: this project's version (CMake's project(VERSION)), then the
  // LLVM/MLIR it is built with, instead of LLVM's own banner.
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "mkc (megakernel) " MK_VERSION "\n  LLVM/MLIR " LLVM_VERSION_STRING
          "\n";
  });

  mlir::registerMLIRContextCLOptions();
  mlir::registerPassManagerCLOptions();
  mlir::registerAsmPrinterCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  // libLLVM registers hundreds of backend options; --help shows mkc's own and
  // MLIR's (--mlir-*), the rest stay reachable through --help-hidden.
  for (auto &entry : cl::getRegisteredOptions()) {
    StringRef name = entry.getKey();
    cl::Option *opt = entry.getValue();
    bool mine = llvm::is_contained(opt->Categories, &category);
    if (!mine && !name.starts_with("mlir-") && name != "help" &&
        name != "version")
      opt->setHiddenFlag(cl::Hidden);
  }
  cl::ParseCommandLineOptions(
      argc, argv,
      "mkc: compiles a block spec into one cooperative CUDA megakernel\n\n"
      "  mkc examples/kimi_linear_w4a16.json --emit=graph\n"
      "  mkc spec.json --emit=graph --dump-dir ir/ "
      "--mlir-print-ir-after-all\n");

  if (listStages) {
    for (const mk::PipelineStage &s : mk::getPipelineStages())
      outs() << s.name << "\t" << s.summary << "\n";
    return 0;
  }

  if (!fromHf.empty()) {
    if (!input.empty()) {
      errs() << "mkc: error: --from-hf takes the config as its value; no other input (got "
             << input << ")\n";
      return 1;
    }
    if (hfGroup < 0) {
      errs() << "mkc: error: --hf-group must be > 0 (0: from the config), got " << hfGroup
             << "\n";
      return 1;
    }
    mk::HfImportOptions o;
    o.asUnit = hfAsUnit;
    o.group = hfGroup;
    o.name = hfName;
    mk::HfImport imported;
    std::string error;
    if (!mk::importHfConfigFile(fromHf, o, imported, error)) {
      errs() << "mkc: error: " << error << "\n";
      return 1;
    }
    for (const std::string &note : imported.notes)
      errs() << "mkc: note: " << fromHf << ": " << note << "\n";
    std::string text = mk::blockConfigToJson(imported.config);
    if (output == "-") {
      outs() << text;
      return 0;
    }
    std::error_code ec;
    raw_fd_ostream os(output, ec);
    if (ec) {
      errs() << "mkc: error: " << output << ": cannot write: " << ec.message() << "\n";
      return 1;
    }
    os << text;
    return 0;
  }
  if (hfAsUnit || hfGroup != 0 || !hfName.empty()) {
    errs() << "mkc: error: --hf-as-unit, --hf-group and --hf-name go with --from-hf\n";
    return 1;
  }

  mk::DriverOptions options;
  options.inputPath = input;
  options.emit = emit;
  options.outputPath = output;
  options.dumpDir = dumpDir;
  options.debugCapture = debugCapture;
  options.verifyEach = verifyEach;
  for (const std::string &spec : passOptions) {
    std::string error;
    if (!mk::addPassOption(spec, options.passOptions, error)) {
      errs() << "mkc: error: " << error << "\n";
      return 1;
    }
  }
  // --mlir-timing: the time of the input's loading, of each pass of every
  // stage and of the emission, reported when the manager goes out of scope.
  mlir::DefaultTimingManager timing;
  mlir::applyDefaultTimingManagerCLOptions(timing);
  mlir::TimingScope root = timing.getRootScope();
  if (timing.isEnabled())
    options.timing = &root;
  return mk::runDriver(options, outs(), errs(), [](mlir::PassManager &pm) {
    return mlir::applyPassManagerCLOptions(pm);
  });
}
