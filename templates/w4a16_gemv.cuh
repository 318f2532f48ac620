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

__device__ __forceinline__ void accum_word(uint32_t w, float x0, float x1, float *alo, float *ahi) {
  const uint32_t lo = w & 0x0f0f0f0fu, hi = (w >> 4) & 0x0f0f0f0fu;
  alo[0] = fmaf(x0, magic_nibble<0>(lo), alo[0]);
  ahi[0] = fmaf(x1, magic_nibble<0>(hi), ahi[0]);
  alo[1] = fmaf(x0, magic_nibble<1>(lo), alo[1]);
  ahi[1] = fmaf(x1, magic_nibble<1>(hi), ahi[1]);
  alo[2] = fmaf(x0, magic_nibble<2>(lo), alo[2]);
  ahi[2] = fmaf(x1, magic_nibble<2>(hi), ahi[2]);
  alo[3] = fmaf(x0, magic_nibble<3>(lo), alo[3]);
  ahi[3] = fmaf(x1, magic_nibble<3>(hi), ahi[3]);
}

__device__ __forceinline__ void accum_row(const uint4 &w, float x0, float x1, float *alo, float *ahi) {
  accum_word(w.x, x0, x1, alo + 0, ahi + 0);
  accum_word(w.y, x0, x1, alo + 4, ahi + 4);
  accum_word(w.z, x0, x1, alo + 8, ahi + 8);
  accum_word(w.w, x0, x1, alo + 12, ahi + 12);
}
} // namespace detail

/// Shared memory the tile needs for its cross-warp reduction, in floats.
template <int THREADS, int TN>
__host__ __device__ constexpr int w4a16_red_floats() { return (THREADS / 32) * TN; }

/// One GEMV task. xs: the input vector in shared memory, indexed by absolute
/// k. N: columns of the (possibly expert-offset) matrix = its row stride.
/// Columns [n0, n0 + nvalid) are computed (nvalid <= TN, multiple of 16);
/// k0, k1 even. `red` holds w4a16_red_floats<THREADS, TN>() floats.
template <int THREADS, int TN, int GROUP, int UNROLL = 4, class Epi>
__device__ void w4a16_gemv_tile(const float *xs, const uint8_t *__restrict__ wq,
                                const bf16 *__restrict__ scales, const bf16 *__restrict__ zeros,
                                int N, int n0, int nvalid, int k0, int k1, float *red, Epi epi) {
  static_assert(TN % 16 == 0 && TN >= 16, "TN must be a multiple of 16");
  constexpr int CT = TN / 16;
  static_assert(CT <= 32 && (CT & (CT - 1)) == 0, "TN/16 must be a power of two <= 32");
  static_assert(THREADS % 32 == 0 && THREADS % CT == 0, "bad THREADS");
  static_assert(GROUP % 2 == 0, "GROUP must be even");
  constexpr int RT = THREADS / CT;
  constexpr int GP = GROUP / 2; // row pairs per group

  const int ct = threadIdx.x % CT;
  const int rt = threadIdx.x / CT;
  const int col = n0 + ct * 16;
  const bool active = ct * 16 < nvalid;

  const int p0 = k0 / 2, p1 = k1 / 2;
  const int per = (p1 - p0 + RT - 1) / RT;
  int r = p0 + rt * per;
  const int rend_all = min(p1, r + per);

  float y[16];
#pragma unroll
  for (int i = 0; i < 16; ++i)
    y[i] = 0.f;

  if (active) {
    while (r < rend_all) {
      const int g = r / GP;
      const int rend = min(rend_all, (g + 1) * GP);
      float alo[16], ahi[16];
#pragma unroll
      for (int i = 0; i < 16; ++i)
        alo[i] = ahi[i] = 0.f;
      float xs0 = 0.f, xs1 = 0.f;
      const uint8_t *wp = wq + (size_t)r * N + col;
      for (; r + UNROLL <= rend; r += UNROLL, wp += (size_t)UNROLL * N) {
        uint4 w[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
          w[u] = ld_stream(wp + (size_t)u * N);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
          const float2 x = *reinterpret_cast<const float2 *>(xs + 2 * (r + u));
          xs0 += x.x;
          xs1 += x.y;
          detail::accum_row(w[u], x.x, x.y, alo, ahi);
        }
      }
      for (; r < rend; ++r, wp += N) {
        const uint4 w = ld_stream(wp);
        const float2 x = *reinterpret_cast<const float2 *>(xs + 2 * r);
        xs0 += x.x;
        xs1 += x.y;
        detail::accum_row(w, x.x, x.y, alo, ahi);
      }
      // Fold the group: y += s * (sum x q - z * sum x).
      const uint4 *sp = reinterpret_cast<const uint4 *>(scales + (size_t)g * N + col);
      const uint4 *zp = reinterpret_cast<const uint4 *>(zeros + (size_t)g * N + col);
      const uint4 s0 = __ldg(sp), s1 = __ldg(sp + 1), z0 = __ldg(zp), z1 = __ldg(zp + 1);
      const uint32_t sw[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
      const uint32_t zw[8] = {z0.x, z0.y, z0.z, z0.w, z1.x, z1.y, z1.z, z1.w};
      const float base0 = 128.f * xs0, base1 = 128.f * xs1, xsum = xs0 + xs1;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float sa = bf_lo(sw[i]), sb = bf_hi(sw[i]);
        const float za = bf_lo(zw[i]), zb = bf_hi(zw[i]);
        const float qa = (alo[2 * i] - base0) + (ahi[2 * i] - base1);
        const float qb = (alo[2 * i + 1] - base0) + (ahi[2 * i + 1] - base1);
        y[2 * i] = fmaf(sa, qa - za * xsum, y[2 * i]);
        y[2 * i + 1] = fmaf(sb, qb - zb * xsum, y[2 * i + 1]);
      }
    }
  }

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
  constexpr int WARPS = THREADS / 32;
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
