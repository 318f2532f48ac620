//===- elementwise.cuh - Grid-strided fills and the final residual -*- CUDA -*-===//
#pragma once

#include "mk/common.cuh"

namespace mk {

/// Zeroes n floats, spread over every thread of the grid.
__device__ __forceinline__ void grid_fill_zero(float *p, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    p[i] = 0.f;
}

/// out = bf16(base + bf16(acc)), spread over the grid (the unit's last residual).
__device__ __forceinline__ void final_residual(const bf16 *base, const float *acc, int n, bf16 *out) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = f2bf(round_bf16(bf2f(__ldcg(base + i)) + round_bf16(__ldcg(acc + i))));
}

/// A (value, index) pair as one unsigned 64-bit key whose order is the
/// argmax's: the larger value first, on equal values (-0 equals +0) the
/// lower index (the value's float bits made monotone in the high word, the
/// index's complement in the low). Every key of a number is above 0, the
/// empty key, which a NaN gets: it is never chosen (all NaN: index -1).
__device__ __forceinline__ unsigned long long argmax_key(float v, int i) {
  if (v != v)
    return 0ull;
  const unsigned bits = __float_as_uint(v == 0.f ? 0.f : v);
  const unsigned ordered = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return ((unsigned long long)ordered << 32) | (0xffffffffu - unsigned(i));
}

/// The argmax of values[i0, i1) merged into the running one: the range's
/// best key goes into scratch[0..1] (atomicMax on the u64 key; zeroed
/// before the step), then the caller counts itself done in scratch[2]; the
/// last of `ntasks` callers writes the index of the best to *out (the first
/// index of the largest value). scratch: 4 floats of the workspace, 8-byte
/// aligned. RELEASE_EARLY: only thread 0 does the atomics, after a block
/// barrier that frees the warps' keys, and the other warps go on to the
/// block's next task (as a counter signal's: counter_signal); otherwise the
/// block waits for them.
template <int THREADS, bool RELEASE_EARLY = false>
__device__ void argmax_merge_range(int i0, int i1, int ntasks, const bf16 *values, float *scratch,
                                   int *out) {
  __shared__ unsigned long long best_of_warp[32];
  unsigned long long best = 0;
  for (int i = i0 + (int)threadIdx.x; i < i1; i += THREADS) {
    const unsigned long long k = argmax_key(bf2f(__ldcg(values + i)), i);
    best = k > best ? k : best;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long other = __shfl_xor_sync(0xffffffffu, best, o);
    best = other > best ? other : best;
  }
  if ((threadIdx.x & 31) == 0)
    best_of_warp[threadIdx.x >> 5] = best;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < THREADS / 32; ++w)
      best = best_of_warp[w] > best ? best_of_warp[w] : best;
  if (RELEASE_EARLY)
    __syncthreads(); // best_of_warp is free for the block's next task
  if (threadIdx.x == 0) {
    unsigned long long *key = reinterpret_cast<unsigned long long *>(scratch);
    atomicMax(key, best);
    __threadfence();
    unsigned *done = reinterpret_cast<unsigned *>(scratch + 2);
    if (atomicAdd(done, 1u) == unsigned(ntasks - 1)) {
      // Every caller's key is in: read it through L2.
      const unsigned long long k = atomicMax(key, 0ull);
      *out = int(0xffffffffu - unsigned(k & 0xffffffffu));
    }
  }
  if (!RELEASE_EARLY)
    __syncthreads(); // best_of_warp is free for the block's next task
}

/// One of `ntasks` slices of the argmax of n bf16 values (argmax_merge_range
/// over the slice).
template <int THREADS>
__device__ void argmax_task(int task, int ntasks, int n, const bf16 *values, float *scratch,
                            int *out) {
  const int per = (n + ntasks - 1) / ntasks;
  const int i0 = task * per, i1 = min(n, i0 + per);
  argmax_merge_range<THREADS>(i0, i1, ntasks, values, scratch, out);
}

/// The argmax folded into a GEMV's tiles (schedule-fuse-argmax): after the
/// tile has stored its columns [n0, n0 + nvalid) of `values`, the block
/// merges their argmax; the last of the GEMV's `ntiles` tiles writes *out.
/// The barrier orders the tile's stores (its epilogue's threads) before the
/// block's loads of them; they read the bf16 values as stored, as the
/// argmax task does. Only thread 0 waits for the atomics (RELEASE_EARLY):
/// the block's other warps go on to its next tile.
template <int THREADS>
__device__ void argmax_of_tile(int n0, int nvalid, int ntiles, const bf16 *values, float *scratch,
                               int *out) {
  __syncthreads();
  argmax_merge_range<THREADS, true>(n0, n0 + nvalid, ntiles, values, scratch, out);
}

} // namespace mk
