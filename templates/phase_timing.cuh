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

/// Phase entry: stamps row `i` of `entries` and clears row `i` of `waits`.
__device__ __forceinline__ void phase_enter(unsigned long long *entries,
                                            unsigned long long *waits, int i) {
  if (threadIdx.x == 0) {
    entries[(size_t)i * kMaxGrid + blockIdx.x] = global_timer_ns();
    waits[(size_t)i * kMaxGrid + blockIdx.x] = 0ull;
  }
}

/// Thread 0 of every block adds `ns` to row `i` of `table` (its own slot).
__device__ __forceinline__ void phase_add(unsigned long long *table, int i,
                                          unsigned long long ns) {
  if (threadIdx.x == 0)
    table[(size_t)i * kMaxGrid + blockIdx.x] += ns;
}

} // namespace mk
