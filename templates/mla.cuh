//===- mla.cuh - MLA with absorbed W_kv_b over the latent cache ---*- CUDA -*-===//
//
// Multi-head latent attention, never materializing c_kv @ W_kv_b:
//   q_abs[h] = W_kv_b[:, key half of h] q_nope[h]            (mla_q_absorb_task)
//   score[l,h] = (q_abs[h] . c_kv[l] + q_rope[h] . k_rope[l]) * scale
//   o_lat[h] = sum_l softmax(score)[l,h] c_kv[l]    (split over context chunks
//              with an online softmax: mla_attention_chunk_task, then merged
//              by mla_combine_wv_task)
//   o[h]     = W_kv_b[:, value half of h]^T o_lat[h]           (same task)
// Every cache row is read once per step by one block, for all heads at once.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mk/common.cuh"
#include "mk/phase_timing.cuh"
#include "mk/w4a16_gemv.cuh"

namespace mk {

__device__ __forceinline__ void rope_pair(float x0, float x1, int pos, int pair, int rope_dim,
                                          float theta, bf16 *out) {
  const float inv = powf(theta, -float(2 * pair) / float(rope_dim));
  const float a = float(pos) * inv;
  float s, c;
  sincosf(a, &s, &c);
  out[0] = f2bf(x0 * c - x1 * s);
  out[1] = f2bf(x1 * c + x0 * s);
}

/// RoPE at `pos` on q's rope part (into q_rope [HM, ROPE]) and on kr; appends
/// the latent row and the rotated kr as cache row `pos` of the OUT caches;
/// when the in and out caches differ (adopting a foreign state), copies rows
/// [0, pos) too. Work is spread over (task, thread) of `ntasks` tasks.
/// q: [HM, NOPE+ROPE]; kv: [LORA + ROPE].
/// ROTARY false: the rope parts are copied as projected (`theta` unused).
/// LATENT_NORM 1: the cached latent row is bf16(c * rsqrt(mean(c^2) + eps) *
/// latent_w) (the norms' arithmetic; every task sums the row's squares); 2:
/// bf16(bf16(c * rsqrt(...)) * latent_w) (rounded twice); 0: as projected.
template <int THREADS, int HM, int NOPE, int ROPE, int LORA, bool ROTARY, int LATENT_NORM>
__device__ __forceinline__ void
mla_rope_append_with(int task, int ntasks, int pos, float theta, const bf16 *q, const bf16 *kv,
                     bf16 *q_rope, const bf16 *ckv_in, const bf16 *kr_in, bf16 *ckv_out,
                     bf16 *kr_out, const bf16 *latent_w, float latent_eps) {
  const int tid = task * THREADS + threadIdx.x, stride = ntasks * THREADS;
  constexpr int QD = NOPE + ROPE;
  for (int i = tid; i < HM * (ROPE / 2); i += stride) {
    const int h = i / (ROPE / 2), p = i % (ROPE / 2);
    const bf16 *src = q + h * QD + NOPE + 2 * p;
    if constexpr (ROTARY) {
      rope_pair(bf2f(__ldcg(src)), bf2f(__ldcg(src + 1)), pos, p, ROPE, theta,
                q_rope + h * ROPE + 2 * p);
    } else {
      q_rope[h * ROPE + 2 * p] = __ldcg(src);
      q_rope[h * ROPE + 2 * p + 1] = __ldcg(src + 1);
    }
  }
  for (int p = tid; p < ROPE / 2; p += stride) {
    if constexpr (ROTARY) {
      rope_pair(bf2f(__ldcg(kv + LORA + 2 * p)), bf2f(__ldcg(kv + LORA + 2 * p + 1)), pos, p,
                ROPE, theta, kr_out + (size_t)pos * ROPE + 2 * p);
    } else {
      kr_out[(size_t)pos * ROPE + 2 * p] = __ldcg(kv + LORA + 2 * p);
      kr_out[(size_t)pos * ROPE + 2 * p + 1] = __ldcg(kv + LORA + 2 * p + 1);
    }
  }
  if constexpr (LATENT_NORM != 0) {
    __shared__ float scratch[32];
    float ss = 0.f;
    for (int d = threadIdx.x; d < LORA; d += THREADS) {
      const float x = bf2f(__ldcg(kv + d));
      ss += x * x;
    }
    ss = block_sum<THREADS>(ss, scratch);
    const float r = 1.f / sqrtf(ss / float(LORA) + latent_eps);
    for (int d = tid; d < LORA; d += stride)
      ckv_out[(size_t)pos * LORA + d] =
          LATENT_NORM == 2 ? f2bf(round_bf16(bf2f(__ldcg(kv + d)) * r) * bf2f(latent_w[d]))
                           : f2bf(bf2f(__ldcg(kv + d)) * r * bf2f(latent_w[d]));
  } else {
    (void)latent_w, (void)latent_eps;
    for (int d = tid; d < LORA; d += stride)
      ckv_out[(size_t)pos * LORA + d] = __ldcg(kv + d);
  }
  if (ckv_in != ckv_out) {
    static_assert(LORA % 8 == 0, "latent rows must be whole 16-byte vectors");
    const uint4 *s = reinterpret_cast<const uint4 *>(ckv_in);
    uint4 *d = reinterpret_cast<uint4 *>(ckv_out);
    for (size_t i = tid; i < (size_t)pos * LORA / 8; i += stride)
      d[i] = __ldcg(s + i);
  }
  if (kr_in != kr_out)
    for (size_t i = tid; i < (size_t)pos * ROPE; i += stride)
      kr_out[i] = __ldcg(kr_in + i);
}
/// The unit's form: rotated, the latent cached as projected.
template <int THREADS, int HM, int NOPE, int ROPE, int LORA>
__device__ void mla_rope_append(int task, int ntasks, int pos, float theta, const bf16 *q,
                                const bf16 *kv, bf16 *q_rope, const bf16 *ckv_in,
                                const bf16 *kr_in, bf16 *ckv_out, bf16 *kr_out) {
  mla_rope_append_with<THREADS, HM, NOPE, ROPE, LORA, true, 0>(
      task, ntasks, pos, theta, q, kv, q_rope, ckv_in, kr_in, ckv_out, kr_out, nullptr, 0.f);
}
/// mla_rope_append_with as the emitted kernels call it (out of line).
template <int THREADS, int HM, int NOPE, int ROPE, int LORA, bool ROTARY, int LATENT_NORM>
__device__ void mla_rope_append_form(int task, int ntasks, int pos, float theta, const bf16 *q,
                                     const bf16 *kv, bf16 *q_rope, const bf16 *ckv_in,
                                     const bf16 *kr_in, bf16 *ckv_out, bf16 *kr_out,
                                     const bf16 *latent_w, float latent_eps) {
  mla_rope_append_with<THREADS, HM, NOPE, ROPE, LORA, ROTARY, LATENT_NORM>(
      task, ntasks, pos, theta, q, kv, q_rope, ckv_in, kr_in, ckv_out, kr_out, latent_w,
      latent_eps);
}

namespace detail {
/// Whether a task's prologue callable is NoPrologue (no wait to run under).
template <class W> struct IsNoPrologue {
  static constexpr bool value = false;
};
template <> struct IsNoPrologue<NoPrologue> {
  static constexpr bool value = true;
};
} // namespace detail

/// Rows of c per q_absorb task.
template <int THREADS, int NOPE, int LORA>
__host__ __device__ constexpr int mla_absorb_rows() {
  constexpr int rows = 2 * (THREADS / 32) * (32 / (NOPE / 16));
  return rows < LORA ? rows : LORA;
}

/// q_abs[h][c] = sum_n W[c, h*(NOPE+VH) + n] q_nope[h][n], c in this task's
/// rows; W = kv_b, dequantized exactly as the spec (bf16((q - z) * s)).
/// Tasks: HM * LORA / mla_absorb_rows().  smem: NOPE floats.
///
/// mla_q_absorb_task_waiting: the same after `wait()` (the task's wait for
/// the projected queries, which the schedule put in its prologue:
/// schedule-prologue-waits absorb=true): each thread's row pair of
/// W (its weights, scales and zero points, which depend on nothing of this
/// step) is loaded first, then the task waits, then stages q_nope, so that
/// the weights' round trip runs under the wait.
template <int THREADS, int HM, int NOPE, int ROPE, int VH, int LORA, int GROUP, class Wait>
__device__ void mla_q_absorb_task_waiting(int task, const bf16 *q, const uint8_t *__restrict__ wq,
                                          const bf16 *__restrict__ scales,
                                          const bf16 *__restrict__ zeros, float *q_abs,
                                          float *smem, Wait wait) {
  static_assert(NOPE % 16 == 0 && 32 % (NOPE / 16) == 0, "NOPE/16 must divide 32");
  constexpr int LPR = NOPE / 16;     // lanes per row pair
  constexpr int RPW = 32 / LPR;      // row pairs per warp
  constexpr int ROWS = mla_absorb_rows<THREADS, NOPE, LORA>();
  constexpr int TPH = LORA / ROWS;   // tasks per head
  constexpr int N = HM * (NOPE + VH);
  const int h = task / TPH;
  const int c0 = (task % TPH) * ROWS;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int lid = lane % LPR;
  const int col = h * (NOPE + VH) + lid * 16;
  // A row pair's weights (16 bytes: 16 columns of two rows), its group's
  // scales and zero points (16 bf16 each).
  struct RowPair {
    uint4 w, s0, s1, z0, z1;
  };
  auto load = [&](int rp) {
    RowPair r;
    r.w = ldg_weights(reinterpret_cast<const uint4 *>(wq + (size_t)rp * N + col));
    const int g = (2 * rp) / GROUP;
    const uint4 *sp = reinterpret_cast<const uint4 *>(scales + (size_t)g * N + col);
    const uint4 *zp = reinterpret_cast<const uint4 *>(zeros + (size_t)g * N + col);
    r.s0 = __ldg(sp);
    r.s1 = __ldg(sp + 1);
    r.z0 = __ldg(zp);
    r.z1 = __ldg(zp + 1);
    return r;
  };
  // ROWS is at most two rows per thread: each thread has at most one row
  // pair. Without a prologue wait (mla_q_absorb_task) the order stays
  // q_nope first, then the row pair.
  static_assert(ROWS <= 2 * (THREADS / 32) * RPW, "one row pair per thread at most");
  constexpr bool kEarly = !detail::IsNoPrologue<Wait>::value;
  const int rp = c0 / 2 + warp * RPW + lane / LPR;
  const bool mine = rp < (c0 + ROWS) / 2;
  RowPair cur{};
  if (kEarly && mine)
    cur = load(rp);
  wait();
  for (int i = threadIdx.x; i < NOPE; i += THREADS)
    smem[i] = bf2f(__ldcg(q + h * (NOPE + ROPE) + i));
  __syncthreads();
  if (mine) {
    if constexpr (!kEarly)
      cur = load(rp);
    const uint32_t ww[4] = {cur.w.x, cur.w.y, cur.w.z, cur.w.w};
    const uint32_t sw[8] = {cur.s0.x, cur.s0.y, cur.s0.z, cur.s0.w,
                            cur.s1.x, cur.s1.y, cur.s1.z, cur.s1.w};
    const uint32_t zw[8] = {cur.z0.x, cur.z0.y, cur.z0.z, cur.z0.w,
                            cur.z1.x, cur.z1.y, cur.z1.z, cur.z1.w};
    float d0 = 0.f, d1 = 0.f;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const uint32_t byte = (ww[i / 4] >> (8 * (i % 4))) & 0xffu;
      const float s = (i & 1) ? bf_hi(sw[i / 2]) : bf_lo(sw[i / 2]);
      const float z = (i & 1) ? bf_hi(zw[i / 2]) : bf_lo(zw[i / 2]);
      const float qn = smem[lid * 16 + i];
      d0 = fmaf(round_bf16((float(byte & 15u) - z) * s), qn, d0);
      d1 = fmaf(round_bf16((float(byte >> 4) - z) * s), qn, d1);
    }
#pragma unroll
    for (int o = 1; o < LPR; o <<= 1) {
      d0 += __shfl_xor_sync(0xffffffffu, d0, o);
      d1 += __shfl_xor_sync(0xffffffffu, d1, o);
    }
    if (lid == 0) {
      q_abs[h * LORA + 2 * rp] = d0;
      q_abs[h * LORA + 2 * rp + 1] = d1;
    }
  }
  __syncthreads();
}
template <int THREADS, int HM, int NOPE, int ROPE, int VH, int LORA, int GROUP>
__device__ void mla_q_absorb_task(int task, const bf16 *q, const uint8_t *__restrict__ wq,
                                  const bf16 *__restrict__ scales, const bf16 *__restrict__ zeros,
                                  float *q_abs, float *smem) {
  mla_q_absorb_task_waiting<THREADS, HM, NOPE, ROPE, VH, LORA, GROUP>(
      task, q, wq, scales, zeros, q_abs, smem, NoPrologue{});
}

