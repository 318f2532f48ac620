//===- TaskLoweringInterface.h - A task op's CUDA lowering ------*- C++ -*-===//
//
// The TaskCudaLowering op interface (TaskLoweringInterface.td) and the hook
// that attaches the emitter's models to the schedule dialect's task ops.
//
//===----------------------------------------------------------------------===//

#ifndef MK_EMITTER_TASKLOWERINGINTERFACE_H
#define MK_EMITTER_TASKLOWERINGINTERFACE_H

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/OpDefinition.h"
#include "llvm/Support/raw_ostream.h"

namespace mk::emitter::detail {
class Emitter;
} // namespace mk::emitter::detail

#include "Emitter/TaskLoweringInterface.h.inc"

namespace mk::emitter {
/// Attaches a TaskCudaLowering model to every task op the CUDA emitter
/// lowers (a dialect extension: applied when the schedule dialect loads).
/// Called by mk::registerAllDialects (the emitter's DIALECT_HOOKS).
void registerTaskLoweringModels(mlir::DialectRegistry &registry);
} // namespace mk::emitter

#endif // MK_EMITTER_TASKLOWERINGINTERFACE_H
