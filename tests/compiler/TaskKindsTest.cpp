//===- TaskKindsTest.cpp - The schedule dialect's registry of task kinds ---===//
//
// Every kind but `opaque` has one registry entry, its keyword maps back to
// it, argument names do not repeat, and docs/schedule.md names it. Every
// kind is its own op implementing TaskOpInterface, declaring as attributes
// the arguments its registry entry lists, and the ops' legal cuts
// (getLegalCuts) are the ones their templates accept.
//
//===----------------------------------------------------------------------===//

#include "Emitter/TaskLoweringInterface.h"
#include "Pipeline/InitAll.h"
#include "mk/Dialect/Schedule/ScheduleOps.h"
#include "mk/Dialect/Schedule/TaskKinds.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>

using namespace mk::schedule;

TEST(TaskKinds, NamesMapBackToTheirKinds) {
  std::set<TaskKind> kinds;
  for (const TaskKindInfo &k : taskKinds()) {
    const std::string name = taskKindName(k.kind).str();
    EXPECT_TRUE(kinds.insert(k.kind).second) << "kind " << name << " twice";
    EXPECT_NE(k.kind, TaskKind::Opaque);
    const TaskKindInfo *found = lookupTaskKind(k.kind);
    ASSERT_NE(found, nullptr) << name;
    EXPECT_EQ(found, &k);
    std::optional<TaskKind> parsed = symbolizeTaskKind(name);
    ASSERT_TRUE(parsed.has_value()) << name;
    EXPECT_EQ(*parsed, k.kind);
  }
  // Every enum case but `opaque` has its entry.
  for (uint32_t i = 0; i <= getMaxEnumValForTaskKind(); ++i) {
    std::optional<TaskKind> k = symbolizeTaskKind(i);
    ASSERT_TRUE(k.has_value()) << i;
    EXPECT_EQ(lookupTaskKind(*k) == nullptr, *k == TaskKind::Opaque) << taskKindName(*k).str();
  }
  EXPECT_FALSE(symbolizeTaskKind("no_such_kind").has_value());
  EXPECT_EQ(kinds.size(), 18u) << "a kind was added or removed: update this count and the docs";
}

TEST(TaskKinds, ArgumentNamesAreUniquePerKind) {
  for (const TaskKindInfo &k : taskKinds()) {
    std::set<std::string> args;
    for (auto list : {k.args, k.familyArgs})
      for (const TaskArgSpec &a : list)
        EXPECT_TRUE(args.insert(a.name.str()).second)
            << taskKindName(k.kind).str() << ": argument " << a.name.str() << " twice";
  }
}

TEST(TaskKinds, DocsNameEveryKind) {
  std::ifstream f(std::string(MK_SOURCE_DIR) + "/docs/schedule.md");
  ASSERT_TRUE(f) << "docs/schedule.md";
  std::stringstream text;
  text << f.rdbuf();
  for (const TaskKindInfo &k : taskKinds()) {
    const std::string name = taskKindName(k.kind).str();
    EXPECT_NE(text.str().find("`" + name + "`"), std::string::npos)
        << "docs/schedule.md does not name kind `" << name << "`";
  }
}

namespace {
/// A context with the project's dialects.
struct Ctx {
  mlir::DialectRegistry registry;
  std::unique_ptr<mlir::MLIRContext> ctx;
  Ctx() {
    mk::registerAllDialects(registry);
    ctx = std::make_unique<mlir::MLIRContext>(registry);
    ctx->loadAllAvailableDialects();
  }
};

/// Calls fn(kind, op) with a task op of each kind (createTaskOp, no
/// arguments), built in a module of `c`.
template <class Fn> void forEachKindOp(Ctx &c, Fn fn) {
  mlir::OpBuilder b(c.ctx.get());
  mlir::OwningOpRef<mlir::ModuleOp> m = mlir::ModuleOp::create(b.getUnknownLoc());
  b.setInsertionPointToEnd(m->getBody());
  for (uint32_t i = 0; i <= getMaxEnumValForTaskKind(); ++i) {
    const TaskKind kind = *symbolizeTaskKind(i);
    TaskOpInterface t = createTaskOp(b, b.getUnknownLoc(), kind, "t", "", std::nullopt,
                                     mlir::DictionaryAttr::get(c.ctx.get()));
    ASSERT_TRUE(t) << taskKindName(kind).str();
    fn(kind, t);
  }
}
} // namespace

