//===- GraphDialect.h - The graph dialect -------------------------*- C++ -*-===//
//
// Tensor-level data flow of one decode step. See GraphDialect.td.
//
//===----------------------------------------------------------------------===//

#ifndef MK_DIALECT_GRAPH_GRAPHDIALECT_H
#define MK_DIALECT_GRAPH_GRAPHDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"

#include "mk/Dialect/Graph/GraphDialect.h.inc"

namespace mk {
namespace graph {
/// Adds the graph dialect to `registry` (the hook mkc and mk-opt call).
void registerGraphDialect(mlir::DialectRegistry &registry);
} // namespace graph
} // namespace mk

#endif // MK_DIALECT_GRAPH_GRAPHDIALECT_H
