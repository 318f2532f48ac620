//===- debug_capture.cuh - Copies into the debug arena -------------*- CUDA -*-===//
//
// Only kernels emitted with --debug-capture include this header. They write
// each phase's intermediates into the `debug` arena (docs/kernel-abi.md):
// workspace, state and output values are copied once at the end of the step,
// after one extra grid barrier (debug_copy, debug_mla_q); values that only
// live in one block's shared memory or registers are written where they are
// computed (debug_store_smem, debug_short_conv).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mk/common.cuh"
#include "mk/kda.cuh"

namespace mk {

__device__ __forceinline__ float debug_load(const bf16 *p) { return bf2f(__ldcg(p)); }
__device__ __forceinline__ float debug_load(const float *p) { return __ldcg(p); }
__device__ __forceinline__ void debug_store(bf16 *p, float v) { *p = f2bf(v); }
__device__ __forceinline__ void debug_store(float *p, float v) { *p = v; }

/// dst[i] = src[i] for i < n, converted to dst's type (an fp32 accumulator
/// into bf16 rounds to nearest even, as the residual that consumes it does).
/// Spread over the grid; call after a grid barrier.
template <class S, class D>
__device__ void debug_copy(const S *src, int n, D *dst) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    debug_store(dst + i, debug_load(src + i));
}

/// dst[i] = bf16(bf16(a[i]) + bf16(b[i])): an FFN output whose two fp32
/// sums are rounded apart (ffn_rounding "each"), as the residual reads it.
/// Spread over the grid; call after a grid barrier.
__device__ __forceinline__ void debug_copy_sum(const float *a, const float *b, int n, bf16 *dst) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    dst[i] = f2bf(round_bf16(__ldcg(a + i)) + round_bf16(__ldcg(b + i)));
}

/// Block-wide copy of a shared-memory vector (already bf16-rounded floats).
/// The caller picks one block; ends synchronized.
template <class D>
__device__ void debug_store_smem(const float *xs, int n, D *dst) {
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    debug_store(dst + i, xs[i]);
  __syncthreads();
}

/// q after RoPE, [HM, NOPE + ROPE]: the nope part from the projection `q`,
/// the rotated rope part from `q_rope` [HM, ROPE]. Spread over the grid.
template <int HM, int NOPE, int ROPE>
__device__ void debug_mla_q(const bf16 *q, const bf16 *q_rope, bf16 *dst) {
  constexpr int QD = NOPE + ROPE;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < HM * QD; i += gridDim.x * blockDim.x) {
    const int h = i / QD, c = i % QD;
    dst[i] = c < NOPE ? __ldcg(q + i) : __ldcg(q_rope + h * ROPE + (c - NOPE));
  }
}

/// The short conv outputs of channels [c0, c0 + n), recomputed from the raw
/// projection and the OLD window with the function kda_head_chunk_task uses
/// (the task keeps them in shared memory only). Call before the windows are
/// committed.
template <int CONV>
__device__ void debug_short_conv(int c0, int n, int C, const bf16 *x, const bf16 *win,
                                 const bf16 *w, bf16 *dst) {
  for (int c = c0 + (int)threadIdx.x; c < c0 + n; c += blockDim.x)
    dst[c] = f2bf(short_conv_channel<CONV>(x, win, w, C, c));
}

} // namespace mk