// createTaskOp builds the op of each kind, which reports that kind.
TEST(TaskOps, EveryKindIsItsOwnOp) {
  Ctx c;
  forEachKindOp(c, [](TaskKind kind, TaskOpInterface t) {
    EXPECT_EQ(t.getKind(), kind);
    EXPECT_EQ(t->getName().getStringRef(), ("schedule." + taskKindName(kind)).str());
    EXPECT_EQ(t.getName(), "t");
    EXPECT_EQ(t.getCount(), 1);
    EXPECT_EQ(t.getTaskKind().has_value(), kind != TaskKind::Opaque);
  });
}

// The emitter asks each task op for its CUDA through TaskCudaLowering: every
// kind with a device template has a model once the project's dialects are
// registered; the every-block norm (emitted by its phase) and opaque have
// none.
TEST(TaskOps, EveryLoweredKindHasACudaLowering) {
  Ctx c;
  forEachKindOp(c, [](TaskKind kind, TaskOpInterface t) {
    const bool lowered = kind != TaskKind::ResidualRmsnorm && kind != TaskKind::Opaque;
    EXPECT_EQ(mlir::isa<mk::emitter::TaskCudaLowering>(t.getOperation()), lowered)
        << taskKindName(kind).str();
  });
}

// Each kind's op declares (ODS attributes) exactly the arguments its registry
// entry lists, beside the attributes every task has; opaque declares only
// its free-form `args`.
TEST(TaskOps, EveryKindDeclaresItsRegistryArguments) {
  Ctx c;
  const std::set<std::string> common = {
      "name",     "count",    "op",         "partition", "bytes", "reads",    "writes",
      "accumulates", "cut_blocks", "unit", "grain",     "grain_per", "grain_span"};
  forEachKindOp(c, [&](TaskKind kind, TaskOpInterface t) {
    std::set<std::string> declared, listed;
    for (mlir::StringAttr n : t->getName().getAttributeNames())
      if (!common.count(n.str()))
        declared.insert(n.str());
    if (const TaskKindInfo *info = lookupTaskKind(kind)) {
      for (auto list : {info->args, info->familyArgs})
        for (const TaskArgSpec &a : list)
          listed.insert(a.name.str());
    } else {
      listed = {"args"};
    }
    EXPECT_EQ(declared, listed) << taskKindName(kind).str();
  });
}

