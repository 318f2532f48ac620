//===- ScheduleInterfaces.td - Interfaces of the schedule dialect -*- tablegen -*-===//
//
// TaskOpInterface: what every task op (one op per task kind,
// ScheduleOps.td) answers, so that the passes and the emitter handle any
// task through one handle.
//
//===----------------------------------------------------------------------===//

#ifndef MK_SCHEDULE_INTERFACES_TD
#define MK_SCHEDULE_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Schedule_TaskOpInterface : OpInterface<"TaskOpInterface"> {
  let cppNamespace = "::mk::schedule";
  let description = [{
    A task: `count` instances of one device template, spread over the
    grid's blocks within a phase. Every task op carries the same
    attributes (ScheduleOps.td, `Schedule_TaskBase`): its `name`, `count`,
    the graph `op` it came from, how its work is `partition`ed, the `bytes`
    all its instances stream, the buffers no argument names (`reads`,
    `writes`, `accumulates`), `cut_blocks` and the unit its consumers wait
    on (`unit`, `grain`, `grain_per`, `grain_span`). Its template
    parameters (its arguments) are attributes its kind's op declares, each
    typed (ScheduleOps.td) and listed in the kind's registry entry with when
    it is required and how the task accesses the buffer it names
    (TaskKinds.h). The kind (`getKind`) is the op's own:
    `schedule.w4a16_gemv` is a W4A16Gemv task.
  }];
  let methods = [
    InterfaceMethod<"The task's kind: the device template its instances call.",
      "::mk::schedule::TaskKind", "getKind">,
    InterfaceMethod<[{
        The ways the task's work may be cut into instances that its kind's
        templates accept, each with its cost in bytes streamed and the
        arguments it sets (TaskCuts.h); an error at the task if there is
        none. Which one a kernel takes is schedule-partition-work's choice.
        Every-block tasks (the norm) are not cut.
      }],
      "::mlir::FailureOr<std::vector<::mk::schedule::TaskCut>>", "getLegalCuts",
      (ins "const ::mk::schedule::TaskCutContext &":$ctx)>,
    InterfaceMethod<[{
        The buffers a wait of the task may guard and still sit in its
        prologue, after the task has asked for what does not depend on them
        (its first weights or cache rows): the buffers the kind's waiting
        template stages after its wait. Empty (the default) for a kind
        without such a template: its waits stay before the task.
        schedule-prologue-waits marks waits by it; the kernel verifier
        refuses a prologue wait that guards anything else.
      }],
      "::llvm::SmallVector<::llvm::StringRef>", "getPrologueGuardedBuffers", (ins), [{}],
      [{ return {}; }]>,
    InterfaceMethod<"The task's name (unique in its kernel).",
      "::llvm::StringRef", "getName", (ins), [{ return $_op.getName(); }]>,
    InterfaceMethod<"Instances of the task.",
      "int64_t", "getCount", (ins), [{ return (int64_t)$_op.getCount(); }]>,
    InterfaceMethod<"", "void", "setCount", (ins "int64_t":$count),
      [{ $_op.setCount((uint64_t)count); }]>,
    InterfaceMethod<"The graph op the task implements (\"\" if none).",
      "::llvm::StringRef", "getOp", (ins), [{ return $_op.getOp(); }]>,
    InterfaceMethod<"How the op's work is cut (before schedule-partition-work: only the "
                    "every-block and zeroing tasks').",
      "std::optional<::mk::schedule::Partition>", "getPartition", (ins),
      [{ return $_op.getPartition(); }]>,
    InterfaceMethod<"", "void", "setPartition", (ins "::mk::schedule::Partition":$partition),
      [{ $_op.setPartition(partition); }]>,
    InterfaceMethod<"Bytes all instances stream from memory together.",
      "int64_t", "getBytes", (ins), [{ return (int64_t)$_op.getBytes(); }]>,
    InterfaceMethod<"", "void", "setBytes", (ins "int64_t":$bytes),
      [{ $_op.setBytes((uint64_t)bytes); }]>,
    InterfaceMethod<"Buffers the task reads that no argument names.",
      "::mlir::ArrayAttr", "getReads", (ins), [{ return $_op.getReads(); }]>,
    InterfaceMethod<"", "void", "setReadsAttr", (ins "::mlir::ArrayAttr":$refs),
      [{ $_op.setReadsAttr(refs); }]>,
    InterfaceMethod<"Buffers the task writes that no argument names.",
      "::mlir::ArrayAttr", "getWrites", (ins), [{ return $_op.getWrites(); }]>,
    InterfaceMethod<"", "void", "setWritesAttr", (ins "::mlir::ArrayAttr":$refs),
      [{ $_op.setWritesAttr(refs); }]>,
    InterfaceMethod<"Buffers the task accumulates into that no argument names.",
      "::mlir::ArrayAttr", "getAccumulates", (ins), [{ return $_op.getAccumulates(); }]>,
    InterfaceMethod<"", "void", "setAccumulatesAttr", (ins "::mlir::ArrayAttr":$refs),
      [{ $_op.setAccumulatesAttr(refs); }]>,
    InterfaceMethod<"The blocks the task's cut was chosen for, if balanced into a phase's idle ones.",
      "std::optional<int64_t>", "getCutBlocks", (ins), [{
        if (std::optional<uint64_t> v = $_op.getCutBlocks())
          return (int64_t)*v;
        return std::nullopt;
      }]>,
    InterfaceMethod<"", "void", "setCutBlocks", (ins "int64_t":$blocks),
      [{ $_op.setCutBlocks((uint64_t)blocks); }]>,
    InterfaceMethod<"", "void", "removeCutBlocks", (ins),
      [{ $_op.removeCutBlocksAttr(); }]>,
  ];
  let extraClassDeclaration = [{
    bool isEveryBlock() { return getPartition() == ::mk::schedule::Partition::EveryBlock; }
    /// The registered kind (TaskKinds.h), or none for an opaque task.
    std::optional<::mk::schedule::TaskKind> getTaskKind();
    /// Argument `name` (an attribute the kind's op declares, or one all
    /// tasks have); null when absent.
    ::mlir::Attribute getArg(::llvm::StringRef name);
    /// Sets argument `name` (removes it when `value` is null).
    void setArg(::llvm::StringRef name, ::mlir::Attribute value);
    /// The arguments the task carries, by name: its kind's registry
    /// entry's that are present; an opaque task's `args` dictionary.
    ::mlir::DictionaryAttr getArgDictionary();
    /// Integer argument `name`, or `dflt` when absent.
    int64_t getIntArg(::llvm::StringRef name, int64_t dflt = 0);
    /// Floating-point argument `name`, or `dflt` when absent.
    double getFloatArg(::llvm::StringRef name, double dflt = 0.0);
    /// String argument `name`, or the name a symbol argument (a buffer)
    /// refers to; "" when absent.
    ::llvm::StringRef getStrArg(::llvm::StringRef name);
    /// Array arguments (empty when absent).
    ::llvm::SmallVector<int64_t> getIntArrayArg(::llvm::StringRef name);
    ::llvm::SmallVector<std::string> getStrArrayArg(::llvm::StringRef name);
  }];
}

#endif // MK_SCHEDULE_INTERFACES_TD
