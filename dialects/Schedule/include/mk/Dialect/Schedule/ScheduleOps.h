//===- ScheduleOps.h - Ops of the schedule dialect --------------*- C++ -*-===//

#ifndef MK_DIALECT_SCHEDULE_SCHEDULEOPS_H
#define MK_DIALECT_SCHEDULE_SCHEDULEOPS_H

#include "mk/Dialect/Schedule/ScheduleDialect.h"
#include "mk/Dialect/Schedule/TaskKinds.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"

#include "mk/Dialect/Schedule/TaskCuts.h"

#define GET_ATTRDEF_CLASSES
#include "mk/Dialect/Schedule/ScheduleAttrs.h.inc"

#include "mk/Dialect/Schedule/ScheduleInterfaces.h.inc"

namespace mk::schedule {
/// The checks every task op's verifier makes: count, bytes, and the
/// arguments its kind's registry entry requires (TaskKinds.h).
mlir::LogicalResult verifyTaskOp(TaskOpInterface t);
/// An array argument's elements (empty for a null `a`): names (strings, or
/// the names symbol references refer to) and integers.
llvm::SmallVector<std::string> argNames(mlir::ArrayAttr a);
llvm::SmallVector<int64_t> argInts(mlir::ArrayAttr a);
/// A task a phase deals over the grid (not every_block), with the number of
/// its first instance: a phase numbers its grid tasks' instances in order,
/// and instance t runs on block (t + deal_offset) % gridDim.x.
struct GridTask {
  TaskOpInterface task;
  int64_t first;
};
} // namespace mk::schedule

#define GET_OP_CLASSES
#include "mk/Dialect/Schedule/ScheduleOps.h.inc"

namespace mk::schedule {
/// A W4A16 GEMV's gated norm input (schedule-fuse-kda-gated-norm): its
/// four arguments together, one weight, and k-slices of whole heads.
mlir::LogicalResult verifyGatedNormInput(W4A16GemvOp g);
/// A W4A16 GEMV's argmax of its tiles (schedule-fuse-argmax): its two
/// arguments together, one weight's stored bf16 output, whole tiles.
mlir::LogicalResult verifyArgmaxOfTiles(W4A16GemvOp g);
/// An MLA attention task's form arguments: `sub_rows` 16 or 32 (32 with at
/// most 8 heads), `query_parts` 1 or 2 (1 with 9-16 heads), `chunk_rows` a
/// multiple of 16.
mlir::LogicalResult verifyMlaAttentionForm(TaskOpInterface t);
/// Why GEMV `g`'s tiles cannot merge the argmax of their output (the
/// verifier's conditions after the arguments' presence; "" if they can).
std::string argmaxOfTilesRefusal(W4A16GemvOp g);
/// Creates the task op of `kind` (`schedule.<keyword>`) named `name` at
/// `b`'s insertion point, with one instance, `partition` if given (before
/// schedule-partition-work only the tasks every block runs and the zeroing
/// tasks have one) and the
/// arguments `args`, each its own attribute (buffers named by string become
/// symbol references: withBufferSymbols).
TaskOpInterface createTaskOp(mlir::OpBuilder &b, mlir::Location loc, TaskKind kind,
                             llvm::StringRef name, llvm::StringRef op,
                             std::optional<Partition> partition, mlir::DictionaryAttr args);
/// Bytes of one element of a buffer dtype ("u8", "bf16", "f32", "i32"); 0
/// for an unknown name.
int64_t dtypeSize(llvm::StringRef dtype);
/// Limits the verifiers hold the IR to, far above any block's needs (the
/// Kimi-Linear unit: 367 counters in all, at most 400 instances per task)
/// and low enough that checks linear in them stay fast and the sync
/// layout's 32-bit word offsets cannot overflow.
constexpr int64_t kMaxCountersPerArray = int64_t(1) << 16;
constexpr int64_t kMaxTaskInstances = int64_t(1) << 20;
} // namespace mk::schedule

#endif // MK_DIALECT_SCHEDULE_SCHEDULEOPS_H
