//===- GraphDialect.td - The graph dialect -----------------*- tablegen -*-===//
//
// A decode block as tensor-level data flow: what is computed, not when or
// where. Weights and decode state are module-level symbols named with the
// spec's state-dict names; compute ops refer to weights by symbol and thread
// state explicitly as SSA values (old state in, new state out).
//
//===----------------------------------------------------------------------===//

#ifndef MK_GRAPH_DIALECT_TD
#define MK_GRAPH_DIALECT_TD

include "mlir/IR/OpBase.td"

def Graph_Dialect : Dialect {
  let name = "graph";
  let cppNamespace = "::mk::graph";
  let summary = "Tensor-level data flow of one decode step of a model block";
  let description = [{
    The graph dialect describes one decode step (batch 1, one token) of a
    hybrid linear-attention block such as Kimi-Linear. Parameters are declared
    once per module with `graph.weight` / `graph.quantized_weight`, decode state
    with `graph.state`; all use the spec's state-dict names as symbol names.

    A `func.func` holds the step. Its state arguments and results carry the
    `graph.state = @"state.i.x"` attribute that ties them to their `graph.state`
    symbol; this dialect verifies that the symbol exists and the types agree.

    The ops have the exact (materialized) semantics of the workload spec,
    including where values are rounded to bf16; later passes are free to fuse
    and re-associate only where the spec allows it.

    `graph.capture = "q"` on an op names its result for differential
    debugging (docs/kernel-abi.md's capture names, within its layer; on
    `graph.moe_router`, its logits before the top-k): the
    frontend, which knows what each op computes, sets it; phase formation
    carries it onto the task that computes the value (`captures`), where a
    `--debug-capture` kernel finds it.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Name of the argument/result attribute that ties a function's state
    /// argument or result to its `graph.state` symbol.
    static constexpr ::llvm::StringLiteral getStateAttrName() {
      return ::llvm::StringLiteral("graph.state");
    }
    /// Name of the op attribute that names its result for debug captures.
    static constexpr ::llvm::StringLiteral getCaptureAttrName() {
      return ::llvm::StringLiteral("graph.capture");
    }
  }];
}

class Graph_Op<string mnemonic, list<Trait> traits = []>
    : Op<Graph_Dialect, mnemonic, traits>;

#endif // MK_GRAPH_DIALECT_TD
