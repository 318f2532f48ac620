//===- GraphDialect.cpp - The graph dialect -------------------------------===//
//
// Dialect registration and the verifier of the `graph.state` argument/result
// attribute that ties a step function's state values to their symbols.
//
//===----------------------------------------------------------------------===//

#include "mk/Dialect/Graph/GraphDialect.h"
#include "mk/Dialect/Graph/GraphOps.h"

#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mk::graph;

#include "mk/Dialect/Graph/GraphDialect.cpp.inc"

void GraphDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "mk/Dialect/Graph/GraphOps.cpp.inc"
      >();
}

void mk::graph::registerGraphDialect(DialectRegistry &registry) {
  registry.insert<GraphDialect, func::FuncDialect>();
}

/// Checks one `graph.state = @sym` attribute on a function argument or result
/// (`what` names it in errors) whose value has type `valueType`.
static LogicalResult verifyStateTie(Operation *op, NamedAttribute attr,
                                    Type valueType, const Twine &what) {
  if (attr.getName() != GraphDialect::getStateAttrName())
    return op->emitError() << "unknown attribute '" << attr.getName()
                           << "' on " << what;
  auto ref = dyn_cast<FlatSymbolRefAttr>(attr.getValue());
  if (!ref)
    return op->emitError() << "'" << GraphDialect::getStateAttrName()
                           << "' on " << what
                           << " must be a flat symbol reference, got "
                           << attr.getValue();
  Operation *sym = SymbolTable::lookupNearestSymbolFrom(op, ref.getAttr());
  if (!sym)
    return op->emitError() << what << " is tied to undefined state " << ref;
  auto state = dyn_cast<StateOp>(sym);
  if (!state)
    return op->emitError() << what << " is tied to " << ref << ", a '"
                           << sym->getName() << "', not a 'graph.state'";
  if (valueType && valueType != state.getType())
    return op->emitError() << what << " has type " << valueType
                           << " but state " << ref << " is "
                           << state.getType();
  return success();
}

LogicalResult GraphDialect::verifyRegionArgAttribute(Operation *op,
                                                     unsigned regionIndex,
                                                     unsigned argIndex,
                                                     NamedAttribute attr) {
  Type type;
  if (auto fn = dyn_cast<FunctionOpInterface>(op))
    type = fn.getArgumentTypes()[argIndex];
  return verifyStateTie(op, attr, type,
                        "argument #" + Twine(argIndex));
}

LogicalResult GraphDialect::verifyRegionResultAttribute(Operation *op,
                                                        unsigned regionIndex,
                                                        unsigned resultIndex,
                                                        NamedAttribute attr) {
  Type type;
  if (auto fn = dyn_cast<FunctionOpInterface>(op))
    type = fn.getResultTypes()[resultIndex];
  return verifyStateTie(op, attr, type, "result #" + Twine(resultIndex));
}
