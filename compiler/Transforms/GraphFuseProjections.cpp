//===- GraphFuseProjections.cpp - Group sibling projections ---------------===//
//
// Sibling projections of one input (KDA q/k/v/g and beta, MLA q_proj and
// kv_a) become one group: phase formation emits them as the tasks of one
// phase sharing the input in shared memory, tiles ordered by consumer unit.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"

namespace mk::schedule {
#define GEN_PASS_DEF_GRAPHFUSEPROJECTIONS
#include "Transforms/Passes.h.inc"
} // namespace mk::schedule

using namespace mlir;
using namespace mk;

namespace {
struct GraphFuseProjectionsPass
    : schedule::impl::GraphFuseProjectionsBase<GraphFuseProjectionsPass> {
  void runOnOperation() override {
    llvm::MapVector<Value, SmallVector<Operation *>> byInput;
    getOperation().walk([&](Operation *op) {
      if (auto l = dyn_cast<graph::LinearW4A16Op>(op))
        byInput[l.getInput()].push_back(op);
      else if (auto l = dyn_cast<graph::LinearBF16Op>(op))
        byInput[l.getInput()].push_back(op);
    });
    for (auto &[input, ops] : byInput) {
      // A group needs at least one W4A16 member and two members in all.
      if (ops.size() < 2 || !llvm::any_of(ops, [](Operation *o) {
            return isa<graph::LinearW4A16Op>(o);
          }))
        continue;
      std::string name;
      for (Operation *o : ops)
        if (auto l = dyn_cast<graph::LinearW4A16Op>(o)) {
          name = (l.getWeight() + ".group").str();
          break;
        }
      auto attr = StringAttr::get(&getContext(), name);
      for (Operation *o : ops)
        o->setAttr(schedule::kFusionGroupAttr, attr);
    }
  }
};
} // namespace
