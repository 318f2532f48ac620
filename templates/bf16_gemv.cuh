//===- bf16_gemv.cuh - Small bf16 linears in (out, in) layout -----*- CUDA -*-===//
//
// y[row] = bf16(sum_k x[k] * W[row, k]) for the tiny bf16 linears (KDA's
// beta_proj, the MoE router): fp32 accumulation, rounded once, as the spec
// requires for the router (top-k is fragile); with an fp32 output (a
// sigmoid router's logits) not rounded. A task of one row splits K
// over all warps; a task of several rows has one warp per row.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mk/common.cuh"

namespace mk {

namespace detail {
/// acc + sum_{i<8} x[i] * w[i], in index order (8 bf16 weights, one load).
__device__ __forceinline__ float dot8_bf16(const bf16 *w8, const float *x, float acc) {
  const uint4 w = ldg_weights(reinterpret_cast<const uint4 *>(w8));
  const float4 xa = *reinterpret_cast<const float4 *>(x);
  const float4 xb = *reinterpret_cast<const float4 *>(x + 4);
  acc = fmaf(xa.x, bf_lo(w.x), acc);
  acc = fmaf(xa.y, bf_hi(w.x), acc);
  acc = fmaf(xa.z, bf_lo(w.y), acc);
  acc = fmaf(xa.w, bf_hi(w.y), acc);
  acc = fmaf(xb.x, bf_lo(w.z), acc);
  acc = fmaf(xb.y, bf_hi(w.z), acc);
  acc = fmaf(xb.z, bf_lo(w.w), acc);
  return fmaf(xb.w, bf_hi(w.w), acc);
}
/// A row's fp32 sum as its output stores it: rounded to bf16, or as is.
/// POLLED (an output its readers poll: poll_nonzero_*): never the all-zero
/// bits, which stand for "not yet written" (a +0.0 is stored as -0.0, equal
/// in every comparison and function the readers apply), in one relaxed
/// store that the readers' relaxed loads observe.
template <bool POLLED = false>
__device__ __forceinline__ void store_row(bf16 *y, float v) {
  if constexpr (POLLED) {
    unsigned short bits = __bfloat16_as_ushort(f2bf(v));
    bits = bits ? bits : (unsigned short)0x8000u;
    asm volatile("st.relaxed.gpu.global.b16 [%0], %1;" ::"l"(y), "h"(bits) : "memory");
  } else {
    *y = f2bf(v);
  }
}
template <bool POLLED = false>
__device__ __forceinline__ void store_row(float *y, float v) {
  if constexpr (POLLED) {
    unsigned bits = __float_as_uint(v);
    bits = bits ? bits : 0x80000000u;
    asm volatile("st.relaxed.gpu.global.b32 [%0], %1;" ::"l"(y), "r"(bits) : "memory");
  } else {
    *y = v;
  }
}
} // namespace detail

/// Rows [row0, row0 + nrows) of W [rows, K]; K a multiple of 8. Out: bf16
/// (rounded once) or float. POLLED: the output is polled by its readers
/// (a router's logits, schedule-poll-router-logits): detail::store_row's
/// polled form.
template <int THREADS, class Out = bf16, bool POLLED = false>
__device__ void bf16_rows_gemv(const float *xs, const bf16 *__restrict__ W, int K, int row0,
                               int nrows, Out *y) {
  constexpr int WARPS = THREADS / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#ifndef MK_ROWS_ONE_WARP
  // A task of one row (the router's, KDA's beta) splits K over all warps
  // instead of leaving 7 of 8 idle, so its loads are one round trip instead
  // of ~3; the fp32 partial sums meet in shared memory, rounded once: 3 us
  // faster end to end (perf notes #67-#68). -DMK_ROWS_ONE_WARP: one warp per
  // row here too (the form before, to measure against).
  if (nrows == 1) {
    __shared__ float part[WARPS];
    const bf16 *wr = W + (size_t)row0 * K;
    float acc = 0.f;
    for (int k = threadIdx.x * 8; k < K; k += THREADS * 8) {
      acc = detail::dot8_bf16(wr + k, xs + k, acc);
    }
    acc = warp_sum(acc);
    if (lane == 0)
      part[warp] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
      float sum = 0.f;
#pragma unroll
      for (int w = 0; w < WARPS; ++w)
        sum += part[w];
      detail::store_row<POLLED>(y + row0, sum);
    }
    __syncthreads(); // `part` is free for the block's next task
    return;
  }
#endif
  for (int row = row0 + warp; row < row0 + nrows; row += WARPS) {
    const bf16 *wr = W + (size_t)row * K;
    float acc = 0.f;
    for (int k = lane * 8; k < K; k += 256) {
      acc = detail::dot8_bf16(wr + k, xs + k, acc);
    }
    acc = warp_sum(acc);
    if (lane == 0)
      detail::store_row<POLLED>(y + row, acc);
  }
}

} // namespace mk
