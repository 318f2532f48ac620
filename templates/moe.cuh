//===- moe.cuh - Router top-k and expert FFN tiles ----------------*- CUDA -*-===//
//
// The router's logits are a grid-wide product, but the softmax + top-k over
// E values is cheaper to recompute in every block than to broadcast, so each
// block calls moe_topk after the logits are visible. Expert FFNs are W4A16
// GEMV tiles: gate and up tiles (split-K) accumulate their fp32 sums with
// atomics, down tiles form silu(gate) * up (fp32, as the spec) as they load
// their input and accumulate w_j * y into an fp32 buffer with atomics
// (rounded once by the residual that consumes it). With bf16 steps (the
// released model's ffn_rounding "each") the down tiles round gate, up,
// silu(gate) and the product as they stage them, and a routed expert's tile
// (which then takes the whole intermediate) rounds its output before the
// weight.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mk/common.cuh"
#include "mk/grid_sync.cuh"
#include "mk/phase_timing.cuh"
#include "mk/topk_rank.cuh"
#include "mk/w4a16_gemv.cuh"

namespace mk {

namespace detail {
/// One warp's softmax numerators: lane `lane`'s v[i] = exp(logit[lane +
/// 32 i] - max) (0 past E); returns their sum over the warp. POLL: the
/// logits are a polled output (poll_nonzero), read once written.
template <int E, bool POLL = false>
__device__ __forceinline__ float topk_exp(const bf16 *logits, int lane,
                                          float (&v)[(E + 31) / 32]) {
  constexpr int PER = (E + 31) / 32;
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int e = lane + 32 * i;
    // Polled one after another: poll_nonzero_strided's loads all in flight
    // at once made moe_topk spill 8 B on sm_90 (the unit's PER is 2;
    // session 35), which the tests refuse in a default kernel's template.
    if constexpr (POLL)
      v[i] = e < E ? poll_nonzero(logits + e) : -INFINITY;
    else
      v[i] = e < E ? bf2f(__ldcg(logits + e)) : -INFINITY;
    mx = fmaxf(mx, v[i]);
  }
  mx = warp_max(mx);
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int e = lane + 32 * i;
    v[i] = e < E ? expf(v[i] - mx) : 0.f;
    sum += v[i];
  }
  return warp_sum(sum);
}

} // namespace detail

/// p = softmax(logits); top-K by probability (ties: the lower index wins);
/// w = p / (sum(p) + 1e-9) * scaling. Results in shared memory (w_out[K],
/// idx_out[K], in that order: the most probable first); all threads call
/// it; ends synchronized.
///
/// Warp 0 forms p into shared memory; then every value's rank (how many
/// values come before it: a larger p, or an equal one at a lower index) is
/// counted by its own thread, and the values ranked below K take their
/// slots (detail::topk_by_rank, topk_rank.cuh: below 128 experts four
/// barriers and E comparisons per thread; from 128 the two-level count,
/// five barriers, 32 comparisons and the candidates' ranks). The
/// chosen weights are summed in rank order, as K rounds of warp arg-max
/// selection summed them (same results, bit for bit); those rounds were
/// the form before (-DMK_TOPK_ROUNDS: K dependent chains of shuffles, ~1.9
/// us per MoE on the H200, perf notes session 13). POLL: the logits are a
/// polled output (schedule-poll-router-logits): each is read once written,
/// with no counter before the call.
template <int E, int K, bool POLL = false>
__device__ void moe_topk(const bf16 *logits, float scaling, float *w_out, int *idx_out) {
  static_assert(K <= E, "top-k larger than the expert count");
  constexpr int PER = (E + 31) / 32;
#ifndef MK_TOPK_ROUNDS
  [[maybe_unused]] StageClock clk; // -DMK_PHASE_TIMING: the logits' part of the top-k
  __shared__ float prob[E];
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    float v[PER];
    const float sum = detail::topk_exp<E, POLL>(logits, lane, v);
#pragma unroll
    for (int i = 0; i < PER; ++i)
      if (lane + 32 * i < E)
        prob[lane + 32 * i] = v[i] / sum;
  }
  __syncthreads();
  clk.lap(kStageTopkLogits);
  detail::topk_by_rank<E, K>(prob, prob, 1e-9f, scaling, w_out, idx_out);