namespace detail {
/// Head h's running softmax state after a sub-chunk whose maximum brought
/// the running maximum to `mnew` and whose exp(s - mnew) sum to `sum`:
/// alpha[h] rescales what was accumulated before.
__device__ __forceinline__ void online_softmax_update(float *mrun, float *lrun, float *alpha,
                                                      int h, float mnew, float sum) {
  const float a = expf(mrun[h] - mnew);
  alpha[h] = a;
  lrun[h] = lrun[h] * a + sum;
  mrun[h] = mnew;
}
} // namespace detail

/// Where chunk `chunk`'s softmax maximum and sum of head h lie in the
/// partials part_m and part_l (nchunks chunks): head-major, [head][chunk],
/// so that a combine task's loads of its head's statistics lie in nchunks
/// * 4 contiguous bytes (chunk-major, [chunk][head], every combine block
/// read a 128-byte line per chunk, every line at once: the merge's loads
/// of them 1.38 -> 0.95 us at 16384 on an H100, perf notes #218).
__device__ __forceinline__ int mla_stat_at(int chunk, int h, int nchunks) {
  return h * nchunks + chunk;
}
/// Head h's statistics in part_m or part_l: its nchunks contiguous values
/// from chunk 0's (mla_stat_at). Indexing from the head's first is the
/// form ptxas keeps short (the combine 1955 SASS instructions against 2121
/// with mla_stat_at's index per chunk, nvcc 13, sm_90).
__device__ __forceinline__ const float *mla_head_stats(const float *stats, int h, int nchunks) {
  return stats + mla_stat_at(0, h, nchunks);
}

/// The attention's partial sums (part_acc, [chunk][head][LORA]) in their
/// buffer's type PT: bf16 (schedule-form-phases mla-partials=bf16, the
/// schedule's default: half the bytes the combine's merge reads) or fp32
/// (the spec's, and the templates' default). Stores the
/// pair (v.x, v.y), or v, at element `at`.
__device__ __forceinline__ void mla_store_partials(float *part_acc, size_t at, float2 v) {
  *reinterpret_cast<float2 *>(part_acc + at) = v;
}
__device__ __forceinline__ void mla_store_partials(bf16 *part_acc, size_t at, float2 v) {
  *reinterpret_cast<__nv_bfloat162 *>(part_acc + at) = __floats2bfloat162_rn(v.x, v.y);
}
__device__ __forceinline__ void mla_store_partial(float *part_acc, size_t at, float v) {
  part_acc[at] = v;
}
__device__ __forceinline__ void mla_store_partial(bf16 *part_acc, size_t at, float v) {
  part_acc[at] = f2bf(v);
}
/// A partial sum as fp32.
__device__ __forceinline__ float mla_partial_f(float v) { return v; }
__device__ __forceinline__ float mla_partial_f(bf16 v) { return bf2f(v); }

/// How many context chunks the attention splits into (same on every block).
/// At most one chunk per `chunk_rows` rows (rounded up): fewer, longer
/// chunks at short contexts, where more would cost more partials to write
/// and merge than their shorter loops save.
__device__ __forceinline__ int mla_num_chunks(int rows, int grid, int max_chunks,
                                              int chunk_rows = 16) {
  int n = (rows + chunk_rows - 1) / chunk_rows;
  n = n < grid ? n : grid;
  n = n < max_chunks ? n : max_chunks;
  return n > 0 ? n : 1;
}

/// Shared memory of mla_attention_chunk_task_simt, in floats: the head
/// group's absorbed and rope queries, one sub-chunk of scores, per-head
/// softmax state, and one sub-chunk of staged cache rows (bf16, 16-byte
/// aligned).
template <int HG, int LORA, int ROPE, int SUB>
__host__ __device__ constexpr int mla_attention_simt_stage_offset() {
  return (HG * LORA + HG * ROPE + HG * SUB + 3 * HG + 3) / 4 * 4;
}
template <int HG, int LORA, int ROPE, int SUB>
__host__ __device__ constexpr int mla_attention_simt_smem_floats() {
  return mla_attention_simt_stage_offset<HG, LORA, ROPE, SUB>() + (SUB * LORA + SUB * ROPE) / 2;
}
/// Rows of the SIMT attention's sub-chunks (-DMK_MLA_ATTENTION_SIMT).
constexpr int kMlaSimtSub = 32;

/// The tensor-core attention's staging: mla_attention_stages ring slots of
/// kMlaSub cache rows each, a row being the latent part, the rope part
/// zero-padded to a multiple of 16 and 8 bf16 of padding (a row is then an
/// odd number of 16-byte units: the 8 rows an ldmatrix or a fragment load
/// touches fall in distinct banks). Up to 8 heads: 3 slots (two in flight
/// under the math); 16 query rows in two parts (hi, lo) take the third
/// slot's room (sm_120's 99 KB), so one slot is in flight under the math,
/// in one part (PARTS 1) they leave it 3 slots. SUB = 32 (the schedule's
/// `attention-sub-rows`, up to 8 heads): two slots of 32 rows, half the
/// barriers and softmax passes per row.
constexpr int kMlaSub = 16;
/// Whether the block-wide attention forms its probabilities in every warp
/// (mla_attention_chunk_task_blockwide's WARP_SOFTMAX; opt-in,
/// -DMK_MLA_WARP_SOFTMAX: within the run spread of the default, and as the
/// default it made ptxas spill in the released forms' templates, perf notes
/// session 37).
#ifdef MK_MLA_WARP_SOFTMAX
constexpr bool kMlaWarpSoftmax = true;
#else
constexpr bool kMlaWarpSoftmax = false;
#endif
/// Whether the one-part 16-head attention keeps its warp's query fragments
/// (the A operands of its score k-steps) in registers for the whole task
/// instead of loading them from shared memory at every sub-chunk
/// (-DMK_MLA_QUERY_REGS, opt-in: up to kMlaQueryRegSteps of them, 4
/// registers each, against an ldmatrix.x4 per step, sub-chunk and warp).
#ifdef MK_MLA_QUERY_REGS
constexpr bool kMlaQueryRegs = true;
#else
constexpr bool kMlaQueryRegs = false;
#endif
/// How many of a warp's score k-steps keep their query fragments in
/// registers under -DMK_MLA_QUERY_REGS (-DMK_MLA_QUERY_REG_STEPS=n): 5 of
/// the unit's 9 by default, 20 registers a thread. NVRTC's sm_90 build of
/// the unit's kernel spills in the attention from 6 steps on (12-24 B), and
/// in the outlined norm too (EmitterNvrtc.MlaOptInForms checks 5).
#ifdef MK_MLA_QUERY_REG_STEPS
constexpr int kMlaQueryRegSteps = MK_MLA_QUERY_REG_STEPS;
#else
constexpr int kMlaQueryRegSteps = 5;
#endif
static_assert(kMlaQueryRegSteps >= 1, "MK_MLA_QUERY_REG_STEPS: at least one step");
/// Whether the softmax stage's half-warps take adjacent heads (2w, 2w + 1:
/// their partial scores 16 floats apart, on other banks) instead of heads
/// w and w + WARPS (at 8 warps 128 floats apart: the same banks),
/// -DMK_MLA_SOFTMAX_ADJACENT.
#ifdef MK_MLA_SOFTMAX_ADJACENT
constexpr bool kMlaSoftmaxAdjacent = true;
#else
constexpr bool kMlaSoftmaxAdjacent = false;
#endif
/// Whether the one-part 16-head attention's warps each score all rows of a
/// sub-chunk over their own k-steps (mla_attention_chunk_task_blockwide's
/// SCORE_ALL_ROWS; -DMK_MLA_SCORE_ALL_ROWS, opt-in).
#ifdef MK_MLA_SCORE_ALL_ROWS
constexpr bool kMlaScoreAllRows = true;
#else
constexpr bool kMlaScoreAllRows = false;
#endif
/// Whether the block-wide attention moves its cache rows with bulk copies
/// (-DMK_MLA_BULK_ROWS, opt-in, sm_90+): one cp.async.bulk per row's latent
/// part and one per rope part, issued by warp 0's lanes, each ring slot
/// completing on its own mbarrier, instead of 16-byte cp.async by every
/// thread (perf notes #112: the copies' issue loop was ~20 % of the
/// attention's stall samples). Slower on an H100 (perf notes #189).
#ifdef MK_MLA_BULK_ROWS
constexpr bool kMlaBulkRows = true;
#else
constexpr bool kMlaBulkRows = false;
#endif
/// The block-wide attention's ring mbarriers (BULK_ROWS): one per slot,
/// initialized at each task's start and invalidated at its end.
__device__ __forceinline__ unsigned long long *mla_ring_bars() {
  __shared__ __align__(8) unsigned long long bars[4];
  return bars;
}
/// Ring slots of the block-wide tensor-core form: 3, but 2 where the query
/// rows take more room (9 to 16 heads in hi and lo parts, PARTS 2) or the
/// sub-chunks are 32 rows (sm_120's 99 KB). PARTS: the parts (hi, lo) the
/// absorbed queries and the probabilities are carried in.
template <int HG, int SUB = kMlaSub, int PARTS = 2>
__host__ __device__ constexpr int mla_attention_stages() {
  return (HG > 8 && PARTS == 2) || SUB > 16 ? 2 : 3;
}
template <int LORA, int ROPE> __host__ __device__ constexpr int mla_stage_row() {
  return LORA + (ROPE + 15) / 16 * 16 + 8;
}
/// Warps that split the K dimension of the scores (the rest split rows).
template <int THREADS, int SUB = kMlaSub> __host__ __device__ constexpr int mla_score_ksplit() {
  return THREADS / 32 / (SUB / 8);
}
/// Query rows the tensor-core attention stages per part (hi, lo): the mma's
/// A rows in use, 8 for up to 8 heads (rows 8-15 are then zero registers),
/// else 16.
template <int HG> __host__ __device__ constexpr int mla_query_rows() { return HG > 8 ? 16 : 8; }
template <int THREADS, int HG, int LORA, int ROPE, int SUB = kMlaSub, int PARTS = 2>
__host__ __device__ constexpr int mla_attention_mma_smem_floats() {
  return (mla_attention_stages<HG, SUB, PARTS>() * SUB + PARTS * mla_query_rows<HG>()) *
             mla_stage_row<LORA, ROPE>() / 2 +
         mla_score_ksplit<THREADS, SUB>() * HG * SUB + HG * SUB + 3 * HG;
}
// The sliced attention form (mla_attention_chunk_task_sliced): each of
// the block's warps owns a slice of LORA / warps latent dims and every
// warps-th 16-wide rope k-step, and stages only its slice of a row (padded
// to an odd number of 16-byte units) in its own ring of 16-row slots: as
// many of 4, 3 or 2 as fit kMlaSlicedMaxBytes.

/// The sliced form takes only shapes whose shared memory stays under this:
/// sm_120 allows 99 KB per block, and the kernel's input vector, resident
/// residual and static data come on top of the largest task's work area.
constexpr int kMlaSlicedMaxBytes = 80 * 1024;
template <int THREADS, int LORA, int ROPE> __host__ __device__ constexpr int mla_sliced_row() {
  constexpr int W = THREADS / 32;
  constexpr int RS = (ROPE + 15) / 16; // rope k-steps
  return LORA / W + (RS + W - 1) / W * 16 + 8;
}
/// Rings of NST slots, then two buffers of partial scores (a float4 per
/// lane and head of the lane: two past 8 heads).
template <int THREADS, int HG, int LORA, int ROPE, int NST>
__host__ __device__ constexpr int mla_sliced_floats() {
  return THREADS / 32 * NST * 16 * mla_sliced_row<THREADS, LORA, ROPE>() / 2 +
         2 * (HG > 8 ? 2 : 1) * (THREADS / 32) * 32 * 4;
}
template <int THREADS, int HG, int LORA, int ROPE>
__host__ __device__ constexpr int mla_sliced_stages() {
  return mla_sliced_floats<THREADS, HG, LORA, ROPE, 4>() * 4 <= kMlaSlicedMaxBytes   ? 4
         : mla_sliced_floats<THREADS, HG, LORA, ROPE, 3>() * 4 <= kMlaSlicedMaxBytes ? 3
                                                                                     : 2;
}
template <int THREADS, int HG, int LORA, int ROPE>
__host__ __device__ constexpr int mla_attention_sliced_smem_floats() {
  return mla_sliced_floats<THREADS, HG, LORA, ROPE,
                           mla_sliced_stages<THREADS, HG, LORA, ROPE>()>();
}
/// Whether a shape takes the sliced form: up to 16 heads, 16-row
/// sub-chunks, an even number of 8-dim column tiles per warp (LORA a
/// multiple of 16 x warps), and the shared memory under kMlaSlicedMaxBytes.
template <int THREADS, int HG, int LORA, int ROPE, int SUB = kMlaSub>
__host__ __device__ constexpr bool mla_attention_sliced_fits() {
  return HG <= 16 && SUB == 16 && THREADS % 32 == 0 && LORA % (16 * (THREADS / 32)) == 0 &&
         mla_attention_sliced_smem_floats<THREADS, HG, LORA, ROPE>() * 4 <= kMlaSlicedMaxBytes;
}
/// Shared memory of mla_attention_chunk_task, in floats: enough for every
/// form, so that -DMK_MLA_ATTENTION_SIMT and -DMK_MLA_ATTENTION_SLICED need
/// no other kernel.
template <int THREADS, int HG, int LORA, int ROPE, int SUB = kMlaSub, int PARTS = 2>
__host__ __device__ constexpr int mla_attention_smem_floats() {
  constexpr int mma = mla_attention_mma_smem_floats<THREADS, HG, LORA, ROPE, SUB, PARTS>();
  constexpr int simt = mla_attention_simt_smem_floats<HG, LORA, ROPE, kMlaSimtSub>();
  constexpr int sliced = mla_attention_sliced_fits<THREADS, HG, LORA, ROPE, SUB>()
                             ? mla_attention_sliced_smem_floats<THREADS, HG, LORA, ROPE>()
                             : 0;
  constexpr int two = mma > simt ? mma : simt;
  return two > sliced ? two : sliced;
}

