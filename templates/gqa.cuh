//===- gqa.cuh - Grouped-query attention over a bf16 KV cache -----*- CUDA -*-===//
//
// The attention of the dense GQA decoder layer (docs/semantics-dense-gqa.md),
// one new token per step:
//   gqa_qk_norm_rope_append: every q and k head RMS-normalized over
//     head_dim (q_norm / k_norm) and rotated (rotate-half RoPE at the
//     token's position); the new k and v rows appended to the caches;
//   gqa_attention_chunk: for one kv head and one chunk of cache rows, the
//     REP query heads that read it: scores, an online softmax and the
//     weighted value rows, as fp32 partials (max, sum, weighted sum);
//   gqa_combine: the chunks' partials of one query head merged, rounded to
//     bf16: the input of o_proj.
// Arithmetic: the spec's roundings (the norm's and RoPE's outputs, the
// attention output) at the spec's points, fp32 in between; RoPE's angles in
// double as the spec states; only summation orders differ (the chunked
// softmax, warp-tree dot products). Called by the gqa_rope_append,
// gqa_attention_chunk and gqa_combine tasks (schedule-form-phases' GQA rule).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mk/common.cuh"

namespace mk {

/// The q / k heads' norm and RoPE at position `pos`, and the new cache rows.
/// One warp per head: heads [0, HQ) are the query heads (q: [HQ, HD] as
/// projected, into q_out [HQ, HD]), [HQ, HQ + HKV) the kv heads (k, v:
/// [HKV, HD]; k normalized and rotated, v as is, into row `pos` of the out
/// caches [rows, HKV, HD]). Work is spread over (task, warp) of `ntasks`
/// tasks. When the in and out caches differ (a state adopted from elsewhere)
/// rows [0, pos) are copied too. HD: a multiple of 64 (lane l holds elements
/// l + 32 j, so the pair (i, i + HD/2) RoPE rotates sits in one lane).
template <int THREADS, int HQ, int HKV, int HD>
__device__ void gqa_qk_norm_rope_append(int task, int ntasks, int pos, double theta, float eps,
                                        const bf16 *q, const bf16 *k, const bf16 *v,
                                        const bf16 *q_norm, const bf16 *k_norm, bf16 *q_out,
                                        const bf16 *k_in, const bf16 *v_in, bf16 *k_out,
                                        bf16 *v_out) {
  static_assert(HD % 64 == 0, "head_dim must be a multiple of 64");
  constexpr int WARPS = THREADS / 32, E = HD / 32, HALF = E / 2;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int head = task * WARPS + warp; head < HQ + HKV; head += ntasks * WARPS) {
    const bool isQ = head < HQ;
    const int g = isQ ? head : head - HQ;
    const bf16 *src = (isQ ? q : k) + (size_t)g * HD;
    const bf16 *w = isQ ? q_norm : k_norm;
    float x[E];
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < E; ++j) {
      x[j] = bf2f(__ldcg(src + lane + 32 * j));
      ss += x[j] * x[j];
    }
    ss = warp_sum(ss);
    const float r = 1.f / sqrtf(ss / float(HD) + eps);
#pragma unroll
    for (int j = 0; j < E; ++j) // y = bf16(x * r * w), as the spec's RMSNorm
      x[j] = round_bf16(__fmul_rn(__fmul_rn(x[j], r), bf2f(w[lane + 32 * j])));
    bf16 *dst = isQ ? q_out + (size_t)g * HD : k_out + ((size_t)pos * HKV + g) * HD;
#pragma unroll
    for (int j = 0; j < HALF; ++j) {
      // Element i = lane + 32 j pairs with i + HD/2 (index j + HALF).
      const int i = lane + 32 * j;
      const double a = double(pos) * pow(theta, -2.0 * double(i) / double(HD));
      double sd, cd;
      sincos(a, &sd, &cd);
      const float c = float(cd), s = float(sd);
      const float x0 = x[j], x1 = x[j + HALF];
      dst[i] = f2bf(__fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s)));
      dst[i + HD / 2] = f2bf(__fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s)));
    }
    if (!isQ) {
      bf16 *vd = v_out + ((size_t)pos * HKV + g) * HD;
#pragma unroll
      for (int j = 0; j < E; ++j)
        vd[lane + 32 * j] = __ldcg(v + (size_t)g * HD + lane + 32 * j);
    }
  }
  const size_t tid = (size_t)task * THREADS + threadIdx.x, stride = (size_t)ntasks * THREADS;
  const size_t prefix = (size_t)pos * HKV * HD;
  if (k_in != k_out)
    for (size_t i = tid; i < prefix; i += stride)
      k_out[i] = __ldcg(k_in + i);
  if (v_in != v_out)
    for (size_t i = tid; i < prefix; i += stride)
      v_out[i] = __ldcg(v_in + i);
}

