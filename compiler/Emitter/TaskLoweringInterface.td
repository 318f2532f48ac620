//===- TaskLoweringInterface.td - A task op's CUDA lowering -*- tablegen -*-===//
//
// How the CUDA emitter lowers one instance of a schedule task op: the op
// answers, through this interface, instead of the emitter switching on its
// kind. The emitter attaches an external model to each task op it can lower
// (registerTaskLoweringModels, TaskLowering.cpp), so the schedule dialect
// stays free of CUDA; a task op without one is refused by name.
//
//===----------------------------------------------------------------------===//

#ifndef MK_EMITTER_TASKLOWERINGINTERFACE
#define MK_EMITTER_TASKLOWERINGINTERFACE

include "mlir/IR/OpBase.td"

def TaskCudaLowering : OpInterface<"TaskCudaLowering"> {
  let cppNamespace = "::mk::emitter";
  let description = [{
    Writes the CUDA of one instance `i` of a task (inside its phase's
    dispatch on the task index), calling the task's device template from
    templates/ with the partition's tile sizes and the buffers' addresses;
    registers with the emitter the work area (shared memory floats) and the
    compile-time checks (`static_assert`s on the templates' shared memory
    functions) that call needs. `group` is the quantization group of the
    W4A16 weights the task reads (0 if none).
  }];
  let methods = [
    InterfaceMethod<"Writes the instance's CUDA to `os`; a located error if "
                    "the task's arguments cannot be lowered.",
      "::mlir::LogicalResult", "emitInstance",
      (ins "::mk::emitter::detail::Emitter &":$emitter, "int64_t":$group,
           "::llvm::raw_ostream &":$os)>,
  ];
}

#endif // MK_EMITTER_TASKLOWERINGINTERFACE
