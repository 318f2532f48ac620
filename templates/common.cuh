//===- common.cuh - Shared device helpers for emitted megakernels -*- CUDA -*-===//
//
// bf16 conversion, warp/block reductions and vector loads used by every other
// template. Emitted kernels include templates as "mk/<name>.cuh"; the runtime
// embeds this folder and hands it to NVRTC, so headers may only include each
// other and CUDA's own headers.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cuda_bf16.h>
#include <stdint.h>

// NVRTC has no <math.h>; the templates only need the constant.
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

// Unrolling that trades code size for a few loop instructions. A phase's
// code runs once per step and comes from L2 each time (the kernel is ~370
// KB of SASS unrolled; perf-notes runs #44-#45: 13% of the step's stall
// samples wait for instructions, and keeping these loops rolled made the
// step 10 us faster), so these loops stay rolled: MK_UNROLL_CODE and
// MK_UNROLL_CODE_N(n) (fully / n times unrolled with -DMK_UNROLLED_CODE,
// the form before, kept to measure against) and MK_UNROLL_RUNTIME (runtime
// trip counts; the compiler's choice with -DMK_UNROLLED_CODE).
#define MK_PRAGMA(x) _Pragma(#x)
#ifndef MK_UNROLLED_CODE
#define MK_UNROLL_CODE MK_PRAGMA(unroll 1)
#define MK_UNROLL_CODE_N(n) MK_PRAGMA(unroll 1)
#define MK_UNROLL_RUNTIME MK_PRAGMA(unroll 1)
#else
#define MK_UNROLL_CODE MK_PRAGMA(unroll)
#define MK_UNROLL_CODE_N(n) MK_PRAGMA(unroll n)
#define MK_UNROLL_RUNTIME
#endif

namespace mk {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float bf2f(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ bf16 f2bf(float v) { return __float2bfloat16_rn(v); }
/// Rounds a float to the nearest bf16 value, returned as a float.
__device__ __forceinline__ float round_bf16(float v) { return bf2f(f2bf(v)); }

/// bf16(bf16(a) + bf16(b)): two fp32 sums rounded apart, then their sum
/// rounded (an FFN whose routed and shared parts are rounded before their
/// sum, ffn_rounding "each"; the norm's residual reads them so, and the
/// emitted final residual and debug_copy_sum compute the same).
__device__ __forceinline__ float round_parts_sum(float a, float b) {
  return round_bf16(round_bf16(a) + round_bf16(b));
}

/// The two bf16 halves of a 32-bit word, widened to float (low half first).
__device__ __forceinline__ float bf_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }
/// {bf16(lo), bf16(hi)} as one 32-bit word (lo in the low half).
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t *>(&h);
}

