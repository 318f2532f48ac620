//===- rmsnorm.cuh - Residual add and RMSNorm, recomputed per block -*- CUDA -*-===//
//
// A 2304-wide RMSNorm costs far less than a grid barrier, so every block
// recomputes it into shared memory instead of waiting for one producer.
//
// It sits on every block's critical path at the start of a phase. The
// element-wise loops (block_residual, block_rmsnorm) pay one L2 round trip
// per few iterations; block_residual_rmsnorm, what the kernels call, issues
// all of a block's global loads at once (16-byte cp.async into shared
// memory, the weight into registers) and pays one. Of its three inputs only
// the GEMV sums (`acc`) are new after the grid barrier in front of the
// norm: the residual base is what the block's previous norm computed (kept
// in shared memory, `resid`), so after the barrier only the sums and the
// static weight come from L2. (Asking L1 for the weight before the barrier
// measured 2 us per step slower, perf notes #87.)
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mk/common.cuh"
#include "mk/phase_timing.cuh"

namespace mk {

/// x_smem[i] = acc ? bf16(base[i] + bf16(acc[i])) : base[i], as floats.
/// `acc` holds a GEMV's fp32 sum that the spec rounds to bf16 before the
/// residual add; TWO_SUMS with a second sum `acc2` (not null) rounded apart,
/// x = bf16(base + bf16(bf16(acc) + bf16(acc2))) (an FFN whose routed and
/// shared parts are rounded before their sum: ffn_rounding "each"). If `out` is non-null, block 0 also stores x (the residual
/// base of later phases). `resid` (shared memory, or null): x is also kept
/// there as bf16, and with `residBase` the base is read from it instead of
/// `base` (which holds the same values: the residual the block's previous
/// norm left there). Caller synchronizes before reading x_smem.
template <int THREADS, bool TWO_SUMS = false>
__device__ __forceinline__ void block_residual(const bf16 *base, const float *acc, int D,
                                               float *x_smem, bf16 *out, bf16 *resid = nullptr,
                                               bool residBase = false,
                                               const float *acc2 = nullptr) {
  MK_UNROLL_RUNTIME
  for (int i = threadIdx.x; i < D; i += THREADS) {
    float v = resid && residBase ? bf2f(resid[i]) : bf2f(__ldcg(base + i));
    if (TWO_SUMS && acc && acc2) {
      v = round_bf16(v + round_parts_sum(__ldcg(acc + i), __ldcg(acc2 + i)));
    } else if (acc) {
      v = round_bf16(v + round_bf16(__ldcg(acc + i)));
    }
    x_smem[i] = v;
    if (resid)
      resid[i] = f2bf(v);
    if (out && blockIdx.x == 0)
      out[i] = f2bf(v);
  }
}

/// y_smem = bf16(x * rsqrt(mean(x^2) + eps) * w) as floats (ROUND_TWICE:
/// bf16(bf16(x * rsqrt(...)) * w)). x_smem may alias y_smem. `scratch` holds
/// 32 floats.
template <int THREADS, bool ROUND_TWICE = false>
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
    y_smem[i] = ROUND_TWICE ? round_bf16(round_bf16(x_smem[i] * r) * bf2f(w[i]))
                            : round_bf16(x_smem[i] * r * bf2f(w[i]));
  __syncthreads();
}

/// Shared memory the staged form of block_residual_rmsnorm (-DMK_NORM_STAGED)
/// stages through, in bytes.
__host__ __device__ constexpr int residual_rmsnorm_stage_bytes(int D) { return 8 * D; }

