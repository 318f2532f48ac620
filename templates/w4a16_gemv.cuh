//===- w4a16_gemv.cuh - Fused int4 dequant + GEMV tile ------------*- CUDA -*-===//
//
// y[n] = sum_k x[k] * (q[k,n] - z[k/G,n]) * s[k/G,n] for one task: TN output
// columns starting at n0, over input rows [k0, k1). The int4 payload is
// streamed once with 16-byte loads and never materialized.
//
// Storage (the spec's): w_q u8 [K/2, N], byte [r,n] = q[2r,n] | q[2r+1,n]<<4;
// scales, zeros bf16 [K/G, N].
//
// Arithmetic is the spec's, bit for bit per weight: w = bf16((q - z) * s),
// then y += f32(x) * f32(w) in fp32. Two weights (rows 2r, 2r+1 of one
// column: one byte) are dequantized together in bf16x2: a byte permute and a
// mask build {128 + q_lo, 128 + q_hi} (exact bf16 integers), HSUB2 subtracts
// 128 + z exactly, HMUL2 multiplies by s and rounds once, which is exactly the
// spec's rounding. Matching the oracle's weights exactly keeps layer outputs
// on the same side of bf16 rounding boundaries, which is what keeps the MoE
// top-k from flipping on near ties.
//
// Thread layout: CT = TN/16 threads across the tile (each owns 16 adjacent
// columns, one 16-byte load per row pair), RT = THREADS/CT thread rows, each
// owning a contiguous range of row pairs. Partial sums are reduced across
// the thread rows of a warp with shuffles, then across warps in shared memory.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mk/common.cuh"
#include "mk/phase_timing.cuh"

namespace mk {

/// -DMK_TILE_TRACE (template bench only): lane 0 of every warp of the packed
/// exact tile stamps the global timer at its stages into
/// mk_tile_trace[block][warp][stage]: 0 entry, 3 prologue done (first
/// group's scales in registers, the weight loads issued), 4 first step's
/// weights landed, 5 last step done, 6 every warp done (the reduction
/// starts), 7 partial sums in shared memory, 9 exit; with -DMK_PACKED_BULK
/// also 1 scale loads issued, 8 the stream start's block barrier passed, 2
/// bulk copies issued (in that order, before 3).
#ifdef MK_TILE_TRACE
constexpr int kTileTraceBlocks = 1024, kTileTraceWarps = 16, kTileTraceStages = 10;
__device__ unsigned long long mk_tile_trace[kTileTraceBlocks][kTileTraceWarps][kTileTraceStages];
/// Stamps go to shared memory (a global store could stall behind the
/// weight stream and time itself); the last stage copies the warp's row out.
__device__ __forceinline__ void tile_stamp(int stage) {
  __shared__ unsigned long long rows[kTileTraceWarps][kTileTraceStages];
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  const int warp = threadIdx.x >> 5;
  if ((threadIdx.x & 31) == 0) {
    rows[warp][stage] = t;
    if (stage == kTileTraceStages - 1 && blockIdx.x < kTileTraceBlocks)
      for (int i = 0; i < kTileTraceStages; ++i)
        mk_tile_trace[blockIdx.x][warp][i] = rows[warp][i];
  }
}
#define MK_TILE_STAMP(i) ::mk::tile_stamp(i)
#else
#define MK_TILE_STAMP(i) ((void)0)
#endif

/// Epilogues: called once per valid output column by one thread, with the
/// tile's (or split-K slice's) fp32 sum for absolute column n.
struct EpiStoreBf16 {
  bf16 *y;
  int offset; // y[n + offset]
  __device__ void operator()(int n, float v) const { y[n + offset] = f2bf(v); }
};
struct EpiStoreF32 {
  float *y;
  int offset;
  __device__ void operator()(int n, float v) const { y[n + offset] = v; }
};
struct EpiAtomicAddF32 {
  float *y;
  float scale;
  int offset;
  __device__ void operator()(int n, float v) const { atomicAdd(y + n + offset, v * scale); }
};
/// Orders of a GEMV tile's int4 payload (the manifest's `tile`/`order`):
/// the spec's row-major storage (or tile-contiguous), the exact tensor-core
/// tile's lane order (`mma`), or the integer tile's order (`int8`).
/// kOrderMmaScaled / kOrderMmaFolded: the `mma` storage, the tile with the
/// scales applied per group (w4a16_gemv_tile_grouped, `arithmetic=scaled`;
/// with the zero points folded too, `arithmetic=folded`): a choice of math,
/// not of storage (the manifest says `mma`).
enum WeightOrder : int {
  kOrderRowMajor = 0,
  kOrderMma = 1,
  kOrderInt8 = 2,
  kOrderMmaScaled = 3,
  kOrderMmaFolded = 4
};

/// Stores into shared memory at n - n0 (caller synchronizes).
struct EpiStoreSmem {
  float *y;
  int n0;
  __device__ void operator()(int n, float v) const { y[n - n0] = v; }
};

namespace detail {
__device__ __forceinline__ __nv_bfloat162 as_bf2(uint32_t u) {
  __nv_bfloat162 r;
  *reinterpret_cast<uint32_t *>(&r) = u;
  return r;
}
__device__ __forceinline__ uint32_t as_u32(__nv_bfloat162 b) {
  return *reinterpret_cast<uint32_t *>(&b);
}

/// The raw words behind load_group_scales: {s[0:8], s[8:16], z[0:8], z[8:16]}.
struct GroupScalesRaw {
  uint4 sa, sb, za, zb;
};
__device__ __forceinline__ GroupScalesRaw load_group_scales_raw(const bf16 *scales,
                                                                const bf16 *zeros, int N, int grp,
                                                                int col) {
  const uint4 *sp = reinterpret_cast<const uint4 *>(scales + (size_t)grp * N + col);
  const uint4 *zp = reinterpret_cast<const uint4 *>(zeros + (size_t)grp * N + col);
  return {ldg_weights(sp), ldg_weights(sp + 1), ldg_weights(zp), ldg_weights(zp + 1)};
}
/// load_group_scales's expansion of the raw words.
__device__ __forceinline__ void expand_group_scales(const GroupScalesRaw &r, uint32_t *s2,
                                                    uint32_t *zc2) {
  const uint32_t sw[8] = {r.sa.x, r.sa.y, r.sa.z, r.sa.w, r.sb.x, r.sb.y, r.sb.z, r.sb.w};
  const uint32_t zw[8] = {r.za.x, r.za.y, r.za.z, r.za.w, r.zb.x, r.zb.y, r.zb.z, r.zb.w};
  const __nv_bfloat162 c128 = __floats2bfloat162_rn(128.f, 128.f);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    s2[2 * i] = __byte_perm(sw[i], 0u, 0x1010);
    s2[2 * i + 1] = __byte_perm(sw[i], 0u, 0x3232);
    const uint32_t zi = as_u32(__hadd2(as_bf2(zw[i]), c128));
    zc2[2 * i] = __byte_perm(zi, 0u, 0x1010);
    zc2[2 * i + 1] = __byte_perm(zi, 0u, 0x3232);
  }
}
/// A lane's 16 columns' scales and zero points, as the exact bf16x2
/// dequantization below takes them: column j's {s, s} and {128 + z, 128 + z}.
/// Held as column pairs (sp[i] = {s[2i], s[2i+1]}, zp[i] = {128 + z[2i],
/// 128 + z[2i+1]}) and splatted where used: ptxas folds the splat into the
/// HADD2 / HMUL2 operand's half selector (.H0_H0 / .H1_H1), so it costs no
/// instruction, and a group change expands 8 words with 8 HADD2 instead of
/// 16 pairs with 32 PRMT + 8 HADD2, in 16 registers instead of 32 (the decode
/// step 1.3 us faster than with the splatted form, perf notes #64).
struct ColumnScales {
  uint32_t sp[8] = {}, zp[8] = {};
  __device__ __forceinline__ void set(const GroupScalesRaw &r) {
    const uint32_t sw[8] = {r.sa.x, r.sa.y, r.sa.z, r.sa.w, r.sb.x, r.sb.y, r.sb.z, r.sb.w};
    const uint32_t zw[8] = {r.za.x, r.za.y, r.za.z, r.za.w, r.zb.x, r.zb.y, r.zb.z, r.zb.w};
    const __nv_bfloat162 c128 = __floats2bfloat162_rn(128.f, 128.f);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      sp[i] = sw[i];
      zp[i] = as_u32(__hadd2(as_bf2(zw[i]), c128));
    }
  }
  __device__ __forceinline__ static uint32_t splat(uint32_t u, int h) {
    const __nv_bfloat162 b = as_bf2(u);
    return as_u32(h ? __high2bfloat162(b) : __low2bfloat162(b));
  }
  __device__ __forceinline__ uint32_t s(int j) const { return splat(sp[j / 2], j % 2); }
  __device__ __forceinline__ uint32_t zc(int j) const { return splat(zp[j / 2], j % 2); }
};
/// Loads the scales and zeros of quantization group `grp` for the 16 columns
/// starting at `col`, as bf16x2 pairs {s, s} and {128 + z, 128 + z} (the
/// operands of the exact bf16x2 dequantization below).
__device__ __forceinline__ void load_group_scales(const bf16 *scales, const bf16 *zeros, int N,
                                                  int grp, int col, uint32_t *s2, uint32_t *zc2) {
  expand_group_scales(load_group_scales_raw(scales, zeros, N, grp, col), s2, zc2);
}

/// Asks for group `grp`'s scales and zeros of the 16 columns at `col` (32
/// bytes each, within one cache line) to be brought ahead of
/// load_group_scales, into L1 (L1 = true) or L2, holding no registers.
template <bool L1>
__device__ __forceinline__ void prefetch_group_scales(const bf16 *scales, const bf16 *zeros,
                                                      int N, int grp, int col) {
  const bf16 *sp = scales + (size_t)grp * N + col, *zp = zeros + (size_t)grp * N + col;
  if constexpr (L1) {
    asm volatile("prefetch.global.L1 [%0];" ::"l"(sp));
    asm volatile("prefetch.global.L1 [%0];" ::"l"(zp));
  } else {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(sp));
    asm volatile("prefetch.global.L2 [%0];" ::"l"(zp));
  }
}

/// Dequantizes byte J of `w` (v = w >> 4): the column's weights for rows 2r
/// and 2r+1, exactly as the spec, widened to float.
template <int J>
__device__ __forceinline__ float2 dequant_pair(uint32_t w, uint32_t v, uint32_t zc2, uint32_t s2) {
  const uint32_t t = __byte_perm(w, v, J | (J << 4) | ((4 + J) << 8) | ((4 + J) << 12));
  const uint32_t q2 = (t & 0x000f000fu) | 0x43004300u; // {128 + q_lo, 128 + q_hi}
  const uint32_t d = as_u32(__hmul2(__hsub2(as_bf2(q2), as_bf2(zc2)), as_bf2(s2)));
  return make_float2(__uint_as_float(d << 16), __uint_as_float(d & 0xffff0000u));
}

/// y[j] += x0 * w[2r, j] + x1 * w[2r+1, j] for the 16 columns of one row pair.
__device__ __forceinline__ void accum_row(const uint4 &row, float x0, float x1, const uint32_t *zc2,
                                          const uint32_t *s2, float *y) {
  const uint32_t words[4] = {row.x, row.y, row.z, row.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t w = words[i], v = w >> 4;
    float2 p;
    p = dequant_pair<0>(w, v, zc2[4 * i + 0], s2[4 * i + 0]);
    y[4 * i + 0] = fmaf(x1, p.y, fmaf(x0, p.x, y[4 * i + 0]));
    p = dequant_pair<1>(w, v, zc2[4 * i + 1], s2[4 * i + 1]);
    y[4 * i + 1] = fmaf(x1, p.y, fmaf(x0, p.x, y[4 * i + 1]));
    p = dequant_pair<2>(w, v, zc2[4 * i + 2], s2[4 * i + 2]);
    y[4 * i + 2] = fmaf(x1, p.y, fmaf(x0, p.x, y[4 * i + 2]));
    p = dequant_pair<3>(w, v, zc2[4 * i + 3], s2[4 * i + 3]);
    y[4 * i + 3] = fmaf(x1, p.y, fmaf(x0, p.x, y[4 * i + 3]));
  }
}
} // namespace detail

/// Rows (16-byte loads) per thread per pipeline stage, and stages in the
/// ring: 18 rows per thread cover a whole 2304-deep, 128-wide tile. The
/// exact and row-major tiles ask for the whole ring at once; the grouped
/// tile (the default arithmetic's) for kGemvAheadStages of it first, below.
/// MK_W4A16_STAGES: the emitter defines 2 ahead of the includes for a kernel
/// that would not fit the target's shared memory with 3 (a 48 KB instead of
/// a 72 KB ring at 256 threads: wide models).
constexpr int kW4A16StageRows = 6;
#ifndef MK_W4A16_STAGES
#define MK_W4A16_STAGES 3
#endif
constexpr int kW4A16Stages = MK_W4A16_STAGES;
static_assert(kW4A16Stages >= 2, "the weight ring needs at least two stages");
/// Of the ring, the stages a grouped packed tile (w4a16_gemv_tile_grouped)
/// asks for before its first step, the next after each stage's steps: the
/// kernel's tile_stages_ahead, which the emitter defines as
/// MK_GEMV_AHEAD_STAGES (at most the ring's stages; 2 when undefined, the
/// compiler's default). At least 2: with one stage ahead ptxas 13.0
/// (sm_90) emits the first stage's copies as LDGSTS whose cache-policy
/// descriptor and shared base name uniform registers it never wrote (the
/// fault of perf notes #72), an illegal instruction at run time: seen in
/// the template tests' grouped tiles (#211), not in the unit's kernel.
#ifndef MK_GEMV_AHEAD_STAGES
#define MK_GEMV_AHEAD_STAGES 2
#endif
constexpr int kGemvAheadStages = MK_GEMV_AHEAD_STAGES;
static_assert(kGemvAheadStages >= 2,
              "a tile asks for at least two stages before its steps (ptxas 13.0 miscompiles one)");

