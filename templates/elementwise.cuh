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

} // namespace mk
