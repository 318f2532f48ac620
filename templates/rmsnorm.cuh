//===- rmsnorm.cuh - Residual add and RMSNorm, recomputed per block -*- CUDA -*-===//
//
// A 2304-wide RMSNorm costs far less than a grid barrier, so every block
// recomputes it into shared memory instead of waiting for one producer.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mk/common.cuh"

namespace mk {

/// x_smem[i] = acc ? bf16(base[i] + bf16(acc[i])) : base[i], as floats.
/// `acc` holds a GEMV's fp32 sum that the spec rounds to bf16 before the
/// residual add. If `out` is non-null, block 0 also stores x (the residual
/// base of later phases). Caller synchronizes before reading x_smem.
template <int THREADS>
__device__ __forceinline__ void block_residual(const bf16 *base, const float *acc, int D,
                                               float *x_smem, bf16 *out) {
  for (int i = threadIdx.x; i < D; i += THREADS) {
    float v = bf2f(__ldcg(base + i));
    if (acc)
      v = round_bf16(v + round_bf16(__ldcg(acc + i)));
    x_smem[i] = v;
    if (out && blockIdx.x == 0)
      out[i] = f2bf(v);
  }
}

/// y_smem = bf16(x * rsqrt(mean(x^2) + eps) * w) as floats. x_smem may alias
/// y_smem. `scratch` holds 32 floats.
template <int THREADS>
__device__ __forceinline__ void block_rmsnorm(const float *x_smem, const bf16 *w, int D, float eps,
                                              float *y_smem, float *scratch) {
  __syncthreads();
  float ss = 0.f;
  for (int i = threadIdx.x; i < D; i += THREADS)
    ss += x_smem[i] * x_smem[i];
  ss = block_sum<THREADS>(ss, scratch);
  const float r = 1.f / sqrtf(ss / float(D) + eps);
  for (int i = threadIdx.x; i < D; i += THREADS)
    y_smem[i] = round_bf16(x_smem[i] * r * bf2f(w[i]));
  __syncthreads();
}

} // namespace mk