/// Floats of one stage of a tile's weight ring (which starts
/// w4a16_ring_offset_floats into `red`): kW4A16StageRows 16-byte slots per
/// thread, stage c at c times this, in the packed, the row-major
/// tensor-core and the SIMT tiles alike.
template <int THREADS> __host__ __device__ constexpr int w4a16_ring_stage_floats() {
  return kW4A16StageRows * THREADS * 4;
}

/// Where a TN-wide tile's weight ring starts in `red`, in floats: after the
/// cross-warp sums (WARPS x TN).
template <int THREADS, int TN> __host__ __device__ constexpr int w4a16_ring_offset_floats() {
  return (THREADS / 32) * TN;
}

/// Shared memory a tile needs, in floats: the cross-warp reduction plus the
/// cp.async ring of weight rows.
template <int THREADS, int TN>
__host__ __device__ constexpr int w4a16_red_floats() {
  return w4a16_ring_offset_floats<THREADS, TN>() +
         kW4A16Stages * w4a16_ring_stage_floats<THREADS>();
}

/// The tensor-core tiles' step of a TN-wide tile: a warp's eight lane
/// groups cover TN / 16 column groups and w4a16_ksub k-subslices of 8 row
/// pairs each, so one warp step covers w4a16_step_pairs row pairs.
template <int TN> __host__ __device__ constexpr int w4a16_ksub() { return 8 / (TN / 16); }
template <int TN> __host__ __device__ constexpr int w4a16_step_pairs() {
  return 8 * w4a16_ksub<TN>();
}

/// Whether a row-major tile of TN columns over rows [k0, k1) (k0 a multiple
/// of 16) copies weights into ring stage 0 only, on the tensor-core path (at
/// most kW4A16StageRows / 2 steps per warp) and on the SIMT path (at most
/// kW4A16StageRows row pairs per thread) alike: its later stages then stay
/// empty for the whole tile (their copies are empty groups), and a caller's
/// `pro` may use them (the MLA combine's waiting form stages its partials
/// there).
template <int THREADS, int TN>
__host__ __device__ constexpr bool w4a16_rows_in_first_stage(int k0, int k1) {
  constexpr int WARPS = THREADS / 32, STEP = w4a16_step_pairs<TN>();
  constexpr int ROW_STREAMS = THREADS / (TN / 16);
  const int pairs = (k1 - k0) / 2, steps = (pairs + STEP - 1) / STEP;
  return k0 % 16 == 0 && k1 > k0 && (steps + WARPS - 1) / WARPS <= kW4A16StageRows / 2 &&
         (pairs + ROW_STREAMS - 1) / ROW_STREAMS <= kW4A16StageRows;
}

namespace detail {
/// Which rows and columns of a task one thread streams, and its slice of the
/// cp.async ring.
template <int THREADS, int TN>
struct W4A16Lane {
  static constexpr int CT = TN / 16;
  static constexpr int RT = THREADS / CT;
  static constexpr int S = kW4A16StageRows;
  static constexpr int STAGES = kW4A16Stages;
  int ct, col, rbeg, rend, nrows, nchunks;
  uint4 *stage;
  const uint8_t *wbase;
  int N;

  __device__ W4A16Lane(const uint8_t *wq, int N_, int n0, int nvalid, int k0, int k1, float *red)
      : N(N_) {
    ct = threadIdx.x % CT;
    const int rt = threadIdx.x / CT;
    col = n0 + ct * 16;
    const int p0 = k0 / 2, p1 = k1 / 2;
    const int per = (p1 - p0 + RT - 1) / RT;
    rbeg = p0 + rt * per;
    rend = min(p1, rbeg + per);
    nrows = ct * 16 < nvalid && rend > rbeg ? rend - rbeg : 0;
    nchunks = (nrows + S - 1) / S;
    stage = reinterpret_cast<uint4 *>(red + w4a16_ring_offset_floats<THREADS, TN>());
    wbase = wq + col;
  }

  /// Issues chunk c's loads into its ring slot; always commits a group, so
  /// that group counting stays uniform across threads and chunks.
  __device__ __forceinline__ void issue(int c) const {
    if (c < nchunks) {
      uint4 *slot = stage + (c % STAGES) * S * THREADS + threadIdx.x;
#pragma unroll
      for (int i = 0; i < S; ++i) {
        const int r = rbeg + c * S + i;
        if (r < rend)
          cp_async16_weights(slot + i * THREADS, wbase + (size_t)r * N);
      }
    }
    cp_async_commit();
  }
  __device__ __forceinline__ void issue_first() const {
#pragma unroll
    for (int c = 0; c < STAGES; ++c)
      issue(c);
  }
};
} // namespace detail

/// Starts streaming a task's first weight rows (exactly what
/// w4a16_gemv_tile would issue first). Weights depend on nothing a barrier
/// protects, so a block calls this for its first task of the NEXT phase
/// before it waits at the barrier, then passes `prefetched = true` to that
/// task's w4a16_gemv_tile (same arguments). The ring lives in `red`, so the
/// current phase must be done with `red`.
template <int THREADS, int TN>
__device__ __forceinline__ void w4a16_prefetch(const uint8_t *wq, int N, int n0, int nvalid,
                                               int k0, int k1, float *red) {
  detail::W4A16Lane<THREADS, TN>(wq, N, n0, nvalid, k0, k1, red).issue_first();
}

/// One GEMV task. xs: the input vector in shared memory, indexed by absolute
/// k. N: columns of the (possibly expert-offset) matrix = its row stride.
/// Columns [n0, n0 + nvalid) are computed (nvalid <= TN, multiple of 16);
/// k0, k1 even. `red` holds w4a16_red_floats<THREADS, TN>() floats.
///
/// Each thread streams its own contiguous rows through a private slice of a
/// cp.async ring (it reads back only what it copied, so no block
/// barrier is needed until the reduction): all of a stage's loads are in
/// flight at once, which is what keeps HBM busy on a one-block-per-SM grid.
template <int THREADS, int TN, int GROUP, class Epi, class Pro>
__device__ void w4a16_gemv_tile_simt(const float *xs, const uint8_t *__restrict__ wq,
                                     const bf16 *__restrict__ scales,
                                     const bf16 *__restrict__ zeros, int N, int n0, int nvalid,
                                     int k0, int k1, float *red, Epi epi, bool prefetched,
                                     Pro pro) {
  static_assert(TN % 16 == 0 && TN >= 16, "TN must be a multiple of 16");
  constexpr int CT = TN / 16;
  static_assert(CT <= 32 && (CT & (CT - 1)) == 0, "TN/16 must be a power of two <= 32");
  static_assert(THREADS % 32 == 0 && THREADS % CT == 0, "bad THREADS");
  static_assert(GROUP % 2 == 0, "GROUP must be even");
  constexpr int GP = GROUP / 2; // row pairs per group
  constexpr int S = kW4A16StageRows;
  constexpr int STAGES = kW4A16Stages;
  constexpr int WARPS = THREADS / 32;

  const detail::W4A16Lane<THREADS, TN> lane_(wq, N, n0, nvalid, k0, k1, red);
  const int ct = lane_.ct, col = lane_.col, rbeg = lane_.rbeg, rend = lane_.rend;
  const int nrows = lane_.nrows, nchunks = lane_.nchunks;
  const uint4 *stage = lane_.stage;
  if (!prefetched)
    lane_.issue_first();
  pro(); // the caller's work that can overlap the first loads

  float y[16];
#pragma unroll
  for (int i = 0; i < 16; ++i)
    y[i] = 0.f;

  if (nrows > 0) {
    int g = rbeg / GP;
    // Per column: {s, s} and {128 + z, 128 + z} as bf16x2.
    uint32_t s2[16], zc2[16];
    auto load_sz = [&](int grp) { detail::load_group_scales(scales, zeros, N, grp, col, s2, zc2); };
    load_sz(g);
    for (int c = 0; c < nchunks; ++c) {
      cp_async_wait<STAGES - 1>();
      const uint4 *slot = stage + (c % STAGES) * S * THREADS + threadIdx.x;
#pragma unroll
      for (int i = 0; i < S; ++i) {
        const int r = rbeg + c * S + i;
        if (r < rend) {
          if (r / GP != g) {
            g = r / GP;
            load_sz(g);
          }
          const uint4 w = slot[i * THREADS];
          const float2 x = *reinterpret_cast<const float2 *>(xs + 2 * r);
          detail::accum_row(w, x.x, x.y, zc2, s2, y);
        }
      }
      lane_.issue(c + STAGES);
    }
  }
  cp_async_wait<0>();

  // Reduce the thread rows that share columns within each warp...
#pragma unroll
  for (int o = CT; o < 32; o <<= 1)
#pragma unroll
    for (int i = 0; i < 16; ++i)
      y[i] += __shfl_xor_sync(0xffffffffu, y[i], o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane < CT) {
#pragma unroll
    for (int i = 0; i < 16; ++i)
      red[warp * TN + ct * 16 + i] = y[i];
  }
  __syncthreads();
  // ...then across warps.
  for (int c = threadIdx.x; c < nvalid; c += THREADS) {
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w)
      v += red[w * TN + c];
    epi(n0 + c, v);
  }
  __syncthreads();
}

namespace detail {
/// {128, 128} in bf16x2, held in a register: (t & 0x000f000f) | magic is
/// then one LOP3 (an instruction takes one immediate; with the magic as a
/// second one, ptxas emits an AND and an OR).
__device__ __forceinline__ uint32_t bf16x2_128() {
  uint32_t m;
  asm("mov.b32 %0, 0x43004300;" : "=r"(m));
  return m;
}
/// v, through a move ptxas cannot look into or repeat: a value computed
/// once before a loop then stays in a register instead of being
/// recomputed (rematerialized) in the loop body.
__device__ __forceinline__ int opaque_int(int v) {
  int r;
  asm volatile("mov.b32 %0, %1;" : "=r"(r) : "r"(v));
  return r;
}
/// Byte J of w (v = w >> 4) dequantized exactly as the spec, as the bf16x2
/// {w[2r, col], w[2r+1, col]}: the register an mma A fragment wants.
/// `magic` is bf16x2_128().
template <int J>
__device__ __forceinline__ uint32_t dequant_pair_bf2(uint32_t w, uint32_t v, uint32_t zc2,
                                                     uint32_t s2, uint32_t magic) {
  const uint32_t t = __byte_perm(w, v, J | (J << 4) | ((4 + J) << 8) | ((4 + J) << 12));
  uint32_t q2; // {128 + q_lo, 128 + q_hi}
  asm("lop3.b32 %0, %1, 0x000f000f, %2, 0xEA;" : "=r"(q2) : "r"(t), "r"(magic));
  return as_u32(__hmul2(__hsub2(as_bf2(q2), as_bf2(zc2)), as_bf2(s2)));
}
/// Column J of a packed word (mk::rt::packMmaWordNibbles: its row pair at
/// bits 4J and 16 + 4J) as the bf16x2 {128 + q[2r], 128 + q[2r+1]} (exact
/// integers): a shift and one LOP3.
template <int J> __device__ __forceinline__ uint32_t nibbles_128(uint32_t w, uint32_t magic) {
  const uint32_t t = J ? w >> (4 * J) : w;
  uint32_t q2;
  asm("lop3.b32 %0, %1, 0x000f000f, %2, 0xEA;" : "=r"(q2) : "r"(t), "r"(magic));
  return q2;
}
/// nibbles_128 of column `col` (0..3; a constant where the caller unrolls).
__device__ __forceinline__ uint32_t nibbles_col_128(uint32_t w, int col, uint32_t magic) {
  switch (col) {
  case 0:
    return nibbles_128<0>(w, magic);
  case 1:
    return nibbles_128<1>(w, magic);
  case 2:
    return nibbles_128<2>(w, magic);
  default:
    return nibbles_128<3>(w, magic);
  }
}
/// Column J of a packed word dequantized as dequant_pair_bf2: a shift and
/// one LOP3 instead of a byte permute and one LOP3.
template <int J>
__device__ __forceinline__ uint32_t dequant_nibbles_bf2(uint32_t w, uint32_t zc2, uint32_t s2,
                                                        uint32_t magic) {
  const uint32_t q2 = nibbles_128<J>(w, magic); // {128 + q_lo, 128 + q_hi}
  return as_u32(__hmul2(__hsub2(as_bf2(q2), as_bf2(zc2)), as_bf2(s2)));
}
__device__ __forceinline__ uint32_t dequant_byte_bf2(uint32_t w, int byte, uint32_t zc2,
                                                     uint32_t s2, uint32_t magic) {
  switch (byte) {
  case 0:
    return dequant_pair_bf2<0>(w, w >> 4, zc2, s2, magic);
  case 1:
    return dequant_pair_bf2<1>(w, w >> 4, zc2, s2, magic);
  case 2:
    return dequant_pair_bf2<2>(w, w >> 4, zc2, s2, magic);
  default:
    return dequant_pair_bf2<3>(w, w >> 4, zc2, s2, magic);
  }
}
/// Column `col` (0..3) of word w: a packed word (PACKED) or the spec's bytes.
template <bool PACKED>
__device__ __forceinline__ uint32_t dequant_col_bf2(uint32_t w, int col, uint32_t zc2, uint32_t s2,
                                                    uint32_t magic) {
  if constexpr (PACKED) {
    switch (col) {
    case 0:
      return dequant_nibbles_bf2<0>(w, zc2, s2, magic);
    case 1:
      return dequant_nibbles_bf2<1>(w, zc2, s2, magic);
    case 2:
      return dequant_nibbles_bf2<2>(w, zc2, s2, magic);
    default:
      return dequant_nibbles_bf2<3>(w, zc2, s2, magic);
    }
  } else {
    return dequant_byte_bf2(w, col, zc2, s2, magic);
  }
}
__device__ __forceinline__ uint32_t pack_bf2(float lo, float hi) {
  return as_u32(__floats2bfloat162_rn(lo, hi));
}
/// x as bf16x2, or (lo) the remainders {bf16(x - bf16(x))}.
__device__ __forceinline__ uint32_t bf2_part(float2 x, bool lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x.x, x.y);
  if (!lo)
    return as_u32(h);
  const float2 hf = __bfloat1622float2(h);
  return pack_bf2(x.x - hf.x, x.y - hf.y);
}
__device__ __forceinline__ void mma_bf16_16816(float *c, uint32_t a0, uint32_t a1, uint32_t a2,
                                               uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
} // namespace detail

