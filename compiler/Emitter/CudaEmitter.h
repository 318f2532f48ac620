//===- CudaEmitter.h - schedule.kernel -> CUDA + manifest -------*- C++ -*-===//
//
// Writes the one translation unit of a scheduled kernel (phases in order,
// task instances dealt round-robin over gridDim.x, template calls from
// templates/, barriers and counters from grid_sync.cuh) and the manifest the
// runtime binds and launches it with (docs/kernel-abi.md).
//
//===----------------------------------------------------------------------===//

#ifndef MK_EMITTER_CUDAEMITTER_H
#define MK_EMITTER_CUDAEMITTER_H

#include "mk/Dialect/Schedule/ScheduleOps.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mk::emitter {

struct EmittedKernel {
  std::string name;     ///< the extern "C" function
  std::string source;   ///< <name>.cu
  std::string manifest; ///< <name>.manifest.json
  int64_t dynamicSharedBytes = 0;
};

/// Emits `kernel` (a fully planned schedule: partitioned, workspace and
/// counters assigned). Reports problems as diagnostics on the IR.
mlir::LogicalResult emitKernel(schedule::KernelOp kernel, EmittedKernel &out);

/// The single kernel of `module`, emitted.
mlir::LogicalResult emitModule(mlir::ModuleOp module, EmittedKernel &out);

/// STAGE_HOOKS: registers the "cuda" stage.
void registerEmitterPipelineStages();

} // namespace mk::emitter

#endif // MK_EMITTER_CUDAEMITTER_H
