//===- ScheduleDialect.cpp - The schedule dialect -------------------------===//

#include "mk/Dialect/Schedule/ScheduleDialect.h"
#include "mk/Dialect/Schedule/ScheduleOps.h"

#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mk::schedule;

#include "mk/Dialect/Schedule/ScheduleDialect.cpp.inc"

void ScheduleDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "mk/Dialect/Schedule/ScheduleOps.cpp.inc"
      >();
}

void mk::schedule::registerScheduleDialect(DialectRegistry &registry) {
  registry.insert<ScheduleDialect>();
}