#else
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    float v[PER];
    const float sum = detail::topk_exp<E, POLL>(logits, lane, v);
#pragma unroll
    for (int i = 0; i < PER; ++i)
      v[i] = (lane + 32 * i) < E ? v[i] / sum : -1.f; // -1: never chosen
    float wsum = 0.f;
    for (int k = 0; k < K; ++k) {
      float best = -2.f;
      int bi = 0x7fffffff;
#pragma unroll
      for (int i = 0; i < PER; ++i)
        if (v[i] > best) { // strict: the lower index of this lane wins ties
          best = v[i];
          bi = lane + 32 * i;
        }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float ob = __shfl_xor_sync(0xffffffffu, best, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ob > best || (ob == best && oi < bi)) {
          best = ob;
          bi = oi;
        }
      }
      if (lane == 0) {
        w_out[k] = best;
        idx_out[k] = bi;
      }
      wsum += best;
#pragma unroll
      for (int i = 0; i < PER; ++i)
        if (lane + 32 * i == bi)
          v[i] = -1.f;
    }
    __syncwarp();
    if (lane < K)
      w_out[lane] = w_out[lane] / (wsum + 1e-9f) * scaling;
  }
  __syncthreads();
#endif
}

/// The released Kimi-Linear router (BlockConfig's RouterKind::Sigmoid):
/// s = sigmoid(logits) (the fp32 logits), the top-K of s + bias
/// (the correction bias `bias`, bf16 [E], steers the choice only; ties: the
/// lower index wins), w = s / (sum(s) + 1e-20) * scaling over the chosen,
/// summed in rank order. Results as moe_topk's (w_out[K], idx_out[K], the
/// highest selection score first); all threads call it; ends synchronized.
/// POLL: as moe_topk's.
template <int E, int K, bool POLL = false>
__device__ void moe_topk_sigmoid(const float *logits, const bf16 *bias, float scaling,
                                 float *w_out, int *idx_out) {
  static_assert(K <= E, "top-k larger than the expert count");
  [[maybe_unused]] StageClock clk; // -DMK_PHASE_TIMING: the logits' part of the top-k
  __shared__ float score[E], sel[E];
  if constexpr (POLL) {
    // One warp polls (as moe_topk's), not every thread: E loads per round
    // from one block instead of E per thread group; each lane's E / 32
    // values together (one round trip, not E / 32).
    if (threadIdx.x < 32) {
      constexpr int PER = (E + 31) / 32;
      const int lane = threadIdx.x;
      const int n = lane < E ? (E - 1 - lane) / 32 + 1 : 0;
      float v[PER];
      poll_nonzero_strided<PER>(logits + lane, 32, n, v);
#pragma unroll
      for (int i = 0; i < PER; ++i)
        if (i < n)
          score[lane + 32 * i] = v[i];
    }
    __syncthreads();
  }
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    const float x = POLL ? score[e] : __ldcg(logits + e);
    const float s = 1.f / (1.f + expf(-x));
    score[e] = s;
    sel[e] = s + bf2f(bias[e]);
  }
  __syncthreads();
  clk.lap(kStageTopkLogits);
  detail::topk_by_rank<E, K>(sel, score, 1e-20f, scaling, w_out, idx_out);
}

/// y[n + offset] += scale * v (atomically), with `round` the whole expert
/// output rounded to bf16 first (a routed expert's in bf16 steps).
struct EpiAtomicAddMaybeRoundedF32 {
  float *y;
  float scale;
  int offset;
  bool round;
  __device__ void operator()(int n, float v) const {
    atomicAdd(y + n + offset, (round ? round_bf16(v) : v) * scale);
  }
};