/// mla_attention_chunk_task on the CUDA cores (the form before the tensor
/// cores carried it; -DMK_MLA_ATTENTION_SIMT, kept to measure against):
/// rows are staged SUB at a time into shared memory with cp.async (all of a
/// sub-chunk's loads in flight at once, one sub-chunk at a time), then
/// scored (one warp per row) and accumulated (one latent dim per thread)
/// from shared memory.
template <int THREADS, int HM, int HG, int LORA, int ROPE, int SUB, class PT>
__device__ void mla_attention_chunk_task_simt(int task, int nchunks, int rows, float scale,
                                         const float *q_abs, const bf16 *q_rope, const bf16 *ckv,
                                         const bf16 *kr, float *part_m, float *part_l,
                                         PT *part_acc, float *smem) {
  static_assert(LORA % 64 == 0, "LORA must be a multiple of 64");
  static_assert(ROPE % 8 == 0 && ROPE <= 64, "ROPE must be a multiple of 8 and <= 64");
  static_assert(HM % HG == 0, "the head group must divide the heads");
  constexpr int NG = HM / HG;
  constexpr int WARPS = THREADS / 32;
  constexpr int DPT = (LORA + THREADS - 1) / THREADS;
  const int chunk = task / NG, h0 = (task % NG) * HG;
  float *qa = smem, *qr = qa + HG * LORA, *sc = qr + HG * ROPE;
  float *mrun = sc + HG * SUB, *lrun = mrun + HG, *alpha = lrun + HG;
  bf16 *cs = reinterpret_cast<bf16 *>(smem + mla_attention_simt_stage_offset<HG, LORA, ROPE, SUB>()); // [SUB][LORA]
  bf16 *ks = cs + SUB * LORA; // [SUB][ROPE]
  // The absorbed queries go to shared memory by cp.async, committed with
  // the first sub-chunk's rows below: one round trip for both, no registers.
  static_assert((HG * LORA) % 4 == 0, "absorbed queries are copied 16 bytes at a time");
  for (int i = threadIdx.x; i < HG * LORA / 4; i += THREADS)
    cp_async16(qa + 4 * i, q_abs + h0 * LORA + 4 * i);
  for (int i = threadIdx.x; i < HG * ROPE; i += THREADS)
    qr[i] = bf2f(__ldcg(q_rope + h0 * ROPE + i));
  for (int h = threadIdx.x; h < HG; h += THREADS) {
    mrun[h] = -INFINITY;
    lrun[h] = 0.f;
  }
  const int r0 = (int)((long long)chunk * rows / nchunks);
  const int r1 = (int)((long long)(chunk + 1) * rows / nchunks);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float acc[DPT][HG];
#pragma unroll
  for (int k = 0; k < DPT; ++k)
#pragma unroll
    for (int h = 0; h < HG; ++h)
      acc[k][h] = 0.f;

  for (int s0 = r0; s0 < r1; s0 += SUB) {
    const int n = min(SUB, r1 - s0);
    // Stage the sub-chunk's rows (cp.async goes through L2: rows appended or
    // copied earlier in this launch are seen).
    for (int i = threadIdx.x; i < n * LORA / 8; i += THREADS)
      cp_async16(cs + 8 * i, ckv + (size_t)s0 * LORA + 8 * i);
    for (int i = threadIdx.x; i < n * ROPE / 8; i += THREADS)
      cp_async16(ks + 8 * i, kr + (size_t)s0 * ROPE + 8 * i);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    // Pass 1: scores, one warp per row.
    for (int rl = warp; rl < n; rl += WARPS) {
      float2 cv[LORA / 64];
#pragma unroll
      for (int i = 0; i < LORA / 64; ++i)
        cv[i] = __bfloat1622float2(
            *reinterpret_cast<const __nv_bfloat162 *>(cs + rl * LORA + 2 * lane + 64 * i));
      float2 rv = make_float2(0.f, 0.f);
      if (2 * lane < ROPE)
        rv = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(ks + rl * ROPE + 2 * lane));
#pragma unroll
      for (int h = 0; h < HG; ++h) {
        float p = 0.f;
#pragma unroll
        for (int i = 0; i < LORA / 64; ++i) {
          const float2 a = *reinterpret_cast<const float2 *>(qa + h * LORA + 2 * lane + 64 * i);
          p = fmaf(a.x, cv[i].x, fmaf(a.y, cv[i].y, p));
        }
        if (2 * lane < ROPE)
          p = fmaf(qr[h * ROPE + 2 * lane], rv.x, fmaf(qr[h * ROPE + 2 * lane + 1], rv.y, p));
        p = warp_sum(p);
        if (lane == 0)
          sc[h * SUB + rl] = p * scale;
      }
    }
    __syncthreads();
    // Softmax statistics, one warp per head.
    for (int h = warp; h < HG; h += WARPS) {
      float mx = -INFINITY;
      for (int rl = lane; rl < n; rl += 32)
        mx = fmaxf(mx, sc[h * SUB + rl]);
      mx = warp_max(mx);
      const float mnew = fmaxf(mrun[h], mx);
      float sum = 0.f;
      for (int rl = lane; rl < n; rl += 32) {
        const float p = expf(sc[h * SUB + rl] - mnew);
        sc[h * SUB + rl] = p;
        sum += p;
      }
      sum = warp_sum(sum);
      if (lane == 0)
        detail::online_softmax_update(mrun, lrun, alpha, h, mnew, sum);
    }
    __syncthreads();
    // Pass 3: weighted latent rows, one latent dim per thread.
#pragma unroll
    for (int k = 0; k < DPT; ++k) {
      const int d = threadIdx.x + k * THREADS;
      if (d < LORA) {
#pragma unroll
        for (int h = 0; h < HG; ++h)
          acc[k][h] *= alpha[h];
        for (int rl = 0; rl < n; ++rl) {
          const float c = bf2f(cs[rl * LORA + d]);
#pragma unroll
          for (int h = 0; h < HG; ++h)
            acc[k][h] = fmaf(sc[h * SUB + rl], c, acc[k][h]);
        }
      }
    }
    __syncthreads();
  }
  cp_async_commit(); // an empty chunk never waited for its queries' copies
  cp_async_wait<0>();
  for (int h = threadIdx.x; h < HG; h += THREADS) {
    part_m[mla_stat_at(chunk, h0 + h, nchunks)] = mrun[h];
    part_l[mla_stat_at(chunk, h0 + h, nchunks)] = lrun[h];
  }
#pragma unroll
  for (int k = 0; k < DPT; ++k) {
    const int d = threadIdx.x + k * THREADS;
    if (d < LORA)
#pragma unroll
      for (int h = 0; h < HG; ++h)
        mla_store_partial(part_acc, ((size_t)chunk * HM + h0 + h) * LORA + d, acc[k][h]);
  }
  __syncthreads();
}

namespace detail {
/// An MLA score k-step's kind as a type:
/// latent (true) or rope.
template <bool LATENT> struct ScoreStepKind {
  static constexpr bool value = LATENT;
};
/// Two 8x8 bf16 matrices from shared memory, transposed: lanes 0-15 give the
/// addresses of rows 0-15 (16 bytes each); lane (g, t) receives
/// {M[2t][g], M[2t+1][g]} of rows 0-7 in r0 and of rows 8-15 in r1, the B
/// fragment of an mma.m16n8k16 whose k runs down the rows.
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t &r0, uint32_t &r1, const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(r0), "=r"(r1)
               : "r"(smem_u32(p)));
}
/// The same, not transposed: lane (g, t) receives {M[g][2t], M[g][2t+1]}.
__device__ __forceinline__ void ldmatrix_x2(uint32_t &r0, uint32_t &r1, const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(r0), "=r"(r1)
               : "r"(smem_u32(p)));
}
/// Four 8x8 bf16 matrices (lanes 8i..8i+7 address matrix i's rows), not
/// transposed: with lane l pointing at row l % 16, column k + 8 (l / 16) of
/// a 16-row A operand, r0..r3 are the a0..a3 of an mma.m16n8k16. TRANS:
/// each matrix transposed, as ldmatrix_x2_trans.
template <bool TRANS = false>
__device__ __forceinline__ void ldmatrix_x4(uint32_t &r0, uint32_t &r1, uint32_t &r2,
                                            uint32_t &r3, const void *p) {
  if constexpr (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(smem_u32(p)));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(smem_u32(p)));
}
} // namespace detail

/// The block-wide tensor-core form of mla_attention_chunk_task, its
/// default (every warp works on the same sub-chunk; three block barriers
/// per sub-chunk, two with WARP_SOFTMAX).
///
/// On the tensor cores (mma.m16n8k16): the rows stream through a ring of
/// mla_attention_stages slots of kMlaSub rows by cp.async, NST - 1 slots
/// ahead of the math, a warp copying whole rows. Scores: the fp32 absorbed
/// queries as bf16 hi + lo parts (products exact, ~16 significant bits of
/// q) against the staged rows, K split over warps; the bf16 rope queries
/// exactly. Weighted sum: the fp32 probabilities as hi + lo parts against
/// the rows (ldmatrix.trans), fp32 accumulation, each warp owning
/// LORA / (8 * warps) column tiles of 8 latent dims. Up to 8 heads, A rows
/// 0-7 are the heads' hi parts and rows 8-15 their lo parts: one mma per
/// step takes both, and C rows 8-15 (the lo sums) are added at the end. 9 to
/// 16 heads fill the 16 A rows with heads, hi and lo parts in two mma each:
/// the rows are read half as often per head, with a 2-slot ring (sm_120's
/// 99 KB). (Perf notes #77: 1-2 us at context 2048 and 7-9 us at 16384 faster
/// than element-wise row copies and hi and lo in separate mma.)
///
/// PARTS 1 (9 to 16 heads only): the absorbed queries and the
/// probabilities rounded to bf16, one part: one mma per step for 16 heads,
/// and the query rows' freed half takes the ring's third slot. The products
/// stay exact and the sums fp32; the error is bf16's rounding of each
/// query element and probability (relative 2^-9), which the softmax's
/// weighted sums average down (docs/pipeline.md, the error budget).
///
/// WARP_SOFTMAX (-DMK_MLA_WARP_SOFTMAX, opt-in; up to 8 heads, 16-row
/// sub-chunks, else ignored): no softmax stage. Every warp forms the
/// probabilities its weighted-sum fragments need itself, right after the
/// scores' barrier:
/// lane (g, t) sums the K-split partial scores of head g's rows 2t, 2t + 1,
/// 2t + 8, 2t + 9 from `spart`, the quad (the four lanes of head g) takes
/// their maximum and their exp sum with two shuffles each, and the head's
/// running maximum and sum live in the quad's registers (the same values
/// in every warp: the same operations on the same inputs). One block
/// barrier and the probabilities' trip through shared memory less per
/// sub-chunk (perf notes #174: the softmax stage is 0.45 us of a 1.8 us
/// sub-chunk at 16384 on an H100), against 8 warps doing the softmax's
/// work each: within the run spread of the softmax stage on an H100 once
/// the partial scores were laid out without bank conflicts (kQuadParts;
/// perf notes #179 and #181, six rounds in two calls: -1.1 us per token at
/// 16384, +0.5 at 2048). The same arithmetic as the softmax stage's but
/// for the order of the sum of the exponentials.
///
/// BULK_ROWS (-DMK_MLA_BULK_ROWS, opt-in; sm_90 and later, else ignored):
/// the rows by bulk copies, two per row (latent, rope) issued by warp 0's
/// lanes, each ring slot completing on its own mbarrier (mla_ring_bars)
/// armed with the sub-chunk's bytes; threads wait on the slot's mbarrier
/// instead of their cp.async groups. The same ring layout and arithmetic.
///
/// QUERY_REGS (-DMK_MLA_QUERY_REGS, opt-in; PARTS 1 where the k-groups
/// before the last hold only latent steps, and neither SCORE_ALL_ROWS nor
/// -DMK_MLA_SCORE_CHAIN applies, else ignored): each warp loads the query
/// fragments of its first kMlaQueryRegSteps score k-steps once, before the
/// sub-chunk loop, and keeps them in registers. SOFTMAX_ADJACENT
/// (-DMK_MLA_SOFTMAX_ADJACENT, opt-in; where a warp's half-warps take a head
/// each): heads 2w and 2w + 1 for warp w. SCORE_ALL_ROWS
/// (-DMK_MLA_SCORE_ALL_ROWS, opt-in; PARTS 1, 16-row sub-chunks, not under
/// -DMK_MLA_SCORE_CHAIN, else ignored): every warp scores both row tiles
/// over its own k-steps, their query fragments in registers (kAllRows
/// below). All the same arithmetic but for the order of the partial scores' sum.
template <int THREADS, int HM, int HG, int LORA, int ROPE, int SUB_ROWS = kMlaSub,
          class Wait = NoPrologue, int PARTS = 2, bool WARP_SOFTMAX = kMlaWarpSoftmax,
          bool BULK_ROWS = kMlaBulkRows, bool QUERY_REGS = kMlaQueryRegs,
          bool SOFTMAX_ADJACENT = kMlaSoftmaxAdjacent, bool SCORE_ALL_ROWS = kMlaScoreAllRows,
          class PT = float>
