//===- ScheduleAttrs.cpp - Attributes of the schedule dialect -------------===//
//
// The dialect's attribute definitions (ScheduleAttrs.td: the partition), in
// a file of their own because of how a sanitizer build links: an attribute
// with storage instantiates LLVM's bump allocator here, and in an
// AddressSanitizer build (-DMK_SANITIZE) an instrumented copy of its slow
// path poisons every new slab, which the MLIR libraries' uninstrumented
// allocations then write into (a use-after-poison in MLIRContext's
// construction, wherever the linker picks this copy). So this file is
// compiled without AddressSanitizer (dialects/Schedule/lib/CMakeLists.txt),
// like the MLIR libraries it allocates with.
//
//===----------------------------------------------------------------------===//

#include "mk/Dialect/Schedule/ScheduleDialect.h"
#include "mk/Dialect/Schedule/ScheduleOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mk::schedule;

#define GET_ATTRDEF_CLASSES
#include "mk/Dialect/Schedule/ScheduleAttrs.cpp.inc"

void ScheduleDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "mk/Dialect/Schedule/ScheduleAttrs.cpp.inc"
      >();
}
