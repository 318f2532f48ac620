//===- GraphOps.h - Ops of the graph dialect ----------------------*- C++ -*-===//

#ifndef MK_DIALECT_GRAPH_GRAPHOPS_H
#define MK_DIALECT_GRAPH_GRAPHOPS_H

#include "mk/Dialect/Graph/GraphDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "mk/Dialect/Graph/GraphOps.h.inc"

#endif // MK_DIALECT_GRAPH_GRAPHOPS_H
