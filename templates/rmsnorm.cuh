//===- rmsnorm.cuh - Residual add and RMSNorm, recomputed per block -*- CUDA -*-===//
//
// A 2304-wide RMSNorm costs far less than a grid barrier, so every block
// recomputes it into shared memory instead of waiting for one producer.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mk/common.cuh"

namespace mk {

// -DMK_NORM_BATCHED_LOADS (opt-in, to measure): each thread issues all its
// global loads of a pass before using any (kNormLoadsPerThread in flight),
// instead of one dependent round trip per loop iteration, which the
// compiler cannot batch across the possibly aliasing residual store.
constexpr int kNormLoadsPerThread = 12;

/// x_smem[i] = acc ? bf16(base[i] + bf16(acc[i])) : base[i], as floats.
/// `acc` holds a GEMV's fp32 sum that the spec rounds to bf16 before the
/// residual add. If `out` is non-null, block 0 also stores x (the residual
/// base of later phases). Caller synchronizes before reading x_smem.
template <int THREADS>
__device__ __forceinline__ void block_residual(const bf16 *base, const float *acc, int D,
                                               float *x_smem, bf16 *out) {
#ifdef MK_NORM_BATCHED_LOADS
  constexpr int U = kNormLoadsPerThread;
  for (int i0 = 0; i0 < D; i0 += U * THREADS) {
    float b[U], a[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = i0 + u * THREADS + (int)threadIdx.x;
      b[u] = i < D ? bf2f(__ldcg(base + i)) : 0.f;
      a[u] = acc && i < D ? __ldcg(acc + i) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = i0 + u * THREADS + (int)threadIdx.x;
      if (i < D) {
        const float v = acc ? round_bf16(b[u] + round_bf16(a[u])) : b[u];
        x_smem[i] = v;
        if (out && blockIdx.x == 0)
          out[i] = f2bf(v);
      }
    }
  }
#else
  for (int i = threadIdx.x; i < D; i += THREADS) {
    float v = bf2f(__ldcg(base + i));
    if (acc)
      v = round_bf16(v + round_bf16(__ldcg(acc + i)));
    x_smem[i] = v;
    if (out && blockIdx.x == 0)
      out[i] = f2bf(v);
  }
#endif
}

/// y_smem = bf16(x * rsqrt(mean(x^2) + eps) * w) as floats. x_smem may alias
/// y_smem. `scratch` holds 32 floats.
template <int THREADS>
__device__ __forceinline__ void block_rmsnorm(const float *x_smem, const bf16 *w, int D, float eps,
                                              float *y_smem, float *scratch) {
#ifdef MK_NORM_BATCHED_LOADS
  // The weights do not depend on x: their loads go out before the sum.
  constexpr int U = kNormLoadsPerThread;
  float wv[U];
  const bool fits = D <= U * THREADS;
  if (fits) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = u * THREADS + (int)threadIdx.x;
      wv[u] = i < D ? bf2f(w[i]) : 0.f;
    }
  }
#endif
  __syncthreads();
  float ss = 0.f;
  for (int i = threadIdx.x; i < D; i += THREADS)
    ss += x_smem[i] * x_smem[i];
  ss = block_sum<THREADS>(ss, scratch);
  const float r = 1.f / sqrtf(ss / float(D) + eps);
#ifdef MK_NORM_BATCHED_LOADS
  if (fits) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = u * THREADS + (int)threadIdx.x;
      if (i < D)
        y_smem[i] = round_bf16(x_smem[i] * r * wv[u]);
    }
    __syncthreads();
    return;
  }
#endif
  for (int i = threadIdx.x; i < D; i += THREADS)
    y_smem[i] = round_bf16(x_smem[i] * r * bf2f(w[i]));
  __syncthreads();
}

} // namespace mk
