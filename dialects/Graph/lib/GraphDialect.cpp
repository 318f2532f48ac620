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
                                    Type valueType, const Twine &what,
                                    const llvm::StringMap<Operation *> *symbols = nullptr,
                                    bool formOnly = false) {
  if (attr.getName() != GraphDialect::getStateAttrName())
    return op->emitError() << "unknown attribute '" << attr.getName()
                           << "' on " << what;
  auto ref = dyn_cast<FlatSymbolRefAttr>(attr.getValue());
  if (!ref)
    return op->emitError() << "'" << GraphDialect::getStateAttrName()
                           << "' on " << what
                           << " must be a flat symbol reference, got "
                           << attr.getValue();
  if (formOnly)
    return success();
  Operation *sym = nullptr;
  if (symbols)
    sym = symbols->lookup(ref.getValue());
  else
    sym = SymbolTable::lookupNearestSymbolFrom(op, ref.getAttr());
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

/// Every state tie of function `fn` (its arguments' and results'), resolved
/// against one map of its symbol table's symbols: a lookup per tie through
/// the module scans it, quadratic in the layer count.
static LogicalResult verifyStateTies(FunctionOpInterface fn) {
  llvm::StringMap<Operation *> symbols;
  if (Operation *table = SymbolTable::getNearestSymbolTable(fn->getParentOp()))
    for (Region &r : table->getRegions())
      for (Block &b : r)
        for (Operation &o : b)
          if (auto name = o.getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName()))
            symbols.try_emplace(name.getValue(), &o);
  auto check = [&](DictionaryAttr attrs, Type type, const Twine &what) -> LogicalResult {
    if (!attrs)
      return success();
    for (NamedAttribute attr : attrs)
      if (attr.getName() == GraphDialect::getStateAttrName())
        if (failed(verifyStateTie(fn, attr, type, what, &symbols)))
          return failure();
    return success();
  };
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i)
    if (failed(check(fn.getArgAttrDict(i), fn.getArgumentTypes()[i], "argument #" + Twine(i))))
      return failure();
  for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i)
    if (failed(check(fn.getResultAttrDict(i), fn.getResultTypes()[i], "result #" + Twine(i))))
      return failure();
  return success();
}

/// Whether `dict` ties a value to a state.
static bool tied(DictionaryAttr dict) {
  return dict && dict.get(GraphDialect::getStateAttrName());
}

// A function's ties are resolved once, at its first tied argument (or, with
// none, its first tied result); each attribute's own call checks its form.
LogicalResult GraphDialect::verifyRegionArgAttribute(Operation *op,
                                                     unsigned regionIndex,
                                                     unsigned argIndex,
                                                     NamedAttribute attr) {
  auto fn = dyn_cast<FunctionOpInterface>(op);
  if (!fn)
    return verifyStateTie(op, attr, Type(), "argument #" + Twine(argIndex));
  if (failed(verifyStateTie(op, attr, Type(), "argument #" + Twine(argIndex), nullptr,
                            /*formOnly=*/true)))
    return failure();
  for (unsigned i = 0; i < argIndex; ++i)
    if (tied(fn.getArgAttrDict(i)))
      return success();
  return verifyStateTies(fn);
}

LogicalResult GraphDialect::verifyRegionResultAttribute(Operation *op,
                                                        unsigned regionIndex,
                                                        unsigned resultIndex,
                                                        NamedAttribute attr) {
  auto fn = dyn_cast<FunctionOpInterface>(op);
  if (!fn)
    return verifyStateTie(op, attr, Type(), "result #" + Twine(resultIndex));
  if (failed(verifyStateTie(op, attr, Type(), "result #" + Twine(resultIndex), nullptr,
                            /*formOnly=*/true)))
    return failure();
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i)
    if (tied(fn.getArgAttrDict(i)))
      return success();
  for (unsigned i = 0; i < resultIndex; ++i)
    if (tied(fn.getResultAttrDict(i)))
      return success();
  return verifyStateTies(fn);
}
