//===- phase_timing.cuh - Per-block phase timestamps (timing builds) -*- CUDA -*-===//
//
// Kernels compiled with -DMK_PHASE_TIMING record, for every block and phase,
// the global timer (ns) as the block enters the phase, the time it spent
// waiting on dependency counters in it, and the time its last task of the
// phase finished (before any grid barrier that follows). mk-bench
// --phase-timing reads the three tables back (mk_phase_ns, mk_phase_wait_ns,
// mk_phase_done_ns: [phase][kMaxGrid] each, phases + 1 rows for the entries)
// and reports, per phase, the work of the slowest and of the average block,
// the waits, and when the last block finished: whether a phase is slow
// because all its blocks are, or because one is.
//
// Inside a task, a StageClock splits its time into stages: thread 0 of
// every block adds the SM cycles (clock64) since its last lap to
// mk_stage_cycles[stage][block] and counts the lap in mk_stage_laps (rows
// reset at the block's phase-0 entry). mk-bench --phase-timing prints, per
// stage with laps, the median and the slowest block's cycles per step. The
// stages (kStage*) are few and named here and in mk-bench.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mk/common.cuh"
#include "mk/grid_sync.cuh"

namespace mk {

__device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// Thread 0 of every block stores the timer in row `i` of `table`.
__device__ __forceinline__ void phase_stamp(unsigned long long *table, int i) {
  if (threadIdx.x == 0)
    table[(size_t)i * kMaxGrid + blockIdx.x] = global_timer_ns();
}

/// Stages a StageClock attributes a task's cycles to (mk-bench names them).
enum StageSlot : int {
  kStageMlaPrologue = 0, ///< attention: queries staged, the first rows asked for
  kStageMlaRowWait,      ///< attention: waiting for a sub-chunk's rows (+ barrier)
  kStageMlaScores,       ///< attention: scores of a sub-chunk (+ barrier)
  kStageMlaSoftmax,      ///< attention: softmax statistics (+ barrier)
  kStageMlaWeighted,     ///< attention: the weighted rows
  kStageMlaEpilogue,     ///< attention: the partials written
  kStageSlots = 8
};

#ifdef MK_PHASE_TIMING
__device__ unsigned long long mk_stage_cycles[kStageSlots * kMaxGrid];
__device__ unsigned int mk_stage_laps[kStageSlots * kMaxGrid];
#endif

/// Splits a task's time into stages (timing builds only; otherwise empty).
struct StageClock {
#ifdef MK_PHASE_TIMING
  long long t0;
  __device__ __forceinline__ StageClock() : t0(clock64()) {}
  /// The cycles since the last lap (or construction) go to `stage`.
  __device__ __forceinline__ void lap(int stage) {
    if (threadIdx.x == 0) {
      const long long t = clock64();
      mk_stage_cycles[stage * kMaxGrid + blockIdx.x] += (unsigned long long)(t - t0);
      mk_stage_laps[stage * kMaxGrid + blockIdx.x] += 1u;
      t0 = t;
    }
  }
#else
  __device__ __forceinline__ void lap(int) {}
#endif
};

/// Phase entry: stamps row `i` of `entries` and clears row `i` of `waits`;
/// at phase 0 also this block's stage rows.
__device__ __forceinline__ void phase_enter(unsigned long long *entries,
                                            unsigned long long *waits, int i) {
  if (threadIdx.x == 0) {
    entries[(size_t)i * kMaxGrid + blockIdx.x] = global_timer_ns();
    waits[(size_t)i * kMaxGrid + blockIdx.x] = 0ull;
#ifdef MK_PHASE_TIMING
    if (i == 0)
      for (int st = 0; st < kStageSlots; ++st) {
        mk_stage_cycles[st * kMaxGrid + blockIdx.x] = 0ull;
        mk_stage_laps[st * kMaxGrid + blockIdx.x] = 0u;
      }
#endif
  }
}

/// Thread 0 of every block adds `ns` to row `i` of `table` (its own slot).
__device__ __forceinline__ void phase_add(unsigned long long *table, int i,
                                          unsigned long long ns) {
  if (threadIdx.x == 0)
    table[(size_t)i * kMaxGrid + blockIdx.x] += ns;
}

} // namespace mk
