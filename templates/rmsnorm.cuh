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
// is inlined into) and pays one. Of its three inputs only the GEMV sums
// (`acc`) are new after the grid barrier in front of the norm: the residual
// base was written before an earlier barrier and the norm weight is static,
// so a block copies those two (block_rmsnorm_prestage) before it waits at
// that barrier, and only the sums are loaded after it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mk/common.cuh"
#include "mk/phase_timing.cuh"

namespace mk {

/// x_smem[i] = acc ? bf16(base[i] + bf16(acc[i])) : base[i], as floats.
/// `acc` holds a GEMV's fp32 sum that the spec rounds to bf16 before the
/// residual add. If `out` is non-null, block 0 also stores x (the residual
/// base of later phases). `resid` (shared memory, or null): x is also kept
/// there as bf16, and with `residBase` the base is read from it instead of
/// `base` (which holds the same values: the residual the block's previous
/// norm left there). Caller synchronizes before reading x_smem.
template <int THREADS>
__device__ __forceinline__ void block_residual(const bf16 *base, const float *acc, int D,
                                               float *x_smem, bf16 *out, bf16 *resid = nullptr,
                                               bool residBase = false) {
  MK_UNROLL_RUNTIME
  for (int i = threadIdx.x; i < D; i += THREADS) {
    float v = resid && residBase ? bf2f(resid[i]) : bf2f(__ldcg(base + i));
    if (acc)
      v = round_bf16(v + round_bf16(__ldcg(acc + i)));
    x_smem[i] = v;
    if (resid)
      resid[i] = f2bf(v);
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
/// Whether block_residual_rmsnorm takes its staged (16-byte copy) form for
/// these arguments; block_rmsnorm_prestage decides by the same test.
__device__ __forceinline__ bool norm_staged(const bf16 *base, const float *acc, const bf16 *w,
                                            int D, const float *y_smem, const bf16 *out,
                                            const void *stage) {
#ifndef MK_NORM_SCALAR
  return D % 8 == 0 && aligned16(base) && (!acc || aligned16(acc)) && aligned16(w) &&
         (!out || aligned16(out)) && aligned16(y_smem) && aligned16(stage);
#else
  (void)base, (void)acc, (void)w, (void)D, (void)y_smem, (void)out, (void)stage;
  return false;
#endif
}
/// The staged norm's copy of the norm weight into its stage (bytes
/// [16 D / 8, 32 D / 8)), one commit group.
__device__ __forceinline__ void norm_copy_weight(const bf16 *w, int D, uint8_t *stage,
                                                 int threads) {
  const int nv = D / 8;
#pragma unroll 1
  for (int v = threadIdx.x; v < nv; v += threads)
    cp_async16(stage + 16 * nv + 16 * v, w + 8 * v);
  cp_async_commit();
}
} // namespace detail

/// Copies the next phase's norm weight (static: no barrier guards it) into
/// the stage of its block_residual_rmsnorm (same arguments) before the
/// block waits at the grid barrier in front of that phase, which then
/// passes `prestaged`. Every thread calls it, once the block's tasks of the
/// current phase are done with `stage`. -DMK_NORM_NO_PRESTAGE: nothing is
/// copied ahead (the form before, to measure against).
template <int THREADS>
__device__ __forceinline__ void block_rmsnorm_prestage(const bf16 *base, const float *acc,
                                                       const bf16 *w, int D, const float *y_smem,
                                                       const bf16 *out, void *stage) {
#ifndef MK_NORM_NO_PRESTAGE
  __syncthreads(); // every warp is done with the current phase's use of `stage`
  if (detail::norm_staged(base, acc, w, D, y_smem, out, stage))
    detail::norm_copy_weight(w, D, static_cast<uint8_t *>(stage), THREADS);
#else
  (void)base, (void)acc, (void)w, (void)D, (void)y_smem, (void)out, (void)stage;
#endif
}

/// block_residual then block_rmsnorm into y_smem, same arithmetic (x
/// rounded as block_residual, y as block_rmsnorm; only the order of the
/// sum of squares differs), with base, acc and w copied into `stage`
/// (residual_rmsnorm_stage_bytes(D) of shared memory, 16-byte aligned, free
/// for the call) by one batch of cp.async. `prestaged`: w was copied by
/// block_rmsnorm_prestage (same arguments). `resid` (shared memory, D bf16,
/// 16-byte aligned, or null) keeps x for the next norm, whose base it is;
/// `residBase`: this norm's base is what the block's previous norm left
/// there, read from it instead of global memory. After a grid barrier
/// only acc is then loaded. The caller synchronizes before (stage and
/// y_smem free); y_smem is ready for every thread on return. Shapes or
/// pointers that do not allow 16-byte copies (D % 8 != 0, unaligned
/// buffers) take the element-wise functions; so does -DMK_NORM_SCALAR (to
/// measure against). -DMK_NORM_NO_RESIDENT: no resid (the form before).
template <int THREADS>
__device__ __forceinline__ void block_residual_rmsnorm(const bf16 *base, const float *acc,
                                                       const bf16 *w, int D, float eps,
                                                       float *y_smem, bf16 *out, float *scratch,
                                                       void *stage, bool prestaged = false,
                                                       bf16 *resid = nullptr,
                                                       bool residBase = false) {
#ifdef MK_NORM_NO_RESIDENT
  resid = nullptr;
#endif
  if (resid && !detail::aligned16(resid))
    resid = nullptr; // neither read nor written
  if (!resid)
    residBase = false;
  if (!detail::norm_staged(base, acc, w, D, y_smem, out, stage)) {
    block_residual<THREADS>(base, acc, D, y_smem, out, resid, residBase);
    block_rmsnorm<THREADS>(y_smem, w, D, eps, y_smem, scratch);
    return;
  }
#ifdef MK_NORM_NO_PRESTAGE
  prestaged = false;
#endif
  [[maybe_unused]] StageClock clk; // -DMK_PHASE_TIMING: loads, then the rest
  const int nv = D / 8; // 8 elements per 16 bytes of bf16, per 32 of fp32
  uint8_t *sb = static_cast<uint8_t *>(stage); // base: 16 B per vector
  uint8_t *sw = sb + 16 * nv;                  // w:    16 B per vector
  uint8_t *sa = sw + 16 * nv;                  // acc:  32 B per vector
  if (residBase)
    sb = reinterpret_cast<uint8_t *>(resid); // the same layout: bf16 in order
#pragma unroll 1
  for (int v = threadIdx.x; v < nv; v += THREADS) {
    if (!residBase)
      cp_async16(sb + 16 * v, base + 8 * v);
    if (!prestaged)
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
    const uint2 xb = make_uint2(pack_bf16x2(x.x, x.y), pack_bf16x2(x.z, x.w));
    if (resid) // in place when residBase: each thread rewrites only what it read
      reinterpret_cast<uint2 *>(resid)[q] = xb;
    if (out && blockIdx.x == 0)
      reinterpret_cast<uint2 *>(out)[q] = xb;
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
                                void *stage, bool prestaged = false, bf16 *resid = nullptr,
                                bool residBase = false) {
  block_residual_rmsnorm<THREADS>(base, acc, w, D, eps, y_smem, out, scratch, stage, prestaged,
                                  resid, residBase);
}

} // namespace mk
