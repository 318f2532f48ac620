//===- ScheduleDialect.cpp - The schedule dialect -------------------------===//

#include "mk/Dialect/Schedule/ScheduleDialect.h"
#include "mk/Dialect/Schedule/ScheduleOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mk::schedule;

#include "mk/Dialect/Schedule/ScheduleDialect.cpp.inc"

void ScheduleDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "mk/Dialect/Schedule/ScheduleOps.cpp.inc"
      >();
  registerAttributes(); // ScheduleAttrs.cpp
}

/// The parse hook of an op name the dialect does not register.
static ParseResult parseUnknownOp(OpAsmParser &parser, OperationState &state) {
  std::string kinds;
  for (const TaskKindInfo &k : taskKinds())
    kinds += (kinds.empty() ? "" : ", ") + taskKindName(k.kind).str();
  (void)state;
  return parser.emitError(parser.getNameLoc())
         << "is no op of the schedule dialect; a task's op is its kind, one of: " << kinds
         << ", opaque";
}

std::optional<Dialect::ParseOpHook>
ScheduleDialect::getParseOperationHook(StringRef opName) const {
  if (std::optional<Dialect::ParseOpHook> hook = Dialect::getParseOperationHook(opName))
    return hook;
  return ParseOpHook(parseUnknownOp);
}

void mk::schedule::registerScheduleDialect(DialectRegistry &registry) {
  registry.insert<ScheduleDialect>();
}
