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

/// Block 0 records the global timer (ns) in slot i (phase timing builds).
__device__ __forceinline__ void phase_mark(unsigned long long *slots, int i) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    slots[i] = t;
  }
}

} // namespace mk