__device__ void mla_attention_chunk_task_blockwide(int task, int nchunks, int rows, float scale,
                                                   const float *q_abs, const bf16 *q_rope,
                                                   const bf16 *ckv, const bf16 *kr, float *part_m,
                                                   float *part_l, PT *part_acc, float *smem,
                                                   Wait wait = {}) {
  static_assert(LORA % 16 == 0, "LORA must be a multiple of 16");
  static_assert(ROPE % 8 == 0 && ROPE <= 64, "ROPE must be a multiple of 8 and <= 64");
  static_assert(HM % HG == 0 && HG <= 16, "the head group must divide the heads, <= 16");
  constexpr int QR = mla_query_rows<HG>(); // staged query rows (A rows in use)
  constexpr bool M16 = QR == 16;          // A rows 8-15 carry heads too
  // Up to 8 heads, A rows 8-15 carry the lo parts (the staged qlo rows
  // follow the qhi rows; the probabilities' lo parts likewise), so one mma
  // takes both parts: C rows 8-15 hold the lo sums, added at the end.
  constexpr bool PACK = !M16;
  static_assert(PARTS == 2 || (PARTS == 1 && M16),
                "one part only with 9 to 16 heads (up to 8, the lo parts ride in A rows 8-15)");
  // ONE: the queries and probabilities as one bf16 part, one mma per step.
  constexpr bool ONE = PARTS == 1;
  constexpr int NG = HM / HG;
  constexpr int WARPS = THREADS / 32;
  static_assert(SUB_ROWS == 16 || (SUB_ROWS == 32 && HG <= 8),
                "16-row sub-chunks, or 32 with up to 8 heads");
  constexpr int SUB = SUB_ROWS, NST = mla_attention_stages<HG, SUB, PARTS>(),
                ROW = mla_stage_row<LORA, ROPE>();
  constexpr int R16 = (ROPE + 15) / 16 * 16;
  constexpr int NTW = SUB / 8;                        // row tiles of a sub-chunk's scores
  constexpr int KQ = mla_score_ksplit<THREADS, SUB>(); // warps per row tile (K split)
  static_assert(KQ >= 1 && WARPS == KQ * NTW, "the warps split a sub-chunk's scores evenly");
  constexpr int LS = LORA / 16, KS = LS + R16 / 16;   // k-steps: latent, then rope
  constexpr int KPW = (KS + KQ - 1) / KQ;             // k-steps per warp
  constexpr int NT = LORA / 8, NTPW = (NT + WARPS - 1) / WARPS; // column tiles per warp
  // Whether every warp has NTPW column tiles of the weighted sum (the
  // unit's 64 tiles on 8 warps), so that their loop needs no run-time test:
  // the test on the warp index kept each tile's ldmatrix and mma apart in
  // ptxas's schedule, one load-then-mma chain of NTPW links, where without
  // it the loads are all issued first (perf notes #217).
  constexpr bool kWholeTiles = NT % WARPS == 0;
  constexpr int LP = LORA / 8, RP = ROPE / 8;         // 16-byte pieces of a row
#ifndef MK_MLA_SCORE_CHAIN
  constexpr bool kChain = false;
#else
  constexpr bool kChain = true;
#endif
  // kAllRows (SCORE_ALL_ROWS, where it applies): warp w scores both row
  // tiles of a sub-chunk over k-steps [w KS / WARPS, (w + 1) KS / WARPS),
  // at most APW of them (9 at most: 36 registers), their query fragments
  // in registers for the whole task; WARPS sets of partial scores instead
  // of KQ, in the query rows' room (free once the fragments are loaded).
  constexpr int APW = (KS + WARPS - 1) / WARPS;
  constexpr bool kAllRows = SCORE_ALL_ROWS && ONE && SUB == 16 && !kChain && APW <= 9 &&
                            WARPS * HG * SUB <= QR * ROW / 2;
  constexpr int KP = kAllRows ? WARPS : KQ; // sets of partial scores
  // The probabilities formed in every warp (WARP_SOFTMAX, where it applies).
  constexpr bool kWarpSoftmax = WARP_SOFTMAX && PACK && SUB == 16;
  StageClock clk; // -DMK_PHASE_TIMING: where the task's cycles go
  const int chunk = task / NG, h0 = (task % NG) * HG;
  bf16 *ring = reinterpret_cast<bf16 *>(smem);       // [NST][SUB][ROW]
  bf16 *qhi = ring + NST * SUB * ROW, *qlo = qhi + QR * ROW; // [QR][ROW] each
  float *const ksums = smem + (NST * SUB + PARTS * QR) * ROW / 2; // [KQ][HG][SUB]
  float *prob = ksums + KQ * HG * SUB;               // [HG][SUB]
  // [KP][HG][SUB] partial scores (kAllRows: over the query rows).
  float *spart = kAllRows ? reinterpret_cast<float *>(qhi) : ksums;
  float *mrun = prob + HG * SUB, *lrun = mrun + HG, *alpha = lrun + HG;
  const int r0 = (int)((long long)chunk * rows / nchunks);
  const int r1 = (int)((long long)(chunk + 1) * rows / nchunks);
  const int nsub = (r1 - r0 + SUB - 1) / SUB;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;

  // kBulk (BULK_ROWS, sm_90 and later): one mbarrier per ring slot; the
  // k-th fill of slot s (of sub-chunk s + k NST) completes its phase k.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  constexpr bool kBulk = false;
#else
  constexpr bool kBulk = BULK_ROWS;
#endif
  [[maybe_unused]] unsigned long long *bars = mla_ring_bars();
  static_assert(!kBulk || NST <= 4, "mla_ring_bars holds 4 slots");
  if constexpr (kBulk) {
    if (threadIdx.x == 0) {
#pragma unroll
      for (int s = 0; s < NST; ++s)
        detail::mbar_init(&bars[s], 1);
      detail::mbar_init_fence();
    }
    __syncthreads(); // the inits, and every earlier use of the ring, before the copies
  }
  // Sub-chunk j into ring slot j % NST (an empty commit group past the end).
  // Rows past the chunk are zeros: they meet zero probabilities, and stale
  // bytes could be NaN (0 * NaN is not 0).
  auto issue = [&](int j) {
    if (j < nsub) {
      bf16 *dst = ring + (j % NST) * SUB * ROW;
      const int s0 = r0 + j * SUB, n = min(SUB, r1 - s0);
      if constexpr (kBulk) {
        // Warp 0: lane 0 arms the slot's mbarrier with the bytes, then lane
        // r < n copies row r (its latent and rope parts). The fence (every
        // state space) orders the slot's earlier reads (generic proxy,
        // before the barrier this follows) and the cache rows' writes this
        // launch made (the appended row, ordered before this by the
        // schedule's barrier or counter) before the copies (async proxy).
        if (warp == 0) {
          unsigned long long *bar = &bars[j % NST];
          asm volatile("fence.proxy.async;" ::: "memory");
          if (lane == 0)
            detail::mbar_expect_tx(bar, (unsigned)(n * (LORA + ROPE) * 2));
          __syncwarp();
          for (int r = lane; r < n; r += 32) {
            detail::bulk_copy(dst + r * ROW, ckv + (size_t)(s0 + r) * LORA, LORA * 2, bar);
            if constexpr (ROPE > 0)
              detail::bulk_copy(dst + r * ROW + LORA, kr + (size_t)(s0 + r) * ROPE, ROPE * 2,
                                bar);
          }
        }
      } else {
        // A warp copies whole rows, lane l its pieces l, l + 32, ...: no
        // division, and a row's addresses advance by a constant.
        MK_UNROLL_RUNTIME
        for (int r = warp; r < n; r += WARPS) {
          const bf16 *lat = ckv + (size_t)(s0 + r) * LORA, *rot = kr + (size_t)(s0 + r) * ROPE;
          bf16 *d = dst + r * ROW;
#pragma unroll
          for (int p = lane; p < LP + RP; p += 32) {
            if (p < LP)
              cp_async16(d + 8 * p, lat + 8 * p);
            else
              cp_async16(d + LORA + 8 * (p - LP), rot + 8 * (p - LP));
          }
        }
      }
      MK_UNROLL_RUNTIME
      for (int i = threadIdx.x; i < (SUB - n) * ROW / 8; i += THREADS)
        reinterpret_cast<uint4 *>(dst + n * ROW)[i] = make_uint4(0, 0, 0, 0);
    }
    if constexpr (!kBulk)
      cp_async_commit();
  };
  static_assert(NST >= 2, "the loop below keeps NST - 1 slots in flight");
#pragma unroll
  for (int j = 0; j < NST - 1; ++j)
    issue(j);
  // The rows do not depend on the absorbed queries: a task whose wait for
  // them the schedule puts in its prologue (schedule-prologue-waits) waits
  // here, with its first rows in flight.
  wait();
  // The queries as A rows: hi and lo parts of the absorbed queries, the
  // rope queries (exact in bf16) in hi only; heads past HG, the rope's
  // padding to 16 and the ring rows' rope padding (never copied) are zeros.
  // Every load of both (absorbed and rope queries) is issued before the
  // first store: one L2 round trip on the MLA chain's critical path, not
  // two. -DMK_MLA_QUERIES_TWO_TRIPS loads the rope queries after the
  // absorbed ones' stores, to measure against: the form before session 28
  // where a thread has one rope piece (the unit's shapes); before, a thread
  // with several loaded and stored them one at a time.
  {
    constexpr int QI = (QR * LORA / 2 + THREADS - 1) / THREADS;
    constexpr int RI = (QR * R16 / 2 + THREADS - 1) / THREADS;
    float2 x[QI];
    uint32_t hv[RI];
    auto loadRope = [&] {
#pragma unroll
      for (int k = 0; k < RI; ++k) {
        const int i = threadIdx.x + k * THREADS, h = i / (R16 / 2), d = 2 * (i % (R16 / 2));
        hv[k] = 0;
        if (h < HG && d < ROPE)
          hv[k] = __ldcg(reinterpret_cast<const unsigned *>(q_rope + (h0 + h) * ROPE + d));
      }
    };
#pragma unroll
    for (int k = 0; k < QI; ++k) {
      const int i = threadIdx.x + k * THREADS, h = i / (LORA / 2), d = 2 * (i % (LORA / 2));
      x[k] = make_float2(0.f, 0.f);
      if (h < HG)
        x[k] = __ldcg(reinterpret_cast<const float2 *>(q_abs + (size_t)(h0 + h) * LORA + d));
    }
#ifndef MK_MLA_QUERIES_TWO_TRIPS
    loadRope();
#endif
#pragma unroll
    for (int k = 0; k < QI; ++k) {
      const int i = threadIdx.x + k * THREADS, h = i / (LORA / 2), d = 2 * (i % (LORA / 2));
      if (h < QR) {
        *reinterpret_cast<uint32_t *>(qhi + h * ROW + d) = detail::bf2_part(x[k], false);
        if constexpr (!ONE)
          *reinterpret_cast<uint32_t *>(qlo + h * ROW + d) = detail::bf2_part(x[k], true);
      }
    }
#ifdef MK_MLA_QUERIES_TWO_TRIPS
    loadRope();
#endif
#pragma unroll
    for (int k = 0; k < RI; ++k) {
      const int i = threadIdx.x + k * THREADS, h = i / (R16 / 2), d = 2 * (i % (R16 / 2));
      if (h < QR)
        *reinterpret_cast<uint32_t *>(qhi + h * ROW + LORA + d) = hv[k];
    }
  }
  if constexpr (R16 > ROPE)
    MK_UNROLL_RUNTIME
    for (int i = threadIdx.x; i < NST * SUB * (R16 - ROPE); i += THREADS)
      ring[(i / (R16 - ROPE)) * ROW + LORA + ROPE + i % (R16 - ROPE)] = __float2bfloat16(0.f);
  for (int h = threadIdx.x; h < HG; h += THREADS) {
    mrun[h] = -INFINITY;
    lrun[h] = 0.f;
  }
  // This warp's score tile: rows nt*8.. of each sub-chunk, k-steps
  // [kq*KPW, (kq+1)*KPW). ldmatrix.x2 addresses (lanes 0-15): A rows
  // (heads) l % 8 at k + 8 * (l / 8) give a0 / a2; cache rows nt*8 + l % 8
  // at k + 8 * (l / 8) give b0 / b1. With 16 query rows, ldmatrix.x4: A row
  // l % 16 at k + 8 * (l / 16) gives a0..a3.
  const int nt = warp % NTW, kq = warp / NTW;
  const int la = lane & 7, lk = 8 * ((lane >> 3) & 1);
  const int la16 = lane & 15, lk16 = 8 * (lane >> 4);
  float acc[NTPW][4];
#pragma unroll
  for (int i = 0; i < NTPW; ++i)
    acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
  // kWarpSoftmax: head g's running maximum and sum, in its quad's lanes.
  [[maybe_unused]] float wmax = -INFINITY, wsum = 0.f;
  // kQuadParts (kWarpSoftmax with 8 heads, which fill the mma's A rows
  // 0-7, so every lane's g is a head): k-group q's partial scores of rows
  // 8 rb + 2 t + e of head g at quadPart(q, rb) + e, the float2 of lane
  // (g, t). A half-warp's 16 lanes (heads g % 4, rows t) then cover the 32
  // banks once, for the score tiles' float2 stores and the probabilities'
  // float2 loads alike; the [KQ][HG][SUB] layout puts heads g and g + 2 on
  // the same banks, 4-way conflicts on each of 16 scalar loads per lane
  // (perf notes #179: the weighted stage 16.7 -> 11.9 us per task at 16384).
  constexpr bool kQuadParts = kWarpSoftmax && HG == 8;
  [[maybe_unused]] auto quadPart = [&](int q, int rb) {
    return q * HG * SUB + rb * HG * 8 + (g / 4) * 32 + t * 8 + (g % 4) * 2;
  };
  // kQueryRegs: this warp's k-steps' query fragments, loaded once (every
  // step's A operand is 16 * ks columns into the query rows: the rope
  // queries follow the latent ones).
#ifndef MK_MLA_SCORE_CHAIN
  constexpr bool kQueryRegs = QUERY_REGS && ONE && !kAllRows && (KQ - 1) * KPW <= LS;
#else
  constexpr bool kQueryRegs = false; // the chain's steps are rolled
#endif
  // The first NQR of them (5 by default, kMlaQueryRegSteps; the others
  // loaded at every sub-chunk as before).
  constexpr int NQR = kQueryRegs ? (kMlaQueryRegSteps < KPW ? kMlaQueryRegSteps : KPW) : 1;
  [[maybe_unused]] uint32_t qa[NQR][4];
  if constexpr (kQueryRegs) {
    __syncthreads(); // the query rows' stores
#pragma unroll
    for (int i = 0; i < NQR; ++i) {
      const int ks = kq * KPW + i;
      qa[i][0] = qa[i][1] = qa[i][2] = qa[i][3] = 0u;
      if (ks < KS)
        detail::ldmatrix_x4(qa[i][0], qa[i][1], qa[i][2], qa[i][3],
                            qhi + la16 * ROW + 16 * ks + lk16);
    }
  }
  // kAllRows: this warp's k-steps and their query fragments.
  const int aks0 = warp * KS / WARPS, aks1 = (warp + 1) * KS / WARPS;
  [[maybe_unused]] uint32_t qw[kAllRows ? APW : 1][4];
  if constexpr (kAllRows) {
    __syncthreads(); // the query rows' stores
#pragma unroll
    for (int i = 0; i < APW; ++i) {
      qw[i][0] = qw[i][1] = qw[i][2] = qw[i][3] = 0u;
      if (aks0 + i < aks1)
        detail::ldmatrix_x4(qw[i][0], qw[i][1], qw[i][2], qw[i][3],
                            qhi + la16 * ROW + 16 * (aks0 + i) + lk16);
    }
  }
  clk.lap(kStageMlaPrologue);

  for (int j = 0; j < nsub; ++j) {
    if constexpr (kBulk)
      detail::mbar_wait(&bars[j % NST], (unsigned)(j / NST) & 1u); // sub-chunk j has landed
    else
      cp_async_wait<NST - 2>(); // sub-chunk j has landed (later ones may be in flight)
    __syncthreads();          // ...for every thread; slot (j + NST - 1) % NST is free
    issue(j + NST - 1);
    clk.lap(kStageMlaRowWait);
    const bf16 *cur = ring + (j % NST) * SUB * ROW;
    const int n = min(SUB, r1 - (r0 + j * SUB));
    // Scores: S[h][row] partial over this warp's k-steps.
    if constexpr (kAllRows) {
      // Both row tiles: one ldmatrix.x4 gives a k-step's B fragments of
      // rows 0-7 (b0, b1) and 8-15 (b2, b3); two chains, one per tile.
      // Every warp runs APW steps, without a branch, so that the loads can
      // all be issued before the first mma: a step past the warp's range
      // has zero query fragments and reads the next warp's first k-step
      // (finite cache values, or zeros past the chunk), adding zeros. (The
      // last warp's range ends at KS; the min is a guard.)
      float s0[4] = {0.f, 0.f, 0.f, 0.f}, s1[4] = {0.f, 0.f, 0.f, 0.f};
      const bf16 *brow = cur + ((lane >> 4) * 8 + la) * ROW + lk;
#pragma unroll
      for (int i = 0; i < APW; ++i) {
        uint32_t b0, b1, b2, b3;
        detail::ldmatrix_x4(b0, b1, b2, b3, brow + 16 * min(aks0 + i, KS - 1));
        detail::mma_bf16_16816(s0, qw[i][0], qw[i][1], qw[i][2], qw[i][3], b0, b1);
        detail::mma_bf16_16816(s1, qw[i][0], qw[i][1], qw[i][2], qw[i][3], b2, b3);
      }
      // Lane (g, t): heads g and g + 8, rows 2t, 2t + 1 (s0) and 2t + 8,
      // 2t + 9 (s1).
      float *sp = spart + (warp * HG + g) * SUB + 2 * t;
      if (g < HG) {
        *reinterpret_cast<float2 *>(sp) = make_float2(s0[0], s0[1]);
        *reinterpret_cast<float2 *>(sp + 8) = make_float2(s1[0], s1[1]);
      }
      if (g + 8 < HG) {
        *reinterpret_cast<float2 *>(sp + 8 * SUB) = make_float2(s0[2], s0[3]);
        *reinterpret_cast<float2 *>(sp + 8 * SUB + 8) = make_float2(s1[2], s1[3]);
      }
    } else {
      float sh[4] = {0.f, 0.f, 0.f, 0.f}, sl[4] = {0.f, 0.f, 0.f, 0.f};
      // The k-steps unrolled, odd ones into a second accumulator (`sl`,
      // free when PACK or ONE: no lo mma of its own): two HMMA chains of ~5 instead of one of 9 (perf
      // notes session 13: 0 at 2048, -1 to -2.7 us at 16384 in three runs).
      // Every step's kind is known at compile time: kq (the warp's k-group)
      // is a run-time value, so a step that tested ks against KS and LS
      // carried both ldmatrix forms under predicates with a WARPSYNC before
      // each (the sub-chunk loop 455 SASS instructions, 352 now); here the
      // k-groups before the last (all latent steps) run without tests and
      // the last one's steps are known from the unrolled i (perf notes #95:
      // -4 us at 16384). -DMK_MLA_SCORE_CHAIN: one rolled chain of tested
      // steps (the form of session 12).
      constexpr bool SPLIT = (PACK || ONE) && !kChain;
      // Whether the k-groups before the last hold only latent steps (the
      // unit's and every wide spec's shapes); otherwise (a small latent
      // dim, as the tiny spec's 128 + 16) each step is tested at run time.
      constexpr bool kFrontLatent = !kChain && (KQ - 1) * KPW <= LS;
      // One k-step, its kind (LATENT: a latent step, else a rope one) a
      // compile-time fact.
      auto scoreStep = [&](int i, int ks, auto latentTag) {
        constexpr bool LATENT = decltype(latentTag)::value;
        const int kb = LATENT ? ks * 16 : LORA + (ks - LS) * 16, k0 = kb + lk;
        uint32_t a0, a1 = 0u, a2, a3 = 0u, b0, b1;
        if (kQueryRegs && i < NQR) { // i is a compile-time value once unrolled
          const int r = i < NQR ? i : 0;
          a0 = qa[r][0], a1 = qa[r][1], a2 = qa[r][2], a3 = qa[r][3];
        } else if constexpr (M16 || (PACK && LATENT)) // PACK: rows 8-15 are qlo's
          detail::ldmatrix_x4(a0, a1, a2, a3, qhi + la16 * ROW + kb + lk16);
        else
          detail::ldmatrix_x2(a0, a2, qhi + la * ROW + k0);
        detail::ldmatrix_x2(b0, b1, cur + (nt * 8 + la) * ROW + k0);
        if (SPLIT && (i & 1))
          detail::mma_bf16_16816(sl, a0, a1, a2, a3, b0, b1);
        else
          detail::mma_bf16_16816(sh, a0, a1, a2, a3, b0, b1);
        if constexpr (!PACK && !ONE && LATENT) {
          if constexpr (M16)
            detail::ldmatrix_x4(a0, a1, a2, a3, qlo + la16 * ROW + kb + lk16);
          else
            detail::ldmatrix_x2(a0, a2, qlo + la * ROW + k0);
          detail::mma_bf16_16816(sl, a0, a1, a2, a3, b0, b1);
        }
      };
      // Step i of k-group kq, its kind tested at run time.
      auto testedStep = [&](int i, int kq0) {
        const int ks = kq0 * KPW + i;
        if (ks < LS)
          scoreStep(i, ks, detail::ScoreStepKind<true>{});
        else if (ks < KS)
          scoreStep(i, ks, detail::ScoreStepKind<false>{});
      };
      if constexpr (kChain) {
        MK_UNROLL_CODE
        for (int i = 0; i < KPW; ++i)
          testedStep(i, kq);
      } else if (kFrontLatent && kq < KQ - 1) {
#pragma unroll
        for (int i = 0; i < KPW; ++i)
          scoreStep(i, kq * KPW + i, detail::ScoreStepKind<true>{});
      } else {
        const int kq0 = kFrontLatent ? KQ - 1 : kq; // compile-time when kFrontLatent
#pragma unroll
        for (int i = 0; i < KPW; ++i)
          testedStep(i, kq0);
      }
      // Lane (g, t) holds S[g][2t, 2t+1] in c0, c1 and S[g + 8][...] in c2,
      // c3 (zero rows below 16 query rows).
      if constexpr (SPLIT)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          sh[c] += sl[c];
          sl[c] = 0.f; // folded (ONE: the stores below add sl)
        }
      if constexpr (kQuadParts) {
        *reinterpret_cast<float2 *>(spart + quadPart(kq, nt)) =
            make_float2(sh[0] + sh[2], sh[1] + sh[3]);
      } else if (PACK && g < HG) { // c2, c3: head g's lo part
        *reinterpret_cast<float2 *>(spart + (kq * HG + g) * SUB + nt * 8 + 2 * t) =
            make_float2(sh[0] + sh[2], sh[1] + sh[3]);
      }
      if (!PACK && g < HG)
        *reinterpret_cast<float2 *>(spart + (kq * HG + g) * SUB + nt * 8 + 2 * t) =
            make_float2(sh[0] + sl[0], sh[1] + sl[1]);
      if (M16 && g + 8 < HG)
        *reinterpret_cast<float2 *>(spart + (kq * HG + g + 8) * SUB + nt * 8 + 2 * t) =
            make_float2(sh[2] + sl[2], sh[3] + sl[3]);
    }
    __syncthreads();
    clk.lap(kStageMlaScores);
    if constexpr (kWarpSoftmax) {
      // Lane (g, t): head g's rows 2t, 2t + 1 (A columns of a0) and 2t + 8,
      // 2t + 9 (of a2); lanes past HG heads hold zero probabilities.
      const int rows4[4] = {2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9};
      float sc[4], mloc = -INFINITY;
      if constexpr (kQuadParts) { // two float2 loads per k-group; g < HG
        float2 lo = make_float2(0.f, 0.f), hi = make_float2(0.f, 0.f);
#pragma unroll
        for (int q = 0; q < KQ; ++q) {
          const float2 a = *reinterpret_cast<const float2 *>(spart + quadPart(q, 0));
          const float2 b = *reinterpret_cast<const float2 *>(spart + quadPart(q, 1));
          lo.x += a.x, lo.y += a.y, hi.x += b.x, hi.y += b.y;
        }
        const float v4[4] = {lo.x, lo.y, hi.x, hi.y};
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          sc[c] = rows4[c] < n ? v4[c] * scale : -INFINITY;
          mloc = fmaxf(mloc, sc[c]);
        }
      } else {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          sc[c] = -INFINITY;
          if (g < HG && rows4[c] < n) {
            float v = 0.f;
#pragma unroll
            for (int q = 0; q < KQ; ++q)
              v += spart[(q * HG + g) * SUB + rows4[c]];
            sc[c] = v * scale;
          }
          mloc = fmaxf(mloc, sc[c]);
        }
      }
      mloc = fmaxf(mloc, __shfl_xor_sync(0xffffffffu, mloc, 1));
      mloc = fmaxf(mloc, __shfl_xor_sync(0xffffffffu, mloc, 2));
      const float mnew = fmaxf(wmax, mloc); // -inf only on lanes past HG heads
      float pr[4], sum = 0.f;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        pr[c] = sc[c] == -INFINITY ? 0.f : expf(sc[c] - mnew);
        sum += pr[c];
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float al = g < HG ? expf(wmax - mnew) : 0.f;
      if (g < HG) {
        wsum = wsum * al + sum;
        wmax = mnew;
      }
      const uint32_t ph0 = detail::bf2_part(make_float2(pr[0], pr[1]), false);
      const uint32_t pl0 = detail::bf2_part(make_float2(pr[0], pr[1]), true);
      const uint32_t ph2 = detail::bf2_part(make_float2(pr[2], pr[3]), false);
      const uint32_t pl2 = detail::bf2_part(make_float2(pr[2], pr[3]), true);
