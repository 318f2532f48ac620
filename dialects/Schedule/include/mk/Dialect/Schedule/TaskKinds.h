//===- TaskKinds.h - The schedule dialect's task kinds ------------*- C++ -*-===//
//
// Every task op is of one kind (`schedule.<kind>`): the device template its
// instances call.
// Each kind's op declares its arguments as typed attributes (ScheduleOps.td);
// this registry says, per kind, when each is required and how the task
// accesses the buffer a buffer argument names (the two list the same names:
// TaskOps.EveryKindDeclaresItsRegistryArguments). The op's verifier checks
// the types, the task verifier the stages (the arguments every pass may read
// are required from the moment the task exists; the ones
// schedule-partition-work adds once the emitter lowers the task), the
// kernel's verifier that the buffers and weights they name are the kernel's.
// Adding a task kind starts here (docs/pipeline.md, "Adding a task kind").
//
//===----------------------------------------------------------------------===//

#ifndef MK_DIALECT_SCHEDULE_TASKKINDS_H
#define MK_DIALECT_SCHEDULE_TASKKINDS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace mk::schedule {

class TaskOpInterface;

} // namespace mk::schedule

// enum class TaskKind, its keywords (stringifyTaskKind, symbolizeTaskKind):
// ScheduleAttrs.td.
#include "mk/Dialect/Schedule/ScheduleEnums.h.inc"

