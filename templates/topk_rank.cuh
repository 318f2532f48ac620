//===- topk_rank.cuh - The router top-k's rank count -------------*- CUDA -*-===//
//
// The top-K of a router's E values by rank counting, shared by the softmax
// and the sigmoid top-k (moe.cuh). It includes nothing and uses only
// threadIdx, blockDim, __syncthreads, __shared__, the warp intrinsics
// __match_any_sync and __shfl_xor_sync, and __popc, __float_as_uint and
// __int_as_float, so that a host test can compile this very file against
// emulated threads and warps (tests/templates/TopkRankHostTest.cpp) where CI
// has no GPU.
//
//===----------------------------------------------------------------------===//
#pragma once

namespace mk {

namespace detail {
/// Experts from which topk_by_rank counts ranks in two levels (below, the
/// one-level count: the unit's 64 experts keep it). To measure:
/// -DMK_TOPK_TWO_LEVEL_ALL takes routers of 64 to the two-level count too,
/// -DMK_TOPK_ONE_LEVEL keeps every router on the one-level count (the form
/// before session 38).
#if defined(MK_TOPK_ONE_LEVEL)
constexpr int kTopkTwoLevelMinExperts = 1 << 30;
#elif defined(MK_TOPK_TWO_LEVEL_ALL)
constexpr int kTopkTwoLevelMinExperts = 64;
#else
constexpr int kTopkTwoLevelMinExperts = 128;
#endif

/// Whether topk_by_rank<E, K> counts in two levels by default.
template <int E, int K> __host__ __device__ constexpr bool topk_two_level() {
  return E >= kTopkTwoLevelMinExperts && K < 32;
}

/// The candidates of a two-level count: min(K, 32) for each warp-sized run
/// of the E values.
template <int E, int K> __host__ __device__ constexpr int topk_two_level_candidates() {
  constexpr int runs = (E + 31) / 32, last = E - 32 * (runs - 1);
  return K * (runs - 1) + (last < K ? last : K);
}

/// The top-K of sel[E] (shared memory; ties: the lower index wins), each
/// chosen expert weighed by its score[e]: w = score / (sum + eps) *
/// scaling, summed in rank order, into w_out[K] / idx_out[K] (the highest
/// first). Every value's rank (how many values come before it: a larger
/// one, or an equal one at a lower index) is counted by its own thread,
/// and the values ranked below K take their slots. All threads call it,
/// after sel and score are written; ends synchronized.
///
/// One level (TWO_LEVEL false; the default below kTopkTwoLevelMinExperts
/// experts, or for K >= 32): the count runs against all E values, E
/// comparisons per thread. Two levels (K < 32; blockDim.x a multiple of
/// 32): each warp of 32 values counts its values' ranks within the warp's
/// 32 (32 comparisons), and the values ranked below K there are the
/// candidates (min(K, 32) per warp of values). A value of the top K is
/// one of them: what outranks it in its warp of values outranks it in all
/// E. Whatever outranks it is itself in the top K, so a top-K value's rank
/// among the candidates is its rank among all E; a value outside the top K
/// is outranked by all K of them, all candidates, and ranks K or more.
/// Same choice, same order, same weights, bit for bit, where no value is a
/// NaN. Equal values within a warp's run are ordered by __match_any_sync,
/// candidates by a 64-bit key that holds their index. A NaN ranks as -inf
/// (the one-level count leaves its rank undefined). For the released
/// model's 256 experts: 32
/// comparisons per thread, then 16 on each of 4 threads per candidate (64),
/// against 256 per thread at ~7 sm_90 instructions each, which by that
/// count is ~3.6 us of issue for the two blocks of an SM per MoE layer
/// (session 38; not yet measured).
template <int E, int K, bool TWO_LEVEL = topk_two_level<E, K>()>
__device__ __forceinline__ void topk_by_rank(const float *sel, const float *score, float eps,
                                             float scaling, float *w_out, int *idx_out) {
  static_assert(K >= 1, "a top-k of no expert");
  static_assert(!TWO_LEVEL || K < 32, "the two-level count takes K < 32");
  if constexpr (!TWO_LEVEL) {
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
      const float p = sel[e];
      int rank = 0;
#pragma unroll 8
      for (int j = 0; j < E; ++j) {
        const float q = sel[j];
        rank += (q > p) || (q == p && j < e);
      }
      if (rank < K) {
        w_out[rank] = score[e];
        idx_out[rank] = e;
      }
    }
  } else {
    // Warp-sized runs of values: run r holds [32 r, min(32 r + 32, E)), one
    // value per lane of the warp on it, and its candidates take slots
    // [K r, K r + min(K, its length)) by their rank in the run (a
    // permutation of the run: every slot is written).
    constexpr int RUNS = (E + 31) / 32, CANDS = topk_two_level_candidates<E, K>();
    // A candidate's key: its value's order-preserving bits, then its
    // index's complement (the larger key comes first; no two are equal).
    __shared__ unsigned long long cand_key[CANDS];
    const int lane = threadIdx.x & 31;
    const float minus_inf = __int_as_float(0xff800000);
    for (int e = threadIdx.x; e < 32 * RUNS; e += blockDim.x) {
      const int base = e & ~31, len = E - base < 32 ? E - base : 32;
      // -0 as +0 (they compare equal), a NaN as -inf (no value compares
      // greater than a NaN either); lanes past E hold -inf, after every
      // lane of the run.
      float p = e < E ? sel[e] : minus_inf;
      p = p == 0.f ? 0.f : (p != p ? minus_inf : p);
      int rank = 0;
      // A full run's loop of its own (a constant trip count): with one loop
      // for both, the released model's kernel body spills 208 B on sm_90
      // (nvcc 13) instead of 112 B.
      if (len == 32) {
#pragma unroll 8
        for (int j = 0; j < 32; ++j)
          rank += sel[base + j] > p;
      } else {
        for (int j = 0; j < len; ++j)
          rank += sel[base + j] > p;
      }
      // An equal value at a lower index (a lower lane) comes first.
      const unsigned same = __match_any_sync(0xffffffffu, __float_as_uint(p));
      rank += __popc(same & ((1u << lane) - 1u));
      if (e < E && rank < K) {
        const unsigned bits = __float_as_uint(p);
        const unsigned ordered = bits & 0x80000000u ? ~bits : bits | 0x80000000u;
        cand_key[K * (base / 32) + rank] =
            (unsigned long long)ordered << 32 | (0xffffffffu - unsigned(e));
      }
    }
    __syncthreads();
    // Each candidate's rank among the candidates: SPLIT neighbouring lanes
    // count a SPAN of the keys each and sum by shuffles (whole warps).
    constexpr int SPLIT = 4, SPAN = (CANDS + SPLIT - 1) / SPLIT;
    constexpr int LANES = (CANDS * SPLIT + 31) / 32 * 32;
    for (int t = threadIdx.x; t < LANES; t += blockDim.x) {
      const int c = t / SPLIT, part = t % SPLIT;
      const unsigned long long key = c < CANDS ? cand_key[c] : 0ull;
      int rank = 0;
#pragma unroll
      for (int j = 0; j < SPAN; ++j) {
        const int at = part * SPAN + j;
        if (CANDS % SPLIT == 0 || at < CANDS)
          rank += cand_key[at] > key;
      }
      rank += __shfl_xor_sync(0xffffffffu, rank, 1);
      rank += __shfl_xor_sync(0xffffffffu, rank, 2);
      if (c < CANDS && part == 0 && rank < K) {
        const int e = int(0xffffffffu - unsigned(key));
        w_out[rank] = score[e];
        idx_out[rank] = e;
      }
    }
  }
  __syncthreads();
  float w = 0.f;
  if (threadIdx.x < K) {
    float wsum = 0.f;
#pragma unroll
    for (int k = 0; k < K; ++k)
      wsum += w_out[k];
    w = w_out[threadIdx.x] / (wsum + eps) * scaling;
  }
  __syncthreads(); // every thread has read w_out before any writes
  if (threadIdx.x < K)
    w_out[threadIdx.x] = w;
  __syncthreads();
}
} // namespace detail

/// Static shared memory (bytes) of topk_by_rank<E, K>'s candidates, which
/// moe_topk<E, K> and moe_topk_sigmoid<E, K> declare once between them
/// (the emitter's static bound counts it).
template <int E, int K> __host__ __device__ constexpr int topk_rank_shared_bytes() {
  return detail::topk_two_level<E, K>() ? 8 * detail::topk_two_level_candidates<E, K>() : 0;
}

} // namespace mk