#pragma unroll
      for (int i = 0; i < NTPW; ++i) {
        const int ct = warp + i * WARPS;
        if (kWholeTiles || ct < NT) {
#pragma unroll
          for (int c = 0; c < 4; ++c)
            acc[i][c] *= al; // rows 8-15: head g's lo parts
          uint32_t b0, b1;
          detail::ldmatrix_x2_trans(b0, b1, cur + (lane & 15) * ROW + ct * 8);
          detail::mma_bf16_16816(acc[i], ph0, pl0, ph2, pl2, b0, b1);
        }
      }
      clk.lap(kStageMlaWeighted);
      // (The next sub-chunk's barrier orders spart's reuse.)
    } else {
      // Softmax statistics, one row per lane, the maximum and the sum
      // reduced within a head's lanes: a warp per head, or where the heads
      // outnumber the warps (16-head tasks) and the sub-chunk is 16 rows, a
      // head per 16 lanes (a warp's two halves take heads h and h + WARPS
      // side by side, or with -DMK_MLA_SOFTMAX_ADJACENT heads 2w and 2w + 1:
      // perf notes #215, the stage 0.80 -> 0.42 us a lap).
      static_assert(SUB <= 32, "one row per lane");
      constexpr int SEGS = HG > WARPS && SUB == 16 ? 2 : 1; // heads per warp
      constexpr int LANES = 32 / SEGS;                     // lanes per head
      const int seg = lane / LANES, row = lane % LANES;
      for (int hw = warp; hw < HG; hw += WARPS * SEGS) {
        const int h = SOFTMAX_ADJACENT ? (hw - warp) + warp * SEGS + seg : hw + seg * WARPS;
        const bool live = h < HG;
        float s = -INFINITY;
        if (live && row < n) {
          s = 0.f;
#pragma unroll
          for (int q = 0; q < KP; ++q)
            s += spart[(q * HG + h) * SUB + row];
          s *= scale;
        }
        const float mx = warp_max<LANES>(s);
        const float mnew = fmaxf(live ? mrun[h] : -INFINITY, mx);
        const float p = live && row < n ? expf(s - mnew) : 0.f;
        if (live && row < SUB)
          prob[h * SUB + row] = p;
        const float sum = warp_sum<LANES>(p);
        if (live && row == 0)
          detail::online_softmax_update(mrun, lrun, alpha, h, mnew, sum);
      }
      __syncthreads();
      clk.lap(kStageMlaSoftmax);
      // Weighted rows: acc[h][d] = alpha[h] acc[h][d] + sum_row P[h][row] C[row][d].
      {
        // A k-step of the weighted sum per 16 rows of the sub-chunk (one for
        // 16-row sub-chunks, two for 32); alpha scales the sums at the first.
#pragma unroll
        for (int rk = 0; rk < SUB / 16; ++rk) {
          const float *pr = prob + 16 * rk;
          uint32_t ph0 = 0, ph1 = 0, ph2 = 0, ph3 = 0, pl0 = 0, pl1 = 0, pl2 = 0, pl3 = 0;
          float al = 0.f, al8 = 0.f;
          if (g < HG) {
            const float2 a = *reinterpret_cast<const float2 *>(pr + g * SUB + 2 * t);
            const float2 b = *reinterpret_cast<const float2 *>(pr + g * SUB + 2 * t + 8);
            ph0 = detail::bf2_part(a, false);
            pl0 = detail::bf2_part(a, true);
            ph2 = detail::bf2_part(b, false);
            pl2 = detail::bf2_part(b, true);
            al = alpha[g];
          }
          if (M16 && g + 8 < HG) { // A rows 8-15: heads g + 8
            const float2 a = *reinterpret_cast<const float2 *>(pr + (g + 8) * SUB + 2 * t);
            const float2 b = *reinterpret_cast<const float2 *>(pr + (g + 8) * SUB + 2 * t + 8);
            ph1 = detail::bf2_part(a, false);
            pl1 = detail::bf2_part(a, true);
            ph3 = detail::bf2_part(b, false);
            pl3 = detail::bf2_part(b, true);
            al8 = alpha[g + 8];
          }
#pragma unroll
          for (int i = 0; i < NTPW; ++i) {
            const int ct = warp + i * WARPS;
            if (kWholeTiles || ct < NT) {
              if (rk == 0) {
                acc[i][0] *= al;
                acc[i][1] *= al;
                if constexpr (M16) {
                  acc[i][2] *= al8;
                  acc[i][3] *= al8;
                }
                if constexpr (PACK) {
                  acc[i][2] *= al;
                  acc[i][3] *= al;
                }
              }
              uint32_t b0, b1;
              detail::ldmatrix_x2_trans(b0, b1, cur + (16 * rk + (lane & 15)) * ROW + ct * 8);
              if constexpr (PACK) { // rows 8-15: head g's lo parts
                detail::mma_bf16_16816(acc[i], ph0, pl0, ph2, pl2, b0, b1);
              } else {
                detail::mma_bf16_16816(acc[i], ph0, ph1, ph2, ph3, b0, b1);
                if constexpr (!ONE)
                  detail::mma_bf16_16816(acc[i], pl0, pl1, pl2, pl3, b0, b1);
              }
            }
          }
        }
      }
      clk.lap(kStageMlaWeighted);
    }
  }
  cp_async_wait<0>(); // the empty groups past the end
  if constexpr (kWarpSoftmax) {
    if (warp == 0 && t == 0 && g < HG) {
      part_m[mla_stat_at(chunk, h0 + g, nchunks)] = wmax;
      part_l[mla_stat_at(chunk, h0 + g, nchunks)] = wsum;
    }
  } else {
    for (int h = threadIdx.x; h < HG; h += THREADS) {
      part_m[mla_stat_at(chunk, h0 + h, nchunks)] = mrun[h];
      part_l[mla_stat_at(chunk, h0 + h, nchunks)] = lrun[h];
    }
  }
