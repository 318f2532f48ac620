//===- ScheduleDialect.h - The schedule dialect -----------------*- C++ -*-===//

#ifndef MK_DIALECT_SCHEDULE_SCHEDULEDIALECT_H
#define MK_DIALECT_SCHEDULE_SCHEDULEDIALECT_H

#include "mlir/IR/Dialect.h"

#include "mk/Dialect/Schedule/ScheduleDialect.h.inc"

namespace mlir {
class DialectRegistry;
}

namespace mk::schedule {
/// Component hook (compiler/cmake/MKCompiler.cmake).
void registerScheduleDialect(mlir::DialectRegistry &registry);
} // namespace mk::schedule

#endif // MK_DIALECT_SCHEDULE_SCHEDULEDIALECT_H