/// How many chunks of cache rows gqa_attention_chunk splits the context
/// into (the same on every block; gqa_combine merges as many): at least 16
/// rows per chunk, at most `max_chunks` (the partials' size) and at most
/// the grid, as the MLA attention's. -DMK_GQA_TASK_PER_BLOCK (opt-in) also
/// keeps chunks x `hkv` tasks within the grid: at most one task per block,
/// where the default leaves most of a Qwen3-8B layer's 264 blocks two tasks
/// in a row at 2048 and beyond (512 tasks). Measured (perf notes #121,
/// #124): the one-layer kernel 5.5 us faster at 2048 and 16384; with
/// -DMK_GQA_LANE_ROWS the 36-layer kernel 140 us slower at 2048 (alone
/// there: not measured).
__device__ __forceinline__ int gqa_num_chunks(int rows, int grid, int hkv, int max_chunks) {
  int n = (rows + 15) / 16;
#ifdef MK_GQA_TASK_PER_BLOCK
  const int cap = grid / hkv > 0 ? grid / hkv : 1;
#else
  const int cap = grid;
  (void)hkv;
#endif
  n = n < cap ? n : cap;
  n = n < max_chunks ? n : max_chunks;
  return n > 0 ? n : 1;
}

/// Cache rows a warp of gqa_attention_chunk asks for at once
/// (-DMK_GQA_ROW_BATCH=1: one row at a time, the form before; the same
/// speed within the rounds' spread, perf notes #119: 8 is what the oracle
/// tests ran).
#ifndef MK_GQA_ROW_BATCH
#define MK_GQA_ROW_BATCH 8
#endif
constexpr int kGqaRowBatch = MK_GQA_ROW_BATCH;
static_assert(kGqaRowBatch >= 1, "MK_GQA_ROW_BATCH: at least one row");

namespace detail {
/// W bf16 pairs from p (4-byte aligned) into w, as 8-byte loads where p's
/// alignment allows (W even: p is E = 2 W elements into a row whose
/// elements are a multiple of 64, so 8-byte aligned), L2 only.
template <int W>
__device__ __forceinline__ void load_bf16_words(const bf16 *p, uint32_t (&w)[W]) {
  if constexpr (W % 2 == 0) {
#pragma unroll
    for (int j = 0; j < W / 2; ++j) {
      const uint2 u = __ldcg(reinterpret_cast<const uint2 *>(p) + j);
      w[2 * j] = u.x;
      w[2 * j + 1] = u.y;
    }
  } else {
#pragma unroll
    for (int j = 0; j < W; ++j)
      w[j] = __ldcg(reinterpret_cast<const unsigned *>(p) + j);
  }
}
} // namespace detail

/// Shared memory of gqa_attention_chunk, in floats: every warp's running
/// max, sum and weighted sum of each of the REP heads.
template <int THREADS, int HD, int REP>
__host__ __device__ constexpr int gqa_attention_smem_floats() {
  return (THREADS / 32) * REP * (HD + 2);
}