namespace detail {
__device__ __forceinline__ unsigned smem_u32(const void *p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
/// Shared-memory loads at a 32-bit shared address (smem_u32's), for loops
/// that step through shared memory. Volatile, so that they keep their
/// order with the cp.async waits' volatile asm and the barriers; no
/// "memory" clobber, so ordinary memory accesses may move across them (the
/// grouped tile's steps read only ring slots its cp.async filled and x,
/// which nothing writes during its loop). Used by the grouped tile's steps
/// under -DMK_GEMV_SHARED_LOADS (opt-in: with generic pointers ptxas
/// rebuilds the shared window's base, an S2R of the CTA's id and three more
/// instructions, at every step; at shared addresses the sm_90 hot path is
/// 91 instructions instead of 98, no faster on an H100, perf notes #205).
__device__ __forceinline__ uint4 lds_u4(unsigned a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(a));
  return v;
}
__device__ __forceinline__ float2 lds_f2(unsigned a) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(a));
  return v;
}
/// Initializes an mbarrier; mbar_init_fence() must follow (once for all the
/// thread's inits) before the async proxy (bulk copies) may complete on it.
__device__ __forceinline__ void mbar_init(unsigned long long *bar, unsigned count) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_inval(unsigned long long *bar) {
  asm volatile("mbarrier.inval.shared.b64 [%0];" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(unsigned long long *bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned long long *bar, unsigned phase) {
  unsigned done = 0;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared.b64 p, [%1], %2;\n"
                 " selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done)
                 : "r"(smem_u32(bar)), "r"(phase)
                 : "memory");
  } while (!done);
}
/// One bulk copy (TMA without a tensor map) of `bytes` (a multiple of 16,
/// both addresses 16-byte aligned) into shared memory; completes on `bar`.
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, unsigned bytes,
                                          unsigned long long *bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
               "[%3];" ::"r"(smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}
/// bulk_copy of weight bytes, its L2 lines marked evict-first as
/// cp_async16_weights marks the per-lane streams (-DMK_WEIGHTS_EVICT_NORMAL:
/// the plain bulk_copy). Before session 43 the bulk streams (the integer
/// tile's, the exact tile's -DMK_PACKED_BULK) went without the hint, so
/// they evicted what the next step reads again (KDA states, the MLA cache)
/// where the per-lane streams did not: perf notes #71 measured the hint at
/// -14 us per token on the per-lane streams.
__device__ __forceinline__ void bulk_copy_weights(void *dst, const void *src, unsigned bytes,
                                                  unsigned long long *bar) {
#ifndef MK_WEIGHTS_EVICT_NORMAL
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
               "[%0], [%1], %2, [%3], %4;" ::"r"(smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar)), "l"(l2_evict_first_policy())
               : "memory");
#else
  bulk_copy(dst, src, bytes, bar);
#endif
}

/// Bytes of one step of a lane-order packed 128-wide tile (8 row pairs x
/// 128 columns; mk::rt::packMmaSteps writes them).
constexpr int kPackedStepBytes = 1024;

/// The weight stream of a packed tile: warp w's steps [sbeg, send) (packed
/// step step0 + st, STEP_BYTES each) are one contiguous range, moved by lane
/// 0 with bulk copies of CHUNK_STEPS steps into the warp's SLICE-byte slice
/// of the ring, which holds NBUF such chunks, each completing on its own
/// mbarrier. All chunks the slice holds are requested at once and the math
/// starts as soon as the first has landed; a consumed chunk's buffer is
/// refilled with the chunk NBUF later. (One copy per slice would make every
/// warp wait for its whole slice before any math: the math would run after
/// the stream instead of under it.) `step(st, p)` runs on step st, which
/// lies at p in shared memory.
constexpr int kPackedChunkSteps = 2;

/// The mbarriers of a block's packed stream: one set per block size, so that
/// a stream started by w4a16_stream_start (e.g. before a grid barrier, by
/// w4a16_gemv_begin) is consumed by the tile that follows with the same ones.
template <int THREADS> __device__ __forceinline__ unsigned long long *packed_stream_bars() {
  __shared__ __align__(8) unsigned long long bars[THREADS / 32 * 8];
  return bars;
}

/// Starts warp w's stream: orders earlier generic-proxy use of the ring (a
/// previous tile's reads and cross-warp sums) before the bulk copies that
/// overwrite it, initializes the warp's mbarriers and requests its first
/// NBUF chunks. Every thread of the block calls it (it synchronizes).
template <int THREADS, int STEP_BYTES, int CHUNK_STEPS, int SLICE>
__device__ __forceinline__ void w4a16_stream_start(const uint8_t *wq, int step0, int sbeg,
                                                   int send, uint8_t *ring) {
  constexpr int CHUNK = CHUNK_STEPS * STEP_BYTES;
  constexpr int NBUF = SLICE / CHUNK;
  static_assert(NBUF >= 2 && NBUF <= 8 && SLICE % 16 == 0,
                "a ring slice holds two to eight chunks");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint8_t *slice = ring + warp * SLICE;
  unsigned long long *bar = packed_stream_bars<THREADS>() + warp * NBUF;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  MK_TILE_STAMP(8);
  if (lane == 0) {
#pragma unroll
    for (int b = 0; b < NBUF; ++b)
      mbar_init(&bar[b], 1);
    mbar_init_fence(); // one fence for all the inits
#pragma unroll
    for (int b = 0; b < NBUF; ++b) {
      const int st = sbeg + b * CHUNK_STEPS;
      if (st < send) {
        const unsigned bytes = unsigned(min(CHUNK_STEPS, send - st) * STEP_BYTES);
        mbar_expect_tx(&bar[b], bytes);
        bulk_copy_weights(slice + b * CHUNK, wq + (size_t)(step0 + st) * STEP_BYTES, bytes, &bar[b]);
      }
    }
  }
  __syncwarp();
}

/// Consumes warp w's stream (started here, or already by
/// w4a16_stream_start when `started`): waits for each chunk, runs
/// `step(st, p)` on each of its steps (step st lies at p in shared memory)
/// and refills the consumed buffer with the chunk NBUF later.
template <int THREADS, int STEP_BYTES, int CHUNK_STEPS, int SLICE, class Step, class Pro>
__device__ __forceinline__ void w4a16_packed_stream(const uint8_t *wq, int step0, int sbeg,
                                                    int send, uint8_t *ring, Step &step,
                                                    Pro &pro, bool started = false) {
  constexpr int CHUNK = CHUNK_STEPS * STEP_BYTES;
  constexpr int NBUF = SLICE / CHUNK;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint8_t *slice = ring + warp * SLICE;
  unsigned long long *bar = packed_stream_bars<THREADS>() + warp * NBUF;
  if (!started)
    w4a16_stream_start<THREADS, STEP_BYTES, CHUNK_STEPS, SLICE>(wq, step0, sbeg, send, ring);
  // Lane 0: the chunk starting at step st into buffer b.
  auto issue = [&](int st, int b) {
    if (st < send) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      const unsigned bytes = unsigned(min(CHUNK_STEPS, send - st) * STEP_BYTES);
      mbar_expect_tx(&bar[b], bytes);
      bulk_copy_weights(slice + b * CHUNK, wq + (size_t)(step0 + st) * STEP_BYTES, bytes, &bar[b]);
    }
  };
  pro(); // the caller's work that can overlap the first copies
  int b = 0;
  unsigned parity = 0;
  for (int st = sbeg; st < send; st += CHUNK_STEPS) {
    mbar_wait(&bar[b], parity);
    const uint8_t *buf = slice + b * CHUNK;
    const int rn = min(CHUNK_STEPS, send - st);
    MK_UNROLL_RUNTIME
    for (int i = 0; i < rn; ++i)
      step(st + i, buf + i * STEP_BYTES);
    __syncwarp(); // every lane is done with the buffer before it is refilled
    if (lane == 0)
      issue(st + NBUF * CHUNK_STEPS, b);
    if (++b == NBUF) {
      b = 0;
      parity ^= 1u;
    }
  }
  if (lane == 0)
#pragma unroll
    for (int b = 0; b < NBUF; ++b)
      mbar_inval(&bar[b]);
}

/// Warp `warp`'s share [sbeg, send) of a task's `nsteps` steps (the packed
/// tiles and w4a16_gemv_begin agree on it through this).
struct WarpSteps {
  int sbeg, send;
};
template <int WARPS> __device__ __forceinline__ WarpSteps warp_steps(int nsteps, int warp) {
  const int per = (nsteps + WARPS - 1) / WARPS;
  const int sbeg = warp * per;
  return {sbeg, min(nsteps, sbeg + per)};
}

/// The exact tile's consumer of the same stream under -DMK_PACKED_BULK
/// (w4a16_stream_start's chunks, kPackedStepBytes steps; the default is
/// packed_cp_async_stage below), kept apart from w4a16_packed_stream:
/// written through its generic step callback, the exact tile spills under
/// NVRTC. Every lane reads its two 16-byte pieces of each step at
/// st*1024 + h*512 + lane*16 (rows t and t + 4 of its k-subslice, its 16
/// columns; conflict-free) and runs `step(st, wa, wb)` on them.
template <int THREADS>
constexpr int kExactSlice = kW4A16Stages * kW4A16StageRows * THREADS * 16 / (THREADS / 32);
template <int THREADS, class Step, class Pro>
__device__ __forceinline__ void w4a16_packed_rounds(const uint8_t *wq, int step0, int sbeg,
                                                    int send, uint4 *ring, Step &step,
                                                    Pro &pro, bool started = false) {
  constexpr int SLICE = kExactSlice<THREADS>;
  constexpr int CHUNK = kPackedChunkSteps * kPackedStepBytes;
  constexpr int NBUF = SLICE / CHUNK;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint8_t *slice = reinterpret_cast<uint8_t *>(ring) + warp * SLICE;
  unsigned long long *bar = packed_stream_bars<THREADS>() + warp * NBUF;
  if (!started)
    w4a16_stream_start<THREADS, kPackedStepBytes, kPackedChunkSteps, SLICE>(
        wq, step0, sbeg, send, reinterpret_cast<uint8_t *>(ring));
  MK_TILE_STAMP(2);
  // Lane 0: the chunk starting at step st into buffer b.
  auto issue = [&](int st, int b) {
    if (st < send) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      const unsigned bytes = unsigned(min(kPackedChunkSteps, send - st) * kPackedStepBytes);
      mbar_expect_tx(&bar[b], bytes);
      bulk_copy_weights(slice + b * CHUNK, wq + (size_t)(step0 + st) * kPackedStepBytes, bytes, &bar[b]);
    }
  };
  pro(); // the caller's work that can overlap the first copies
  MK_TILE_STAMP(3);
  int b = 0;
  unsigned parity = 0;
  for (int st = sbeg; st < send; st += kPackedChunkSteps) {
    mbar_wait(&bar[b], parity);
    if (st == sbeg)
      MK_TILE_STAMP(4);
    const uint8_t *buf = slice + b * CHUNK;
    const int rn = min(kPackedChunkSteps, send - st);
    MK_UNROLL_RUNTIME
    for (int i = 0; i < rn; ++i) {
      const uint4 wa = *reinterpret_cast<const uint4 *>(buf + i * kPackedStepBytes + lane * 16);
      const uint4 wb =
          *reinterpret_cast<const uint4 *>(buf + i * kPackedStepBytes + 512 + lane * 16);
      step(st + i, wa, wb);
    }
    __syncwarp(); // every lane is done with the buffer before it is refilled
    if (lane == 0)
      issue(st + NBUF * kPackedChunkSteps, b);
    if (++b == NBUF) {
      b = 0;
      parity ^= 1u;
    }
  }
  if (lane == 0)
#pragma unroll
    for (int b = 0; b < NBUF; ++b)
      mbar_inval(&bar[b]);
}
} // namespace detail

namespace detail {
/// Copies warp w's first quantization group's scales and zeros (of a
/// grouped packed tile: k-slice from row pair `pa`, the warp's steps
/// [sbeg, send) of STEP row pairs, columns n0 + [0, nvalid)) into `red`:
/// per warp TN floats' worth, 64 bytes per 16-column group (scales 0-7,
/// 8-15, zeros 0-7, 8-15), one 16-byte cp.async per lane; always commits a
/// group. The tile reads them back with staged_first_scales.
template <int TN, int GROUP, int STEP>
__device__ __forceinline__ void stage_first_scales(const bf16 *scales, const bf16 *zeros, int N,
                                                   int n0, int nvalid, int pa, int sbeg,
                                                   int send, float *red) {
  constexpr int PIECES = 4 * (TN / 16);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int cg = lane >> 2, part = lane & 3;
  if (lane < PIECES && sbeg < send && cg * 16 < nvalid) {
    const int grp = 2 * (pa + sbeg * STEP) / GROUP;
    const bf16 *src = (part < 2 ? scales : zeros) + (size_t)grp * N + n0 + cg * 16 + (part & 1) * 8;
    cp_async16(reinterpret_cast<uint4 *>(red) + warp * PIECES + lane, src);
  }
  cp_async_commit();
}
template <int TN>
__device__ __forceinline__ GroupScalesRaw staged_first_scales(const float *red, int warp, int cg) {
  const uint4 *r = reinterpret_cast<const uint4 *>(red) + warp * 4 * (TN / 16) + cg * 4;
  return {r[0], r[1], r[2], r[3]};
}
} // namespace detail