namespace mk::schedule {

/// The type of one task argument.
enum class TaskArgType {
  Pos,       ///< integer in 1..kMaxTaskArg
  NonNeg,    ///< integer in 0..kMaxTaskArg
  Float,     ///< floating-point number
  Buffer,    ///< a buffer of the kernel, as a symbol reference (@name)
  OptBuffer, ///< the same, where present (absent: none)
  Weight,    ///< non-empty string naming a weight of the kernel (a
             ///< schedule.weight, or the prefix of a W4A16 weight's parts)
  Ints,      ///< non-empty array of integers in 1..kMaxTaskArg
  Weights,   ///< non-empty array of weight names
  Buffers,   ///< non-empty array of buffer symbol references
  Captures,  ///< where present, an array of debug-capture names of the
             ///< values the task computes (its outputs, in order; "" for
             ///< none): what the frontend named them (graph.capture)
  Epilogue,  ///< where present, how a GEMV's sums leave the tile: "bf16"
             ///< (rounded and stored; also when absent) or "atomic_f32"
             ///< (added to fp32 sums: split-K)
  Bf16Steps, ///< where present, a moe_down's bf16 steps: "hidden" (gate, up,
             ///< silu(gate) and their product rounded) or "hidden_and_output"
             ///< (and the expert's whole output, before its weight: the task
             ///< then takes the whole of its input, no split-K)
  Flag,      ///< a unit attribute: present or absent
};

/// When an argument is required: from the task's creation
/// (schedule-form-phases) on, once schedule-partition-work has cut it, or
/// never (`Optional`: set by an optional rewrite such as
/// schedule-fuse-kda-o-proj, or only where the model has it, such as a
/// sigmoid router's bias; checked when present).
enum class TaskArgStage { Formed, Partitioned, Optional };

/// How a task accesses the buffer a buffer argument names. The task's
/// accesses are these (its `reads`, `writes` and `accumulates` attributes
/// add only what no argument names), so that a buffer is named once.
enum class TaskAccess {
  None,       ///< not a buffer argument
  Read,       ///< read
  Write,      ///< written whole
  ReadWrite,  ///< read, then written (a decode state, a cache row appended)
  Accumulate, ///< fp32 sums added to (zeroed by an earlier task)
  Output,     ///< written, or accumulated into when the task's `epilogue`
              ///< is "atomic_f32" (a GEMV's outputs)
};

struct TaskArgSpec {
  llvm::StringLiteral name;
  TaskArgType type;
  TaskArgStage stage = TaskArgStage::Formed;
  /// Only required of a routed expert task (one whose `logits` is set).
  bool routedOnly = false;
  TaskAccess access = TaskAccess::None;
};

struct TaskKindInfo {
  TaskKind kind;
  llvm::ArrayRef<TaskArgSpec> args;
  /// Arguments a family of kinds shares (the expert kinds'), after `args`.
  llvm::ArrayRef<TaskArgSpec> familyArgs = {};
};

/// The kernel's index arithmetic is 32-bit: integer arguments stay below.
constexpr int64_t kMaxTaskArg = 2147483647;

/// The most rows of silu(gate) * up a `moe_down` task stages in shared
/// memory (fp32: 16 KB). An expert at most this wide is staged whole by
/// each of its tasks; a wider one is cut into split-K slices of at most this
/// many rows (schedule-partition-work), each task staging only its own
/// (the emitter's slice form), so that the work area does not grow with the
/// expert width.
constexpr int64_t kMoeDownMaxStagedRows = 4096;

/// Every kind but `opaque`, with its arguments.
llvm::ArrayRef<TaskKindInfo> taskKinds();
/// The registry entry of `kind`; null for `opaque`.
const TaskKindInfo *lookupTaskKind(TaskKind kind);
/// The keyword of `kind` (how a task prints it).
inline llvm::StringRef taskKindName(TaskKind kind) { return stringifyTaskKind(kind); }
/// The argument specs that apply to task `t` (its kind's, less the routed
/// ones of an unrouted expert task); empty for an unknown kind.
llvm::SmallVector<TaskArgSpec> taskArgSpecs(TaskOpInterface t);

/// The weights `t` reads (the names in its Weight and Weights arguments, in
/// spec order, each once), and whether they are chosen at run time: a
/// routed expert task's weights are indexed by the router's top-k.
llvm::SmallVector<std::string> taskWeights(TaskOpInterface t);
bool readsRoutedWeights(TaskOpInterface t);

/// What task `t` reads, writes and accumulates into (buffer symbol names,
/// each once per list, in argument order): what its buffer arguments name,
/// by their TaskAccess, then its `reads`, `writes` and `accumulates`
/// attributes (an opaque task's only source; for a registered kind, the
/// buffers no argument names).
struct TaskAccesses {
  llvm::SmallVector<llvm::StringRef> reads, writes, accumulates;
};
TaskAccesses taskAccesses(TaskOpInterface t);
/// Only what `t`'s buffer arguments name (the first part of taskAccesses).
TaskAccesses taskArgAccesses(TaskOpInterface t);
/// The first buffer not in `allowed` that `producer` writes or accumulates
/// into and `consumer` reads ("" if none): what a wait of `consumer` on
/// `producer` guards besides `allowed` (a prologue wait may guard only what
/// its task stages after it: schedule-prologue-waits, the kernel verifier).
llvm::StringRef guardedBesides(TaskOpInterface producer, TaskOpInterface consumer,
                               llvm::ArrayRef<llvm::StringRef> allowed);
/// How many of `t`'s waits may run in its prologue: 0 for a kind without
/// such a form (no getPrologueGuardedBuffers), 2 for a W4A16 GEMV staging a
/// gated norm (the gated delta's o and the gate: the emitter runs the two
/// as one mk::BothWaits), else 1.
unsigned maxPrologueWaits(TaskOpInterface t);

/// Arguments `args` of a `kind` task with every buffer argument the kind
/// declares given as a symbol reference (a builder names buffers by string;
/// "" means none and drops the argument): what createTaskOp sets.
mlir::DictionaryAttr withBufferSymbols(mlir::MLIRContext *ctx, TaskKind kind,
                                       mlir::DictionaryAttr args);
/// The names of the arguments `kind` declares, comma-separated (for
/// diagnostics).
std::string describeTaskArgs(TaskKind kind);

/// Checks `t`'s arguments' presence (their types and ranges are the op's
/// own verifier's, the names they resolve to KernelOp's): the Formed ones
/// (a routed expert task's included) must be present, and with `upTo` =
/// Partitioned also the partition's. Emits a located error.
mlir::LogicalResult verifyTaskArgs(TaskOpInterface t, TaskArgStage upTo);

} // namespace mk::schedule

#endif // MK_DIALECT_SCHEDULE_TASKKINDS_H