/// Task `task` = chunk * HKV + g: the REP query heads g*REP .. g*REP+REP-1
/// over cache rows [chunk * per, min(rows, (chunk + 1) * per)), per =
/// ceil(rows / chunks). Each warp takes every WARPS-th row: lane l holds
/// head_dim elements [E l, E l + E) of q (in registers) and of each row;
/// score = (q . k) / sqrt(HD), an online softmax and the weighted v rows per
/// warp, then the warps' partials merged into the chunk's: part_m and
/// part_l [HQ][chunks], part_acc [HQ][chunks][HD] (a chunk without rows:
/// max -inf, sums 0). q: [HQ, HD] (normalized and rotated); caches [rows,
/// HKV, HD]. smem: gqa_attention_smem_floats().
template <int THREADS, int HD, int REP>
__device__ void gqa_attention_chunk(int task, int chunks, int hkv, int rows, const bf16 *q,
                                    const bf16 *k_cache, const bf16 *v_cache, float *part_m,
                                    float *part_l, float *part_acc, float *smem) {
  static_assert(HD % 64 == 0 && HD <= 256, "head_dim: a multiple of 64, at most 256");
  constexpr int WARPS = THREADS / 32, E = HD / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int chunk = task / hkv, g = task % hkv;
  const int per = (rows + chunks - 1) / chunks;
  const int r0 = chunk * per, r1 = min(rows, r0 + per);
  const float scale = 1.f / sqrtf(float(HD));
  float acc[REP][E], m[REP], l[REP];
  constexpr int W = E / 2; // bf16 pairs per lane and row
#ifdef MK_GQA_LANE_ROWS
#pragma unroll
  for (int h = 0; h < REP; ++h) {
    m[h] = -INFINITY;
    l[h] = 0.f;
#pragma unroll
    for (int e = 0; e < E; ++e)
      acc[h][e] = 0.f;
  }
  // Lanes own rows for the scores, dims for the weighted sum: each warp
  // takes 32 consecutive rows at a time (every WARPS-th such sub-chunk);
  // lane l computes its row's REP scores alone (the dot sequential over
  // hd, the queries broadcast from shared memory), the sub-chunk's softmax
  // takes one warp max per head, and the probabilities go through shared
  // memory to the weighted sum, in which lane l owns elements [E l, E l +
  // E) of every row, as in the default form. No warp sum per row and head:
  // ~50 instructions per row and warp where the default form's PTX has
  // ~250, mostly the shuffles of its 4 warp sums. Measured on the Qwen3-8B
  // layer (perf notes #121): alone +5 us at 2048 and -1.7 at 16384, with
  // -DMK_GQA_TASK_PER_BLOCK -5 / -11 us against the default, but the two
  // together make the 36-layer kernel 140 us slower at 2048 (#124): opt-in. Shared memory: the queries [REP][HD], then each warp's
  // probabilities [32][REP], inside gqa_attention_smem_floats (the merge
  // below reuses it after a barrier).
  static_assert(REP * HD + WARPS * 32 * REP <= WARPS * REP * (HD + 2),
                "the lane-rows form's queries and probabilities fit the merge area");
  float *qs = smem, *ps = smem + REP * HD + warp * 32 * REP;
  for (int i = threadIdx.x; i < REP * HD; i += THREADS)
    qs[i] = bf2f(__ldcg(q + (size_t)g * REP * HD + i));
  __syncthreads();
  float lpart[REP]; // this lane's share of each head's sum (its rows' p)
#pragma unroll
  for (int h = 0; h < REP; ++h)
    lpart[h] = 0.f;
  for (int base = r0 + warp * 32; base < r1; base += WARPS * 32) {
    const int r = base + lane;
    const bool ok = r < r1;
    float s[REP];
#pragma unroll
    for (int h = 0; h < REP; ++h)
      s[h] = 0.f;
    // The lane's own row, 16 bytes at a time (plain loads: the other half
    // of each 32-byte sector comes from L1; the rows are read after the
    // counter wait that orders the append before them).
    const uint4 *kr = reinterpret_cast<const uint4 *>(k_cache + ((size_t)(ok ? r : base) * hkv + g) * HD);
#pragma unroll 4
    for (int c = 0; c < HD / 8; ++c) {
      const uint4 u = kr[c];
      const float kf[8] = {bf_lo(u.x), bf_hi(u.x), bf_lo(u.y), bf_hi(u.y),
                           bf_lo(u.z), bf_hi(u.z), bf_lo(u.w), bf_hi(u.w)};
#pragma unroll
      for (int h = 0; h < REP; ++h) {
        const float4 qa = *reinterpret_cast<const float4 *>(qs + h * HD + 8 * c);
        const float4 qb = *reinterpret_cast<const float4 *>(qs + h * HD + 8 * c + 4);
        s[h] += qa.x * kf[0];
        s[h] += qa.y * kf[1];
        s[h] += qa.z * kf[2];
        s[h] += qa.w * kf[3];
        s[h] += qb.x * kf[4];
        s[h] += qb.y * kf[5];
        s[h] += qb.z * kf[6];
        s[h] += qb.w * kf[7];
      }
    }
#pragma unroll
    for (int h = 0; h < REP; ++h) {
      const float sh = ok ? s[h] * scale : -INFINITY;
      const float mn = fmaxf(m[h], warp_max(sh)); // lane 0's row exists: finite
      const float alpha = expf(m[h] - mn), p = ok ? expf(sh - mn) : 0.f;
      m[h] = mn;
      lpart[h] = lpart[h] * alpha + p;
#pragma unroll
      for (int e = 0; e < E; ++e)
        acc[h][e] *= alpha;
      ps[lane * REP + h] = p;
    }
    __syncwarp();
    const int nrows = min(32, r1 - base);
    for (int j0 = 0; j0 < nrows; j0 += 8) {
      uint32_t vw[8][W];
#pragma unroll
      for (int b = 0; b < 8; ++b) {
        const int j = min(j0 + b, nrows - 1);
        detail::load_bf16_words<W>(v_cache + ((size_t)(base + j) * hkv + g) * HD + E * lane, vw[b]);
      }
#pragma unroll
      for (int b = 0; b < 8; ++b) {
        if (j0 + b >= nrows)
          break;
        float vf[E];
#pragma unroll
        for (int jj = 0; jj < W; ++jj) {
          vf[2 * jj] = bf_lo(vw[b][jj]);
          vf[2 * jj + 1] = bf_hi(vw[b][jj]);
        }
#pragma unroll
        for (int h = 0; h < REP; ++h) {
          const float p = ps[(j0 + b) * REP + h];
#pragma unroll
          for (int e = 0; e < E; ++e)
            acc[h][e] += p * vf[e];
        }
      }
    }
    __syncwarp(); // ps is read before the next sub-chunk writes it
  }
#pragma unroll
  for (int h = 0; h < REP; ++h)
    l[h] = warp_sum(lpart[h]);
  __syncthreads(); // every warp is done with qs and ps before the merge writes
#else
  float qf[REP][E];
#pragma unroll
  for (int h = 0; h < REP; ++h) {
    m[h] = -INFINITY;
    l[h] = 0.f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      qf[h][e] = bf2f(__ldcg(q + (size_t)(g * REP + h) * HD + E * lane + e));
      acc[h][e] = 0.f;
    }
  }
  // A warp's rows in batches of kGqaRowBatch: every row's k and v words
  // are asked for before the first is used (the rows and their order per
  // warp are as one at a time: the same sums, bit for bit). Measured no
  // faster than one row at a time on a Qwen3-8B layer (perf notes #119):
  // the attention's time is not one load latency per row.
  constexpr int B = kGqaRowBatch;
  for (int rb = r0 + warp; rb < r1; rb += WARPS * B) {
    uint32_t kw[B][W], vw[B][W];
#pragma unroll
    for (int b = 0; b < B; ++b) {
      const int r = rb + b * WARPS;
      const size_t at = ((size_t)(r < r1 ? r : rb) * hkv + g) * HD + E * lane;
      detail::load_bf16_words<W>(k_cache + at, kw[b]);
      detail::load_bf16_words<W>(v_cache + at, vw[b]);
    }
#pragma unroll
    for (int b = 0; b < B; ++b) {
      if (rb + b * WARPS >= r1)
        break;
      float kf[E], vf[E];
#pragma unroll
      for (int j = 0; j < W; ++j) {
        kf[2 * j] = bf_lo(kw[b][j]);
        kf[2 * j + 1] = bf_hi(kw[b][j]);
        vf[2 * j] = bf_lo(vw[b][j]);
        vf[2 * j + 1] = bf_hi(vw[b][j]);
      }
#pragma unroll
      for (int h = 0; h < REP; ++h) {
        float d = 0.f;
#pragma unroll
        for (int e = 0; e < E; ++e)
          d += qf[h][e] * kf[e];
        const float s = warp_sum(d) * scale;
        const float mn = fmaxf(m[h], s);
        const float alpha = expf(m[h] - mn), p = expf(s - mn);
        m[h] = mn;
        l[h] = l[h] * alpha + p;
#pragma unroll
        for (int e = 0; e < E; ++e)
          acc[h][e] = acc[h][e] * alpha + p * vf[e];
      }
    }
  }
