//===- moe.cuh - Router top-k and expert FFN tiles ----------------*- CUDA -*-===//
//
// The router's logits are a grid-wide product, but the softmax + top-k over
// E values is cheaper to recompute in every block than to broadcast, so each
// block calls moe_topk after the logits are visible. Expert FFNs are W4A16
// GEMV tiles: gate/up tiles write silu(gate) * up (fp32, as the spec), down
// tiles accumulate w_j * y into an fp32 buffer with atomics (rounded once by
// the residual that consumes it).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mk/common.cuh"
#include "mk/w4a16_gemv.cuh"

namespace mk {

/// p = softmax(logits); top-K by probability (ties: the lower index wins);
/// w = p / (sum(p) + 1e-9) * scaling. Results in shared memory (w_out[K],
/// idx_out[K]); all threads call it; ends synchronized.
template <int E, int K>
__device__ void moe_topk(const bf16 *logits, float scaling, float *w_out, int *idx_out) {
  static_assert(K <= E, "top-k larger than the expert count");
  constexpr int PER = (E + 31) / 32;
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    float v[PER];
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      const int e = lane + 32 * i;
      v[i] = e < E ? bf2f(__ldcg(logits + e)) : -INFINITY;
      mx = fmaxf(mx, v[i]);
    }
    mx = warp_max(mx);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      const int e = lane + 32 * i;
      v[i] = e < E ? expf(v[i] - mx) : 0.f;
      sum += v[i];
    }
    sum = warp_sum(sum);
#pragma unroll
    for (int i = 0; i < PER; ++i)
      v[i] = (lane + 32 * i) < E ? v[i] / sum : -1.f; // -1: never chosen
    float wsum = 0.f;
    for (int k = 0; k < K; ++k) {
      float best = -2.f;
      int bi = 0x7fffffff;
#pragma unroll
      for (int i = 0; i < PER; ++i)
        if (v[i] > best) { // strict: the lower index of this lane wins ties
          best = v[i];
          bi = lane + 32 * i;
        }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float ob = __shfl_xor_sync(0xffffffffu, best, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ob > best || (ob == best && oi < bi)) {
          best = ob;
          bi = oi;
        }
      }
      if (lane == 0) {
        w_out[k] = best;
        idx_out[k] = bi;
      }
      wsum += best;
#pragma unroll
      for (int i = 0; i < PER; ++i)
        if (lane + 32 * i == bi)
          v[i] = -1.f;
    }
    __syncwarp();
    if (lane < K)
      w_out[lane] = w_out[lane] / (wsum + 1e-9f) * scaling;
  }
  __syncthreads();
}

template <int THREADS, int TN>
__host__ __device__ constexpr int moe_gate_up_smem_floats() { return 2 * TN + w4a16_red_floats<THREADS, TN>(); }

/// hmid[n] = silu(x @ W_gate)[n] * (x @ W_up)[n] for columns [n0, n0+nvalid)
/// of one expert (pointers already offset to it). xs: x in shared memory.
template <int THREADS, int TN, int GROUP>
__device__ void moe_gate_up_task(const float *xs, int K, const uint8_t *g_wq, const bf16 *g_s,
                                 const bf16 *g_z, const uint8_t *u_wq, const bf16 *u_s,
                                 const bf16 *u_z, int N, int n0, int nvalid, float *hmid,
                                 float *smem) {
  float *sg = smem, *su = smem + TN, *red = smem + 2 * TN;
  w4a16_gemv_tile<THREADS, TN, GROUP>(xs, g_wq, g_s, g_z, N, n0, nvalid, 0, K, red,
                                      EpiStoreSmem{sg, n0});
  w4a16_gemv_tile<THREADS, TN, GROUP>(xs, u_wq, u_s, u_z, N, n0, nvalid, 0, K, red,
                                      EpiStoreSmem{su, n0});
  for (int c = threadIdx.x; c < nvalid; c += THREADS)
    hmid[n0 + c] = silu(sg[c]) * su[c];
  __syncthreads();
}

template <int THREADS, int TN>
__host__ __device__ constexpr int moe_down_smem_floats(int inter) { return inter + w4a16_red_floats<THREADS, TN>(); }

/// acc[n] += weight * (hmid @ W_down)[n] over rows [k0, k1), columns
/// [n0, n0+nvalid) of one expert. hmid: fp32 [inter] written by other blocks.
template <int THREADS, int TN, int GROUP>
__device__ void moe_down_task(const float *hmid, int inter, const uint8_t *wq, const bf16 *s,
                              const bf16 *z, int N, int n0, int nvalid, int k0, int k1,
                              float weight, float *acc, float *smem) {
  float *xs = smem, *red = smem + inter;
  for (int i = k0 + threadIdx.x; i < k1; i += THREADS)
    xs[i] = __ldcg(hmid + i);
  __syncthreads();
  w4a16_gemv_tile<THREADS, TN, GROUP>(xs, wq, s, z, N, n0, nvalid, k0, k1, red,
                                      EpiAtomicAddF32{acc, weight, 0});
}

} // namespace mk
