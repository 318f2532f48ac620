//===- Planning.h - Phase, partition and workspace planning -----*- C++ -*-===//
//
// The algorithmic cores of the scheduling passes, as plain C++ so that they
// are unit-tested (tests/compiler/Schedule*Test.cpp, Workspace*Test.cpp)
// without building IR:
//  - planPhases: the fewest grid barriers a dependency DAG allows (ASAP
//    segments), and the phases inside each segment;
//  - choosePartition: the task count that balances streamed bytes over the
//    SMs, given the ways an op may be cut;
//  - phaseLoad: how a phase's task instances load its blocks (the phase
//    balancing's measure);
//  - planWorkspace: offsets into one arena for buffers with live ranges.
//
//===----------------------------------------------------------------------===//

#ifndef MK_TRANSFORMS_PLANNING_H
#define MK_TRANSFORMS_PLANNING_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mk::planning {

/// How a consumer depends on a producer.
enum class DepKind {
  /// Both run in the same block (the producer recomputes per block, e.g. an
  /// RMSNorm into shared memory): program order is enough.
  Local,
  /// Crosses blocks: a grid barrier (or a counter, later) must separate them.
  Grid,
};

struct DepEdge {
  int from, to;
  DepKind kind;
};

struct PhasePlan {
  /// Per node: the barrier-separated segment and the phase (global index,
  /// phases sorted by segment then depth).
  std::vector<int> segment, phase;
  int numSegments = 0, numPhases = 0;
  /// Barriers = numSegments - 1.
  int numBarriers() const { return numSegments > 0 ? numSegments - 1 : 0; }
};

/// Nodes are 0..n-1 in a topological order (every edge has from < to).
/// Segment(v) = max over Grid preds (segment + 1) and Local preds (segment):
/// the longest Grid-edge chain, which no valid schedule can beat. Inside a
/// segment, depth(v) = max over preds in the segment (depth + (Grid ? 1 :
/// 0)); phases are the distinct (segment, depth) pairs in order.
/// Returns false (and sets `error`) if an edge goes backwards.
bool planPhases(int n, const std::vector<DepEdge> &edges, PhasePlan &plan,
                std::string &error);

/// One way to cut an op: `count` equal tasks of `bytesPerTask` each, each
/// streaming rows of `segmentBytes` contiguous bytes (0: one contiguous
/// stream).
struct PartitionOption {
  int64_t count = 1;
  int64_t bytesPerTask = 0;
  int64_t segmentBytes = 0;
};

/// What a task's bytes cost beyond their count.
struct CostModel {
  /// A task's fixed latency, in bytes-streamed equivalents.
  int64_t overheadBytes = 0;
  /// Rows streamed in segments shorter than this many contiguous bytes cost
  /// `shortSegmentPenalty` times as much per byte (0: no penalty). On the
  /// H200, W4A16 tiles reading 16-64 bytes per row streamed 2.0-2.3x slower
  /// per byte than 128-byte ones (docs/perf-notes.md).
  int64_t fullSegmentBytes = 0;
  double shortSegmentPenalty = 2.0;
};

/// The option with the lowest estimated time on `sms` SMs:
/// ceil(count / sms) waves of (bytesPerTask * segment penalty +
/// overheadBytes). Ties go to the earlier option. Returns -1 if `options`
/// is empty.
int choosePartition(const std::vector<PartitionOption> &options, int64_t sms,
                    const CostModel &model);

/// The load of a phase made of `tasks` (instance count, cost per instance in
/// bytes-streamed equivalents), dealt round-robin over `blocks` blocks in
/// task order as the emitted kernel deals them (its deal offset shifts every
/// task of the phase alike): its busiest block (what the phase's time
/// follows), then the sum of squared block loads (how evenly the rest is
/// spread: each block's next task starts when its own work here is done).
/// O(blocks) per task, whatever its count.
struct PhaseLoad {
  int64_t busiest = 0;
  double squares = 0;
};
PhaseLoad phaseLoad(const std::vector<std::pair<int64_t, int64_t>> &tasks, int64_t blocks);
double partitionCost(const PartitionOption &o, int64_t sms, const CostModel &model);

/// A workspace buffer live over segments [first, last] (inclusive).
struct WorkspaceBuffer {
  int64_t bytes = 0;
  int first = 0, last = 0;
};

/// Assigns offsets (multiples of `align`) so that buffers whose live ranges
/// overlap never overlap in memory; buffers live in disjoint segment ranges
/// (a barrier apart) may share. Greedy by size, first fit. Returns the arena
/// size.
int64_t planWorkspace(const std::vector<WorkspaceBuffer> &buffers,
                      std::vector<int64_t> &offsets, int64_t align = 256);

} // namespace mk::planning

#endif // MK_TRANSFORMS_PLANNING_H