namespace detail {
__device__ __forceinline__ bool aligned16(const void *p) {
  return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}
/// Quads (4 elements) of the norm weight a thread holds in registers
/// across the sum of squares; a thread's quads past these (D > 4 * R *
/// THREADS) are loaded where used.
constexpr int kNormWeightQuads = 4;
/// The resident residual a norm may use: none under -DMK_NORM_NO_RESIDENT
/// or where `resid` is not 16-byte aligned (neither read nor written then),
/// and without one no base is read from it.
__device__ __forceinline__ void norm_resident(bf16 *&resid, bool &residBase) {
#ifdef MK_NORM_NO_RESIDENT
  resid = nullptr;
#endif
  if (resid && !aligned16(resid))
    resid = nullptr;
  if (!resid)
    residBase = false;
}
/// Whether a norm takes its vector form (16-byte copies and quads): D a
/// multiple of 8, every pointer 16-byte aligned, and a place for the base
/// (`basePlace`); never under -DMK_NORM_SCALAR (to measure against).
__device__ __forceinline__ bool norm_vec_ok(const bf16 *base, const float *acc, const bf16 *w,
                                            int D, const float *y_smem, const bf16 *out,
                                            bool basePlace, const float *acc2) {
#ifdef MK_NORM_SCALAR
  return false;
#else
  return D % 8 == 0 && aligned16(base) && (!acc || aligned16(acc)) && aligned16(w) &&
         (!out || aligned16(out)) && aligned16(y_smem) && basePlace &&
         (!acc2 || aligned16(acc2));
#endif
}
/// The vector form's 16-byte copies: the base (unless `residBase`) to
/// `sb`, the weight to `sw` (if staged), the sums to `sa`; one commit.
template <int THREADS>
__device__ __forceinline__ void norm_issue_copies(const bf16 *base, const float *acc,
                                                  const bf16 *w, int D, uint8_t *sb,
                                                  uint8_t *sa, uint8_t *sw, bool residBase) {
#pragma unroll 1
  for (int v = threadIdx.x; v < D / 8; v += THREADS) {
    if (!residBase)
      cp_async16(sb + 16 * v, base + 8 * v);
    if (sw)
      cp_async16(sw + 16 * v, w + 8 * v);
    if (acc) {
      cp_async16(sa + 32 * v, acc + 8 * v);
      cp_async16(sa + 32 * v + 16, acc + 8 * v + 4);
    }
  }
  cp_async_commit();
}
/// The arithmetic of block_residual_rmsnorm's vector form, once its loads
/// have landed for every thread: the base at `sb` (bf16, in order), the
/// sums at `sa` (fp32), the weight at `sw` (staged) or in `wr`. No global
/// load but the weight quads past kNormWeightQuads (none up to 4 x THREADS
/// quads) and, TWO_SUMS, acc2's likewise. Ends before the caller's barrier.
template <int THREADS, bool ROUND_TWICE, bool TWO_SUMS>
__device__ __forceinline__ void norm_rest(const uint8_t *sb, const uint8_t *sa, const uint8_t *sw,
                                          const float *acc, const float *acc2, const bf16 *w,
                                          int D, float eps, float *y_smem, bf16 *out,
                                          float *scratch, bf16 *resid,
                                          const uint2 (&wr)[kNormWeightQuads],
                                          [[maybe_unused]] const float4 (&a2)[kNormWeightQuads]) {
  constexpr int R = kNormWeightQuads;
  const int nq = D / 4;
  // x = bf16(base + bf16(acc)) over quad q: into y_smem, resid (in place
  // when resident: each thread rewrites only what it read) and, block 0,
  // out.
  auto residual = [&](int q, [[maybe_unused]] float4 second) {
    const uint2 b = *reinterpret_cast<const uint2 *>(sb + 8 * q);
    float4 x = make_float4(bf_lo(b.x), bf_hi(b.x), bf_lo(b.y), bf_hi(b.y));
    if (acc) {
      float4 a = *reinterpret_cast<const float4 *>(sa + 16 * q);
      if (TWO_SUMS && acc2)
        a = make_float4(round_parts_sum(a.x, second.x), round_parts_sum(a.y, second.y),
                        round_parts_sum(a.z, second.z), round_parts_sum(a.w, second.w));
      x = make_float4(round_bf16(x.x + round_bf16(a.x)), round_bf16(x.y + round_bf16(a.y)),
                      round_bf16(x.z + round_bf16(a.z)), round_bf16(x.w + round_bf16(a.w)));
    }
    reinterpret_cast<float4 *>(y_smem)[q] = x;
    const uint2 xb = make_uint2(pack_bf16x2(x.x, x.y), pack_bf16x2(x.z, x.w));
    if (resid)
      reinterpret_cast<uint2 *>(resid)[q] = xb;
    if (out && blockIdx.x == 0)
      reinterpret_cast<uint2 *>(out)[q] = xb;
    return x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w;
  };
  float ss = 0.f;
  [[maybe_unused]] const float4 none = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
  for (int j = 0; j < R; ++j)
    if (const int q = threadIdx.x + j * THREADS; q < nq) {
      if constexpr (TWO_SUMS)
        ss += residual(q, a2[j]);
      else
        ss += residual(q, none);
    }
#pragma unroll 1
  for (int q = threadIdx.x + R * THREADS; q < nq; q += THREADS) {
    if constexpr (TWO_SUMS)
      ss += residual(q, acc && acc2 ? __ldcg(reinterpret_cast<const float4 *>(acc2) + q) : none);
    else
      ss += residual(q, none);
  }
  ss = block_sum<THREADS>(ss, scratch);
  const float r = 1.f / sqrtf(ss / float(D) + eps);
  auto scale = [&](int q, uint2 wv) {
    float4 *xd = reinterpret_cast<float4 *>(y_smem) + q;
    const float4 x = *xd;
    if constexpr (ROUND_TWICE)
      *xd = make_float4(round_bf16(round_bf16(x.x * r) * bf_lo(wv.x)),
                        round_bf16(round_bf16(x.y * r) * bf_hi(wv.x)),
                        round_bf16(round_bf16(x.z * r) * bf_lo(wv.y)),
                        round_bf16(round_bf16(x.w * r) * bf_hi(wv.y)));
    else
      *xd = make_float4(round_bf16(x.x * r * bf_lo(wv.x)), round_bf16(x.y * r * bf_hi(wv.x)),
                        round_bf16(x.z * r * bf_lo(wv.y)), round_bf16(x.w * r * bf_hi(wv.y)));
  };
  auto weightAt = [&](int q) {
    return sw ? *reinterpret_cast<const uint2 *>(sw + 8 * q)
              : __ldg(reinterpret_cast<const uint2 *>(w) + q);
  };
#pragma unroll
  for (int j = 0; j < R; ++j)
    if (const int q = threadIdx.x + j * THREADS; q < nq)
      scale(q, sw ? weightAt(q) : wr[j]);
#pragma unroll 1
  for (int q = threadIdx.x + R * THREADS; q < nq; q += THREADS)
    scale(q, weightAt(q));
}
} // namespace detail

