//===- grid_sync.cuh - Grid barrier and dependency counters -----*- CUDA -*-===//
//
// The synchronization between phases of a cooperative megakernel. The `sync`
// buffer is zeroed once when allocated; afterwards the kernel keeps it valid
// across launches: the barrier's generation and arrival flags only ever grow,
// and counters are reset by `counters_reset` after their last use in a launch.
//
// Layout of the sync words (u32):
//   words 0-1                arrivals of the counting barrier (u64)
//   word 32                  barrier generation (on its own 128-byte line)
//   words 64 .. 64+kMaxGrid  one arrival flag per block (contiguous, so the
//                            master block polls them with coalesced loads)
//   word kSyncCounterBase + 32*i   counter i (each on its own line)
//
// Rule for data that crosses blocks inside one launch: read it with
// ld.global.cg (L2) -- never through the non-coherent/L1 path -- because an
// SM's L1 may still hold a line it read before another block rewrote it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mk/common.cuh"

// Nanoseconds a spinning thread sleeps between polls (0: poll back to back).
// A tuning knob: fewer polls contend less with the releasing store.
#ifndef MK_SPIN_NS
#define MK_SPIN_NS 0
#endif

namespace mk {

__device__ __forceinline__ void spin_pause() {
  if (MK_SPIN_NS > 0)
    __nanosleep(MK_SPIN_NS);
}

constexpr int kSyncStride = 32;
constexpr int kSyncFlagBase = 64;
constexpr int kMaxGrid = 1024;
constexpr int kSyncCounterBase = kSyncFlagBase + kMaxGrid;

__device__ __forceinline__ unsigned ld_acquire(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ unsigned ld_relaxed(const unsigned *p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
/// The same on a 64-bit word (the counting grid barrier's arrivals).
__device__ __forceinline__ unsigned long long ld_acquire(const unsigned long long *p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned long long ld_relaxed(const unsigned long long *p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

/// Polls `*p` until it is at least `target`, then orders the caller's later
/// accesses after the load that saw it. Default: every poll an acquire load
/// (in SASS a strong load and an invalidation of the SM's L1, each round
/// trip). -DMK_POLL_RELAXED (to measure): relaxed polls, then one acq_rel
/// fence once the value is seen (the L1 the co-resident block reads through
/// is invalidated once per wait, not once per round trip); the counting grid
/// barrier's poll too, not the flag barrier's (-DMK_GRID_BARRIER_FLAGS).
template <class Word>
__device__ __forceinline__ void poll_at_least(const Word *p, Word target) {
#ifdef MK_POLL_RELAXED
  while (ld_relaxed(p) < target)
    spin_pause();
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
#else
  while (ld_acquire(p) < target)
    spin_pause();
#endif
}

/// A value another block writes once per step with a polled store
/// (bf16_gemv.cuh's store_row<true>: never the all-zero bits, which the
/// buffer holds until then): read with relaxed loads until it is not zero.
/// The reader needs nothing else the writer wrote, so no fence.
__device__ __forceinline__ unsigned ld_relaxed_bits(const bf16 *p) {
  unsigned short b;
  asm volatile("ld.relaxed.gpu.global.b16 %0, [%1];" : "=h"(b) : "l"(p) : "memory");
  return b;
}
__device__ __forceinline__ unsigned ld_relaxed_bits(const float *p) {
  return ld_relaxed(reinterpret_cast<const unsigned *>(p));
}
__device__ __forceinline__ float value_of_bits(const bf16 *, unsigned b) {
  return bf2f(__ushort_as_bfloat16(static_cast<unsigned short>(b)));
}
__device__ __forceinline__ float value_of_bits(const float *, unsigned b) {
  return __uint_as_float(b);
}

/// One polled value (as above).
template <class T> __device__ __forceinline__ float poll_nonzero(const T *p) {
  for (;;) {
    if (const unsigned b = ld_relaxed_bits(p))
      return value_of_bits(p, b);
    spin_pause();
  }
}

/// The polled values p[i * stride], i < n (n <= N), into out[i]: the loads
/// of all n are issued before any is looked at, so a thread's n values cost
/// one L2 round trip once written, not n dependent ones (the sigmoid
/// router's top-k: 2 values a lane at 64 experts, 8 at 256).
/// -DMK_POLL_SERIAL polls them one after another (the form before session
/// 35's last commits, to measure against).
template <int N, class T>
__device__ __forceinline__ void poll_nonzero_strided(const T *p, int stride, int n,
                                                     float (&out)[N]) {
#ifdef MK_POLL_SERIAL
#pragma unroll
  for (int i = 0; i < N; ++i)
    if (i < n)
      out[i] = poll_nonzero(p + i * stride);
#else
  // Every round loads all n (a round trip for them all) and ends the wait
  // once none is zero.
  for (;;) {
    unsigned b[N];
    bool ready = true;
#pragma unroll
    for (int i = 0; i < N; ++i)
      if (i < n) {
        b[i] = ld_relaxed_bits(p + i * stride);
        ready = ready && b[i] != 0u;
      }
    if (ready) {
#pragma unroll
      for (int i = 0; i < N; ++i)
        if (i < n)
          out[i] = value_of_bits(p, b[i]);
      return;
    }
    spin_pause();
  }
#endif
}

__device__ __forceinline__ void red_release_add(unsigned *p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ unsigned atom_acq_rel_add(unsigned *p, unsigned v) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

__device__ __forceinline__ void st_release(unsigned *p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/// Waits until every block of the grid has arrived. All threads call it.
///
/// The default counts arrivals: each block's thread 0 adds one to a 64-bit
/// count (acq_rel, after the bar.sync that orders the block's writes before
/// it) and waits until the count reaches the next multiple of gridDim.x. The
/// last arrival releases everyone directly: one trip through L2 instead of
/// the two of the flag barrier below (arrival flag -> block 0 -> generation
/// -> everyone). The count only grows; it stays a multiple of gridDim.x
/// between barriers as long as every launch on one sync buffer uses one grid
/// size (a Session fixes its grid at creation).
__device__ __forceinline__ unsigned long long atom_acq_rel_add_u64(unsigned long long *p,
                                                                   unsigned long long v) {
  unsigned long long old;
  asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], %2;"
               : "=l"(old)
               : "l"(p), "l"(v)
               : "memory");
  return old;
}
__device__ __forceinline__ void grid_barrier_flags(unsigned *sync);
__device__ __forceinline__ void grid_barrier(unsigned *sync) {
#ifdef MK_GRID_BARRIER_FLAGS
  grid_barrier_flags(sync);
#else
  __syncthreads();
  if (threadIdx.x == 0) {
    if (gridDim.x > kMaxGrid)
      __trap(); // the sync layout's limit, as the flag barrier's
    unsigned long long *count = reinterpret_cast<unsigned long long *>(sync);
    const unsigned long long g = gridDim.x;
    const unsigned long long target = (atom_acq_rel_add_u64(count, 1ull) / g + 1ull) * g;
    poll_at_least<unsigned long long>(count, target);
  }
  __syncthreads();
#endif
}

/// The flag barrier (-DMK_GRID_BARRIER_FLAGS; the default before session 5).
/// No block contends on a shared counter: each block's thread 0 publishes
/// its arrival in its own flag (a release, after the bar.sync that orders the
/// block's writes before it); block 0's threads poll all flags in parallel
/// (acquire), then block 0 releases the new generation, which every other
/// block's thread 0 acquires before the final bar.sync. Generations only grow,
/// so flags never need resetting (gridDim.x <= kMaxGrid).
__device__ __forceinline__ void grid_barrier_flags(unsigned *sync) {
  __syncthreads();
  unsigned *gen = sync + kSyncStride;
  unsigned *flags = sync + kSyncFlagBase;
  __shared__ unsigned next_gen;
  if (threadIdx.x == 0) {
    if (gridDim.x > kMaxGrid)
      __trap(); // more blocks than arrival flags: the launch is invalid
    // The generation cannot advance before this block arrives.
    next_gen = ld_acquire(gen) + 1u;
    st_release(flags + blockIdx.x, next_gen);
  }
  if (blockIdx.x == 0) {
    __syncthreads();
    const unsigned target = next_gen;
    for (int b = threadIdx.x; b < (int)gridDim.x; b += blockDim.x)
      while ((int)(ld_acquire(flags + b) - target) < 0)
        spin_pause();
    __syncthreads();
    if (threadIdx.x == 0)
      st_release(gen, target);
  } else if (threadIdx.x == 0) {
    while ((int)(ld_acquire(gen) - next_gen) < 0)
      spin_pause();
  }
  __syncthreads();
}

__device__ __forceinline__ unsigned *counter_ptr(unsigned *sync, int i) {
  return sync + kSyncCounterBase + kSyncStride * i;
}

/// Publishes this block's writes, then adds one to counter `i`.
///
/// Only thread 0 waits for the release (its fence waits until the block's
/// writes are visible at L2, ~0.5 us): the other warps go on to the block's
/// next task (whose weight requests need nothing the counter guards) and
/// meet thread 0 at that task's first block barrier. The block barrier in
/// front of the release is also what frees the task's shared memory for
/// the next one. -DMK_SIGNAL_TAIL_SYNC: every warp waits for the release
/// (a block barrier after it; the emitted form before, to measure against).
__device__ __forceinline__ void counter_signal(unsigned *sync, int i) {
  __syncthreads();
  if (threadIdx.x == 0)
    red_release_add(counter_ptr(sync, i), 1u);
}

__device__ __forceinline__ void red_relaxed_add(unsigned *p, unsigned v) {
  asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/// counter_signal of two counters with one release fence (not two).
__device__ __forceinline__ void counter_signal2(unsigned *sync, int i, int j) {
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
    red_relaxed_add(counter_ptr(sync, i), 1u);
    red_relaxed_add(counter_ptr(sync, j), 1u);
  }
}

/// What follows a task's counter signals in the emitted kernel: nothing (see
/// counter_signal), or under -DMK_SIGNAL_TAIL_SYNC a block barrier.
__device__ __forceinline__ void counter_signal_tail() {
#ifdef MK_SIGNAL_TAIL_SYNC
  __syncthreads();
#endif
}

/// Waits until counter `i` reaches `target` (the number of producer tasks).
/// Deadlock-free as long as, in the phase's task order, every producer task
/// comes before every task that waits for it and all blocks are co-resident.
__device__ __forceinline__ void counter_wait(unsigned *sync, int i, unsigned target) {
  if (threadIdx.x == 0)
    poll_at_least<unsigned>(counter_ptr(sync, i), target);
  __syncthreads();
}

/// This block's first task of a phase whose tasks are dealt round-robin
/// (task t to block (t + r) % gridDim.x), continuing where the kernel's
/// earlier phases stopped: `dealt` tasks so far, r = dealt % gridDim.x. A
/// phase's first tasks then go to the blocks that got the fewest of the
/// previous phase's (e.g. MoE down after the 400-task gate/up phase starts
/// at block 136, past the blocks that ran two). -DMK_NO_DEAL starts every
/// phase at block 0 (the form before, to measure against).
__device__ __forceinline__ int deal_first_task(unsigned dealt) {
#ifdef MK_NO_DEAL
  (void)dealt;
  return blockIdx.x;
#else
  const int t = (int)blockIdx.x - (int)(dealt % gridDim.x);
  return t < 0 ? t + (int)gridDim.x : t;
#endif
}

/// Zeroes counters [0, n). Call after the last grid barrier, from one block,
/// once no block can still be waiting on a counter.
__device__ __forceinline__ void counters_reset(unsigned *sync, int n) {
  if (blockIdx.x == 0)
    for (int i = threadIdx.x; i < n; i += blockDim.x)
      *counter_ptr(sync, i) = 0u;
}

/// Bytes of `sync` a kernel with `counters` counters needs.
__host__ __device__ constexpr int sync_bytes(int counters) {
  return (kSyncCounterBase + kSyncStride * (counters > 0 ? counters : 1)) * 4;
}

} // namespace mk