namespace detail {
/// The packed exact tile's default stream (not -DMK_PACKED_BULK): stage c
/// of warp w's steps [sbeg, send) (steps sbeg + c*S .. +S-1, S =
/// kW4A16StageRows / 2) copied with 16-byte cp.async, each lane its own two
/// pieces of each step (st*1024 + h*512 + lane*16: what it reads back, so no
/// barrier and no mbarrier), into its slots of ring stage c % kW4A16Stages;
/// always commits a group. Three stages of three steps hold 9 steps per
/// warp: a whole task of up to 72 steps fits the ring (the grouped tile
/// asks for kGemvAheadStages of its stages before its first step).
template <int THREADS>
__device__ __forceinline__ void packed_cp_async_stage(const uint8_t *wq, int step0, int sbeg,
                                                      int send, uint4 *ring, int c) {
  constexpr int S = kW4A16StageRows / 2;
  if (sbeg + c * S < send) {
    uint4 *slot = ring + (c % kW4A16Stages) * 2 * S * THREADS + threadIdx.x;
    const uint8_t *src =
        wq + (size_t)(step0 + sbeg + c * S) * kPackedStepBytes + (threadIdx.x & 31) * 16;
    // The S steps' copies unrolled, so that the shared window's base, the
    // cache policy's move to uniform registers and the addresses are formed
    // once per chunk, not once per step (~20 instructions of a step's ~22
    // for its two copies; rolled, the unit ran 4.4 us slower, perf notes #95).
#pragma unroll
    for (int i = 0; i < S; ++i) {
      if (sbeg + c * S + i < send) {
        cp_async16_weights(slot + (2 * i) * THREADS, src + i * kPackedStepBytes);
        cp_async16_weights(slot + (2 * i + 1) * THREADS, src + i * kPackedStepBytes + 512);
      }
    }
  }
  cp_async_commit();
}

/// A packed tile's start (w4a16_gemv_tile_mma's and the grouped tile's):
/// unless `started` (w4a16_gemv_begin issued them), the ring's first AHEAD
/// stages of weight copies (the whole ring by default; the grouped tile
/// passes kGemvAheadStages), then the caller's prologue `pro` (its counter wait and
/// input loads), which so overlap the first loads. (The prologue after the
/// first stage's copies instead, so that a waiting down tile's gate and up
/// sums queue behind one stage's bytes, was no faster: perf notes #201.)
template <int THREADS, int AHEAD = kW4A16Stages, class Pro>
__device__ __forceinline__ void packed_ring_start(const uint8_t *wq, int step0, int sbeg,
                                                  int send, uint4 *ring, bool started,
                                                  Pro &&pro) {
  static_assert(AHEAD >= 1 && AHEAD <= kW4A16Stages, "stages asked for up front");
  if (!started) {
MK_UNROLL_CODE
    for (int c = 0; c < AHEAD; ++c)
      packed_cp_async_stage<THREADS>(wq, step0, sbeg, send, ring, c);
  }
  pro();
}
} // namespace detail

/// The same task on the tensor cores: weights dequantized exactly (bf16x2
/// per byte) straight into mma.m16n8k16 A fragments (rows = 16 output
/// columns, k = 8 row pairs), x as the B column, fp32 accumulation. Half the
/// instructions per weight of the SIMT path. Lane (g, t) of a warp streams
/// the 16 columns of column group g % (TN/16) for row pairs t and t+4 of
/// k-subslice g / (TN/16); with TN < 128 the subslices' partial sums sit in
/// different B columns (n = subslice), so one mma still does 16 x 16.
template <int THREADS, int TN, int GROUP, bool FP32X, bool PACKED, class Epi, class Pro>
__device__ void w4a16_gemv_tile_mma(const float *xs, const uint8_t *__restrict__ wq,
                                    const bf16 *__restrict__ scales,
                                    const bf16 *__restrict__ zeros, int N, int n0, int nvalid,
                                    int k0, int k1, float *red, Epi epi, Pro pro,
                                    bool started = false) {
  static_assert(TN == 16 || TN == 32 || TN == 64 || TN == 128, "mma path: TN in 16..128");
  static_assert(GROUP % 16 == 0, "mma path: GROUP must be a multiple of 16");
  constexpr int WARPS = THREADS / 32;
  constexpr int GPER = TN / 16;     // column groups per warp
  constexpr int KG = w4a16_ksub<TN>();        // k-subslices per warp step
  constexpr int STEP = w4a16_step_pairs<TN>(); // row pairs per warp step
  constexpr int NB = FP32X ? 2 * KG : KG; // B columns in use
  static_assert(NB <= 8, "FP32X needs TN >= 32 (a free B column per subslice)");
  static_assert(WARPS * NB * TN <= kW4A16Stages * kW4A16StageRows * THREADS * 4,
                "the cross-warp sums must fit the ring they reuse");
  constexpr int S = kW4A16StageRows / 2; // steps per ring stage (2 rows/step)
  constexpr int STAGES = kW4A16Stages;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int cg = g % GPER, sub = g / GPER;
  const int col = n0 + cg * 16;
  const bool colActive = cg * 16 < nvalid;
  [[maybe_unused]] StageClock clk; // -DMK_PHASE_TIMING: the packed tile's stages
  if constexpr (PACKED)
    MK_TILE_STAMP(0);
  // Steps start at a multiple of 8 row pairs, so each lane's 8-row subslice
  // lies inside one quantization group (GROUP % 16 == 0); rows outside
  // [k0, k1) are masked.
  const int p0 = k0 / 2, p1 = k1 / 2, pa = p0 & ~7;
  auto valid = [&](int r) { return r >= p0 && r < p1; };
  const int nsteps = (p1 - pa + STEP - 1) / STEP;
  const detail::WarpSteps ws_ = detail::warp_steps<WARPS>(nsteps, warp);
  const int sbeg = ws_.sbeg, send = ws_.send;
  const int nmine = send > sbeg ? send - sbeg : 0;
  const int nchunks = (nmine + S - 1) / S;
  uint4 *stage = reinterpret_cast<uint4 *>(red + w4a16_ring_offset_floats<THREADS, TN>());
  // Row pair of step `st` for this lane: A rows t (ra) and t + 4 (rb).
  auto rowA = [&](int st) { return pa + st * STEP + sub * 8 + t; };
  auto issue = [&](int c) {
    if (c < nchunks && colActive) {
      uint4 *slot = stage + (c % STAGES) * 2 * S * THREADS + threadIdx.x;
      // Unrolled as packed_cp_async_stage's.
#pragma unroll
      for (int i = 0; i < S; ++i) {
        const int st = sbeg + c * S + i;
        if (st < send) {
          const int ra = rowA(st);
          if (valid(ra))
            cp_async16_weights(slot + (2 * i) * THREADS, wq + (size_t)ra * N + col);
          if (valid(ra + 4))
            cp_async16_weights(slot + (2 * i + 1) * THREADS, wq + (size_t)(ra + 4) * N + col);
        }
      }
    }
    cp_async_commit();
  };
  // The group of this lane's 8-row subslice at step `st`; a subslice past
  // the task's rows (short K) takes the last row's group, which exists (its
  // rows are masked to zero weights and meet zero x anyway).
  auto groupOf = [&](int st) { return min(2 * (pa + st * STEP + sub * 8), k1 - 2) / GROUP; };
  // The first group's scales and zeros are loaded (and the later groups'
  // prefetched into L2) before any weight is requested, and the first group
  // is expanded into registers only after the stream has started (in `prol`
  // below, with the caller's prologue): its load's round trip then runs
  // under the first chunk's instead of after it. Loaded only when the math
  // reaches them (or issued right after the weights' bulk copies: measured
  // with MK_TILE_TRACE, 2-3 us instead of ~1), they queue behind the whole
  // phase's weight stream.
  // -DMK_GEMV_LAZY_SCALES: the first group prefetched into L1 and loaded at
  // the first step (the code before session 5, kept to measure against);
  // -DMK_GEMV_SCALES_L1: the later groups prefetched into L1, not L2.
  detail::ColumnScales cs;
  int grp = -1;
#ifdef MK_GEMV_LAZY_SCALES
  constexpr bool kEagerScales = false;
#else
  constexpr bool kEagerScales = true;
#endif
#ifdef MK_GEMV_SCALES_L1
  constexpr bool kLaterScalesL1 = true;
#else
  constexpr bool kLaterScalesL1 = false;
#endif
#ifdef MK_GEMV_NO_AHEAD
  constexpr bool kAhead = false;
#else
  constexpr bool kAhead = true;
#endif
  const int grpRowEnd = min(k1, 2 * (pa + send * STEP));
  detail::GroupScalesRaw raw0{};
  const int g0 = groupOf(sbeg);
  const bool eager = kEagerScales && colActive && nmine > 0;
  if (colActive && nmine > 0) {
    if (eager)
      raw0 = detail::load_group_scales_raw(scales, zeros, N, g0, col);
    else
      detail::prefetch_group_scales<true>(scales, zeros, N, g0, col);
    MK_UNROLL_RUNTIME
    for (int gi = g0 + 1; gi * GROUP < grpRowEnd; ++gi)
      detail::prefetch_group_scales<kLaterScalesL1>(scales, zeros, N, gi, col);
  }
  auto prol = [&] {
    pro();
    if (eager) {
      cs.set(raw0);
      grp = g0;
      if (kAhead && (g0 + 1) * GROUP < grpRowEnd)
        detail::prefetch_group_scales<true>(scales, zeros, N, g0 + 1, col);
    }
  };
  // Packed weights: 16-byte cp.async per lane (default) or bulk copies
  // into mbarrier-tracked chunks (-DMK_PACKED_BULK, before session 7: each
  // bulk copy held the issuing warp ~0.15 us, MK_TILE_TRACE).
#ifdef MK_PACKED_BULK
  constexpr bool kBulk = PACKED;
#else
  constexpr bool kBulk = false;
#endif
  if constexpr (!PACKED) {
MK_UNROLL_CODE
    for (int c = 0; c < STAGES; ++c)
      issue(c);
    prol(); // the caller's work that can overlap the first loads
  } else if constexpr (!kBulk) {
    detail::packed_ring_start<THREADS>(wq, pa / STEP, sbeg, send, stage, started, prol);
  }

  float acc[8][4];
#pragma unroll
  for (int m = 0; m < 8; ++m)
    acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = 0.f;
  auto load_sz = [&](int gi) { cs.set(detail::load_group_scales_raw(scales, zeros, N, gi, col)); };
  // The lean step: the group is recomputed only at the first step of the
  // next group (nextGrpSt, per lane: lanes of different subslices may
  // change groups at different steps), and in a task made of whole steps
  // (p0 and p1 on step boundaries: every task of the unit) x is loaded by
  // every lane with no row checks, from its own subslice (lanes whose B
  // column is not read load x too: their D columns are never summed). With
  // per-step group and row checks the step was ~14 instructions longer and
  // the unit 5.8 us slower (perf notes #63).
  // At a group change the next group's scales and zero points are asked
  // into L1 (their load at the next change then hits L1, not L2), and this
  // lane's x address is held in a register through an opaque move (ptxas
  // otherwise recomputes it from threadIdx at every step);
  // -DMK_GEMV_NO_AHEAD: neither (session 9's first form, to measure
  // against).
  int nextGrpSt = sbeg;
  const bool xWhole = p0 == pa && (p1 - pa) % STEP == 0;
  const bool loPart = FP32X && g >= KG;
  const int xoff = 2 * (pa + (g % KG) * 8 + t);
  const float *xlane = xs + (kAhead ? detail::opaque_int(xoff) : xoff);
  // One step: weights wa (row pair ra = rowA(st)) and wb (ra + 4) of this
  // lane's 16 columns, the x of those row pairs, 8 mma.
  auto step = [&](int st, uint4 wa, uint4 wb) {
    if (st == nextGrpSt) {
      const int gi = groupOf(st);
      if (colActive && gi != grp) {
        grp = gi;
        load_sz(gi);
        if (kAhead && (gi + 1) * GROUP < grpRowEnd)
          detail::prefetch_group_scales<true>(scales, zeros, N, gi + 1, col);
      }
      // First step whose subslice starts in group gi + 1.
      const int nextRow = (gi + 1) * (GROUP / 2) - pa - sub * 8;
      nextGrpSt = max(st + 1, (nextRow + STEP - 1) / STEP);
    }
    // B: lane (g, t) holds x of k-subslice g (n = g), row pairs t, t+4,
    // as bf16 (exact for the bf16 values the spec rounds most
    // activations to). With FP32X, lanes g = KG + j hold the remainders
    // bf16(x - bf16(x)) of subslice j in B column KG + j: the same mma
    // then carries an fp32 x to 16 significant bits (products exact,
    // sums fp32), for free while KG <= 4.
    uint32_t b0 = 0, b1 = 0;
    if (xWhole) {
      const float2 x0 = *reinterpret_cast<const float2 *>(xlane + 2 * st * STEP);
      const float2 x1 = *reinterpret_cast<const float2 *>(xlane + 2 * st * STEP + 8);
      b0 = detail::bf2_part(x0, loPart);
      b1 = detail::bf2_part(x1, loPart);
    } else if (g < NB) {
      const int xb = pa + st * STEP + (g % KG) * 8 + t;
      if (valid(xb)) {
        const float2 x = *reinterpret_cast<const float2 *>(xs + 2 * xb);
        b0 = detail::bf2_part(x, g >= KG);
      }
      if (valid(xb + 4)) {
        const float2 x = *reinterpret_cast<const float2 *>(xs + 2 * (xb + 4));
        b1 = detail::bf2_part(x, g >= KG);
      }
    }
    const uint32_t magic = detail::bf16x2_128();
    const uint32_t wav[4] = {wa.x, wa.y, wa.z, wa.w};
    const uint32_t wbv[4] = {wb.x, wb.y, wb.z, wb.w};
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      // Columns 2m (A row g) and 2m+1 (A row g+8) of this lane's 16.
      const int j0 = 2 * m, j1 = 2 * m + 1;
      // Rows outside [k0, k1) were not loaded (zero bytes): whatever they dequantize
      // to meets a zero x in B. Inactive column groups only produce rows
      // of D that are never read.
      const uint32_t a0 = detail::dequant_col_bf2<PACKED>(wav[j0 / 4], j0 % 4, cs.zc(j0), cs.s(j0), magic);
      const uint32_t a1 = detail::dequant_col_bf2<PACKED>(wav[j1 / 4], j1 % 4, cs.zc(j1), cs.s(j1), magic);
      const uint32_t a2 = detail::dequant_col_bf2<PACKED>(wbv[j0 / 4], j0 % 4, cs.zc(j0), cs.s(j0), magic);
      const uint32_t a3 = detail::dequant_col_bf2<PACKED>(wbv[j1 / 4], j1 % 4, cs.zc(j1), cs.s(j1), magic);
      detail::mma_bf16_16816(acc[m], a0, a1, a2, a3, b0, b1);
    }
  };
  if constexpr (kBulk) {
    // Packed steps are STEP row pairs (k0 a multiple of 2 * STEP rows).
    MK_TILE_STAMP(1);
    detail::w4a16_packed_rounds<THREADS>(wq, pa / STEP, sbeg, send, stage, step, prol, started);
    MK_TILE_STAMP(5);
  } else if constexpr (PACKED) {
    MK_TILE_STAMP(3);
    clk.lap(kStageTileIssue);
    for (int c = 0; c < nchunks; ++c) {
      cp_async_wait<STAGES - 1>();
      if (c == 0) {
        MK_TILE_STAMP(4);
        clk.lap(kStageTileFirstData);
      }
      const uint4 *slot = stage + (c % STAGES) * 2 * S * THREADS + threadIdx.x;
      // Rolled: the stage's S steps unrolled ran 3.4 us slower (perf notes
      // #67; 3x the step's code).
MK_UNROLL_CODE
      for (int i = 0; i < S; ++i) {
        const int st = sbeg + c * S + i;
        if (st < send) { // warp-uniform
          step(st, slot[(2 * i) * THREADS], slot[(2 * i + 1) * THREADS]);
        }
      }
      detail::packed_cp_async_stage<THREADS>(wq, pa / STEP, sbeg, send, stage, c + STAGES);
    }
    MK_TILE_STAMP(5);
    clk.lap(kStageTileSteps);
  } else {
    for (int c = 0; c < nchunks; ++c) {
      cp_async_wait<STAGES - 1>();
      const uint4 *slot = stage + (c % STAGES) * 2 * S * THREADS + threadIdx.x;
MK_UNROLL_CODE
      for (int i = 0; i < S; ++i) {
        const int st = sbeg + c * S + i;
        if (st < send) { // warp-uniform
          const int ra = rowA(st);
          uint4 wa = make_uint4(0, 0, 0, 0), wb = wa;
          if (colActive && valid(ra))
            wa = slot[(2 * i) * THREADS];
          if (colActive && valid(ra + 4))
            wb = slot[(2 * i + 1) * THREADS];
          step(st, wa, wb);
        }
      }
      issue(c + STAGES);
    }
  }
  cp_async_wait<0>();
  __syncthreads(); // the ring is free: reuse it for the cross-warp sums
  if constexpr (PACKED && !kBulk)
    clk.lap(kStageTileWarps);
  if constexpr (PACKED)
    MK_TILE_STAMP(6);
  float *sums = reinterpret_cast<float *>(stage); // [WARPS * NB][TN]
  // Lane (g, t) holds D[row][n] for n = 2t, 2t+1; row g's useful columns
  // are n = sub (its own k-subslice) and, with FP32X, n = KG + sub.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int n = 2 * t + h;
    if (n < NB && n % KG == sub) {
      float *row = sums + (warp * NB + n) * TN + cg * 16;
#pragma unroll
      for (int m = 0; m < 8; ++m) {
        row[2 * m] = acc[m][h];
        row[2 * m + 1] = acc[m][2 + h];
      }
    }
  }
  __syncthreads();
  if constexpr (PACKED)
    MK_TILE_STAMP(7);
  for (int cidx = threadIdx.x; cidx < nvalid; cidx += THREADS) {
    float v = 0.f;
#pragma unroll 4
    for (int w = 0; w < WARPS * NB; ++w)
      v += sums[w * TN + cidx];
    epi(n0 + cidx, v);
  }
  __syncthreads();
  if constexpr (PACKED && !kBulk)
    clk.lap(kStageTileReduce);
  if constexpr (PACKED)
    MK_TILE_STAMP(9);
}

