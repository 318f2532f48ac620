//===- w4a16_gemv.cuh - Fused int4 dequant + GEMV tile ------------*- CUDA -*-===//
//
// y[n] = sum_k x[k] * (q[k,n] - z[k/G,n]) * s[k/G,n] for one task: TN output
// columns starting at n0, over input rows [k0, k1). The int4 payload is
// streamed once with 16-byte loads and never materialized.
//
// Storage (the spec's): w_q u8 [K/2, N], byte [r,n] = q[2r,n] | q[2r+1,n]<<4;
// scales, zeros bf16 [K/G, N].
//
// Arithmetic: the scale and zero are factored out of each group,
//   sum_k x_k (q_k - z) s = s * (sum_k x_k q_k - z * sum_k x_k),
// and q is widened with a magic number instead of a conversion: one byte
// permute puts the (pre-masked) nibble into bits 16..23 under the exponent
// byte 0x43, which reads as the float 128 + q, so each weight costs one PRMT
// and one FMA (plus two masks per eight weights). The constant
// 128 * sum x is subtracted once per group; it cancels at most ~4 of fp32's
// 24 bits. The result differs from the spec's per-weight bf16 rounding of the
// dequantized value only by that rounding (well under the 0.999 cosine bar).
//
// Thread layout: CT = TN/16 threads across the tile (each owns 16 adjacent
// columns, one 16-byte load per row pair), RT = THREADS/CT thread rows, each
// owning a contiguous range of row pairs. Partial sums are reduced across
// the thread rows of a warp with shuffles, then across warps in shared memory.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mk/common.cuh"

namespace mk {

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
/// Stores into shared memory at n - n0 (caller synchronizes).
struct EpiStoreSmem {
  float *y;
  int n0;
  __device__ void operator()(int n, float v) const { y[n - n0] = v; }
};

namespace detail {
/// Byte J of `w` (a nibble, already masked) as the float 128 + q: the byte
/// lands in bits 16..23 under the exponent byte 0x43.
template <int J>
__device__ __forceinline__ float magic_nibble(uint32_t w) {
  return __uint_as_float(__byte_perm(w, 0x43u, 0x4055u | (J << 8)));
}

/// a[j] += x0 * (128 + q[2r, j]) + x1 * (128 + q[2r+1, j]) for the 4 columns
/// of one 32-bit word.
__device__ __forceinline__ void accum_word(uint32_t w, float x0, float x1, float *a) {
  const uint32_t lo = w & 0x0f0f0f0fu, hi = (w >> 4) & 0x0f0f0f0fu;
  a[0] = fmaf(x1, magic_nibble<0>(hi), fmaf(x0, magic_nibble<0>(lo), a[0]));
  a[1] = fmaf(x1, magic_nibble<1>(hi), fmaf(x0, magic_nibble<1>(lo), a[1]));
  a[2] = fmaf(x1, magic_nibble<2>(hi), fmaf(x0, magic_nibble<2>(lo), a[2]));
  a[3] = fmaf(x1, magic_nibble<3>(hi), fmaf(x0, magic_nibble<3>(lo), a[3]));
}

__device__ __forceinline__ void accum_row(const uint4 &w, float x0, float x1, float *a) {
  accum_word(w.x, x0, x1, a + 0);
  accum_word(w.y, x0, x1, a + 4);
  accum_word(w.z, x0, x1, a + 8);
  accum_word(w.w, x0, x1, a + 12);
}
} // namespace detail

/// Rows (16-byte loads) per thread per pipeline stage, and stages in flight:
/// 18 rows per thread cover a whole 2304-deep, 128-wide tile, so its loads are
/// all issued at once and only one memory latency is exposed per task.
constexpr int kW4A16StageRows = 6;
constexpr int kW4A16Stages = 3;

/// Shared memory a tile needs, in floats: the cross-warp reduction plus the
/// cp.async ring of weight rows.
template <int THREADS, int TN>
__host__ __device__ constexpr int w4a16_red_floats() {
  return (THREADS / 32) * TN + kW4A16Stages * kW4A16StageRows * THREADS * 4;
}

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
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
    stage = reinterpret_cast<uint4 *>(red + (THREADS / 32) * TN);
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
          cp_async16(slot + i * THREADS, wbase + (size_t)r * N);
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
template <int THREADS, int TN, int GROUP, class Epi>
__device__ void w4a16_gemv_tile(const float *xs, const uint8_t *__restrict__ wq,
                                const bf16 *__restrict__ scales, const bf16 *__restrict__ zeros,
                                int N, int n0, int nvalid, int k0, int k1, float *red, Epi epi,
                                bool prefetched = false) {
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

  float y[16];
#pragma unroll
  for (int i = 0; i < 16; ++i)
    y[i] = 0.f;

  if (nrows > 0) {
    int g = rbeg / GP;
    uint4 s0, s1, z0, z1;
    auto load_sz = [&](int grp) {
      const uint4 *sp = reinterpret_cast<const uint4 *>(scales + (size_t)grp * N + col);
      const uint4 *zp = reinterpret_cast<const uint4 *>(zeros + (size_t)grp * N + col);
      s0 = __ldg(sp);
      s1 = __ldg(sp + 1);
      z0 = __ldg(zp);
      z1 = __ldg(zp + 1);
    };
    load_sz(g);
    float a[16];
#pragma unroll
    for (int i = 0; i < 16; ++i)
      a[i] = 0.f;
    float xsum = 0.f;
    // Fold a finished group: y += s * (sum x q - z * sum x).
    auto fold = [&]() {
      const uint32_t sw[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
      const uint32_t zw[8] = {z0.x, z0.y, z0.z, z0.w, z1.x, z1.y, z1.z, z1.w};
      const float base = 128.f * xsum;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        y[2 * i] = fmaf(bf_lo(sw[i]), (a[2 * i] - base) - bf_lo(zw[i]) * xsum, y[2 * i]);
        y[2 * i + 1] =
            fmaf(bf_hi(sw[i]), (a[2 * i + 1] - base) - bf_hi(zw[i]) * xsum, y[2 * i + 1]);
        a[2 * i] = a[2 * i + 1] = 0.f;
      }
      xsum = 0.f;
    };
    for (int c = 0; c < nchunks; ++c) {
      cp_async_wait<STAGES - 1>();
      const uint4 *slot = stage + (c % STAGES) * S * THREADS + threadIdx.x;
#pragma unroll
      for (int i = 0; i < S; ++i) {
        const int r = rbeg + c * S + i;
        if (r < rend) {
          if (r / GP != g) {
            fold();
            g = r / GP;
            load_sz(g);
          }
          const uint4 w = slot[i * THREADS];
          const float2 x = *reinterpret_cast<const float2 *>(xs + 2 * r);
          xsum += x.x + x.y;
          detail::accum_row(w, x.x, x.y, a);
        }
      }
      lane_.issue(c + STAGES);
    }
    fold();
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

} // namespace mk
