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
// Inside a task, a StageClock splits its time into stages: thread 0 sums
// the SM cycles (clock64) between laps per stage in shared memory, and
// the entry of phase i stores the sums so far to row i of mk_stage_cycles
// ([phase + 1][stage][kMaxGrid], declared by the emitted kernel) and the
// laps to mk_stage_laps (zeroed at the block's phase-0 entry): the end
// mark's row holds the step's sums, the difference of two rows a phase's.
// mk-bench --phase-timing prints, per stage with laps, the median and the
// slowest block's time per step, and the GEMV tile stages per phase. The
// stages (kStage*) and their names are stage_slots.cuh's.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mk/common.cuh"
#include "mk/grid_sync.cuh"
#include "mk/stage_slots.cuh"

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

#ifdef MK_PHASE_TIMING
/// This block's running sums in shared memory (thread 0's).
struct StageSums {
  unsigned long long cycles[kStageSlots];
  unsigned laps[kStageSlots];
};
static_assert(sizeof(StageSums) <= kStageSumsBytes,
              "the emitter's static shared bound counts kStageSumsBytes of stage sums");
__device__ __forceinline__ StageSums &stage_sums() {
  __shared__ StageSums sums;
  return sums;
}
#endif

/// Splits a task's time into stages (timing builds only; otherwise empty).
/// Thread 0 adds the cycles since its last lap to the block's sums in shared
/// memory; phase_enter stores the sums to the global rows with plain stores:
/// a global load inside a timed stage would wait behind the task's own
/// memory traffic and time itself.
struct StageClock {
#ifdef MK_PHASE_TIMING
  long long t0;
  __device__ __forceinline__ StageClock() : t0(clock64()) {}
  /// The cycles since the last lap (or construction) go to `stage`.
  __device__ __forceinline__ void lap(int stage) {
    if (threadIdx.x == 0) {
      const long long t = clock64();
      StageSums &s = stage_sums();
      s.cycles[stage] += (unsigned long long)(t - t0);
      s.laps[stage] += 1u;
      t0 = t;
    }
  }
#else
  __device__ __forceinline__ void lap(int) {}
#endif
};

/// Phase entry: stamps row `i` of `entries` and clears row `i` of `waits`;
/// zeroes the block's stage sums at phase 0, and stores them (so far) to
/// row `i` of `stageCycles` / `stageLaps` ([phase][stage][kMaxGrid]): the
/// end mark's row holds the step's.
__device__ __forceinline__ void phase_enter(unsigned long long *entries,
                                            unsigned long long *waits,
                                            [[maybe_unused]] unsigned long long *stageCycles,
                                            [[maybe_unused]] unsigned *stageLaps, int i) {
  if (threadIdx.x == 0) {
    entries[(size_t)i * kMaxGrid + blockIdx.x] = global_timer_ns();
    waits[(size_t)i * kMaxGrid + blockIdx.x] = 0ull;
#ifdef MK_PHASE_TIMING
    StageSums &s = stage_sums();
    for (int st = 0; st < kStageSlots; ++st) {
      if (i == 0)
        s.cycles[st] = 0ull, s.laps[st] = 0u;
      const size_t at = ((size_t)i * kStageSlots + st) * kMaxGrid + blockIdx.x;
      stageCycles[at] = s.cycles[st];
      stageLaps[at] = s.laps[st];
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

/// Counters [first, first + n) each waited for until they reach `target`,
/// as a task's prologue calls it (moe_down_task_waiting: after its weight
/// copies are issued, so that the stream runs under the wait). Every
/// thread of the block calls it. With -DMK_PHASE_TIMING the emitter also
/// passes the kernel's wait table and the phase: thread 0 adds the time it
/// waited there, so that mk-bench's phase profile (work = done - entry -
/// waits) counts it as a wait, as it counts the waits before a task.
/// Without it the struct is the four fields alone (the kernel unchanged).
struct CounterWaits {
  unsigned *sync;
  int first, n;
  unsigned target;
#ifdef MK_PHASE_TIMING
  unsigned long long *waits = nullptr;
  int phase = 0;
#endif
  __device__ __forceinline__ void operator()() const {
#ifdef MK_PHASE_TIMING
    const unsigned long long t0 = global_timer_ns();
#endif
    for (int q = 0; q < n; ++q)
      counter_wait(sync, first + q, target);
#ifdef MK_PHASE_TIMING
    if (waits)
      phase_add(waits, phase, global_timer_ns() - t0);
#endif
  }
};

/// Two prologue waits run one after the other, as one: a task whose
/// prologue stages the outputs of two producers (a W4A16 GEMV staging a
/// gated norm of one producer's o with another's gate) waits for both
/// after its first weights are asked for.
template <class A, class B> struct BothWaits {
  A first;
  B second;
  __device__ __forceinline__ void operator()() const {
    first();
    second();
  }
};

} // namespace mk