namespace detail {
/// bf16 element h (0: low half) of word u, widened.
__device__ __forceinline__ float bf16_half(uint32_t u, int h) {
  return __uint_as_float(h ? u & 0xffff0000u : u << 16);
}
} // namespace detail

/// The packed tile (kOrderMma storage, 128 or 64 wide, whole steps) with
/// the quantization scales applied per group to fp32 sums instead of per
/// weight (`arithmetic=scaled`, kOrderMmaScaled): sum_k x_k (q_k - z) s =
/// s (sum_k x_k (q_k - z)). A weight pair is {q - z}, exact in bf16 (a
/// shift for three of a word's four columns, one LOP3, one HSUB2: no HMUL2,
/// 3 of the exact tile's 4 instructions per pair; ~128 instead of ~157
/// instructions on a step's hot path in sm_90 SASS), and each group's scale
/// multiplies the tensor cores' fp32 sum of its rows once per column. The
/// dequantized weight is not rounded to bf16 as the spec rounds it (the
/// exact tile does): the sums differ from the spec's by that rounding
/// (~2^-9 per weight, random), the budget docs/pipeline.md states.
///
/// ZFOLD (`arithmetic=folded`, kOrderMmaFolded, the default): a weight pair is
/// {128 + q} (a shift and one LOP3, no HSUB2; with the mma below ~99
/// instructions on a step's hot path), and (128 + z) times the sum of x
/// over the same rows is
/// subtracted from each group sum before its scale: one more mma per step
/// (A all ones, the same B) leaves in every lane's even D column the sum of
/// x its slot's column has seen, so the correction needs no cross-lane work
/// either. The cancellation of (128 + z) sum x against sum (128 + q) x
/// costs ~2^-19 of a sum in fp32. (Session 22's first form summed x per
/// group in each tile's prologue: 6 us slower than the exact tile, perf
/// notes #121.)
///
/// Group sums live in the mma's spare B columns: even B column 2r carries
/// x of k-subslice r % KG for the group in slot r / KG (zero while another
/// group fills the other slots; a group's rows go to slot (g - first
/// group) % SLOTS), odd B columns are zero. Lane (g, t) then holds in its
/// even D column the group sums of slot t / KG and in its odd one (which
/// the mma leaves as it is) its running totals: every SLOTS groups (and at
/// the end) each lane scales its slot's sums into its totals and clears
/// them, with no cross-lane work in the loop; the quad's totals are added
/// once at the end. An fp32 x (FP32X) takes a second mma per step for its
/// bf16 remainder (same A, same D). SLOTS = 4 / KG: 4 for 128-wide tiles
/// (a flush every 32 steps), 2 for 64-wide (every 8). Registers: the exact
/// tile's (32 sums, 16 words of scales and zero points).
template <int THREADS, int TN, int GROUP, bool FP32X, bool ZFOLD, class Epi, class Pro>
__device__ void w4a16_gemv_tile_grouped(const float *xs, const uint8_t *__restrict__ wq,
                                        const bf16 *__restrict__ scales,
                                        const bf16 *__restrict__ zeros, int N, int n0, int nvalid,
                                        int k0, int k1, float *red, Epi epi, Pro pro,
                                        bool started) {
  static_assert(TN == 128 || TN == 64, "packed tiles are 128 or 64 wide");
  constexpr int WARPS = THREADS / 32;
  constexpr int GPER = TN / 16; // column groups per warp
  constexpr int KG = w4a16_ksub<TN>();        // k-subslices per step
  constexpr int STEP = w4a16_step_pairs<TN>(); // row pairs per step
  constexpr int SLOTS = 4 / KG;
  static_assert(GROUP % (2 * STEP) == 0, "a step lies inside one quantization group");
  constexpr int S = kW4A16StageRows / 2, STAGES = kW4A16Stages;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int cg = g % GPER, sub = g / GPER;
  const int col = n0 + cg * 16;
  const bool colActive = cg * 16 < nvalid;
  // B column g: zero if odd, else slot (g / 2) / KG's x of subslice
  // (g / 2) % KG. D column 2t: slot t / KG's sums of subslice t % KG.
  const bool evenB = (g & 1) == 0;
  const int slotB = (g >> 1) / KG, subB = (g >> 1) % KG;
  const int slotD = t / KG;
  const bool mineD = t % KG == sub; // D rows and columns of one subslice
  [[maybe_unused]] StageClock clk;
  MK_TILE_STAMP(0);
  // Whole steps (k0, k1 multiples of 2 * STEP rows), so a step's
  // subslices share one group and every lane's x lies inside the task.
  const int pa = k0 / 2;
  const int nsteps = (k1 / 2 - pa) / STEP;
  const detail::WarpSteps ws_ = detail::warp_steps<WARPS>(nsteps, warp);
  const int sbeg = ws_.sbeg, send = ws_.send;
  const int nmine = send > sbeg ? send - sbeg : 0;
  const int nchunks = (nmine + S - 1) / S;
  uint4 *stage = reinterpret_cast<uint4 *>(red + w4a16_ring_offset_floats<THREADS, TN>());
  auto groupOf = [&](int st) { return 2 * (pa + st * STEP) / GROUP; };
  const int gFirst = groupOf(sbeg), gLast = nmine > 0 ? groupOf(send - 1) : gFirst - 1;
  // The scales of the group in this lane's slot, loaded when the group
  // starts and used when it is flushed (zeroed: a slot never filled
  // flushes zeros), and the current group's {128 + z} pairs (the HSUB2's).
  // With ZFOLD also the slot's group's zero points.
  uint4 slotS0 = make_uint4(0, 0, 0, 0), slotS1 = slotS0;
  [[maybe_unused]] uint4 slotZ0 = slotS0, slotZ1 = slotS0;
  detail::ColumnScales cur;
  if (started) {
    // w4a16_gemv_begin copied each warp's first group's scales and zeros
    // into `red` (its oldest cp.async group, then STAGES of weights).
    cp_async_wait<STAGES>();
    __syncwarp();
  }
  // The first group's scales and zero points: loaded first and taken into
  // the slot's registers before the weight copies are issued. (Taking
  // them after the copies, so that their round trip runs under the first
  // chunks', measured no faster, perf notes #160: the copies' issue is
  // paced by the SM's queue of outstanding requests, not by this wait.)
  if (colActive && nmine > 0) {
    const detail::GroupScalesRaw raw =
        started ? detail::staged_first_scales<TN>(red, warp, cg)
                : detail::load_group_scales_raw(scales, zeros, N, gFirst, col);
    if (slotD == 0) {
      slotS0 = raw.sa, slotS1 = raw.sb;
      if constexpr (ZFOLD)
        slotZ0 = raw.za, slotZ1 = raw.zb;
    }
    if constexpr (!ZFOLD)
      cur.set(raw);
    MK_UNROLL_RUNTIME
    for (int gi = gFirst + 1; gi <= gLast; ++gi)
      detail::prefetch_group_scales<false>(scales, zeros, N, gi, col);
  }
  // AHEAD of the ring's stages are asked for up front, the next one after
  // each stage's steps (a stream begun by w4a16_gemv_begin has all of
  // them): a warp's first steps then run while its last stages are still
  // to be asked for, instead of after the issue of all its copies, which
  // the SM's queue of outstanding requests paces (perf notes #210).
  constexpr int AHEAD = kGemvAheadStages < STAGES ? kGemvAheadStages : STAGES;
  const int ahead = started ? STAGES : AHEAD;
  detail::packed_ring_start<THREADS, AHEAD>(wq, pa / STEP, sbeg, send, stage, started, pro);

  // acc[m][0] / [2]: the slot's sums of columns 2m / 2m + 1 (D rows g /
  // g + 8); acc[m][1] / [3]: their totals.
  float acc[8][4];
#pragma unroll
  for (int m = 0; m < 8; ++m)
    acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = 0.f;
  // Adds the lane's slot's sums times their group's scales to its totals
  // and clears them.
  // ZFOLD: the sums of x (as the B columns carry it) of the lane's slot:
  // sx[0] (and sx[2]) for its even column, sx[1], sx[3] zero.
  [[maybe_unused]] float sx[4] = {0.f, 0.f, 0.f, 0.f};
  auto flush = [&] {
    const uint32_t sw[8] = {slotS0.x, slotS0.y, slotS0.z, slotS0.w,
                            slotS1.x, slotS1.y, slotS1.z, slotS1.w};
#pragma unroll
    for (int m = 0; m < 8; ++m) {
#pragma unroll
      for (int h = 0; h < 2; ++h) { // column 2m + h
        float v = acc[m][2 * h];
        if constexpr (ZFOLD) {
          const uint4 &zq = m < 4 ? slotZ0 : slotZ1;
          const int k = m % 4;
          const uint32_t zw = k == 0 ? zq.x : k == 1 ? zq.y : k == 2 ? zq.z : zq.w;
          v = fmaf(-(128.f + detail::bf16_half(zw, h)), sx[0], v);
        }
        acc[m][2 * h + 1] = fmaf(detail::bf16_half(sw[m], h), v, acc[m][2 * h + 1]);
        acc[m][2 * h] = 0.f;
      }
    }
    if constexpr (ZFOLD)
      sx[0] = sx[1] = sx[2] = sx[3] = 0.f;
  };
  int nextGrpSt = sbeg, curSlot = 0, gCur = gFirst;
  // The lane's B column is x (all ones) while its slot fills, else zero
  // (no branch before the mma: x is loaded by every lane).
  const int slotBx = detail::opaque_int(evenB ? slotB : -1);
  uint32_t bmask = slotBx == 0 ? ~0u : 0u;
  const uint32_t magic = detail::bf16x2_128();
  const int xoff = 2 * (pa + subB * 8 + t);
  const float *xlane = xs + detail::opaque_int(xoff);
  // This lane's x pair `off` floats past step st's (in shared memory).
#ifdef MK_GEMV_SHARED_LOADS
  const unsigned xlaneS = detail::smem_u32(xlane);
  auto xAt = [&](int st, int off) { return detail::lds_f2(xlaneS + 4 * (2 * st * STEP + off)); };
#else
  auto xAt = [&](int st, int off) {
    return *reinterpret_cast<const float2 *>(xlane + 2 * st * STEP + off);
  };
#endif
  auto step = [&](int st, uint4 wa, uint4 wb) {
    if (st == nextGrpSt) { // warp-uniform: a step lies in one group
      const int gi = groupOf(st);
      if (gi != gCur) {
        const int rel = gi - gFirst;
        if (rel % SLOTS == 0)
          flush();
        curSlot = rel % SLOTS;
        bmask = slotBx == curSlot ? ~0u : 0u;
        gCur = gi;
        if (colActive && (!ZFOLD || slotD == curSlot)) {
          const detail::GroupScalesRaw raw =
              detail::load_group_scales_raw(scales, zeros, N, gi, col);
          if (slotD == curSlot) {
            slotS0 = raw.sa, slotS1 = raw.sb;
            if constexpr (ZFOLD)
              slotZ0 = raw.za, slotZ1 = raw.zb;
          }
          if constexpr (!ZFOLD) {
            cur.set(raw);
            if (gi + 1 <= gLast)
              detail::prefetch_group_scales<true>(scales, zeros, N, gi + 1, col);
          }
        }
      }
      nextGrpSt = max(st + 1, ((gi + 1) * (GROUP / 2) - pa) / STEP);
    }
    const float2 x0 = xAt(st, 0), x1 = xAt(st, 8);
    const uint32_t b0 = detail::bf2_part(x0, false) & bmask;
    const uint32_t b1 = detail::bf2_part(x1, false) & bmask;
    uint32_t l0 = 0, l1 = 0;
    if constexpr (FP32X) {
      l0 = detail::bf2_part(x0, true) & bmask;
      l1 = detail::bf2_part(x1, true) & bmask;
    }
    const uint32_t wav[4] = {wa.x, wa.y, wa.z, wa.w};
    const uint32_t wbv[4] = {wb.x, wb.y, wb.z, wb.w};
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      const int j0 = 2 * m, j1 = 2 * m + 1;
      uint32_t a[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int j = i & 1 ? j1 : j0;
        const uint32_t w = (i & 2 ? wbv : wav)[j / 4];
        const uint32_t q2 = detail::nibbles_col_128(w, j % 4, magic);
        if constexpr (ZFOLD)
          a[i] = q2;
        else
          a[i] = detail::as_u32(__hsub2(detail::as_bf2(q2), detail::as_bf2(cur.zc(j))));
      }
      detail::mma_bf16_16816(acc[m], a[0], a[1], a[2], a[3], b0, b1);
      if constexpr (FP32X)
        detail::mma_bf16_16816(acc[m], a[0], a[1], a[2], a[3], l0, l1);
    }
    if constexpr (ZFOLD) {
      const uint32_t ones = 0x3f803f80u; // bf16x2 {1, 1}
      detail::mma_bf16_16816(sx, ones, ones, ones, ones, b0, b1);
      if constexpr (FP32X)
        detail::mma_bf16_16816(sx, ones, ones, ones, ones, l0, l1);
    }
  };
  MK_TILE_STAMP(3);
  clk.lap(kStageTileIssue);
  for (int c = 0; c < nchunks; ++c) {
    if (started) // w4a16_gemv_begin asked for the whole ring (warp-uniform)
      cp_async_wait<STAGES - 1>();
    else
      cp_async_wait<AHEAD - 1>();
    if (c == 0) {
      MK_TILE_STAMP(4);
      clk.lap(kStageTileFirstData);
    }
    const uint4 *slot = stage + (c % STAGES) * 2 * S * THREADS + threadIdx.x;
    // This thread's piece j of the stage.
#ifdef MK_GEMV_SHARED_LOADS
    const unsigned slotS = detail::smem_u32(slot);
    auto pieceAt = [&](int j) { return detail::lds_u4(slotS + j * THREADS * 16); };
#else
    auto pieceAt = [&](int j) { return slot[j * THREADS]; };
#endif
MK_UNROLL_CODE
    for (int i = 0; i < S; ++i) {
      const int st = sbeg + c * S + i;
      if (st < send) // warp-uniform
        step(st, pieceAt(2 * i), pieceAt(2 * i + 1));
    }
    detail::packed_cp_async_stage<THREADS>(wq, pa / STEP, sbeg, send, stage, c + ahead);
  }
  flush();
  MK_TILE_STAMP(5);
  clk.lap(kStageTileSteps);
  cp_async_wait<0>();
  __syncthreads(); // the ring is free: reuse it for the cross-warp sums
  clk.lap(kStageTileWarps);
  MK_TILE_STAMP(6);
  // The quad's lanes of one subslice (t and t ^ 2; with one subslice all
  // four) add their totals; lane t = sub writes them.
  float *sums = reinterpret_cast<float *>(stage); // [WARPS * KG][TN]
