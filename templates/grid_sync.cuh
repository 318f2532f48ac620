//===- grid_sync.cuh - Grid barrier and dependency counters -----*- CUDA -*-===//
//
// The synchronization between phases of a cooperative megakernel. The `sync`
// buffer is zeroed once when allocated; afterwards the kernel keeps it valid
// across launches: the barrier's generation word only ever grows (the
// arrival count returns to zero at every barrier) and counters are reset by
// `counters_reset` after their last use in a launch.
//
// Layout of the sync words (u32, each on its own 128-byte line):
//   word 0       barrier arrival count
//   word 32      barrier generation
//   word 64 + 32*i   counter i
//
// Rule for data that crosses blocks inside one launch: read it with
// ld.global.cg (L2) -- never through the non-coherent/L1 path -- because an
// SM's L1 may still hold a line it read before another block rewrote it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mk/common.cuh"

namespace mk {

constexpr int kSyncCounterBase = 64;
constexpr int kSyncStride = 32;

__device__ __forceinline__ unsigned ld_acquire(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void red_release_add(unsigned *p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ unsigned atom_acq_rel_add(unsigned *p, unsigned v) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

/// Waits until every block of the grid has arrived. All threads call it.
/// Thread 0 arrives with a release (publishing what the block wrote: the
/// bar.sync before it orders the block's writes first) and leaves with an
/// acquire; the bar.sync after it extends that to the whole block.
__device__ __forceinline__ void grid_barrier(unsigned *sync) {
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned *count = sync;
    unsigned *gen = sync + kSyncStride;
    // Read the generation before arriving: it cannot advance until we do.
    const unsigned g = ld_acquire(gen);
    const unsigned arrived = atom_acq_rel_add(count, 1u);
    if (arrived == gridDim.x - 1) {
      *reinterpret_cast<volatile unsigned *>(count) = 0u;
      red_release_add(gen, 1u);
    } else {
      while (ld_acquire(gen) == g) {
      }
    }
  }
  __syncthreads();
}

__device__ __forceinline__ unsigned *counter_ptr(unsigned *sync, int i) {
  return sync + kSyncCounterBase + kSyncStride * i;
}

/// Publishes this block's writes, then adds one to counter `i`.
__device__ __forceinline__ void counter_signal(unsigned *sync, int i) {
  __syncthreads();
  if (threadIdx.x == 0)
    red_release_add(counter_ptr(sync, i), 1u);
}

/// Waits until counter `i` reaches `target` (the number of producer tasks).
/// Deadlock-free as long as, in the phase's task order, every producer task
/// comes before every task that waits for it and all blocks are co-resident.
__device__ __forceinline__ void counter_wait(unsigned *sync, int i, unsigned target) {
  if (threadIdx.x == 0) {
    const unsigned *c = counter_ptr(sync, i);
    while (ld_acquire(c) < target) {
    }
  }
  __syncthreads();
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
