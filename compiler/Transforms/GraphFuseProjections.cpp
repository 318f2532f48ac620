//===- GraphFuseProjections.cpp - Group sibling projections ---------------===//
//
// Sibling projections of one input (KDA q/k/v/g and beta, MLA q_proj and
// kv_a) become one group: phase formation emits them as the tasks of one
// phase sharing the input in shared memory, tiles ordered by consumer unit.
// Bottlenecks (projections read only by other projections: the released
// KDA's f_a and g_a) group among themselves.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"

namespace mk::schedule {
#define GEN_PASS_DEF_GRAPHFUSEPROJECTIONS
#include "Transforms/Passes.h.inc"
} // namespace mk::schedule

using namespace mlir;
using namespace mk;

namespace {
struct GraphFuseProjectionsPass
    : schedule::impl::GraphFuseProjectionsBase<GraphFuseProjectionsPass> {
  void runOnOperation() override;
};

/// The quantization group of a W4A16 linear's weight (0 if unresolved: the
/// graph verifier rejects that).
int64_t groupOf(SymbolTableCollection &symbols, graph::LinearW4A16Op l) {
  auto w = symbols.lookupNearestSymbolFrom<graph::QuantizedWeightOp>(l, l.getWeightAttr());
  return w ? w.getGroup() : 0;
}

void GraphFuseProjectionsPass::runOnOperation() {
  // Grouping is this pass's decision alone: stale marks go.
  getOperation().walk(
      [&](Operation *op) { op->removeAttr(schedule::kFusionGroupAttr); });
  // By input, and apart whether the projection is a bottleneck (every user
  // another projection: the released KDA's f_a / g_a): its consumers need
  // all of it, so it joins no group whose tiles are ordered by head.
  llvm::MapVector<std::pair<Value, unsigned>, SmallVector<Operation *>> byInput;
  auto bottleneck = [](Operation *op) {
    return !op->use_empty() && llvm::all_of(op->getUsers(), [](Operation *u) {
      return isa<graph::LinearW4A16Op, graph::LinearBF16Op>(u);
    });
  };
  getOperation().walk([&](Operation *op) {
    // A projection that feeds a residual add accumulates in fp32 on its
    // own (split-K tiles); phase formation refuses it in a group.
    if (op->hasOneUse() && isa<graph::AddOp>(*op->user_begin()))
      return;
    if (isa<graph::LinearW4A16Op, graph::LinearBF16Op>(op))
      byInput[{op->getOperand(0), unsigned(bottleneck(op))}].push_back(op);
  });
  llvm::StringSet<> names;
  SymbolTableCollection symbols; // hashed once per table, not scanned per lookup
  for (auto &[input, ops] : byInput) {
    // One group per quantization group size of the W4A16 members (a GEMV
    // task reads weights of one group size); bf16 members join the first.
    llvm::MapVector<int64_t, SmallVector<Operation *>> byGroup;
    SmallVector<Operation *> bf16;
    for (Operation *o : ops) {
      if (auto l = dyn_cast<graph::LinearW4A16Op>(o))
        byGroup[groupOf(symbols, l)].push_back(o);
      else
        bf16.push_back(o);
    }
    bool first = true;
    for (auto &[group, members] : byGroup) {
      if (first)
        members.append(bf16.begin(), bf16.end());
      first = false;
      // A group needs two members in all (it has a W4A16 one).
      if (members.size() < 2)
        continue;
      std::string base =
          (cast<graph::LinearW4A16Op>(members.front()).getWeight() + ".group").str();
      std::string name = base;
      for (int i = 1; names.contains(name); ++i)
        name = base + "." + std::to_string(i);
      names.insert(name);
      auto attr = StringAttr::get(&getContext(), name);
      for (Operation *o : members)
        o->setAttr(schedule::kFusionGroupAttr, attr);
    }
  }
}

} // namespace