#pragma unroll
  for (int m = 0; m < 8; ++m)
#pragma unroll
    for (int h = 1; h < 4; h += 2) {
      float v = mineD ? acc[m][h] : 0.f;
      if constexpr (KG == 1)
        v += __shfl_xor_sync(0xffffffffu, v, 1);
      v += __shfl_xor_sync(0xffffffffu, v, 2);
      acc[m][h] = v;
    }
  if (t == sub && colActive) {
    float *row = sums + (warp * KG + sub) * TN + cg * 16;
#pragma unroll
    for (int m = 0; m < 8; ++m) {
      row[2 * m] = acc[m][1];
      row[2 * m + 1] = acc[m][3];
    }
  }
  __syncthreads();
  MK_TILE_STAMP(7);
  for (int cidx = threadIdx.x; cidx < nvalid; cidx += THREADS) {
    float v = 0.f;
#pragma unroll 4
    for (int w = 0; w < WARPS * KG; ++w)
      v += sums[w * TN + cidx];
    epi(n0 + cidx, v);
  }
  __syncthreads();
  clk.lap(kStageTileReduce);
  MK_TILE_STAMP(9);
}

/// Shared memory of a row-slice product (w4a16_row_slice_stage /
/// w4a16_row_slice_atomic) of KS rows of an N-column weight, in bytes: per
/// 128-wide tile and 16-row step, the step's weights (1 KB) and its group's
/// 128 scales and 128 zeros (512 B).
template <int KS, int N> __host__ __device__ constexpr int row_slice_smem_bytes() {
  return (N / 128) * (KS / 16) * (1024 + 512);
}

/// Requests rows [r0, r0 + KS) of every column of a W4A16 weight [K, N] into
/// shared memory `stage` (16-byte cp.async, one commit group; 16-byte
/// aligned, row_slice_smem_bytes<KS, N>() bytes), for w4a16_row_slice_atomic
/// after cp_async_wait<0>() and a block barrier. The weights depend on no
/// phase: a task requests them first and they land under its other work.
/// ORDER: kOrderMma (the 128-wide packed tiles, tile-contiguous, whose step
/// r0 / 16 is the slice) or kOrderRowMajor with TILED (128-wide
/// tile-contiguous [N/128][K/2][128]) or not (the spec's [K/2, N]); the
/// scales and zeros are tile-contiguous ([N/128][K/GROUP][128]) exactly when
/// the weights are.
template <int THREADS, int KS, int GROUP, int N, int ORDER, bool TILED>
__device__ __forceinline__ void w4a16_row_slice_stage(const uint8_t *__restrict__ wq,
                                                      const bf16 *__restrict__ scales,
                                                      const bf16 *__restrict__ zeros, int K,
                                                      int r0, uint8_t *stage) {
  static_assert(KS % 16 == 0 && GROUP % 16 == 0 && N % 128 == 0,
                "row slices are whole 16-row steps of 128-wide tiles");
  static_assert(ORDER != kOrderMma || TILED, "packed tiles are tile-contiguous");
  constexpr int NS = KS / 16, TILES = N / 128;
  constexpr int STEPS = TILES * NS;
  uint4 *w = reinterpret_cast<uint4 *>(stage);
  uint4 *sz = reinterpret_cast<uint4 *>(stage + STEPS * 1024);
  // Weights: 64 pieces of 16 bytes per step.
  for (int p = threadIdx.x; p < STEPS * 64; p += THREADS) {
    const int ts = p / 64, piece = p % 64, ti = ts / NS, s = ts % NS;
    const uint8_t *src;
    if constexpr (ORDER == kOrderMma) {
      src = wq + (size_t)ti * (K / 2) * 128 + (size_t)(r0 / 16 + s) * 1024 + piece * 16;
    } else {
      // Row pair r0/2 + 8s + piece/8, 16 columns (piece % 8) of the tile.
      const size_t pr = (size_t)(r0 / 2 + 8 * s + piece / 8);
      src = TILED ? wq + (size_t)ti * (K / 2) * 128 + pr * 128 + (piece % 8) * 16
                  : wq + pr * N + ti * 128 + (piece % 8) * 16;
    }
    cp_async16_weights(w + p, src);
  }
  // Scales then zeros: 16 pieces each (128 bf16) per step.
  for (int p = threadIdx.x; p < STEPS * 32; p += THREADS) {
    const int ts = p / 32, piece = p % 32, ti = ts / NS, s = ts % NS;
    const int grp = (r0 + 16 * s) / GROUP;
    const bf16 *base = piece < 16 ? scales : zeros;
    const bf16 *src = TILED ? base + (size_t)ti * (K / GROUP) * 128 + (size_t)grp * 128
                            : base + (size_t)grp * N + ti * 128;
    cp_async16(sz + p, src + (piece % 16) * 8);
  }
  cp_async_commit();
}

/// acc[n] += scale * sum_{r < KS} bf16(x[r]) * w[r0 + r][n] for every column
/// n of the weight staged by w4a16_row_slice_stage (same KS, N, ORDER): the
/// product of one slice of a split-K GEMV's input, which its producer holds,
/// with the whole rows of the weight it meets. Each warp takes whole
/// 128-wide tiles; a step is the exact tile's (w4a16_gemv_tile_mma: the
/// spec's bf16 dequantization, x as the mma's B column, fp32 sums), and the
/// tile's 128 sums go out as fp32 atomics, no cross-warp sums (the stage is
/// overwritten with them). `xs`: the KS inputs as floats (bf16 values) in
/// shared memory.
template <int THREADS, int KS, int N, int ORDER>
__device__ __forceinline__ void w4a16_row_slice_atomic(const float *xs, uint8_t *stage,
                                                       float *acc, float scale) {
  constexpr int NS = KS / 16, TILES = N / 128, WARPS = THREADS / 32;
  constexpr bool PACKED = ORDER == kOrderMma;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const uint4 *w = reinterpret_cast<const uint4 *>(stage);
  const uint4 *sz = reinterpret_cast<const uint4 *>(stage + TILES * NS * 1024);
  // B: lanes g == 0 hold x of row pairs t and t + 4 of each step.
  uint32_t b0[NS], b1[NS];
#pragma unroll
  for (int s = 0; s < NS; ++s) {
    b0[s] = b1[s] = 0;
    if (g == 0) {
      const int r = 16 * s + 2 * t;
      b0[s] = detail::pack_bf2(xs[r], xs[r + 1]);
      b1[s] = detail::pack_bf2(xs[r + 8], xs[r + 9]);
    }
  }
  const uint32_t magic = detail::bf16x2_128();
  for (int ti = warp; ti < TILES; ti += WARPS) {
    float c[8][4];
#pragma unroll
    for (int m = 0; m < 8; ++m)
      c[m][0] = c[m][1] = c[m][2] = c[m][3] = 0.f;
#pragma unroll
    for (int s = 0; s < NS; ++s) {
      const int ts = ti * NS + s;
      // This lane's 16 columns g*16.. of the step's group.
      detail::ColumnScales cs;
      cs.set({sz[ts * 32 + 2 * g], sz[ts * 32 + 2 * g + 1], sz[ts * 32 + 16 + 2 * g],
              sz[ts * 32 + 16 + 2 * g + 1]});
      // Row pairs t and t + 4: the packed step's lane order, or the rows'
      // 16 columns of the row-major pieces.
      const uint4 wa = PACKED ? w[ts * 64 + lane] : w[ts * 64 + t * 8 + g];
      const uint4 wb = PACKED ? w[ts * 64 + 32 + lane] : w[ts * 64 + (t + 4) * 8 + g];
      const uint32_t wav[4] = {wa.x, wa.y, wa.z, wa.w};
      const uint32_t wbv[4] = {wb.x, wb.y, wb.z, wb.w};
#pragma unroll
      for (int m = 0; m < 8; ++m) {
        const int j0 = 2 * m, j1 = 2 * m + 1;
        const uint32_t a0 = detail::dequant_col_bf2<PACKED>(wav[j0 / 4], j0 % 4, cs.zc(j0), cs.s(j0), magic);
        const uint32_t a1 = detail::dequant_col_bf2<PACKED>(wav[j1 / 4], j1 % 4, cs.zc(j1), cs.s(j1), magic);
        const uint32_t a2 = detail::dequant_col_bf2<PACKED>(wbv[j0 / 4], j0 % 4, cs.zc(j0), cs.s(j0), magic);
        const uint32_t a3 = detail::dequant_col_bf2<PACKED>(wbv[j1 / 4], j1 % 4, cs.zc(j1), cs.s(j1), magic);
        detail::mma_bf16_16816(c[m], a0, a1, a2, a3, b0[s], b1[s]);
      }
    }
    // D column 0 (x's B column): lanes t == 0 hold columns g*16 + 2m (c[m][0])
    // and g*16 + 2m + 1 (c[m][2]). They go through the tile's first step in
    // `stage` (only this warp reads it, and it has) so that each atomic
    // instruction covers 32 consecutive columns: the 8 lanes' own scattered
    // atomics made 16x the L2 requests and cost ~40 us per KDA layer
    // (docs/perf-notes.md, #60).
    float *sums = reinterpret_cast<float *>(stage + (size_t)ti * NS * 1024);
    __syncwarp();
    if (t == 0) {
#pragma unroll
      for (int m = 0; m < 8; ++m) {
        sums[g * 16 + 2 * m] = c[m][0];
        sums[g * 16 + 2 * m + 1] = c[m][2];
      }
    }
    __syncwarp();
#pragma unroll
    for (int j = lane; j < 128; j += 32)
      atomicAdd(acc + ti * 128 + j, sums[j] * scale);
  }
}