#pragma unroll
  for (int i = 0; i < NTPW; ++i) {
    const int ct = warp + i * WARPS;
    if (ct < NT && g < HG)
      mla_store_partials(part_acc, ((size_t)chunk * HM + h0 + g) * LORA + ct * 8 + 2 * t,
                         PACK ? make_float2(acc[i][0] + acc[i][2], acc[i][1] + acc[i][3])
                              : make_float2(acc[i][0], acc[i][1]));
    if (M16 && ct < NT && g + 8 < HG)
      mla_store_partials(part_acc, ((size_t)chunk * HM + h0 + g + 8) * LORA + ct * 8 + 2 * t,
                         make_float2(acc[i][2], acc[i][3]));
  }
  __syncthreads();
  if constexpr (kBulk)
    if (threadIdx.x == 0)
#pragma unroll
      for (int s = 0; s < NST; ++s)
        detail::mbar_inval(&bars[s]);
  clk.lap(kStageMlaEpilogue);
}

/// The sliced tensor-core form of mla_attention_chunk_task (up to 16 heads,
/// 16-row sub-chunks): each warp owns a slice of LORA / W latent dims (W
/// warps) and every W-th 16-wide rope k-step, and stages only its slice of
/// each row, in its own ring (mla_sliced_stages slots, all but one in
/// flight under the math), so a slot needs no barrier beyond __syncwarp.
/// Per sub-chunk a warp forms the partial scores of its k-steps for both
/// 8-row halves (its query fragments live in registers for the whole
/// task); the block sums the W partials through shared memory at one
/// barrier (in one fixed order, so every warp holds the same scores bit
/// for bit), and every warp runs the online softmax on its own registers:
/// the scores' accumulator layout is the weighted sum's A layout (lane
/// (g, t) holds rows 2t, 2t + 1, 2t + 8, 2t + 9 of head g, and of head
/// g + 8 past 8 heads), so the probabilities never go through shared
/// memory. The weighted sum covers the warp's own latent slice
/// (ldmatrix.trans, two column tiles per load). One block barrier per
/// sub-chunk where the block-wide form has three (two with WARP_SOFTMAX).
/// Numerics as the block-wide form's two parts (this form takes no PARTS:
/// it always carries both): queries and probabilities as bf16 hi + lo parts, fp32
/// sums; up to 8 heads A rows 0-7 are the heads' hi parts and rows 8-15
/// their lo parts (one mma takes both), 9 to 16 heads fill the A rows with
/// heads and take hi and lo parts in two mma.
template <int THREADS, int HM, int HG, int LORA, int ROPE, class PT>
__device__ void mla_attention_chunk_task_sliced(int task, int nchunks, int rows, float scale,
                                                const float *q_abs, const bf16 *q_rope,
                                                const bf16 *ckv, const bf16 *kr, float *part_m,
                                                float *part_l, PT *part_acc, float *smem) {
  static_assert(mla_attention_sliced_fits<THREADS, HG, LORA, ROPE>(),
                "a shape the sliced attention does not take");
  static_assert(ROPE % 8 == 0 && ROPE <= 64, "ROPE must be a multiple of 8 and <= 64");
  static_assert(HM % HG == 0, "the head group must divide the heads");
  constexpr int W = THREADS / 32, NG = HM / HG, SUB = 16;
  constexpr bool M16 = HG > 8;      // A rows 8-15 carry heads 8-15 (else lo parts)
  constexpr int NH = M16 ? 2 : 1;   // heads per lane: g, and g + 8 past 8 heads
  constexpr int NP = M16 ? 2 : 1;   // query A fragments per k-step: hi, lo
  constexpr int NST = mla_sliced_stages<THREADS, HG, LORA, ROPE>();
  constexpr int LS = LORA / 16, RS = (ROPE + 15) / 16; // latent and rope k-steps
  constexpr int LSW = LS / W, RSW = (RS + W - 1) / W;  // per warp (rope: slots)
  constexpr int LPW = LORA / W;                        // latent dims per warp
  constexpr int ROWW = mla_sliced_row<THREADS, LORA, ROPE>();
  constexpr int CT = LPW / 8;                          // column tiles per warp
  constexpr int PL = LPW / 8, PPR = PL + 2 * RSW;      // 16-byte pieces per staged row
  static_assert(CT % 2 == 0 && SUB * PPR % 32 == 0, "column tiles in pairs, whole pieces per lane");
  StageClock clk; // -DMK_PHASE_TIMING: where the task's cycles go (warp 0's view)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int chunk = task / NG, h0 = (task % NG) * HG;
  bf16 *ring = reinterpret_cast<bf16 *>(smem) + warp * NST * SUB * ROWW;
  float4 *spart = reinterpret_cast<float4 *>(smem + W * NST * SUB * ROWW / 2); // [2][NH][W][32]
  const int r0 = (int)((long long)chunk * rows / nchunks);
  const int r1 = (int)((long long)(chunk + 1) * rows / nchunks);
  const int nsub = (r1 - r0 + SUB - 1) / SUB;
  // Whether rope k-step slot i of this warp holds a k-step (always when W
  // divides RS).
  auto ropeStep = [&](int i) { return RS % W == 0 || warp + W * i < RS; };

  // Rope pieces past ROPE (a partial or absent k-step) are never copied:
  // zeros, as stale bytes could be NaN (0 * NaN is not 0).
  if constexpr (RSW * W * 16 > ROPE)
    for (int i = lane; i < NST * SUB * 2 * RSW; i += 32) {
      const int q = i % (2 * RSW), r = i / (2 * RSW);
      if (16 * (warp + W * (q / 2)) + 8 * (q % 2) >= ROPE)
        *reinterpret_cast<uint4 *>(ring + r * ROWW + LPW + 8 * q) = make_uint4(0, 0, 0, 0);
    }
  // Sub-chunk j into ring slot j % NST (an empty commit group past the
  // end); rows past the chunk are zeros (they meet zero probabilities;
  // stale bytes could be NaN).
  auto issue = [&](int j) {
    if (j < nsub) {
      bf16 *dst = ring + (j % NST) * SUB * ROWW;
      const int s0 = r0 + j * SUB, n = min(SUB, r1 - s0);
#pragma unroll
      for (int k = 0; k < SUB * PPR / 32; ++k) {
        const int i = lane + 32 * k, r = i / PPR, p = i % PPR;
        bf16 *d = dst + r * ROWW + 8 * p;
        if (r < n) {
          if (p < PL) {
            cp_async16(d, ckv + (size_t)(s0 + r) * LORA + warp * LPW + 8 * p);
          } else {
            const int q = p - PL, rd = 16 * (warp + W * (q / 2)) + 8 * (q % 2);
            if (rd < ROPE)
              cp_async16(d, kr + (size_t)(s0 + r) * ROPE + rd);
          }
        } else {
          *reinterpret_cast<uint4 *>(d) = make_uint4(0, 0, 0, 0);
        }
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int j = 0; j < NST - 1; ++j)
    issue(j);
  // The query fragments of this warp's k-steps, held for the whole task
  // (heads past HG are zeros): up to 8 heads one per k-step, A rows 0-7 the
  // heads' hi parts and rows 8-15 their lo parts; past 8 heads a hi and a
  // lo fragment, A rows the 16 heads. The rope queries are exact in bf16:
  // hi parts only.
  uint32_t qa[LSW][NP][4], qr[RSW][4];
  {
    float2 x[LSW][NH][2];
#pragma unroll
    for (int i = 0; i < LSW; ++i)
#pragma unroll
      for (int e = 0; e < NH; ++e) {
        const int h = g + 8 * e;
        const float *src = q_abs + (size_t)(h0 + h) * LORA + (warp * LSW + i) * 16 + 2 * t;
        x[i][e][0] = x[i][e][1] = make_float2(0.f, 0.f);
        if (h < HG) {
          x[i][e][0] = __ldcg(reinterpret_cast<const float2 *>(src));
          x[i][e][1] = __ldcg(reinterpret_cast<const float2 *>(src + 8));
        }
      }
#pragma unroll
    for (int i = 0; i < RSW; ++i)
#pragma unroll
      for (int k = 0; k < 4; ++k) { // a0..a3: (row half k & 1, k half k >> 1)
        const int h = g + 8 * (k & 1), d = 16 * (warp + W * i) + 2 * t + 8 * (k >> 1);
        qr[i][k] = (M16 || (k & 1) == 0) && h < HG && d < ROPE
                       ? __ldcg(reinterpret_cast<const unsigned *>(q_rope + (h0 + h) * ROPE + d))
                       : 0u;
      }
#pragma unroll
    for (int i = 0; i < LSW; ++i) {
      if constexpr (M16) {
#pragma unroll
        for (int p = 0; p < 2; ++p) {
          qa[i][p][0] = detail::bf2_part(x[i][0][0], p == 1);
          qa[i][p][1] = detail::bf2_part(x[i][1][0], p == 1);
          qa[i][p][2] = detail::bf2_part(x[i][0][1], p == 1);
          qa[i][p][3] = detail::bf2_part(x[i][1][1], p == 1);
        }
      } else {
        qa[i][0][0] = detail::bf2_part(x[i][0][0], false);
        qa[i][0][1] = detail::bf2_part(x[i][0][0], true);
        qa[i][0][2] = detail::bf2_part(x[i][0][1], false);
        qa[i][0][3] = detail::bf2_part(x[i][0][1], true);
      }
    }
  }
  // The running softmax state of head g (and g + 8), the same in the four
  // lanes of g.
  float mrun[NH], lrun[NH];
#pragma unroll
  for (int e = 0; e < NH; ++e) {
    mrun[e] = -INFINITY;
    lrun[e] = 0.f;
  }
  float acc[CT][4];
#pragma unroll
  for (int c = 0; c < CT; ++c)
    acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = 0.f;
  // ldmatrix.x4 addresses: the scores' B (lane l: row (l & 7) + 8 (l / 16),
  // k + 8 ((l / 8) & 1): r0, r1 the rows 0-7 fragment, r2, r3 rows 8-15's);
  // the weighted sum's B, transposed (lane l: row l & 15, column tile
  // c + l / 16: r0, r1 tile c's fragment, r2, r3 tile c + 1's).
  const int sOff = ((lane & 7) + 8 * (lane >> 4)) * ROWW + 8 * ((lane >> 3) & 1);
  const int wOff = (lane & 15) * ROWW + 8 * (lane >> 4);
  clk.lap(kStageMlaPrologue);

  for (int j = 0; j < nsub; ++j) {
    cp_async_wait<NST - 2>(); // sub-chunk j has landed (this lane's copies)
    __syncwarp();             // ...every lane's; slot (j - 1) % NST is free
    issue(j + NST - 1);
    clk.lap(kStageMlaRowWait);
    const bf16 *cur = ring + (j % NST) * SUB * ROWW;
    const int n = min(SUB, r1 - (r0 + j * SUB));
    // Partial scores over this warp's k-steps, rows 0-7 (s0) and 8-15 (s1):
    // four short mma chains, the second accumulators (b) taking the odd
    // k-steps (up to 8 heads) or the lo parts (past 8).
    float s0[4] = {0.f, 0.f, 0.f, 0.f}, s1[4] = {0.f, 0.f, 0.f, 0.f};
    float s0b[4] = {0.f, 0.f, 0.f, 0.f}, s1b[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int i = 0; i < LSW; ++i) {
      uint32_t b0, b1, b2, b3;
      detail::ldmatrix_x4(b0, b1, b2, b3, cur + sOff + 16 * i);
      const uint32_t *a = qa[i][0];
      const bool odd = !M16 && (i & 1);
      detail::mma_bf16_16816(odd ? s0b : s0, a[0], a[1], a[2], a[3], b0, b1);
      detail::mma_bf16_16816(odd ? s1b : s1, a[0], a[1], a[2], a[3], b2, b3);
      if constexpr (M16) {
        const uint32_t *l = qa[i][NP - 1];
        detail::mma_bf16_16816(s0b, l[0], l[1], l[2], l[3], b0, b1);
        detail::mma_bf16_16816(s1b, l[0], l[1], l[2], l[3], b2, b3);
      }
    }
#pragma unroll
    for (int i = 0; i < RSW; ++i)
      if (ropeStep(i)) {
        uint32_t b0, b1, b2, b3;
        detail::ldmatrix_x4(b0, b1, b2, b3, cur + sOff + LPW + 16 * i);
        const bool odd = M16 || ((LSW + i) & 1);
        detail::mma_bf16_16816(odd ? s0b : s0, qr[i][0], qr[i][1], qr[i][2], qr[i][3], b0, b1);
        detail::mma_bf16_16816(odd ? s1b : s1, qr[i][0], qr[i][1], qr[i][2], qr[i][3], b2, b3);
      }
    // Lane (g, t)'s rows 2t, 2t + 1, 2t + 8, 2t + 9 of head g (C rows g and
    // g + 8 when these are its hi and lo parts) and of head g + 8.
    float4 part[NH];
    if constexpr (M16) {
      part[0] = make_float4(s0[0] + s0b[0], s0[1] + s0b[1], s1[0] + s1b[0], s1[1] + s1b[1]);
      part[NH - 1] = make_float4(s0[2] + s0b[2], s0[3] + s0b[3], s1[2] + s1b[2], s1[3] + s1b[3]);
    } else {
      part[0] = make_float4(s0[0] + s0b[0] + s0[2] + s0b[2], s0[1] + s0b[1] + s0[3] + s0b[3],
                            s1[0] + s1b[0] + s1[2] + s1b[2], s1[1] + s1b[1] + s1[3] + s1b[3]);
    }
    float4 *buf = spart + (j & 1) * NH * W * 32;
#pragma unroll
    for (int e = 0; e < NH; ++e)
      buf[(e * W + warp) * 32 + lane] = part[e];
    clk.lap(kStageMlaScores);
    // The partials summed in one order (the buffer of j & 1 is rewritten at
    // j + 2, after every warp passed j + 1's barrier), then the online
    // softmax of each of the lane's heads over the rows 2t, 2t + 1, 2t + 8,
    // 2t + 9 (rows past n count for nothing), the maximum and the sum over
    // the four lanes of g.
    __syncthreads();
    const int rr[4] = {2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9};
    float x[NH][4], alpha[NH];
#pragma unroll
    for (int e = 0; e < NH; ++e) {
      float4 sc = buf[e * W * 32 + lane];
#pragma unroll
      for (int w = 1; w < W; ++w) {
        const float4 o = buf[(e * W + w) * 32 + lane];
        sc.x += o.x;
        sc.y += o.y;
        sc.z += o.z;
        sc.w += o.w;
      }
      x[e][0] = sc.x * scale;
      x[e][1] = sc.y * scale;
      x[e][2] = sc.z * scale;
      x[e][3] = sc.w * scale;
      float mx = -INFINITY;
#pragma unroll
      for (int k = 0; k < 4; ++k)
        if (rr[k] < n)
          mx = fmaxf(mx, x[e][k]);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mnew = fmaxf(mrun[e], mx); // finite: every sub-chunk has a row
      float sum = 0.f;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        x[e][k] = rr[k] < n ? expf(x[e][k] - mnew) : 0.f;
        sum += x[e][k];
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      alpha[e] = expf(mrun[e] - mnew);
      lrun[e] = lrun[e] * alpha[e] + sum;
      mrun[e] = mnew;
    }
    clk.lap(kStageMlaSoftmax);
    // Weighted rows over this warp's latent slice; A = the probabilities,
    // straight from the registers: up to 8 heads rows 0-7 their hi and rows
    // 8-15 their lo parts, past 8 the 16 heads' hi, then lo parts.
    uint32_t pa[NP][4];
    if constexpr (M16) {
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        pa[p][0] = detail::bf2_part(make_float2(x[0][0], x[0][1]), p == 1);
        pa[p][1] = detail::bf2_part(make_float2(x[NH - 1][0], x[NH - 1][1]), p == 1);
        pa[p][2] = detail::bf2_part(make_float2(x[0][2], x[0][3]), p == 1);
        pa[p][3] = detail::bf2_part(make_float2(x[NH - 1][2], x[NH - 1][3]), p == 1);
      }
    } else {
      pa[0][0] = detail::bf2_part(make_float2(x[0][0], x[0][1]), false);
      pa[0][1] = detail::bf2_part(make_float2(x[0][0], x[0][1]), true);
      pa[0][2] = detail::bf2_part(make_float2(x[0][2], x[0][3]), false);
      pa[0][3] = detail::bf2_part(make_float2(x[0][2], x[0][3]), true);
    }
    const float aLo = alpha[NH - 1]; // C rows 8-15: head g's lo sums, or head g + 8
#pragma unroll
    for (int c = 0; c < CT; c += 2) {
      uint32_t b0, b1, b2, b3;
      detail::ldmatrix_x4<true>(b0, b1, b2, b3, cur + wOff + 8 * c);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        acc[c][k] *= k < 2 ? alpha[0] : aLo;
        acc[c + 1][k] *= k < 2 ? alpha[0] : aLo;
      }
#pragma unroll
      for (int p = 0; p < NP; ++p) {
        detail::mma_bf16_16816(acc[c], pa[p][0], pa[p][1], pa[p][2], pa[p][3], b0, b1);
        detail::mma_bf16_16816(acc[c + 1], pa[p][0], pa[p][1], pa[p][2], pa[p][3], b2, b3);
      }
    }
    clk.lap(kStageMlaWeighted);
  }
  cp_async_wait<0>(); // the empty groups past the end
#pragma unroll
  for (int e = 0; e < NH; ++e) {
    const int h = g + 8 * e;
    if (h < HG) {
      if (t == 0 && warp == 0) {
        part_m[mla_stat_at(chunk, h0 + h, nchunks)] = mrun[e];
        part_l[mla_stat_at(chunk, h0 + h, nchunks)] = lrun[e];
      }
#pragma unroll
      for (int c = 0; c < CT; ++c)
        mla_store_partials(part_acc,
                           ((size_t)chunk * HM + h0 + h) * LORA + warp * LPW + 8 * c + 2 * t,
                           M16 ? make_float2(acc[c][2 * e], acc[c][2 * e + 1])
                               : make_float2(acc[c][0] + acc[c][2], acc[c][1] + acc[c][3]));
    }
  }
  __syncthreads(); // the next task's copies reuse the rings
  clk.lap(kStageMlaEpilogue);
}

