//===- ScheduleDialect.cpp - The schedule dialect -------------------------===//

#include "mk/Dialect/Schedule/ScheduleDialect.h"
#include "mk/Dialect/Schedule/ScheduleOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mk::schedule;

#include "mk/Dialect/Schedule/ScheduleDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "mk/Dialect/Schedule/ScheduleAttrs.cpp.inc"

void ScheduleDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "mk/Dialect/Schedule/ScheduleAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "mk/Dialect/Schedule/ScheduleOps.cpp.inc"
      >();
}

void mk::schedule::registerScheduleDialect(DialectRegistry &registry) {
  registry.insert<ScheduleDialect>();
}
