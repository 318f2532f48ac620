//===- InitAll.h - Register every dialect, pass and stage -------*- C++ -*-===//
//
// Implemented by a file generated at configure time (compiler/Pipeline/
// InitAll.cpp.in) that calls the hooks each component announced with
// mk_add_compiler_component in CMake: a new component needs no edit here.
//
//===----------------------------------------------------------------------===//

#ifndef MK_PIPELINE_INITALL_H
#define MK_PIPELINE_INITALL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mk {

/// Every dialect the compiler uses (graph, func, and each component's).
void registerAllDialects(mlir::DialectRegistry &registry);

/// Every pass, in MLIR's global pass registry (for mk-opt and
/// --pass-pipeline). Idempotent.
void registerAllPasses();

/// Every pipeline stage, in pipeline order (see PipelineStages.h).
/// Idempotent.
void registerAllPipelineStages();

} // namespace mk

#endif // MK_PIPELINE_INITALL_H
