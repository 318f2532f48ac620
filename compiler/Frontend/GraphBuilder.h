//===- GraphBuilder.h - Block configuration -> graph IR ---------*- C++ -*-===//
//
// The frontend: builds the graph-dialect module of one decode step from a
// BlockConfig (normally read from a block spec with mk::loadBlockSpecFile).
//
//===----------------------------------------------------------------------===//

#ifndef MK_FRONTEND_GRAPHBUILDER_H
#define MK_FRONTEND_GRAPHBUILDER_H

#include "mk/BlockConfig.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace mk {

/// Name of the step function the frontend emits.
inline constexpr llvm::StringLiteral kDecodeStepFuncName = "decode_step";

/// Builds `module @<cfg.name>` holding:
///  - one `graph.weight` / `graph.quantized_weight` per parameter of
///    mk::parameterTensors(cfg) (a quantized linear's w_q/scales/zeros become
///    one symbol named by their prefix), in that order;
///  - one `graph.state` per tensor of mk::stateTensors(cfg), caches with a
///    dynamic row count;
///  - `func.func @decode_step(%hidden, %ctx_len: i32, %states...) ->
///    (%hidden_out, %new_states...)`, each state argument and result tied to
///    its symbol by a `graph.state` attribute, states in catalogue order.
/// Returns null and sets `error` if `cfg` does not validate. The graph and
/// func dialects must be loadable in `ctx`.
mlir::OwningOpRef<mlir::ModuleOp> buildGraphModule(mlir::MLIRContext &ctx,
                                                   const BlockConfig &cfg,
                                                   std::string *error = nullptr);

/// The STAGE_HOOKS function of the frontend: registers the "graph" stage.
void registerFrontendPipelineStages();

} // namespace mk

#endif // MK_FRONTEND_GRAPHBUILDER_H
