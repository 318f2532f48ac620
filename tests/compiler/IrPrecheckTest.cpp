//===- IrPrecheckTest.cpp - The lexical check before MLIR parses IR -------===//
//
// mk::findValueOutsideFunctions must accept every IR text the compiler
// writes or its tests read (values only inside func.func bodies and
// signatures) and find the shape that crashes MLIR 19's parser: a value
// used outside every function.
//
//===----------------------------------------------------------------------===//

#include "Pipeline/Driver.h"
#include "Pipeline/IrPrecheck.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace {

std::optional<mk::TextLocation> find(const std::string &text) {
  return mk::findValueOutsideFunctions(text);
}

TEST(IrPrecheck, FindsTheParserCrashShape) {
  // MLIR 19 writes into a freed operation when this fails to parse.
  const std::string text = "%b = \"t.use\"(%n) : (i32) -> i32\n"
                           "func.func @f(%x: i32) -> i32 {\n"
                           "  %n = \"t.def\"(%x) : (i32) -> i32\n"
                           "  %q = \"t.bad\"(%x) : (i32) -> [\n"
                           "}\n";
  const auto at = find(text);
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(at->line, 1u);
  EXPECT_EQ(at->column, 1u);
  EXPECT_EQ(mk::checkValuesInsideFunctions(text, "in.mlir"),
            "in.mlir:1:1: an SSA value outside every func.func: this compiler's IR defines "
            "values only inside functions (top-level operations refer to weights and state by "
            "symbol)");
}

TEST(IrPrecheck, LocatesAValueAfterAFunction) {
  const std::string text = "func.func @f() {\n  return\n}\n  \"t.use\"(%v) : (i32) -> ()\n";
  const auto at = find(text);
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(at->line, 4u);
  EXPECT_EQ(at->column, 11u);
}

TEST(IrPrecheck, AcceptsValuesInFunctionsAndTheirSignatures) {
  EXPECT_FALSE(find("module {\n"
                    "  graph.weight @w : tensor<4xbf16>\n"
                    "  func.func @f(%a: tensor<4xbf16> {graph.state = @s}, %p: i32)\n"
                    "      -> (tensor<4xbf16> {graph.state = @s}) attributes {x = 1} {\n"
                    "    %0 = graph.add %a, %a : tensor<4xbf16>\n"
                    "    ^bb1(%z: i32):\n"
                    "    return %0 : tensor<4xbf16>\n"
                    "  }\n"
                    "}\n"));
  // The generic form, with properties before the region.
  EXPECT_FALSE(find("\"func.func\"() <{function_type = (i32) -> (), sym_name = \"f\"}> ({\n"
                    "^bb0(%x: i32):\n  \"func.return\"() : () -> ()\n}) : () -> ()\n"));
  // A declaration has no body: the next operation is outside it again.
  EXPECT_FALSE(find("func.func private @d(%x: i32)\nfunc.func @g(%y: i32) {\n  return\n}\n"));
  EXPECT_TRUE(find("func.func private @d(i32)\ngraph.weight @w : tensor<4xbf16>\n"
                   "\"t.use\"(%v) : (i32) -> ()\n")
                  .has_value());
}

TEST(IrPrecheck, SkipsCommentsAndStrings) {
  EXPECT_FALSE(find("// %not_a_value\nschedule.kernel @k attributes {name = \"%x {\"} {\n}\n"));
  EXPECT_FALSE(find("graph.weight @\"a%b\" : tensor<4xbf16> // 100%\n"));
}

/// Every stage's IR of both example specs, as mkc dumps it, passes.
TEST(IrPrecheck, AcceptsEveryDumpedStage) {
  for (const char *spec : {"examples/kimi_linear_w4a16.json", "examples/specs/tiny.json"}) {
    const fs::path dump = fs::path(MK_TEST_TMPDIR) / "precheck-dump";
    fs::remove_all(dump);
    mk::DriverOptions o;
    o.inputPath = std::string(MK_SOURCE_DIR) + "/" + spec;
    o.emit = "cuda";
    o.outputPath = (dump / "kernel").string();
    o.dumpDir = (dump / "ir").string();
    std::string out, err;
    llvm::raw_string_ostream os(out), es(err);
    ASSERT_EQ(mk::runDriver(o, os, es), 0) << err;
    int files = 0;
    for (const auto &e : fs::directory_iterator(dump / "ir")) {
      std::ifstream in(e.path());
      std::stringstream ss;
      ss << in.rdbuf();
      EXPECT_FALSE(find(ss.str()).has_value()) << e.path();
      ++files;
    }
    EXPECT_GE(files, 3) << spec;
  }
}

/// And so do the lit tests' hand-written inputs (all .mlir under tests/lit
/// but the ones that exercise this very check).
TEST(IrPrecheck, AcceptsTheLitInputs) {
  int files = 0;
  for (const auto &e : fs::recursive_directory_iterator(std::string(MK_SOURCE_DIR) + "/tests/lit")) {
    if (e.path().extension() != ".mlir" ||
        e.path().filename().string().find("values-outside") != std::string::npos)
      continue;
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    const auto at = find(ss.str());
    EXPECT_FALSE(at.has_value()) << e.path() << ":" << (at ? at->line : 0);
    ++files;
  }
  EXPECT_GE(files, 10);
}

} // namespace