namespace detail {
__device__ __forceinline__ void mma_u8s8_16832(int *c, uint32_t a0, uint32_t a1, uint32_t a2,
                                               uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
} // namespace detail

/// Bytes of one step (32 weight rows) of a TN-wide tile in the integer
/// order (mk::rt::packInt8Steps writes them; core/include/mk/PackedLayout.h).
template <int TN> __host__ __device__ constexpr int int8_step_bytes() { return 16 * TN; }
/// The most rows one integer-order task may cover: its quantized x (two
/// bytes per row, a word per step and per group) lives in the ring's last
/// 1/9 (core/include/mk/PackedLayout.h has the same number).
constexpr int kInt8TileMaxRows = 3584; // mk::kInt8MaxSliceRows
/// Where xl starts behind xh: 16 bytes of padding put the two tables' words
/// of one step in different banks.
constexpr int kInt8XlOffset = kInt8TileMaxRows + 16;

/// Bytes of one bulk copy of the integer tile's stream (whole steps: 2 of
/// 2 KB at 128 wide, 4 of 1 KB at 64). 4 KB chunks, two per warp slice in
/// flight, ran the unit 3.4 us faster than 2 KB ones (four per slice) on an
/// H100 with int8 expert tiles (perf notes #208).
constexpr int kInt8ChunkBytes = 4096;
/// Bytes of a warp's slice of the ring in the integer tile: whole chunks
/// (the rest of the ring holds the quantized x).
template <int THREADS>
constexpr int kInt8Slice = (kW4A16Stages * kW4A16StageRows * THREADS * 16 / (THREADS / 32)) /
                           kInt8ChunkBytes * kInt8ChunkBytes;

/// The same task in integer arithmetic on the tensor cores. The spec's
/// y[n] = sum_k x[k] (q[k,n] - z[g,n]) s[g,n] is, per quantization group g,
/// s[g,n] * (sum_k x[k] q[k,n] - z[g,n] sum_k x[k]); x is quantized per group
/// to x ~= u_g * (254 xh + xl) with int8 xh (|xh| <= 127, scale absmax/127)
/// and int8 xl (the remainder, 254 steps per unit of xh): x to ~16
/// significant bits. Then sum_k x q is u_g * (254 * sum xh q + sum xl q),
/// both integer dot products of raw nibbles, exact in one
/// mma.m16n8k32.u8.s8 per 16 x 32 weights: xh and xl are two B columns of
/// the same mma. The zero point is an exact integer correction and the
/// scale one fp32 multiply per column and group. What differs from the spec:
/// the dequantized weight is not rounded to bf16 (the product is exact), x
/// carries 16 bits instead of 24 (docs/pipeline.md, the error budget).
///
/// Layout (integer order): a step is 32 rows x TN columns, TN/32 16-byte
/// pieces per lane, piece i at i*512 + lane*16 holding mma tiles 2i and
/// 2i+1 as words (W0, W1): W0's byte b = q[4t+b][c(m,g)] | q[4t+b][c(m,g+8)]
/// << 4, W1 the same for rows 16+4t+b, where lane = 4g+t and column
/// c(m, r) = (TN/32) * (4 (r%8) + m%4) + 2 (m/4) + r/8. A fragments are then
/// W & 0x0f0f0f0f (A row g) and W & 0xf0f0f0f0 (A row g+8, 16 q: the 16 is
/// taken out of that column's scale): two LOP3 per 8 weights. Tile m uses
/// B variant m%4, whose columns 2v, 2v+1 hold xh, xl (the others zero),
/// and tiles 4h..4h+3 accumulate into one set: lane (g, t) then holds the
/// xh and xl sums of exactly its TN/32 columns, c(4h+t, g) and c(4h+t, g+8),
/// which are the contiguous (TN/32) * lane + [0, TN/32).
///
/// k0, k1: multiples of 32, k1 - k0 <= kInt8TileMaxRows; GROUP % 32 == 0.
/// wq at the tile (N = TN, n0 = 0); scales and zeros tile-contiguous.
template <int THREADS, int TN, int GROUP, class Epi, class Pro>
__device__ void w4a16_gemv_tile_int8(const float *xs, const uint8_t *__restrict__ wq,
                                     const bf16 *__restrict__ scales,
                                     const bf16 *__restrict__ zeros, int N, int n0, int nvalid,
                                     int k0, int k1, float *red, Epi epi, Pro pro,
                                     bool started = false) {
  static_assert(TN == 128 || TN == 64, "integer order: 128- or 64-wide tiles");
  static_assert(GROUP % 32 == 0, "integer order: GROUP must be a multiple of 32");
  constexpr int WARPS = THREADS / 32;
  constexpr int CPL = TN / 32;   // columns per lane
  constexpr int SETS = TN / 64;  // accumulator sets (4 mma tiles each)
  constexpr int MT = TN / 16;    // mma tiles per step
  constexpr int STEP_BYTES = int8_step_bytes<TN>();
  constexpr int CHUNK_STEPS = kInt8ChunkBytes / STEP_BYTES;
  constexpr int RING = kW4A16Stages * kW4A16StageRows * THREADS * 16;
  constexpr int SLICE = kInt8Slice<THREADS>;
  static_assert(GROUP <= 128, "integer order: 16 q * x sums of a group must fit int32");
  static_assert(RING - WARPS * SLICE >= kInt8XlOffset + kInt8TileMaxRows +
                                            kInt8TileMaxRows / 8 + (kInt8TileMaxRows / GROUP + 2) * 4,
                "the quantized x must fit behind the ring slices");
  static_assert(WARPS * TN * 4 <= WARPS * SLICE, "the cross-warp sums must fit the ring");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int rows = k1 - k0, nsteps = rows / 32;
  const int gq0 = k0 / GROUP, ngq = (k1 - 1) / GROUP - gq0 + 1;
  uint8_t *ring = reinterpret_cast<uint8_t *>(red + w4a16_ring_offset_floats<THREADS, TN>());
  // Quantized x: xh[rows], xl[rows] (int8), per-step sums of 254 xh + xl
  // (int32), per-group u (fp32).
  int8_t *xq = reinterpret_cast<int8_t *>(ring + WARPS * SLICE);
  int *xsum = reinterpret_cast<int *>(xq + kInt8XlOffset + kInt8TileMaxRows);
  float *xu = reinterpret_cast<float *>(xsum + kInt8TileMaxRows / 32);
  const detail::WarpSteps ws_ = detail::warp_steps<WARPS>(nsteps, warp);
  const int sbeg = ws_.sbeg, send = ws_.send;

  // After the caller's prologue (x staged), each warp quantizes groups.
  auto quantize = [&] {
    pro();
    for (int q = warp; q < ngq; q += WARPS) {
      const int r0 = max(k0, (gq0 + q) * GROUP), r1 = min(k1, (gq0 + q + 1) * GROUP);
      float amax = 0.f;
      for (int r = r0 + lane; r < r1; r += 32)
        amax = fmaxf(amax, fabsf(xs[r]));
#pragma unroll
      for (int o = 16; o; o >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
      const float inv = amax > 0.f ? 127.f / amax : 0.f;
      if (lane == 0)
        xu[q] = amax / (127.f * 254.f);
      // r0, r1 are multiples of 32: one row per lane and step.
      for (int rb = r0; rb < r1; rb += 32) {
        const int r = rb + lane;
        const float a = xs[r] * inv;
        const int h = __float2int_rn(a);
        const int l = max(-127, min(127, __float2int_rn((a - float(h)) * 254.f)));
        xq[r - k0] = int8_t(h);
        xq[kInt8XlOffset + r - k0] = int8_t(l);
        int v = 254 * h + l;
#pragma unroll
        for (int o = 16; o; o >>= 1)
          v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0)
          xsum[(rb - k0) / 32] = v;
      }
    }
    __syncthreads();
  };

  int acc[SETS][4];
#pragma unroll
  for (int h = 0; h < SETS; ++h)
    acc[h][0] = acc[h][1] = acc[h][2] = acc[h][3] = 0;
  float y[CPL];
#pragma unroll
  for (int j = 0; j < CPL; ++j)
    y[j] = 0.f;
  int grp = -1, xp = 0;     // the group being accumulated; its sum of x (integer)
  float sc[CPL];            // that group's scales (fp32), pre-divided by 16 for rows g+8
  int zr[CPL];              // and zeros (integers), pre-multiplied by 16 for rows g+8
  auto load_sz = [&](int gi) {
    const bf16 *sp = scales + (size_t)gi * N + CPL * lane, *zp = zeros + (size_t)gi * N + CPL * lane;
    uint32_t sw[CPL / 2], zw[CPL / 2];
    if constexpr (CPL == 4) {
      const uint2 a = __ldg(reinterpret_cast<const uint2 *>(sp));
      const uint2 b = __ldg(reinterpret_cast<const uint2 *>(zp));
      sw[0] = a.x, sw[1] = a.y, zw[0] = b.x, zw[1] = b.y;
    } else {
      sw[0] = __ldg(reinterpret_cast<const unsigned int *>(sp));
      zw[0] = __ldg(reinterpret_cast<const unsigned int *>(zp));
    }
#pragma unroll
    for (int j = 0; j < CPL; ++j) {
      const float s = __uint_as_float(j % 2 ? sw[j / 2] & 0xffff0000u : sw[j / 2] << 16);
      const float z = __uint_as_float(j % 2 ? zw[j / 2] & 0xffff0000u : zw[j / 2] << 16);
      sc[j] = j % 2 ? s * (1.f / 16.f) : s;
      zr[j] = __float2int_rn(z) * (j % 2 ? 16 : 1);
    }
  };
  // Folds the group's integer sums into y: lane column 2h + r/8 is set h's
  // row g (c0 xh, c1 xl) or g+8 (c2, c3).
  auto flush = [&] {
    const float u = xu[grp - gq0];
#pragma unroll
    for (int h = 0; h < SETS; ++h) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int j = 2 * h + r;
        const int v = acc[h][2 * r] * 254 + acc[h][2 * r + 1] - zr[j] * xp;
        y[j] = fmaf(float(v), sc[j] * u, y[j]);
        acc[h][2 * r] = acc[h][2 * r + 1] = 0;
      }
    }
    xp = 0;
  };
  const uint32_t *xh32 = reinterpret_cast<const uint32_t *>(xq);
  // B: lane (g, t) holds column g of every variant v, nonzero for v = g/2
  // only: xh (g even) or xl (g odd) of rows 4t..4t+3 and 16+4t..16+4t+3.
  const int xoff = (g & 1) ? kInt8XlOffset / 4 : 0;
  auto step = [&](int st, const uint8_t *p) {
    const int gi = (k0 + 32 * st) / GROUP;
    if (gi != grp) {
      if (grp >= 0)
        flush();
      grp = gi;
      load_sz(gi);
    }
    xp += xsum[st];
    const uint32_t xb0 = xh32[xoff + 8 * st + t], xb1 = xh32[xoff + 8 * st + 4 + t];
    uint4 pc[CPL];
#pragma unroll
    for (int i = 0; i < CPL; ++i)
      pc[i] = *reinterpret_cast<const uint4 *>(p + i * 512 + lane * 16);
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      const uint4 &q = pc[m / 2];
      const uint32_t w0 = m % 2 ? q.z : q.x, w1 = m % 2 ? q.w : q.y;
      const bool mine = (m % 4) == (g >> 1);
      const uint32_t b0 = mine ? xb0 : 0u, b1 = mine ? xb1 : 0u;
      detail::mma_u8s8_16832(acc[m / 4], w0 & 0x0f0f0f0fu, w0 & 0xf0f0f0f0u, w1 & 0x0f0f0f0fu,
                             w1 & 0xf0f0f0f0u, b0, b1);
    }
  };
  detail::w4a16_packed_stream<THREADS, STEP_BYTES, CHUNK_STEPS, SLICE>(
      wq, k0 / 32, sbeg, send, ring, step, quantize, started);
  if (grp >= 0)
    flush();
  __syncthreads(); // the ring is free: reuse it for the cross-warp sums
  float *sums = reinterpret_cast<float *>(ring); // [WARPS][TN]
