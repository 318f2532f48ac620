//===- TaskCuts.h - How a task's work may be cut --------------*- C++ -*-===//
//
// What TaskOpInterface::getLegalCuts answers: the ways a task's work may be
// cut into instances that the templates of its kind accept (tile widths,
// split-K slices aligned with the units the input's producer publishes,
// state column chunks, ...), each with what it costs in bytes streamed and
// the arguments it sets. Which one a kernel takes is the partitioner's
// choice (schedule-partition-work, by its cost model), not the kind's.
//
//===----------------------------------------------------------------------===//

#ifndef MK_DIALECT_SCHEDULE_TASKCUTS_H
#define MK_DIALECT_SCHEDULE_TASKCUTS_H

#include "mk/Dialect/Schedule/TaskKinds.h"

#include "mlir/IR/Attributes.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mk::schedule {

class TaskOpInterface;

/// One legal cut of a task: `count` instances of `bytesPerTask` bytes each,
/// each streaming rows of `segmentBytes` contiguous bytes (0: one
/// contiguous stream); `partition` names how the work is cut; `intArgs`, `strArgs` are
/// the task arguments it sets (integers, or strings for a `grain`), and
/// `bufferShapes` the shapes it gives buffers whose size follows the cut
/// (the MLA attention's partials, one row per chunk).
struct TaskCut {
  int64_t count = 1;
  int64_t bytesPerTask = 0;
  int64_t segmentBytes = 0;
  Partition partition = Partition::Cols;
  llvm::SmallVector<std::pair<std::string, int64_t>> intArgs;
  llvm::SmallVector<std::pair<std::string, std::string>> strArgs;
  llvm::SmallVector<std::pair<std::string, llvm::SmallVector<int64_t>>> bufferShapes;
};

/// Context chunks of an attention whose `attention-chunks` is 0 (the
/// default): a GQA attention's, and the most an MLA attention takes (it
/// takes as many as fill the blocks once with its head groups' tasks).
constexpr int64_t kDefaultGqaChunks = 64;
constexpr int64_t kMaxAutoMlaChunks = 128;
/// An MLA attention task's `sub_rows`, `query_parts` and `chunk_rows`
/// where unsaid (the template's defaults), and the most rows per chunk it
/// takes.
constexpr int64_t kMlaTemplateSubRows = 16;
constexpr int64_t kMlaTemplateQueryParts = 2;
constexpr int64_t kMlaTemplateChunkRows = 16;
constexpr int64_t kMaxMlaChunkRows = 4096;

/// What a kind's cuts depend on beyond the task itself.
struct TaskCutContext {
  /// Threads per block (the kernel's).
  int64_t threads = 256;
  /// Blocks the grid runs at once (schedule-partition-work target-sms).
  int64_t targetBlocks = 264;
  /// Attention: the most context chunks (0: the kind's default, below), the
  /// most heads per MLA task.
  int64_t attentionChunks = 0;
  int64_t attentionHeadGroup = 16;
  /// Cache rows per sub-chunk of an attention task (16, or 32 with up to 8
  /// heads per task).
  int64_t attentionSubRows = 16;
  /// Parts (bf16 hi, lo) of the attention's queries and probabilities (2,
  /// or 1 with 9-16 heads per task); rows per chunk at least (a multiple of
  /// 16).
  int64_t attentionQueryParts = 1;
  int64_t attentionChunkRows = 32;
  /// The last task before this one that writes buffer `name` (null if none).
  llvm::function_ref<TaskOpInterface(llvm::StringRef name)> producerOf;
};

} // namespace mk::schedule

#endif // MK_DIALECT_SCHEDULE_TASKCUTS_H
