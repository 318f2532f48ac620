//===- FuzzTest.cpp - Seeded mutation fuzzing of the compiler's inputs ----===//
//
// Two fuzz targets with a seeded mutator of our own (deterministic, so a
// failure reproduces from its seed), each run for a bounded number of
// mutants (MK_FUZZ_ITERS, default below; MK_FUZZ_SEED picks another
// deterministic sequence) from a seed corpus in the repo:
//
//  - Fuzz.SpecFrontendAndPipeline: block specs (examples/, the malformed
//    specs of tests/lit/mkc/Inputs) mutated and run through mkc's whole
//    pipeline to CUDA in process; every mutant must end in success (a
//    kernel and its manifest written) or one "mkc: error:" line, never a
//    crash or hang (ctest's timeout).
//  - Fuzz.IrParserAndVerifiers: the graph and schedule IR of the lit tests
//    (split at `// -----`) mutated and parsed and verified as mk-opt does,
//    and every mutant that verifies run through each pass on its own (as
//    `mk-opt --<pass>`, the opt-in folds enabled); any outcome but a crash
//    passes, a diagnostic always has a location.
//
// Mutations: tests/support/FuzzMutator.h. A crash found here is a bug to
// fix, then its input joins the corpus (tests/fuzz/specs for specs).
//
// Known, upstream: MLIR 19's parser writes into a freed block when a
// top-level op refers forward to a value defined inside a later func.func
// and the parse then fails (Debian's mlir-opt crashes the same way; fixed
// after LLVM 19), e.g.
//   %b = "t.use"(%n) : (i32) -> i32
//   func.func @f(%x: i32) -> i32 {
//     %n = "t.def"(%x) : (i32) -> i32
//     %q = "t.bad"(%x) : (i32) -> [
//   }
// mkc and mk-opt refuse IR with a value outside every function before
// parsing it (Pipeline/IrPrecheck.h); the IR target does the same, so such
// mutants are refused with that message, as the tools refuse them.
//===----------------------------------------------------------------------===//

#include "FuzzMutator.h"
#include "Pipeline/Driver.h"
#include "Pipeline/InitAll.h"
#include "Pipeline/IrPrecheck.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace {

namespace fs = std::filesystem;
using mk::testing::iterations;
using mk::testing::mutate;
using mk::testing::seedOr;

std::string slurp(const fs::path &p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> specSeeds() {
  const fs::path root = MK_SOURCE_DIR;
  std::vector<std::string> seeds = {slurp(root / "examples/kimi_linear_w4a16.json")};
  for (const fs::path &dir : {root / "examples/specs", root / "tests/lit/mkc/Inputs",
                              root / "tests/fuzz/specs"}) {
    if (!fs::exists(dir))
      continue;
    std::vector<fs::path> files;
    for (const auto &e : fs::directory_iterator(dir))
      if (e.path().extension() == ".json")
        files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const fs::path &p : files)
      seeds.push_back(slurp(p));
  }
  return seeds;
}

TEST(Fuzz, SpecFrontendAndPipeline) {
  const std::vector<std::string> seeds = specSeeds();
  ASSERT_GE(seeds.size(), 5u);
  std::mt19937_64 rng(seedOr(20261201));
  const fs::path dir = fs::path(MK_TEST_TMPDIR) / "fuzz-spec";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const int n = iterations(2000);
  int accepted = 0;
  for (int i = 0; i < n; ++i) {
    const std::string &a = seeds[rng() % seeds.size()], &b = seeds[rng() % seeds.size()];
    const std::string spec = mutate(a, b, rng);
    const fs::path input = dir / "spec.json";
    std::ofstream(input) << spec;
    mk::DriverOptions o;
    o.inputPath = input.string();
    o.emit = "cuda";
    o.outputPath = (dir / "out").string();
    fs::remove_all(o.outputPath);
    std::string out, err;
    llvm::raw_string_ostream os(out), es(err);
    const int rc = mk::runDriver(o, os, es);
    if (rc == 0) {
      ++accepted;
      bool wrote = false;
      for (const auto &e : fs::directory_iterator(o.outputPath))
        wrote |= e.path().extension() == ".cu";
      EXPECT_TRUE(wrote) << "mutant " << i << " succeeded without a kernel:\n" << spec;
    } else {
      EXPECT_EQ(rc, 1);
      EXPECT_EQ(es.str().rfind("mkc: error: ", 0), 0u)
          << "mutant " << i << ": not the one error form:\n" << es.str() << "\n" << spec;
    }
  }
  std::printf("%d mutants, %d compiled to CUDA\n", n, accepted);
}

