//===- Passes.h - Graph -> schedule passes ----------------------*- C++ -*-===//

#ifndef MK_TRANSFORMS_PASSES_H
#define MK_TRANSFORMS_PASSES_H

#include "mk/Dialect/Graph/GraphOps.h"
#include "mk/Dialect/Schedule/ScheduleOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mk::schedule {

/// Discardable attributes the graph-level passes leave for phase formation.
inline constexpr llvm::StringLiteral kFusionGroupAttr = "schedule.fusion_group";
inline constexpr llvm::StringLiteral kAbsorbedAttr = "schedule.absorbed";

#define GEN_PASS_DECL
#include "Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "Transforms/Passes.h.inc"

/// Adds the passes of the "schedule" stage in order.
void buildSchedulePipeline(mlir::OpPassManager &pm);

/// Writes the schedule summary of every kernel in `module` to `os`.
void printScheduleSummary(mlir::ModuleOp module, llvm::raw_ostream &os);
/// The same as a string (the header of the schedule and cuda stages' IR).
std::string scheduleSummary(mlir::ModuleOp module);

/// Component hooks (compiler/cmake/MKCompiler.cmake).
void registerScheduleTransformsPasses();
void registerSchedulePipelineStages();

} // namespace mk::schedule

#endif // MK_TRANSFORMS_PASSES_H