/// block_residual then block_rmsnorm into y_smem, same arithmetic (x
/// rounded as block_residual, y as block_rmsnorm; only the order of the sum
/// of squares differs), with one round trip to L2: the GEMV sums `acc`
/// (fp32) are copied into y_smem itself with 16-byte cp.async (x then
/// replaces them in place), the base into `resid`, and the weight into
/// registers, all at once. `resid` (shared memory, D bf16, 16-byte aligned)
/// keeps x for the next norm, whose base it is: with `residBase` this
/// norm's base is what the block's previous norm left there (the same
/// values as `base`, which only block 0 writes) and is not loaded. After a
/// grid barrier only the sums and the (static) weight then come from L2.
/// Uses no shared memory beyond y_smem, resid and
/// the 32 floats of `scratch`, so a phase's first weight stream may fill
/// the work area meanwhile. The caller synchronizes before (y_smem and
/// resid free but for resid's base); y_smem is ready for every thread on
/// return.
///
/// With BASE_IN_STAGE and no `resid` the base lands in `stage` (2 D bytes
/// of it, 16-byte aligned: the phase's work area, which no early stream
/// fills then; what kernels without a resident residual use). Shapes or
/// pointers that do not allow 16-byte copies (D % 8 != 0, unaligned
/// buffers) or no place for the base take the element-wise functions; so
/// does -DMK_NORM_SCALAR (to measure against). -DMK_NORM_STAGED with a
/// `stage` (residual_rmsnorm_stage_bytes(D) of shared memory) stages base
/// (unless resident), weight and sums there instead (session 13's form);
/// -DMK_NORM_NO_RESIDENT ignores `resid` (the base from global memory).
/// REG_LOADS (for a phase whose first weight stream was begun before the
/// norm) loads base and sums through registers instead of cp.async: a
/// cp.async wait cannot skip older groups, so it would wait for the whole
/// begun stream. ROUND_TWICE: y = bf16(bf16(x * r) * w) (the released
/// model's norms; default once, bf16(x * r * w)). TWO_SUMS: where acc2 is
/// not null the residual adds bf16(bf16(acc) + bf16(acc2)) (block_residual's);
/// acc2's quads come through registers, loaded beside the copies (the same
/// round trip).
template <int THREADS, bool BASE_IN_STAGE = false, bool REG_LOADS = false,
          bool ROUND_TWICE = false, bool TWO_SUMS = false>
