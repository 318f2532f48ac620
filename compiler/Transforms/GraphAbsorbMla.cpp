//===- GraphAbsorbMla.cpp - Absorb W_kv_b into MLA query and output -------===//
//
// The materialized form computes c_kv @ W_kv_b for every cache row: L times
// the weight's work and an [L, Hm*(nope+v)] intermediate. Absorbed, the key
// half multiplies the query once (q_abs = W_k q_nope, scored directly
// against latent rows) and the value half multiplies the attention-weighted
// latent once per head. The decision is recorded on the op; phase formation
// lowers absorbed attention to q-absorb, chunked latent attention and
// combine + W_v tasks.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"

namespace mk::schedule {
#define GEN_PASS_DEF_GRAPHABSORBMLA
#include "Transforms/Passes.h.inc"
} // namespace mk::schedule

using namespace mlir;
using namespace mk;

namespace {
struct GraphAbsorbMlaPass
    : schedule::impl::GraphAbsorbMlaBase<GraphAbsorbMlaPass> {
  void runOnOperation() override {
    auto module = getOperation();
    SymbolTableCollection symbols; // hashed once, not scanned per lookup
    WalkResult r = module.walk([&](graph::MlaAttentionOp op) {
      auto w = symbols.lookupNearestSymbolFrom<graph::QuantizedWeightOp>(op, op.getKvBAttr());
      if (!w) {
        op.emitOpError("kv_b ") << op.getKvBAttr()
                                << " is not a graph.quantized_weight";
        return WalkResult::interrupt();
      }
      int64_t n = op.getHeads() * (op.getQkNope() + op.getVHead());
      if (w.getOutDim() != n) {
        op.emitOpError("kv_b has ")
            << w.getOutDim() << " columns, absorption needs heads*(qk_nope+"
            << "v_head) = " << n;
        return WalkResult::interrupt();
      }
      op->setAttr(schedule::kAbsorbedAttr, UnitAttr::get(&getContext()));
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