#pragma unroll
  for (int j = 0; j < CPL; ++j)
    sums[warp * TN + CPL * lane + j] = y[j];
  __syncthreads();
  for (int c = threadIdx.x; c < nvalid; c += THREADS) {
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w)
      v += sums[w * TN + c];
    epi(n0 + c, v);
  }
  __syncthreads();
}

/// No work to overlap with a tile's first loads.
struct NoPrologue {
  __device__ void operator()() const {}
};


/// One GEMV task: the tensor-core path (w4a16_gemv_tile_mma) for tiles of at
/// most 128 columns and groups of 16k rows, else the SIMT path
/// (w4a16_gemv_tile_simt); -DMK_GEMV_SIMT selects the SIMT path everywhere
/// (to compare). FP32X: x holds arbitrary fp32 values (else bf16 values,
/// which the tensor-core path takes exactly in one mma per step). ORDER
/// kOrderMma: the weights are one 128- or 64-wide tile in the exact tile's
/// lane-order packed layout (wq at the tile, N = TN, n0 = 0; k0 and k1
/// multiples of 16 rows for TN = 128, of 32 for TN = 64: whole 1 KB steps),
/// streamed with per-lane cp.async (-DMK_PACKED_BULK: bulk copies); always
/// the exact tensor-core path; kOrderMmaScaled / kOrderMmaFolded: the same
/// storage, the scales (and zero points) applied per group
/// (w4a16_gemv_tile_grouped). kOrderInt8:
/// the same tile in the integer order (w4a16_gemv_tile_int8).
///
/// `pro()` runs (every thread, once) after the tile's first scale and weight
/// loads are issued and before its math: work the tile depends on that can
/// overlap those loads, e.g. staging x into `xs` (end it with
/// __syncthreads()). It must not touch `red`, but for the ring stages a
/// row-major tile leaves empty (w4a16_rows_in_first_stage: stages 1 and up).
template <int THREADS, int TN, int GROUP, class Epi, bool FP32X, int ORDER, class Pro>
__device__ void w4a16_gemv_tile_with(const float *xs, const uint8_t *__restrict__ wq,
                                     const bf16 *__restrict__ scales,
                                     const bf16 *__restrict__ zeros, int N, int n0, int nvalid,
                                     int k0, int k1, float *red, Epi epi, bool prefetched,
                                     Pro pro) {
  // Packed orders: `prefetched` means w4a16_gemv_begin started the stream.
  if constexpr (ORDER == kOrderInt8) {
    w4a16_gemv_tile_int8<THREADS, TN, GROUP>(xs, wq, scales, zeros, N, n0, nvalid, k0, k1, red,
                                             epi, pro, prefetched);
    return;
  } else if constexpr (ORDER == kOrderMma) {
    static_assert(TN == 128 || TN == 64, "packed weights are 128- or 64-wide tiles");
    w4a16_gemv_tile_mma<THREADS, TN, GROUP, FP32X, true>(xs, wq, scales, zeros, N, n0, nvalid,
                                                         k0, k1, red, epi, pro, prefetched);
    return;
  } else if constexpr (ORDER == kOrderMmaScaled || ORDER == kOrderMmaFolded) {
    static_assert(TN == 128 || TN == 64, "packed weights are 128- or 64-wide tiles");
    w4a16_gemv_tile_grouped<THREADS, TN, GROUP, FP32X, ORDER == kOrderMmaFolded>(
        xs, wq, scales, zeros, N, n0, nvalid, k0, k1, red, epi, pro, prefetched);
    return;
  } else {
    static_assert(ORDER == kOrderRowMajor, "unknown weight order");
#ifndef MK_GEMV_SIMT
    // An fp32 x needs a free B column per k-subslice (TN >= 32); 16-wide
    // tiles of fp32 inputs take the SIMT path, which is exact in fp32.
    if constexpr (TN <= 128 && GROUP % 16 == 0 && (!FP32X || TN >= 32)) {
      if (prefetched) // the mma path streams rows in its own order
        cp_async_wait<0>();
      w4a16_gemv_tile_mma<THREADS, TN, GROUP, FP32X, false>(xs, wq, scales, zeros, N, n0,
                                                            nvalid, k0, k1, red, epi, pro);
      return;
    }
#endif
    w4a16_gemv_tile_simt<THREADS, TN, GROUP>(xs, wq, scales, zeros, N, n0, nvalid, k0, k1, red,
                                             epi, prefetched, pro);
  }
}

/// w4a16_gemv_tile_with, nothing overlapped (the emitted kernels' entry).
template <int THREADS, int TN, int GROUP, class Epi, bool FP32X = false, int ORDER = kOrderRowMajor>
__device__ void w4a16_gemv_tile(const float *xs, const uint8_t *__restrict__ wq,
                                const bf16 *__restrict__ scales, const bf16 *__restrict__ zeros,
                                int N, int n0, int nvalid, int k0, int k1, float *red, Epi epi,
                                bool prefetched = false) {
  w4a16_gemv_tile_with<THREADS, TN, GROUP, Epi, FP32X, ORDER>(
      xs, wq, scales, zeros, N, n0, nvalid, k0, k1, red, epi, prefetched, NoPrologue{});
}

namespace detail {
/// One element of a GEMV input staged from global memory: a bf16 value as
/// stored; an fp32 one is a sum the spec rounds to bf16 first.
__device__ __forceinline__ float staged_x(const bf16 *p) { return bf2f(__ldcg(p)); }
__device__ __forceinline__ float staged_x(const float *p) { return round_bf16(__ldcg(p)); }
} // namespace detail

/// dst[i - k0] = staged_x(src + i) for i in [k0, k1), each thread's
/// elements kStageBatch at a time with all of a batch's loads issued before
/// its stores: one loop of load-then-store pays an L2 round trip per
/// element, as the compiler cannot move a load above a store to shared
/// memory it does not know apart from src. Caller synchronizes.
/// -DMK_SERIAL_STAGING: that loop (the form before, to measure against).
constexpr int kStageBatch = 4;
template <int THREADS, class In>
__device__ __forceinline__ void block_stage_slice(const In *src, float *dst, int k0, int k1) {
#ifndef MK_SERIAL_STAGING
  for (int base = k0 + threadIdx.x; base < k1; base += kStageBatch * THREADS) {
    float v[kStageBatch];
#pragma unroll
    for (int j = 0; j < kStageBatch; ++j) {
      const int i = base + j * THREADS;
      v[j] = i < k1 ? detail::staged_x(src + i) : 0.f;
    }
#pragma unroll
    for (int j = 0; j < kStageBatch; ++j)
      if (base + j * THREADS < k1)
        dst[base + j * THREADS - k0] = v[j];
  }
#else
  for (int i = k0 + threadIdx.x; i < k1; i += THREADS)
    dst[i - k0] = detail::staged_x(src + i);
#endif
}

/// w4a16_gemv_tile of an input in global memory (bf16, or an fp32 sum
/// rounded to bf16): its k-slice [k0, k1) is staged into `stage`
/// (k1 - k0 floats of shared memory) while the tile's first weights load
/// (block_stage_slice as the tile's prologue).
/// -DMK_SERIAL_STAGING: staged element by element before the tile starts
/// (the form before, to measure against).
template <int THREADS, int TN, int GROUP, class Epi, bool FP32X, int ORDER, class In>
__device__ void w4a16_gemv_tile_staged(const In *src, float *stage, const uint8_t *__restrict__ wq,
                                       const bf16 *__restrict__ scales,
                                       const bf16 *__restrict__ zeros, int N, int n0, int nvalid,
                                       int k0, int k1, float *red, Epi epi,
                                       bool prefetched = false) {
#ifndef MK_SERIAL_STAGING
  auto pro = [&] {
    block_stage_slice<THREADS>(src, stage, k0, k1);
    __syncthreads();
  };
  w4a16_gemv_tile_with<THREADS, TN, GROUP, Epi, FP32X, ORDER>(
      stage - k0, wq, scales, zeros, N, n0, nvalid, k0, k1, red, epi, prefetched, pro);
#else
  block_stage_slice<THREADS>(src, stage, k0, k1);
  __syncthreads();
  w4a16_gemv_tile_with<THREADS, TN, GROUP, Epi, FP32X, ORDER>(
      stage - k0, wq, scales, zeros, N, n0, nvalid, k0, k1, red, epi, prefetched, NoPrologue{});
#endif
}

/// w4a16_gemv_tile_staged after `wait()` (the task's wait for its input,
/// which the schedule put in its prologue: schedule-prologue-waits
/// `gemv`, on by default): the tile asks for its first weights, then waits, then stages
/// its input, so that the weights' round trip runs under the wait.
template <int THREADS, int TN, int GROUP, class Epi, bool FP32X, int ORDER, class In, class Wait>
__device__ void w4a16_gemv_tile_staged_waiting(const In *src, float *stage,
                                               const uint8_t *__restrict__ wq,
                                               const bf16 *__restrict__ scales,
                                               const bf16 *__restrict__ zeros, int N, int n0,
                                               int nvalid, int k0, int k1, float *red, Epi epi,
                                               bool prefetched, Wait wait) {
#ifndef MK_SERIAL_STAGING
  auto pro = [&] {
    wait();
    block_stage_slice<THREADS>(src, stage, k0, k1);
    __syncthreads();
  };
  w4a16_gemv_tile_with<THREADS, TN, GROUP, Epi, FP32X, ORDER>(
      stage - k0, wq, scales, zeros, N, n0, nvalid, k0, k1, red, epi, prefetched, pro);
#else
  wait();
  block_stage_slice<THREADS>(src, stage, k0, k1);
  __syncthreads();
  w4a16_gemv_tile_with<THREADS, TN, GROUP, Epi, FP32X, ORDER>(
      stage - k0, wq, scales, zeros, N, n0, nvalid, k0, k1, red, epi, prefetched, NoPrologue{});
#endif
}

/// Starts the weight stream of a packed tile (ORDER kOrderMma,
/// kOrderMmaScaled, kOrderMmaFolded or kOrderInt8; the same arguments as its
/// w4a16_gemv_tile call, which then passes prefetched = true): its first
/// chunks are requested into the tile's ring now, and for the grouped
/// orders (scaled, folded) first each warp's first group's scales and zero
/// points into `red`, so that the tile's first step waits for no load.
/// Weights depend on no phase, so a block may call this for its first task
/// of a phase BEFORE the norm, counter waits or staging that task's inputs
/// need, and the stream runs under them (the opt-in early streams; in the
/// unit measured slower, perf notes #87 and #129: the critical path's small
/// loads queue behind the stream). A norm in between must load through
/// registers (block_residual_rmsnorm's REG_LOADS). Nothing may use `red` in
/// between; every thread of the block calls it.
template <int THREADS, int TN, int GROUP, int ORDER>
__device__ void w4a16_gemv_begin(const uint8_t *__restrict__ wq, const bf16 *__restrict__ scales,
                                 const bf16 *__restrict__ zeros, int N, int n0, int nvalid,
                                 int k0, int k1, float *red) {
  constexpr int WARPS = THREADS / 32;
  uint8_t *ring = reinterpret_cast<uint8_t *>(red + w4a16_ring_offset_floats<THREADS, TN>());
  const int warp = threadIdx.x >> 5;
  if constexpr (ORDER == kOrderMma || ORDER == kOrderMmaScaled || ORDER == kOrderMmaFolded) {
    constexpr int STEP = w4a16_step_pairs<TN>();
    const int p0 = k0 / 2, pa = p0 & ~7, nsteps = (k1 / 2 - pa + STEP - 1) / STEP;
    const detail::WarpSteps w = detail::warp_steps<WARPS>(nsteps, warp);
#ifdef MK_PACKED_BULK
    if constexpr (ORDER == kOrderMma) { // the grouped (scaled / folded) tiles stream with cp.async only
      detail::w4a16_stream_start<THREADS, detail::kPackedStepBytes, detail::kPackedChunkSteps,
                                 detail::kExactSlice<THREADS>>(wq, pa / STEP, w.sbeg, w.send,
                                                               ring);
      return;
    }
#endif
    // The ring's earlier readers (a previous tile's sums) are done.
    __syncthreads();
    // The grouped tiles' first scales ahead of the weights, into `red`.
    if constexpr (ORDER != kOrderMma)
      detail::stage_first_scales<TN, GROUP, STEP>(scales, zeros, N, n0, nvalid, pa, w.sbeg,
                                                  w.send, red);
    else
      (void)scales, (void)zeros, (void)N, (void)n0, (void)nvalid;
MK_UNROLL_CODE
    for (int c = 0; c < kW4A16Stages; ++c)
      detail::packed_cp_async_stage<THREADS>(wq, pa / STEP, w.sbeg, w.send,
                                             reinterpret_cast<uint4 *>(ring), c);
  } else {
    static_assert(ORDER == kOrderInt8, "only packed tiles stream from a begun ring");
    (void)scales, (void)zeros, (void)N, (void)n0, (void)nvalid;
    constexpr int STEP_BYTES = int8_step_bytes<TN>();
    const detail::WarpSteps w = detail::warp_steps<WARPS>((k1 - k0) / 32, warp);
    detail::w4a16_stream_start<THREADS, STEP_BYTES, kInt8ChunkBytes / STEP_BYTES, kInt8Slice<THREADS>>(
        wq, k0 / 32, w.sbeg, w.send, ring);
  }
}

} // namespace mk