/// The lit tests' IR, split into its `// -----` cases.
std::vector<std::string> irSeeds() {
  const fs::path root = MK_SOURCE_DIR;
  std::vector<std::string> seeds;
  for (const char *f : {"tests/lit/Graph/roundtrip.mlir", "tests/lit/Graph/invalid.mlir",
                        "tests/lit/Schedule/roundtrip.mlir", "tests/lit/Schedule/invalid.mlir",
                        "tests/lit/Transforms/schedule-prefetch-weights.mlir",
                        "tests/lit/Transforms/schedule-tile-weights-rules.mlir",
                        "tests/lit/Transforms/schedule-deal-tasks.mlir",
                        "tests/lit/Transforms/schedule-partition-work-ir.mlir",
                        "tests/lit/Transforms/schedule-partition-work-balance.mlir",
                        "tests/lit/Transforms/schedule-prologue-waits.mlir",
                        "tests/lit/Transforms/schedule-fuse-kda-o-proj.mlir",
                        "tests/lit/Transforms/schedule-fuse-kda-gated-norm.mlir",
                        "tests/lit/Transforms/schedule-fuse-argmax.mlir",
                        "tests/lit/Transforms/schedule-poll-router-logits.mlir",
                        "tests/lit/Schedule/task-args-invalid.mlir",
                        "tests/lit/Transforms/schedule-barriers-to-counters-ir.mlir",
                        "tests/lit/Transforms/schedule-barriers-malformed.mlir",
                        "tests/lit/Transforms/schedule-plan-workspace-ir.mlir",
                        "tests/lit/Transforms/graph-fuse-projections-ir.mlir",
                        "tests/lit/Transforms/graph-absorb-mla-ir.mlir",
                        "tests/lit/Transforms/schedule-form-phases-ir.mlir",
                        "tests/lit/Transforms/schedule-form-phases-malformed.mlir"}) {
    // A seed file that went away must not quietly become an empty seed.
    EXPECT_TRUE(fs::exists(root / f)) << "seed file " << f << " is missing";
    const std::string text = slurp(root / f);
    size_t at = 0;
    while (at < text.size()) {
      size_t next = text.find("// -----", at);
      seeds.push_back(text.substr(at, next == std::string::npos ? std::string::npos : next - at));
      if (next == std::string::npos)
        break;
      at = next + 8;
    }
  }
  return seeds;
}

/// The passes every verified mutant goes through, one at a time (the
/// opt-in folds enabled).
const char *const kFuzzedPasses[] = {
    "graph-fuse-projections",
    "graph-absorb-mla",
    "schedule-form-phases",
    "schedule-partition-work",
    "schedule-fuse-kda-o-proj{enabled=true}",
    "schedule-fuse-kda-gated-norm{enabled=true}",
    "schedule-fuse-argmax{enabled=true}",
    "schedule-tile-weights",
    "schedule-prefetch-weights",
    "schedule-barriers-to-counters",
    "schedule-poll-router-logits{enabled=true}",
    "schedule-prologue-waits",
    "schedule-deal-tasks",
    "schedule-plan-workspace",
};

TEST(Fuzz, IrParserAndVerifiers) {
  const std::vector<std::string> seeds = irSeeds();
  ASSERT_GE(seeds.size(), 10u);
  mlir::DialectRegistry registry;
  mk::registerAllDialects(registry);
  mk::registerAllPasses();
  int passRuns = 0;
  std::mt19937_64 rng(seedOr(1201));
  const fs::path current = fs::path(MK_TEST_TMPDIR) / "fuzz-ir-current.mlir";
  const int n = iterations(20000);
  int parsed = 0, refused = 0;
  for (int i = 0; i < n; ++i) {
    const std::string &a = seeds[rng() % seeds.size()], &b = seeds[rng() % seeds.size()];
    const std::string text = mutate(a, b, rng);
    if (mk::findValueOutsideFunctions(text)) { // refused by the tools before parsing
      ++refused;
      continue;
    }
    // A crash leaves the mutant that caused it here.
    std::ofstream(current, std::ios::trunc) << text;
    if (std::getenv("MK_FUZZ_TRACE"))
      std::fprintf(stderr, "mutant %d\n", i);
    mlir::MLIRContext ctx(registry);
    ctx.allowUnregisteredDialects(false);
    int unlocated = 0;
    mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
      unlocated += llvm::isa<mlir::UnknownLoc>(d.getLocation());
      return mlir::success();
    });
    const auto t0 = std::chrono::steady_clock::now();
    mlir::OwningOpRef<mlir::ModuleOp> m = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
    if (m) {
      ++parsed;
      if (mlir::succeeded(mlir::verify(*m)))
        for (const char *pass : kFuzzedPasses) {
          mlir::OwningOpRef<mlir::ModuleOp> clone = m->clone();
          mlir::PassManager pm(&ctx);
          ASSERT_TRUE(mlir::succeeded(mlir::parsePassPipeline(
              std::string("builtin.module(") + pass + ")", pm)))
              << pass;
          (void)pm.run(*clone);
          ++passRuns;
        }
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (std::getenv("MK_FUZZ_REPORT_SLOW") && ms > 200)
      std::printf("slow mutant %d: %.0f ms\n%s\n", i, ms, text.c_str());
    EXPECT_EQ(unlocated, 0) << "mutant " << i << ": a diagnostic without a location:\n" << text;
  }
  std::printf("%d mutants, %d parsed, %d refused before parsing (values outside functions), %d pass runs\n",
              n, parsed, refused, passRuns);
}

} // namespace