/// Online-softmax attention of HG heads (head group task % (HM/HG)) over
/// cache rows [c*rows/nchunks, (c+1)*rows/nchunks), c = task / (HM/HG).
/// Writes the chunk's running max, sum and unnormalized latent accumulator
/// for its heads. Tasks: nchunks * (HM/HG). Splitting heads as well as rows
/// gives every block work at short contexts; the groups of one chunk read the
/// same rows, so all but one of those reads hit L2. The form: the
/// block-wide one; -DMK_MLA_ATTENTION_SLICED the sliced one where the shape
/// fits it (mla_attention_sliced_fits; perf notes session 19: no faster, as
/// the loop waits on the rows either way), -DMK_MLA_ATTENTION_SIMT the
/// CUDA-core one.
///
/// mla_attention_chunk_task_waiting: the same after `wait()` (the task's
/// wait for the absorbed queries, which the schedule put in its prologue):
/// the block-wide form asks for its first rows first, then waits; the other
/// forms wait first.
template <int THREADS, int HM, int HG, int LORA, int ROPE, int SUB_ROWS, class Wait,
          int PARTS = 2, class PT = float>
__device__ void mla_attention_chunk_task_waiting(int task, int nchunks, int rows, float scale,
                                                 const float *q_abs, const bf16 *q_rope,
                                                 const bf16 *ckv, const bf16 *kr, float *part_m,
                                                 float *part_l, PT *part_acc, float *smem,
                                                 Wait wait) {
#if defined(MK_MLA_ATTENTION_SIMT)
  wait();
  mla_attention_chunk_task_simt<THREADS, HM, HG, LORA, ROPE, kMlaSimtSub, PT>(
      task, nchunks, rows, scale, q_abs, q_rope, ckv, kr, part_m, part_l, part_acc, smem);
#else
#if defined(MK_MLA_ATTENTION_SLICED)
  constexpr bool kSliced = mla_attention_sliced_fits<THREADS, HG, LORA, ROPE, SUB_ROWS>();
#else
  constexpr bool kSliced = false;
#endif
  if constexpr (kSliced) {
    wait();
    mla_attention_chunk_task_sliced<THREADS, HM, HG, LORA, ROPE, PT>(
        task, nchunks, rows, scale, q_abs, q_rope, ckv, kr, part_m, part_l, part_acc, smem);
  } else {
    mla_attention_chunk_task_blockwide<THREADS, HM, HG, LORA, ROPE, SUB_ROWS, Wait, PARTS>(
        task, nchunks, rows, scale, q_abs, q_rope, ckv, kr, part_m, part_l, part_acc, smem,
        wait);
  }
#endif
}
template <int THREADS, int HM, int HG, int LORA, int ROPE, int SUB_ROWS = kMlaSub, int PARTS = 2,
          class PT = float>
