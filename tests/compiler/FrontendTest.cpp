//===- FrontendTest.cpp - BlockConfig -> graph IR -------------------------===//
//
// Counts the ops the frontend emits per kind for the spec's unit and for the
// tiny specs, and checks that the symbols are exactly the tensor catalogue.
//
//===----------------------------------------------------------------------===//

#include "Frontend/GraphBuilder.h"
#include "Pipeline/InitAll.h"
#include "mk/BlockSpec.h"
#include "mk/Dialect/Graph/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"

#include <gtest/gtest.h>

#include <set>

using namespace mlir;

namespace {

struct Built {
  std::unique_ptr<MLIRContext> ctx;
  OwningOpRef<ModuleOp> module;
  llvm::StringMap<int> counts; // op name -> count
};

Built build(const mk::BlockConfig &cfg) {
  Built b;
  DialectRegistry registry;
  mk::registerAllDialects(registry);
  b.ctx = std::make_unique<MLIRContext>(registry);
  std::string error;
  b.module = mk::buildGraphModule(*b.ctx, cfg, &error);
  EXPECT_TRUE(b.module) << error;
  if (b.module) {
    EXPECT_TRUE(succeeded(verify(*b.module)));
    b.module->walk([&](Operation *op) {
      ++b.counts[op->getName().getStringRef()];
    });
  }
  return b;
}

mk::BlockConfig loadSpec(const std::string &relPath) {
  mk::BlockConfig cfg;
  std::string error;
  EXPECT_TRUE(mk::loadBlockSpecFile(std::string(MK_SOURCE_DIR) + "/" + relPath,
                                    cfg, error))
      << error;
  return cfg;
}

TEST(Frontend, KimiLinearUnitOpCounts) {
  mk::BlockConfig cfg = loadSpec("examples/kimi_linear_w4a16.json");
  Built b = build(cfg);
  ASSERT_TRUE(b.module);
  EXPECT_EQ(b.counts["func.func"], 1);
  EXPECT_EQ(b.counts["graph.kda_gated_delta"], 3);
  EXPECT_EQ(b.counts["graph.kda_short_conv"], 9);
  EXPECT_EQ(b.counts["graph.linear_bf16"], 3);
  EXPECT_EQ(b.counts["graph.mla_attention"], 1);
  EXPECT_EQ(b.counts["graph.mla_cache_append"], 2);
  EXPECT_EQ(b.counts["graph.rope"], 2);
  EXPECT_EQ(b.counts["graph.slice"], 2);
  EXPECT_EQ(b.counts["graph.reshape"], 1);
  EXPECT_EQ(b.counts["graph.moe_router"], 4);
  EXPECT_EQ(b.counts["graph.moe_experts"], 4);
  EXPECT_EQ(b.counts["graph.shared_experts"], 4);
  EXPECT_EQ(b.counts["graph.moe_combine"], 4);
  EXPECT_EQ(b.counts["graph.rmsnorm"], 8);
  EXPECT_EQ(b.counts["graph.add"], 8);
  EXPECT_EQ(b.counts["graph.linear_w4a16"], 3 * 5 + 3);
  EXPECT_EQ(b.counts["graph.quantized_weight"], 3 * 5 + 4 + 4 * 6);
  EXPECT_EQ(b.counts["graph.state"], 3 * 4 + 2);
}

TEST(Frontend, SymbolsAreTheTensorCatalogue) {
  mk::BlockConfig cfg;
  Built b = build(cfg);
  ASSERT_TRUE(b.module);
  // Every parameter tensor is a graph.weight, or the w_q/scales/zeros of a
  // graph.quantized_weight named by its prefix, with the catalogue's shape.
  std::set<std::string> expected, actual;
  for (const mk::TensorDesc &t : mk::parameterTensors(cfg))
    expected.insert(t.name);
  for (auto w : b.module->getOps<mk::graph::WeightOp>()) {
    actual.insert(w.getSymName().str());
    for (const mk::TensorDesc &t : mk::parameterTensors(cfg))
      if (t.name == w.getSymName())
        EXPECT_EQ(w.getTensorType().getShape(), llvm::ArrayRef(t.shape))
            << t.name;
  }
  for (auto q : b.module->getOps<mk::graph::QuantizedWeightOp>()) {
    EXPECT_EQ(q.getGroup(), cfg.group);
    for (const char *field : {".w_q", ".scales", ".zeros"})
      actual.insert(q.getSymName().str() + field);
  }
  EXPECT_EQ(expected, actual);

  std::vector<mk::TensorDesc> states = mk::stateTensors(cfg, -1);
  auto stateOps = llvm::to_vector(b.module->getOps<mk::graph::StateOp>());
  ASSERT_EQ(stateOps.size(), states.size());
  for (size_t i = 0; i < states.size(); ++i)
    EXPECT_EQ(stateOps[i].getSymName(), states[i].name);
}

TEST(Frontend, StepSignatureThreadsState) {
  mk::BlockConfig cfg;
  Built b = build(cfg);
  ASSERT_TRUE(b.module);
  auto fn = b.module->lookupSymbol<func::FuncOp>(mk::kDecodeStepFuncName);
  ASSERT_TRUE(fn);
  size_t nStates = mk::stateTensors(cfg, -1).size();
  ASSERT_EQ(fn.getNumArguments(), 2 + nStates);
  ASSERT_EQ(fn.getNumResults(), 1 + nStates);
  EXPECT_TRUE(fn.getArgumentTypes()[1].isInteger(32)); // ctx_len
  for (size_t i = 0; i < nStates; ++i) {
    auto argTie = fn.getArgAttrOfType<FlatSymbolRefAttr>(
        2 + i, mk::graph::GraphDialect::getStateAttrName());
    auto resTie = fn.getResultAttrOfType<FlatSymbolRefAttr>(
        1 + i, mk::graph::GraphDialect::getStateAttrName());
    ASSERT_TRUE(argTie && resTie);
    EXPECT_EQ(argTie, resTie);
  }
}

TEST(Frontend, TinySpecsGiveValidIR) {
  for (const char *spec :
       {"examples/specs/tiny.json", "examples/specs/tiny_mla_first.json",
        "examples/specs/tiny_no_shared.json", "examples/specs/tiny_dense_first.json"}) {
    SCOPED_TRACE(spec);
    mk::BlockConfig cfg = loadSpec(spec);
    Built b = build(cfg);
    ASSERT_TRUE(b.module);
    int kda = 0, mla = 0;
    for (mk::LayerKind k : cfg.pattern)
      (k == mk::LayerKind::KDA ? kda : mla)++;
    int layers = kda + mla;
    // A dense-FFN layer: one shared_experts op (its SwiGLU), no router.
    const int dense = int(cfg.denseLayers), moe = layers - dense;
    EXPECT_EQ(b.counts["graph.kda_gated_delta"], kda);
    EXPECT_EQ(b.counts["graph.kda_short_conv"], 3 * kda);
    EXPECT_EQ(b.counts["graph.mla_attention"], mla);
    EXPECT_EQ(b.counts["graph.mla_cache_append"], 2 * mla);
    EXPECT_EQ(b.counts["graph.moe_router"], moe);
    EXPECT_EQ(b.counts["graph.moe_experts"], moe);
    EXPECT_EQ(b.counts["graph.shared_experts"], (cfg.nShared > 0 ? moe : 0) + dense);
    EXPECT_EQ(b.counts["graph.moe_combine"], layers);
    EXPECT_EQ(b.counts["graph.rmsnorm"], 2 * layers);
    EXPECT_EQ(b.counts["graph.add"], 2 * layers);
  }
}

TEST(Frontend, InvalidConfigIsAnErrorNotACrash) {
  mk::BlockConfig cfg;
  cfg.group = 100; // 2304 is not a multiple
  DialectRegistry registry;
  mk::registerAllDialects(registry);
  MLIRContext ctx(registry);
  std::string error;
  EXPECT_FALSE(mk::buildGraphModule(ctx, cfg, &error));
  EXPECT_NE(error.find("not divisible by the group size 100"),
            std::string::npos)
      << error;
}

} // namespace