/// Shared memory (floats) of a moe_down_task that stages `staged` rows of
/// hmid (the expert's width, or with SLICE its k-slice), then the tile's
/// reduction area.
template <int THREADS, int TN>
__host__ __device__ constexpr int moe_down_smem_floats(int staged) { return staged + w4a16_red_floats<THREADS, TN>(); }

/// acc[acc_offset + n] += weight * (hmid @ W_down)[n] over rows [k0, k1),
/// columns [n0, n0+nvalid) of one expert's W_down (as addressed: the matrix,
/// or one tile-contiguous tile with n0 = 0 and acc_offset its first column;
/// ORDER: that tile's weight order, w4a16_gemv.cuh's WeightOrder), where
/// hmid = silu(gate) * up (fp32, as the spec) is formed here from the
/// expert's gate and up sums: gate_up[0, inter) and gate_up[inter, 2 inter),
/// fp32, accumulated by split-K GEMV tiles in the previous phase (plain
/// w4a16_gemv_tile tasks with EpiAtomicAddF32). `smem`:
/// moe_down_smem_floats<THREADS, TN>(SLICE ? k1 - k0 : inter) floats.
/// SLICE (experts wider than the schedule's kMoeDownMaxStagedRows): only
/// the task's k-slice of hmid is staged, at smem[0, k1 - k0), so that the
/// work area does not grow with the expert width; else hmid's rows sit at
/// their own index in smem[0, inter) (the form the unit's kernel uses).
/// moe_down_task_waiting: the same after `wait()`, which runs first in the
/// tile's prologue, once the weight copies are issued: the task's wait for
/// the gate and up sums (CounterWaits) then overlaps its stream's start
/// instead of preceding it.
/// moe_down_task_bf16_steps(_waiting): the same in bf16 steps (the schedule's
/// `bf16_steps`): hmid = bf16(bf16(silu(bf16(g))) * bf16(u)), and with
/// `round_output` ("hidden_and_output": a routed expert, whose tile then
/// takes the whole intermediate, k0 = 0 and k1 = inter) the expert's output
/// rounded to bf16 before its weight. One instantiation serves both (the
/// shared and the routed experts' tiles): the choice is an argument, not a
/// template parameter (a second copy of the tile measured slower, perf
/// notes #146-#147).
template <int THREADS, int TN, int GROUP, int ORDER, bool SLICE, bool BF16_STEPS, class Wait>
__device__ __forceinline__ void moe_down_body(const float *gate_up, int inter, const uint8_t *wq,
                                              const bf16 *s, const bf16 *z, int N, int n0,
                                              int nvalid, int k0, int k1, float weight,
                                              float *acc, int acc_offset, float *smem,
                                              Wait wait, bool round_output) {
  // The tile indexes x by absolute row: with SLICE it gets smem - k0.
  float *xs = SLICE ? smem - k0 : smem, *red = smem + (SLICE ? k1 - k0 : inter);
  // hmid: fp32 (the unit does not round silu(g) * u), or in bf16 steps.
  auto hmid = [](float g, float u) {
    if constexpr (BF16_STEPS)
      return round_bf16(round_bf16(silu(round_bf16(g))) * round_bf16(u));
    else
      return silu(g) * u;
  };
  // Its loads wait on the previous phase's sums; they overlap the tile's
  // first weight loads.
  // A batch's loads are all issued before its stores (block_stage_slice
  // says why); -DMK_SERIAL_STAGING: one element at a time (the form before).
  auto stage_hmid = [&] {
    wait();
#ifndef MK_SERIAL_STAGING
    for (int base = k0 + threadIdx.x; base < k1; base += kStageBatch * THREADS) {
      float g[kStageBatch], u[kStageBatch];
#pragma unroll
      for (int j = 0; j < kStageBatch; ++j) {
        const int i = base + j * THREADS;
        g[j] = i < k1 ? __ldcg(gate_up + i) : 0.f;
        u[j] = i < k1 ? __ldcg(gate_up + inter + i) : 0.f;
      }
#pragma unroll
      for (int j = 0; j < kStageBatch; ++j)
        if (base + j * THREADS < k1)
          xs[base + j * THREADS] = hmid(g[j], u[j]);
    }
#else
    for (int i = k0 + threadIdx.x; i < k1; i += THREADS)
      xs[i] = hmid(__ldcg(gate_up + i), __ldcg(gate_up + inter + i));
#endif
    __syncthreads();
  };
  if constexpr (BF16_STEPS) {
    w4a16_gemv_tile_with<THREADS, TN, GROUP, EpiAtomicAddMaybeRoundedF32, true, ORDER>(
        xs, wq, s, z, N, n0, nvalid, k0, k1, red,
        EpiAtomicAddMaybeRoundedF32{acc, weight, acc_offset, round_output}, false, stage_hmid);
  } else {
    (void)round_output;
    w4a16_gemv_tile_with<THREADS, TN, GROUP, EpiAtomicAddF32, true, ORDER>(
        xs, wq, s, z, N, n0, nvalid, k0, k1, red, EpiAtomicAddF32{acc, weight, acc_offset},
        false, stage_hmid);
  }
}
template <int THREADS, int TN, int GROUP, int ORDER = kOrderRowMajor, bool SLICE = false>
__device__ void moe_down_task(const float *gate_up, int inter, const uint8_t *wq, const bf16 *s,
                              const bf16 *z, int N, int n0, int nvalid, int k0, int k1,
                              float weight, float *acc, int acc_offset, float *smem) {
  moe_down_body<THREADS, TN, GROUP, ORDER, SLICE, false>(gate_up, inter, wq, s, z, N, n0, nvalid,
                                                         k0, k1, weight, acc, acc_offset, smem,
                                                         NoPrologue{}, false);
}
template <int THREADS, int TN, int GROUP, int ORDER, bool SLICE, class Wait>
__device__ void moe_down_task_waiting(const float *gate_up, int inter, const uint8_t *wq,
                                      const bf16 *s, const bf16 *z, int N, int n0, int nvalid,
                                      int k0, int k1, float weight, float *acc, int acc_offset,
                                      float *smem, Wait wait) {
  moe_down_body<THREADS, TN, GROUP, ORDER, SLICE, false>(gate_up, inter, wq, s, z, N, n0, nvalid,
                                                         k0, k1, weight, acc, acc_offset, smem,
                                                         wait, false);
}
template <int THREADS, int TN, int GROUP, int ORDER, bool SLICE>
__device__ void moe_down_task_bf16_steps(const float *gate_up, int inter, const uint8_t *wq,
                                         const bf16 *s, const bf16 *z, int N, int n0,
                                         int nvalid, int k0, int k1, float weight, float *acc,
                                         int acc_offset, float *smem, bool round_output) {
  moe_down_body<THREADS, TN, GROUP, ORDER, SLICE, true>(gate_up, inter, wq, s, z, N, n0, nvalid,
                                                        k0, k1, weight, acc, acc_offset, smem,
                                                        NoPrologue{}, round_output);
}
template <int THREADS, int TN, int GROUP, int ORDER, bool SLICE, class Wait>
__device__ void moe_down_task_bf16_steps_waiting(const float *gate_up, int inter,
                                                 const uint8_t *wq, const bf16 *s, const bf16 *z,
                                                 int N, int n0, int nvalid, int k0, int k1,
                                                 float weight, float *acc, int acc_offset,
                                                 float *smem, Wait wait, bool round_output) {
  moe_down_body<THREADS, TN, GROUP, ORDER, SLICE, true>(gate_up, inter, wq, s, z, N, n0, nvalid,
                                                        k0, k1, weight, acc, acc_offset, smem,
                                                        wait, round_output);
}

} // namespace mk