#endif
  // The warps' partials: smem [WARPS][REP] maxima, [WARPS][REP] sums, then
  // [WARPS][REP][HD] weighted sums.
  float *sm = smem, *sl = smem + WARPS * REP, *sa = smem + 2 * WARPS * REP;
#pragma unroll
  for (int h = 0; h < REP; ++h) {
    if (lane == 0) {
      sm[warp * REP + h] = m[h];
      sl[warp * REP + h] = l[h];
    }
#pragma unroll
    for (int e = 0; e < E; ++e)
      sa[(warp * REP + h) * HD + E * lane + e] = acc[h][e];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < REP * HD; i += THREADS) {
    const int h = i / HD, d = i % HD;
    float M = -INFINITY;
    for (int w = 0; w < WARPS; ++w)
      M = fmaxf(M, sm[w * REP + h]);
    float L = 0.f, A = 0.f;
    if (M != -INFINITY)
      for (int w = 0; w < WARPS; ++w) {
        const float f = expf(sm[w * REP + h] - M); // 0 for a warp without rows
        L += sl[w * REP + h] * f;
        A += sa[(w * REP + h) * HD + d] * f;
      }
    const size_t at = (size_t)(g * REP + h) * chunks + chunk;
    part_acc[at * HD + d] = A;
    if (d == 0) {
      part_m[at] = M;
      part_l[at] = L;
    }
  }
  __syncthreads();
}