__device__ __forceinline__ void block_residual_rmsnorm(const bf16 *base, const float *acc,
                                                       const bf16 *w, int D, float eps,
                                                       float *y_smem, bf16 *out, float *scratch,
                                                       void *stage, bf16 *resid,
                                                       bool residBase,
                                                       const float *acc2 = nullptr) {
  detail::norm_resident(resid, residBase);
#ifdef MK_NORM_STAGED
  const bool staged = stage && detail::aligned16(stage);
#else
  const bool staged = false;
  (void)stage;
#endif
  // BASE_IN_STAGE, without a resident residual: the base lands in `stage`
  // (2 D bytes of it) where the caller passes one.
  const bool baseInStage =
      BASE_IN_STAGE && !resid && !staged && stage && detail::aligned16(stage);
  // (Not detail::norm_vec_ok: its place-for-the-base argument, evaluated
  // first, changes this form's sm_90 code; the same condition otherwise.)
#ifndef MK_NORM_SCALAR
  const bool vec = D % 8 == 0 && detail::aligned16(base) && (!acc || detail::aligned16(acc)) &&
                   detail::aligned16(w) && (!out || detail::aligned16(out)) &&
                   detail::aligned16(y_smem) && (resid || staged || baseInStage) &&
                   (!TWO_SUMS || !acc || !acc2 || detail::aligned16(acc2));
#else
  const bool vec = false;
#endif
  if (!vec) {
    block_residual<THREADS, TWO_SUMS>(base, acc, D, y_smem, out, resid, residBase, acc2);
    block_rmsnorm<THREADS, ROUND_TWICE>(y_smem, w, D, eps, y_smem, scratch);
    return;
  }
  [[maybe_unused]] StageClock clk; // -DMK_PHASE_TIMING: loads, then the rest
  constexpr int R = detail::kNormWeightQuads;
  const int nv = D / 8; // 8 elements per 16 bytes of bf16, per 32 of fp32
  const int nq = D / 4;
  // Where the base (bf16, in order), the sums (fp32) and, staged, the
  // weight land.
  uint8_t *sb = baseInStage ? static_cast<uint8_t *>(stage) : reinterpret_cast<uint8_t *>(resid);
  uint8_t *sa = reinterpret_cast<uint8_t *>(y_smem);
  uint8_t *sw = nullptr;
  if (staged) {
    sw = static_cast<uint8_t *>(stage) + 16 * nv;
    sa = sw + 16 * nv;
    if (!residBase)
      sb = static_cast<uint8_t *>(stage);
  }
  // The weight's first quads into registers (under the copies' flight);
  // TWO_SUMS, acc2's too.
  uint2 wr[R];
  [[maybe_unused]] float4 a2[R];
  auto loadWeight = [&] {
#pragma unroll
    for (int j = 0; j < R; ++j) {
      const int q = threadIdx.x + j * THREADS;
      wr[j] =
          !sw && q < nq ? __ldg(reinterpret_cast<const uint2 *>(w) + q) : make_uint2(0u, 0u);
      if constexpr (TWO_SUMS)
        a2[j] = acc && acc2 && q < nq ? __ldcg(reinterpret_cast<const float4 *>(acc2) + q)
                                      : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  };
  if (REG_LOADS && !staged) {
    // Plain L2 loads through registers, no cp.async group: a weight stream
    // begun before the norm (w4a16_gemv_begin: cp.async groups of its own)
    // stays in flight, where the cp.async form's wait for its group would
    // wait for the whole stream too. Every load of a thread is issued
    // before its first store.
    loadWeight();
    constexpr int B = 2;
#pragma unroll 1
    for (int v0 = threadIdx.x; v0 < nv; v0 += B * THREADS) {
      uint4 rb[B], ra[B][2];
#pragma unroll
      for (int j = 0; j < B; ++j) {
        const int v = v0 + j * THREADS;
        if (v < nv) {
          if (!residBase)
            rb[j] = __ldcg(reinterpret_cast<const uint4 *>(base) + v);
          if (acc) {
            ra[j][0] = __ldcg(reinterpret_cast<const uint4 *>(acc) + 2 * v);
            ra[j][1] = __ldcg(reinterpret_cast<const uint4 *>(acc) + 2 * v + 1);
          }
        }
      }
#pragma unroll
      for (int j = 0; j < B; ++j) {
        const int v = v0 + j * THREADS;
        if (v < nv) {
          if (!residBase)
            *reinterpret_cast<uint4 *>(sb + 16 * v) = rb[j];
          if (acc) {
            *reinterpret_cast<uint4 *>(sa + 32 * v) = ra[j][0];
            *reinterpret_cast<uint4 *>(sa + 32 * v + 16) = ra[j][1];
          }
        }
      }
    }
  } else {
    detail::norm_issue_copies<THREADS>(base, acc, w, D, sb, sa, sw, residBase);
    loadWeight();
    cp_async_wait<0>();
  }
  // Each thread waits for its own copies; the barrier orders everyone's
  // before any cross-thread read.
  __syncthreads();
  clk.lap(kStageNormLoads);
  detail::norm_rest<THREADS, ROUND_TWICE, TWO_SUMS>(sb, sa, sw, acc, acc2, w, D, eps, y_smem,
                                                    out, scratch, resid, wr, a2);
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
template <int THREADS, bool BASE_IN_STAGE = false, bool REG_LOADS = false,
          bool ROUND_TWICE = false>
__device__ MK_NORM_OUTLINED_ATTR void
block_residual_rmsnorm_outlined(const bf16 *base, const float *acc, const bf16 *w, int D,
                                float eps, float *y_smem, bf16 *out, float *scratch,
                                void *stage, bf16 *resid, bool residBase) {
  block_residual_rmsnorm<THREADS, BASE_IN_STAGE, REG_LOADS, ROUND_TWICE>(
      base, acc, w, D, eps, y_smem, out, scratch, stage, resid, residBase);
}

/// The same with a second sum rounded apart (block_residual_rmsnorm's
/// TWO_SUMS): the residual adds bf16(bf16(acc) + bf16(acc2)), or with a null
/// acc2 bf16(acc) as the one-sum form (a kernel with some two-sum norm
/// calls this form for all its norms: one copy of the norm's code).
template <int THREADS, bool BASE_IN_STAGE = false, bool REG_LOADS = false,
          bool ROUND_TWICE = false>
__device__ MK_NORM_OUTLINED_ATTR void
block_residual2_rmsnorm_outlined(const bf16 *base, const float *acc, const float *acc2,
                                 const bf16 *w, int D, float eps, float *y_smem, bf16 *out,
                                 float *scratch, void *stage, bf16 *resid, bool residBase) {
  block_residual_rmsnorm<THREADS, BASE_IN_STAGE, REG_LOADS, ROUND_TWICE, true>(
      base, acc, w, D, eps, y_smem, out, scratch, stage, resid, residBase, acc2);
}

/// What a split norm carries from its loads to its arithmetic: whether it
/// took the vector form, and the thread's first norm weight quads (loaded
/// into registers by the loads; they land before the rest is called, which
/// takes them by value).
struct NormLoads {
  bool vec;
  uint2 w[detail::kNormWeightQuads];
};

/// block_residual_rmsnorm (its default form: one sum, rounded once, the
/// residual resident in `resid`) in two parts, so that a phase may ask for
/// its first tile's weights between them (w4a16_gemv_begin): the loads,
/// inlined, issue the copies of the sums and the base and the weight's
/// register loads, and wait for the copies (a block barrier); the rest
/// (out of line, block_residual_rmsnorm_rest_outlined) is the arithmetic,
/// which loads nothing from global memory (the weight quads come in
/// `NormLoads`). Meant to let a stream run under the arithmetic without
/// the norm's loads queueing behind it (perf notes #129, #196); measured
/// no faster, with per-lane `cp.async` streams (#212) and with bulk copies
/// (#213): the arithmetic slows while the block's stream is in flight. Same values as
/// block_residual_rmsnorm_outlined (bit for bit: the same operations in the
/// same order).
template <int THREADS>
__device__ __forceinline__ NormLoads block_residual_rmsnorm_loads(const bf16 *base,
                                                                  const float *acc,
                                                                  const bf16 *w, int D,
                                                                  float *y_smem, bf16 *out,
                                                                  bf16 *resid, bool residBase) {
  [[maybe_unused]] StageClock clk; // -DMK_PHASE_TIMING: the norm's loads
  detail::norm_resident(resid, residBase);
  NormLoads l;
  l.vec = detail::norm_vec_ok(base, acc, w, D, y_smem, out, resid != nullptr, nullptr);
  constexpr int R = detail::kNormWeightQuads;
#pragma unroll
  for (int j = 0; j < R; ++j)
    l.w[j] = make_uint2(0u, 0u);
  if (!l.vec)
    return l;
  detail::norm_issue_copies<THREADS>(base, acc, w, D, reinterpret_cast<uint8_t *>(resid),
                                     reinterpret_cast<uint8_t *>(y_smem), nullptr, residBase);
#pragma unroll
  for (int j = 0; j < R; ++j)
    if (const int q = threadIdx.x + j * THREADS; q < D / 4)
      l.w[j] = __ldg(reinterpret_cast<const uint2 *>(w) + q);
  cp_async_wait<0>();
  __syncthreads();
  clk.lap(kStageNormLoads);
  return l;
}

/// The rest of block_residual_rmsnorm_loads' norm (the same arguments):
/// block_residual_rmsnorm's arithmetic, or, where the loads did not take
/// the vector form, the element-wise functions. y_smem is ready for every
/// thread on return.
template <int THREADS>
__device__ MK_NORM_OUTLINED_ATTR void
block_residual_rmsnorm_rest_outlined(const bf16 *base, const float *acc, const bf16 *w, int D,
                                     float eps, float *y_smem, bf16 *out, float *scratch,
                                     bf16 *resid, bool residBase, NormLoads l) {
  detail::norm_resident(resid, residBase);
  if (!l.vec) {
    block_residual<THREADS>(base, acc, D, y_smem, out, resid, residBase);
    block_rmsnorm<THREADS>(y_smem, w, D, eps, y_smem, scratch);
    return;
  }
  [[maybe_unused]] StageClock clk;
  const float4 none[detail::kNormWeightQuads] = {};
  detail::norm_rest<THREADS, false, false>(reinterpret_cast<const uint8_t *>(resid),
                                           reinterpret_cast<const uint8_t *>(y_smem), nullptr,
                                           acc, nullptr, w, D, eps, y_smem, out, scratch, resid,
                                           l.w, none);
  __syncthreads();
  clk.lap(kStageNormRest);
}
} // namespace mk
