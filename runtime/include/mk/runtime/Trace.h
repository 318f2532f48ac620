//===- Trace.h - Phase stamps as a Chrome/Perfetto trace ----------*- C++ -*-===//
//
// Turns the per-block phase stamps of one decode step (a -DMK_PHASE_TIMING
// build, templates/phase_timing.cuh) into a trace in Chrome's Trace Event
// Format, which chrome://tracing and ui.perfetto.dev open:
//
//   {"traceEvents": [
//     {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "mk-bench K"}},
//     {"ph": "M", "pid": 1, "tid": B, "name": "thread_name", "args": {"name": "block B"}},
//     {"ph": "M", "pid": 1, "tid": B, "name": "thread_sort_index", "args": {"sort_index": B}},
//     {"ph": "X", "cat": "phase", "name": PHASE, "pid": 1, "tid": B, "ts": US, "dur": US,
//      "args": {"phase": PHASE, "phase_index": P, "block": B, "wait_us": US,
//               "work_us": US, "phase_bytes": N}},
//     {"ph": "X", "cat": "wait", "name": "counter wait", "pid": 1, "tid": B,
//      "ts": US, "dur": US, "args": {"phase": PHASE, "wait_us": US}},
//     ...],
//    "displayTimeUnit": "ns",
//    "otherData": {"key": "value", ...}}
//
// One track (tid) per thread block, one "phase" slice per phase and block,
// from the block's entry stamp to its done stamp. ts and dur are in
// microseconds (fractional: the stamps are ns), relative to the earliest
// phase-0 entry of any block. The stamps hold only each block's total
// counter-wait time in a phase, not when it waited: the nested "counter
// wait" slice has that length and starts with the phase slice (clamped to
// it), and is left out where the block did not wait. "phase_bytes" (the
// bytes the whole phase streams, all blocks) is present only when the caller
// knows them. A block that has no entry or done stamp for a phase (0), or
// whose stamps are out of order or older than the step's first entry (left
// from an earlier step), gets no slice for it.
//
//===----------------------------------------------------------------------===//

#ifndef MK_RUNTIME_TRACE_H
#define MK_RUNTIME_TRACE_H

#include "mk/runtime/Status.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mk::rt {

/// The stamps of one step, [phase * grid + block], in ns of the device's
/// global timer (0: not stamped).
struct PhaseTrace {
  std::string processName;            ///< e.g. "mk-bench mk_kimi_linear_w4a16"
  std::vector<std::string> phaseNames; ///< one per phase
  int grid = 0;                        ///< blocks (tracks)
  std::vector<uint64_t> entryNs;       ///< phase entry, >= phases * grid
  std::vector<uint64_t> waitNs;        ///< counter waits (a duration), same size
  std::vector<uint64_t> doneNs;        ///< phase's tasks done, same size
  /// Bytes each phase streams (all blocks); empty when unknown.
  std::vector<double> phaseBytes;
  /// Free-form key/value strings for the trace's "otherData".
  std::vector<std::pair<std::string, std::string>> otherData;
};

/// The trace as JSON text (one event per line). InvalidArgument if the grid
/// is not positive or a table is smaller than phases x grid, or phaseBytes is
/// neither empty nor one per phase.
Status phaseTraceJson(const PhaseTrace &t, std::string &json);

/// phaseTraceJson, written to `path` (created or truncated). Io, with the
/// system's reason, if the file cannot be written.
Status writePhaseTrace(const PhaseTrace &t, const std::string &path);

/// Writes `text` to `path` (created or truncated); an Io error naming the
/// path and the system's reason on failure (the tools' JSON outputs).
Status writeTextFile(const std::string &path, const std::string &text);

} // namespace mk::rt

#endif // MK_RUNTIME_TRACE_H