/// o[h] = bf16(sum_c acc_c exp(m_c - M) / sum_c l_c exp(m_c - M)), M the
/// largest chunk max, for query heads [task * heads_per_task, ...) of
/// `hq` (partials as gqa_attention_chunk writes them; o: [HQ, HD]). smem:
/// 2 * chunks floats.
template <int THREADS, int HD>
__device__ void gqa_combine(int task, int heads_per_task, int hq, int chunks,
                            const float *part_m, const float *part_l, const float *part_acc,
                            bf16 *o, float *smem) {
  const int h0 = task * heads_per_task, h1 = min(hq, h0 + heads_per_task);
  for (int h = h0; h < h1; ++h) {
    float *w = smem, *ls = smem + chunks;
    // The chunks' maxima and sums, each read from L2 once (into w and ls);
    // every thread then finds M in shared memory, and the weights replace
    // the maxima once all have read them.
    for (int c = threadIdx.x; c < chunks; c += THREADS) {
      w[c] = __ldcg(part_m + (size_t)h * chunks + c);
      ls[c] = __ldcg(part_l + (size_t)h * chunks + c);
    }
    __syncthreads();
    float M = -INFINITY;
    for (int c = 0; c < chunks; ++c)
      M = fmaxf(M, w[c]);
    __syncthreads();
    for (int c = threadIdx.x; c < chunks; c += THREADS)
      w[c] = w[c] == -INFINITY ? 0.f : expf(w[c] - M);
    __syncthreads();
    float L = 0.f;
    for (int c = 0; c < chunks; ++c)
      L += ls[c] * w[c];
    for (int d = threadIdx.x; d < HD; d += THREADS) {
      float A = 0.f;
      for (int c = 0; c < chunks; ++c)
        A += __ldcg(part_acc + ((size_t)h * chunks + c) * HD + d) * w[c];
      o[(size_t)h * HD + d] = f2bf(A / L);
    }
    __syncthreads();
  }
}

} // namespace mk