// A GEMV's cuts: every tile width its template takes (16..128 columns, no
// wider than an output), split-K only where the sums are accumulated, in
// slices of whole quantization groups; each cut's arguments and bytes.
TEST(TaskOps, GemvCutsAreTheTemplates) {
  Ctx c;
  const char *text = R"mlir(
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.weight @w.w_q {dtype = "u8", shape = array<i64: 512, 256>, group = 128 : i64}
  schedule.buffer @x {dtype = "f32", shape = array<i64: 1024>, space = "shared"}
  schedule.buffer @y {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @acc {dtype = "f32", shape = array<i64: 256>}
  schedule.phase "z" {
    schedule.zero_f32 "zero" {buffer = @acc, n = 256 : i64}
  }
  schedule.barrier
  schedule.phase "p" {
    schedule.w4a16_gemv "sum" {epilogue = "atomic_f32", group = 128 : i64, input = @x, k = 1024 : i64, n = [256], outputs = [@acc], weights = ["w"]}
    schedule.w4a16_gemv "store" {epilogue = "bf16", group = 128 : i64, input = @x, k = 1024 : i64, n = [256], outputs = [@y], weights = ["w"]}
  }
}
)mlir";
  mlir::OwningOpRef<mlir::ModuleOp> m = mlir::parseSourceString<mlir::ModuleOp>(text, c.ctx.get());
  ASSERT_TRUE(m);
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*m)));
  TaskCutContext ctx;
  ctx.threads = 256;
  std::map<std::string, std::vector<TaskCut>> cuts;
  m->walk([&](TaskOpInterface t) {
    if (t.getKind() != TaskKind::W4A16Gemv)
      return;
    mlir::FailureOr<std::vector<TaskCut>> r = t.getLegalCuts(ctx);
    ASSERT_TRUE(mlir::succeeded(r)) << t.getName().str();
    cuts[t.getName().str()] = *r;
  });
  auto arg = [](const TaskCut &cut, const std::string &name) {
    for (const auto &[n, v] : cut.intArgs)
      if (n == name)
        return v;
    return int64_t(-1);
  };
  std::set<std::pair<int64_t, int64_t>> sum, store;
  for (const TaskCut &cut : cuts["sum"]) {
    const int64_t tn = arg(cut, "tn"), ks = arg(cut, "ksplit");
    sum.insert({tn, ks});
    EXPECT_EQ(cut.count, (256 / tn) * ks);
    EXPECT_EQ(cut.partition, ks > 1 ? Partition::SplitK : Partition::Cols);
    EXPECT_EQ((1024 / ks) % 128, 0) << "split-K slices are whole groups";
    // K/ks rows x tn columns of nibbles, with their groups' scales and zeros.
    EXPECT_EQ(cut.bytesPerTask, 1024 / ks * tn / 2 + 2 * (1024 / ks / 128) * tn * 2);
  }
  for (const TaskCut &cut : cuts["store"])
    store.insert({arg(cut, "tn"), arg(cut, "ksplit")});
  const std::set<std::pair<int64_t, int64_t>> stored = {{128, 1}, {64, 1}, {32, 1}, {16, 1}};
  EXPECT_EQ(store, stored) << "a bf16 output is cut by columns only";
  for (int64_t tn : {128, 64, 32, 16})
    for (int64_t ks : {1, 2, 4, 8})
      EXPECT_TRUE(sum.count({tn, ks})) << "tn " << tn << " ksplit " << ks;
  EXPECT_FALSE(sum.count({128, 16})) << "a 64-row slice is half a group";
}

// The every-block norm and opaque tasks have no cut: asking is a located
// error naming the kind.
TEST(TaskOps, NormAndOpaqueHaveNoCuts) {
  Ctx c;
  const char *text = R"mlir(
schedule.kernel @k attributes {threads = 256 : i64} {
  schedule.weight @n {dtype = "bf16", shape = array<i64: 256>}
  schedule.buffer @x {dtype = "bf16", shape = array<i64: 256>, space = "io"}
  schedule.phase "p" {
    schedule.residual_rmsnorm "norm" {partition = #schedule.partition<every_block>, base = @x, weight = "n", dim = 256 : i64, eps = 1.0e-06 : f64}
    schedule.opaque "other" {count = 2 : i64}
  }
}
)mlir";
  mlir::OwningOpRef<mlir::ModuleOp> m = mlir::parseSourceString<mlir::ModuleOp>(text, c.ctx.get());
  ASSERT_TRUE(m);
  std::vector<std::string> errors;
  mlir::ScopedDiagnosticHandler h(c.ctx.get(), [&](mlir::Diagnostic &d) {
    errors.push_back(d.str());
    return mlir::success();
  });
  m->walk([&](TaskOpInterface t) { EXPECT_TRUE(mlir::failed(t.getLegalCuts(TaskCutContext{}))); });
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].find("no partitioning rule for kind 'residual_rmsnorm'"), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("no partitioning rule for kind 'opaque'"), std::string::npos)
      << errors[1];
}