/// Sum over aligned groups of LANES lanes (the whole warp by default); every
/// lane of the warp takes part.
template <int LANES = 32> __device__ __forceinline__ float warp_sum(float v) {
  static_assert(LANES >= 1 && LANES <= 32 && (LANES & (LANES - 1)) == 0, "a power of two");
#pragma unroll
  for (int o = LANES / 2; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// Maximum over aligned groups of LANES lanes, as warp_sum.
template <int LANES = 32> __device__ __forceinline__ float warp_max(float v) {
  static_assert(LANES >= 1 && LANES <= 32 && (LANES & (LANES - 1)) == 0, "a power of two");
#pragma unroll
  for (int o = LANES / 2; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/// Sum over the block; `scratch` holds at least 32 floats. All threads get
/// the result. Ends with the scratch free for reuse.
template <int THREADS>
__device__ __forceinline__ float block_sum(float v, float *scratch) {
  constexpr int WARPS = THREADS / 32;
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  float r = 0.f;
#pragma unroll
  for (int w = 0; w < WARPS; ++w)
    r += scratch[w];
  return r;
}

__device__ __forceinline__ uint4 ldg_nc(const void *p) {
  return __ldg(reinterpret_cast<const uint4 *>(p));
}

/// A 16-byte copy global -> shared that holds no registers (L2 only, so it
/// sees other blocks' writes as __ldcg does); completes at cp_async_wait.
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}
/// An L2 cache policy that marks every line it touches evict-first (the
/// operand of the `.L2::cache_hint` forms below).
__device__ __forceinline__ unsigned long long l2_evict_first_policy() {
  unsigned long long policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
/// cp_async16 with the L2 cache policy Policy() makes. The shared address is a 64-bit
/// operand on purpose: with a 32-bit one, ptxas 13.0 (sm_90) folded the
/// shared window's base into a uniform register that overlaps the policy's,
/// emitting an LDGSTS the GPU rejects as an illegal instruction (seen in the
/// SIMT tile inside the MLA combine, perf notes #72); the 64-bit form gives
/// byte-identical code elsewhere.
template <unsigned long long (*Policy)()>
__device__ __forceinline__ void cp_async16_hinted(void *smem, const void *gmem) {
  const unsigned long long s = (unsigned long long)__cvta_generic_to_shared(smem);
  const unsigned long long policy = Policy();
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"l"(s),
               "l"(gmem), "l"(policy)
               : "memory");
}
/// cp_async16 for a weight stream: weights are read once per step and the
/// step's weights are ~5x L2, so their lines are marked evict-first, leaving
/// L2 to what a step reads again (decode state, the MLA cache, activations,
/// the kernel's code): 14 us faster at context 2048 (perf notes #71, #72).
/// -DMK_WEIGHTS_EVICT_NORMAL gives the plain copy of before.
__device__ __forceinline__ void cp_async16_weights(void *smem, const void *gmem) {
#ifndef MK_WEIGHTS_EVICT_NORMAL
  cp_async16_hinted<l2_evict_first_policy>(smem, gmem);
#else
  cp_async16(smem, gmem);
#endif
}
/// A 16-byte read-only load of weight data (scales and zero points, bf16
/// weight rows, MLA's W_kv_b rows), its L2 lines marked evict-first as
/// cp_async16_weights marks the streams (perf notes #72: -2.8 us at context
/// 2048); -DMK_WEIGHT_LOADS_EVICT_NORMAL gives the plain __ldg.
__device__ __forceinline__ uint4 ldg_weights(const uint4 *p) {
#ifndef MK_WEIGHT_LOADS_EVICT_NORMAL
  const unsigned long long policy = l2_evict_first_policy();
  uint4 v;
  asm("ld.global.nc.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(policy));
  return v;
#else
  return __ldg(p);
#endif
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/// Streams a weight once: skip L1, keep L2 policy default.
__device__ __forceinline__ uint4 ld_stream(const void *p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

/// Loads `n` values into shared memory as floats (n need not be a multiple
/// of anything). Caller synchronizes.
template <int THREADS>
__device__ __forceinline__ void block_load_f32(const bf16 *src, float *dst, int n) {
  for (int i = threadIdx.x; i < n; i += THREADS)
    dst[i] = bf2f(src[i]);
}
template <int THREADS>
__device__ __forceinline__ void block_load_f32(const float *src, float *dst, int n) {
  for (int i = threadIdx.x; i < n; i += THREADS)
    dst[i] = __ldcg(src + i);
}

/// Asks for this block's share of [p, p + bytes) (16-byte aligned; a tail
/// under 16 bytes is left out) to be brought into L2 with bulk prefetches
/// (sm_90+; a hint: no data moves into the block, nothing is waited for).
/// The range (under 4 GB) is cut into gridDim.x shares of whole 256-byte
/// lines; thread 0 of each block issues its share. Out of line: a kernel
/// names many weights, and the call is cheaper than its inlined body.
__device__ __noinline__ void l2_prefetch_share(const void *p, unsigned bytes) {
#if __CUDA_ARCH__ >= 900
  if (threadIdx.x != 0)
    return;
  const unsigned per = ((bytes + gridDim.x - 1) / gridDim.x + 255u) & ~255u;
  const unsigned b0 = per * blockIdx.x;
  if (b0 >= bytes)
    return;
  const unsigned n = (bytes - b0 < per ? bytes - b0 : per) & ~15u;
  if (n)
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(static_cast<const char *>(p) + b0),
                 "r"(n)
                 : "memory");
#else
  (void)p, (void)bytes;
#endif
}

/// Asks L2 for [p, p + bytes) (the size rounded down to 16 bytes; nothing
/// if p is not 16-byte aligned, as the bulk prefetch requires): one bulk
/// prefetch by thread 0 (sm_90+; a hint: nothing is copied into the block or
/// waited for). For what a block's own next instance reads, where
/// l2_prefetch_share spreads a whole weight over the grid.
__device__ __forceinline__ void l2_prefetch_range(const void *p, unsigned bytes) {
#if __CUDA_ARCH__ >= 900
  if (threadIdx.x == 0 && (bytes & ~15u) && (reinterpret_cast<uintptr_t>(p) & 15u) == 0)
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes & ~15u)
                 : "memory");
#else
  (void)p, (void)bytes;
#endif
}

__device__ __forceinline__ float silu(float x) { return x / (1.f + expf(-x)); }
__device__ __forceinline__ float sigmoidf_(float x) { return 1.f / (1.f + expf(-x)); }
__device__ __forceinline__ float softplusf_(float x) {
  return x > 20.f ? x : log1pf(expf(x));
}

} // namespace mk