__device__ void mla_attention_chunk_task(int task, int nchunks, int rows, float scale,
                                         const float *q_abs, const bf16 *q_rope, const bf16 *ckv,
                                         const bf16 *kr, float *part_m, float *part_l,
                                         PT *part_acc, float *smem) {
  mla_attention_chunk_task_waiting<THREADS, HM, HG, LORA, ROPE, SUB_ROWS, NoPrologue, PARTS, PT>(
      task, nchunks, rows, scale, q_abs, q_rope, ckv, kr, part_m, part_l, part_acc, smem,
      NoPrologue{});
}

template <int THREADS, int VH, int LORA>
__host__ __device__ constexpr int mla_combine_smem_floats() { return LORA + w4a16_red_floats<THREADS, VH>(); }
/// The merge's own scratch in the waiting form (which cannot use the
/// GEMV's ring's first stage: its first weights are in flight there; the
/// later stages, which a slice's rows leave empty, take the staged
/// partials): the chunk weights and sums, and the (dim, chunk share)
/// partial sums of a `span`-wide slice.
template <int THREADS>
__host__ __device__ constexpr int mla_combine_merge_floats(int span, int max_chunks) {
  return 2 * ((max_chunks + 3) / 4 * 4) + span * (span >= THREADS ? 1 : THREADS / span);
}
template <int THREADS, int VH, int LORA>
__host__ __device__ constexpr int mla_combine_waiting_smem_floats(int span, int max_chunks) {
  return mla_combine_smem_floats<THREADS, VH, LORA>() +
         mla_combine_merge_floats<THREADS>(span, max_chunks);
}

/// Merges the chunk partials of head h's latent slice [d0, d1) into
/// xs[d0, d1) (o_lat, fp32). `scratch` holds the chunk weights and sums and
/// the partial sums (mla_combine_merge_floats), and, where the slice's rows
/// of every chunk fit beside them within `scratch_floats` (LENT_STAGE:
/// in the caller's `stage_area`, 16-byte aligned, of `stage_floats` floats,
/// if not null), their staged copy (one cp.async round trip for all the
/// partials, issued before the chunks' maxima and sums are loaded; its wait
/// also waits for whatever copies the caller has in flight); else the rows
/// are read from L2 in the sums' loop. Every warp forms the chunk
/// weights exp(m_i - M) and their sum W itself (no barrier to share W), and each
/// (dim, chunk share) pair of threads sums its chunks one at a time. Ends
/// with a block barrier. `clk` takes the merge's stages (timing builds).
/// (Perf notes #220 and #222 measured the statistics asked for before the
/// copies, the staged sums in batches of 8 loads and the partials staged
/// by bulk copies: none faster end to end.)
template <int THREADS, int HM, int LORA, bool LENT_STAGE = false, class PT = float>
__device__ void mla_combine_merge(int h, int d0, int d1, int nchunks, const float *part_m,
                                  const float *part_l, const PT *part_acc, float *xs,
                                  float *scratch, int scratch_floats, StageClock &clk,
                                  float *stage_area = nullptr, int stage_floats = 0) {
  const int span = d1 - d0;
  const int parts = span >= THREADS ? 1 : THREADS / span;
  const int cpad = (nchunks + 3) / 4 * 4;
  float *e = scratch, *lw = scratch + cpad, *part = scratch + 2 * cpad,
        *stage = LENT_STAGE ? stage_area : part + span * parts;
  // The partials (fp32 or bf16: PT) and their staged copy, of
  // staged_floats floats; 16-byte pieces of PIECE values.
  constexpr int PIECE = 16 / sizeof(PT);
  const int staged_floats = nchunks * span * (int)sizeof(PT) / 4;
  PT *const stage_pt = reinterpret_cast<PT *>(stage);
  // LENT_STAGE: the caller's `stage_area` (null: nothing staged).
  const bool staged = (LENT_STAGE ? stage_area && staged_floats <= stage_floats
                                  : 2 * cpad + span * parts + staged_floats <= scratch_floats) &&
                      span % PIECE == 0;
  if (staged) {
    for (int i = threadIdx.x; i < nchunks * span / PIECE; i += THREADS) {
      const int c = i / (span / PIECE), p = i % (span / PIECE);
      cp_async16(stage_pt + c * span + PIECE * p,
                 part_acc + ((size_t)c * HM + h) * LORA + d0 + PIECE * p);
    }
    cp_async_commit();
  }
  clk.lap(kStageCombineCopies);
  const float *mh = mla_head_stats(part_m, h, nchunks),
              *lh = mla_head_stats(part_l, h, nchunks);
  for (int i = threadIdx.x; i < nchunks; i += THREADS) {
    e[i] = __ldcg(mh + i);
    lw[i] = __ldcg(lh + i);
  }
  __syncthreads();
  clk.lap(kStageCombineStats);
  // Every warp: M = max_i m_i, the weights exp(m_i - M) (empty chunks weigh
  // 0) and W = sum_i weight_i l_i; warp 0 publishes the weights.
  const int lane = threadIdx.x & 31;
  float M = -INFINITY;
  for (int i = lane; i < nchunks; i += 32)
    M = fmaxf(M, e[i]);
  M = warp_max(M);
  float W = 0.f;
  for (int i = lane; i < nchunks; i += 32)
    W = fmaf(e[i] == -INFINITY ? 0.f : expf(e[i] - M), lw[i], W);
  W = warp_sum(W);
  __syncthreads(); // every warp has read e before warp 0 overwrites it
  if (threadIdx.x < 32)
    for (int i = lane; i < nchunks; i += 32)
      e[i] = e[i] == -INFINITY ? 0.f : expf(e[i] - M);
  clk.lap(kStageCombineWeights);
  if (staged)
    cp_async_wait<0>();
  __syncthreads();
  clk.lap(kStageCombineLanded);
  for (int t = threadIdx.x; t < span * parts; t += THREADS) {
    const int d = t % span, q = t / span;
    float v = 0.f;
    if (staged) {
MK_UNROLL_CODE_N(16)
      for (int i = q; i < nchunks; i += parts)
        v = fmaf(e[i], mla_partial_f(stage_pt[i * span + d]), v);
    } else {
MK_UNROLL_CODE_N(16)
      for (int i = q; i < nchunks; i += parts)
        v = fmaf(e[i], mla_partial_f(__ldcg(part_acc + ((size_t)i * HM + h) * LORA + d0 + d)), v);
    }
    part[t] = v;
  }
  __syncthreads();
  for (int t = threadIdx.x; t < span; t += THREADS) {
    float v = 0.f;
    for (int q = 0; q < parts; ++q)
      v += part[q * span + t];
    xs[d0 + t] = v / W;
  }
  __syncthreads();
}

/// One latent-dim slice [d0, d1) of head h: merges the chunk partials into
/// o_lat[d0, d1) and adds that slice's share of W_kv_b's value half to the
/// head's fp32 output sums:
///   o_acc[h*VH + n] += sum_{c in [d0, d1)} W[c, h*(NOPE+VH) + NOPE + n] o_lat[c].
/// The slices of a head together give the spec's o (its consumer rounds the
/// sum to bf16). Slicing the merge spreads the partials' traffic over many
/// blocks; (d1 - d0) a multiple of 16. The merge stages its partials in the
/// GEMV's ring (mla_combine_merge), which they use until the GEMV starts.
template <int THREADS, int HM, int NOPE, int VH, int LORA, int GROUP, class PT = float>
__device__ void mla_combine_wv_task(int h, int d0, int d1, int nchunks, const float *part_m,
                                    const float *part_l, const PT *part_acc,
                                    const uint8_t *wq, const bf16 *scales, const bf16 *zeros,
                                    float *o_acc, float *smem) {
  StageClock clk; // -DMK_PHASE_TIMING: where the task's cycles go
  float *xs = smem, *red = smem + LORA;
  constexpr int RED = w4a16_red_floats<THREADS, VH>();
  mla_combine_merge<THREADS, HM, LORA>(h, d0, d1, nchunks, part_m, part_l, part_acc, xs, red,
                                       RED, clk);
  clk.lap(kStageCombineMerge);
  constexpr int N = HM * (NOPE + VH);
  const int n0 = h * (NOPE + VH) + NOPE;
  // o_lat is fp32.
  w4a16_gemv_tile<THREADS, VH, GROUP, EpiAtomicAddF32, true>(
      xs, wq, scales, zeros, N, n0, VH, d0, d1, red, EpiAtomicAddF32{o_acc, 1.f, h * VH - n0});
  clk.lap(kStageCombineGemv);
}

/// mla_combine_wv_task after `wait()` (the task's wait for the attention
/// chunks' partials, which the schedule put in its prologue:
/// schedule-prologue-waits combine=true): the GEMV asks for its first W_v
/// rows, then the task waits and merges the partials (its chunk weights and
/// sums in its own scratch past the ring, mla_combine_waiting_smem_floats),
/// so that the weights' round trip runs under the wait. Where the slice's
/// W_v rows all lie in the ring's first stage (every warp's steps, and
/// under the SIMT path every thread's rows, fit one stage: slices of up to
/// 384 rows at 256 threads), the partials are staged in the ring's later
/// stages, which the GEMV then never fills (its later copies are empty);
/// their wait also waits for the GEMV's first copies, asked for before the
/// task's wait. Else the merge reads them from L2. Its scratch past the
/// ring (mla_combine_merge_floats) must hold nchunks' weights and sums: the
/// caller sizes it for the most chunks. -DMK_COMBINE_WAITING_UNSTAGED:
/// never staged (the form #158 measured).
template <int THREADS, int HM, int NOPE, int VH, int LORA, int GROUP, class Wait,
          class PT = float>
__device__ void mla_combine_wv_task_waiting(int h, int d0, int d1, int nchunks,
                                            const float *part_m, const float *part_l,
                                            const PT *part_acc, const uint8_t *wq,
                                            const bf16 *scales, const bf16 *zeros, float *o_acc,
                                            float *smem, Wait wait) {
  constexpr int RED = w4a16_red_floats<THREADS, VH>();
  float *xs = smem, *red = smem + LORA, *scratch = red + RED;
  constexpr int N = HM * (NOPE + VH);
  const int n0 = h * (NOPE + VH) + NOPE;
  // Where the slice's W_v rows all lie in the ring's first stage, its later
  // stages (the ring has at least two) hold the staged partials.
#ifdef MK_COMBINE_WAITING_UNSTAGED
  constexpr bool kMayLend = false;
#else
  constexpr bool kMayLend = true;
#endif
  constexpr int kStageFloats = w4a16_ring_stage_floats<THREADS>();
  const bool lend = kMayLend && w4a16_rows_in_first_stage<THREADS, VH>(d0, d1);
  float *const ring = red + w4a16_ring_offset_floats<THREADS, VH>();
  StageClock clk; // -DMK_PHASE_TIMING: where the task's cycles go
  auto pro = [&] {
    wait();
    clk.lap(kStageCombineEntry);
    mla_combine_merge<THREADS, HM, LORA, true>(
        h, d0, d1, nchunks, part_m, part_l, part_acc, xs, scratch, 0, clk,
        lend ? ring + kStageFloats : nullptr, lend ? (kW4A16Stages - 1) * kStageFloats : 0);
    clk.lap(kStageCombineMerge);
  };
  // o_lat is fp32.
  w4a16_gemv_tile_with<THREADS, VH, GROUP, EpiAtomicAddF32, true, kOrderRowMajor>(
      xs, wq, scales, zeros, N, n0, VH, d0, d1, red, EpiAtomicAddF32{o_acc, 1.f, h * VH - n0},
      false, pro);
  clk.lap(kStageCombineGemv);
}

} // namespace mk
