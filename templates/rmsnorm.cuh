//===- rmsnorm.cuh - Residual add and RMSNorm, recomputed per block -*- CUDA -*-===//
//
// A 2304-wide RMSNorm costs far less than a grid barrier, so every block
// recomputes it into shared memory instead of waiting for one producer.
//
// It sits on every block's critical path at the start of a phase. The
// element-wise loops (block_residual, block_rmsnorm) pay one L2 round trip
// per few iterations; block_residual_rmsnorm, what the kernels call, issues
// all of a block's global loads at once as 16-byte cp.async into a shared
// staging area (no registers held, so nothing spills in the kernel body it
// is inlined into) and pays one.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mk/common.cuh"
#include "mk/phase_timing.cuh"

namespace mk {

/// x_smem[i] = acc ? bf16(base[i] + bf16(acc[i])) : base[i], as floats.
/// `acc` holds a GEMV's fp32 sum that the spec rounds to bf16 before the
/// residual add. If `out` is non-null, block 0 also stores x (the residual
/// base of later phases). Caller synchronizes before reading x_smem.
template <int THREADS>
__device__ __forceinline__ void block_residual(const bf16 *base, const float *acc, int D,
                                               float *x_smem, bf16 *out) {
  MK_UNROLL_RUNTIME
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
  MK_UNROLL_RUNTIME
  for (int i = threadIdx.x; i < D; i += THREADS)
    ss += x_smem[i] * x_smem[i];
  ss = block_sum<THREADS>(ss, scratch);
  const float r = 1.f / sqrtf(ss / float(D) + eps);
  MK_UNROLL_RUNTIME
  for (int i = threadIdx.x; i < D; i += THREADS)
    y_smem[i] = round_bf16(x_smem[i] * r * bf2f(w[i]));
  __syncthreads();
}

/// Shared memory block_residual_rmsnorm stages through, in bytes.
__host__ __device__ constexpr int residual_rmsnorm_stage_bytes(int D) { return 8 * D; }

namespace detail {
__device__ __forceinline__ bool aligned16(const void *p) {
  return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}
} // namespace detail

/// block_residual then block_rmsnorm into y_smem, same arithmetic (x
/// rounded as block_residual, y as block_rmsnorm; only the order of the
/// sum of squares differs), with base, acc and w copied into `stage`
/// (residual_rmsnorm_stage_bytes(D) of shared memory, 16-byte aligned, free
/// for the call) by one batch of cp.async. The caller synchronizes before
/// (stage and y_smem free); y_smem is ready for every thread on return.
/// Shapes or pointers that do not allow 16-byte copies (D % 8 != 0,
/// unaligned buffers) take the element-wise functions; so does
/// -DMK_NORM_SCALAR (to measure against).
template <int THREADS>
__device__ __forceinline__ void block_residual_rmsnorm(const bf16 *base, const float *acc,
                                                       const bf16 *w, int D, float eps,
                                                       float *y_smem, bf16 *out, float *scratch,
                                                       void *stage) {
#ifndef MK_NORM_SCALAR
  const bool vec = D % 8 == 0 && detail::aligned16(base) && (!acc || detail::aligned16(acc)) &&
                   detail::aligned16(w) && (!out || detail::aligned16(out)) &&
                   detail::aligned16(y_smem) && detail::aligned16(stage);
#else
  const bool vec = false;
#endif
  if (!vec) {
    block_residual<THREADS>(base, acc, D, y_smem, out);
    block_rmsnorm<THREADS>(y_smem, w, D, eps, y_smem, scratch);
    return;
  }
  [[maybe_unused]] StageClock clk; // -DMK_PHASE_TIMING: loads, then the rest
  const int nv = D / 8; // 8 elements per 16 bytes of bf16, per 32 of fp32
  uint8_t *sb = static_cast<uint8_t *>(stage); // base: 16 B per vector
  uint8_t *sw = sb + 16 * nv;                  // w:    16 B per vector
  uint8_t *sa = sw + 16 * nv;                  // acc:  32 B per vector
#pragma unroll 1
  for (int v = threadIdx.x; v < nv; v += THREADS) {
    cp_async16(sb + 16 * v, base + 8 * v);
    cp_async16(sw + 16 * v, w + 8 * v);
    if (acc) {
      cp_async16(sa + 32 * v, acc + 8 * v);
      cp_async16(sa + 32 * v + 16, acc + 8 * v + 4);
    }
  }
  cp_async_commit();
  cp_async_wait<0>();
  // Each thread waits for its own copies; the barrier in block_sum below
  // orders everyone's before any cross-thread read. Four elements at a time
  // (8 bytes of bf16, 16 of fp32): few registers held in the kernel body.
  __syncthreads();
  clk.lap(kStageNormLoads);
  const int nq = D / 4;
  float ss = 0.f;
#pragma unroll 1
  for (int q = threadIdx.x; q < nq; q += THREADS) {
    const uint2 b = *reinterpret_cast<const uint2 *>(sb + 8 * q);
    float4 x = make_float4(bf_lo(b.x), bf_hi(b.x), bf_lo(b.y), bf_hi(b.y));
    if (acc) {
      const float4 a = *reinterpret_cast<const float4 *>(sa + 16 * q);
      x = make_float4(round_bf16(x.x + round_bf16(a.x)), round_bf16(x.y + round_bf16(a.y)),
                      round_bf16(x.z + round_bf16(a.z)), round_bf16(x.w + round_bf16(a.w)));
    }
    reinterpret_cast<float4 *>(y_smem)[q] = x;
    ss += x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w;
    if (out && blockIdx.x == 0)
      reinterpret_cast<uint2 *>(out)[q] = make_uint2(pack_bf16x2(x.x, x.y), pack_bf16x2(x.z, x.w));
  }
  ss = block_sum<THREADS>(ss, scratch);
  const float r = 1.f / sqrtf(ss / float(D) + eps);
#pragma unroll 1
  for (int q = threadIdx.x; q < nq; q += THREADS) {
    const uint2 wv = *reinterpret_cast<const uint2 *>(sw + 8 * q);
    float4 *xd = reinterpret_cast<float4 *>(y_smem) + q;
    const float4 x = *xd;
    *xd = make_float4(round_bf16(x.x * r * bf_lo(wv.x)), round_bf16(x.y * r * bf_hi(wv.x)),
                      round_bf16(x.z * r * bf_lo(wv.y)), round_bf16(x.w * r * bf_hi(wv.y)));
  }
  __syncthreads();
  clk.lap(kStageNormRest);
}

/// block_residual_rmsnorm as one out-of-line function (one copy of its code
/// for every norm phase of a kernel, instead of one inlined per phase; it
/// also keeps the norm's registers out of the kernel body's allocation).
/// -DMK_NORM_INLINE inlines it again (the form before, to measure against).
#ifdef MK_NORM_INLINE
#define MK_NORM_OUTLINED_ATTR __forceinline__
#else
#define MK_NORM_OUTLINED_ATTR __noinline__
#endif
template <int THREADS>
__device__ MK_NORM_OUTLINED_ATTR void
block_residual_rmsnorm_outlined(const bf16 *base, const float *acc, const bf16 *w, int D,
                                float eps, float *y_smem, bf16 *out, float *scratch,
                                void *stage) {
  block_residual_rmsnorm<THREADS>(base, acc, w, D, eps, y_smem, out, scratch, stage);
}

} // namespace mk
