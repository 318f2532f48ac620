//===- kda.cuh - KDA short conv + gated delta rule, per head chunk -*- CUDA -*-===//
//
// One task updates CHUNK columns (value dims) of one head's recurrent state
// S [DK, DK]: the columns of S are independent in the gated delta rule, so a
// head splits into DK/CHUNK tasks that each stream 1/(DK/CHUNK) of its state.
// Each task recomputes the head's q/k short conv (cheap) and its own slice of
// v, the decay exp(-softplus(g)) and beta = sigmoid(b).
//
// The conv windows are NOT shifted here: every task of the layer reads the old
// windows, so `conv_window_commit` runs in a later phase, after a barrier.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mk/common.cuh"
#include "mk/w4a16_gemv.cuh"

namespace mk {

/// bf16(silu(sum_t win[t][c] * w[c][t] + x[c] * w[c][CONV-1])), fp32 inside.
template <int CONV>
__device__ __forceinline__ float short_conv_channel(const bf16 *x, const bf16 *win, const bf16 *w,
                                                    int C, int c) {
  float acc = 0.f;
#pragma unroll
  for (int t = 0; t < CONV - 1; ++t)
    acc = fmaf(bf2f(__ldcg(win + (size_t)t * C + c)), bf2f(w[(size_t)c * CONV + t]), acc);
  acc = fmaf(bf2f(__ldcg(x + c)), bf2f(w[(size_t)c * CONV + CONV - 1]), acc);
  return round_bf16(silu(acc));
}

/// Shared memory for kda_head_chunk_task, in floats.
template <int THREADS, int DK, int CHUNK>
__host__ __device__ constexpr int kda_smem_floats() { return 3 * DK + CHUNK + 2 * (THREADS / CHUNK) * CHUNK + 32; }

/// Where kda_head_chunk_task leaves its CHUNK outputs bf16(o) as floats in
/// its shared memory, for a fused output projection (below).
template <int DK, int CHUNK> __host__ __device__ constexpr int kda_o_smem_offset() {
  return 3 * DK + CHUNK;
}

/// task in [0, H * DK / CHUNK): head h = task / (DK/CHUNK).
/// conv_w: [3, C, CONV] (0 = q, 1 = k, 2 = v). win_*: the OLD windows
/// [CONV-1, C]. o: bf16 [C]; the task's CHUNK values also stay in smem at
/// kda_o_smem_offset, as floats.
///
/// The released model's form (kda_head_chunk_form): L2 (q and k divided per
/// head by sqrt(sum x^2 + l2_eps) before q's scale; every warp sums the
/// head's squares itself, so no block barrier is added) and LOW_RANK (the
/// decay -exp(a_log[h]) * softplus(g + dt_bias[c]), a_log [H] and dt_bias
/// [C] fp32).
template <int THREADS, int DK, int CHUNK, int CONV, bool L2, bool LOW_RANK>
__device__ __forceinline__ void
kda_head_chunk_with(int task, int C, const bf16 *q_raw, const bf16 *k_raw, const bf16 *v_raw,
                    const bf16 *g_raw, const bf16 *beta_logits, const bf16 *conv_w,
                    const bf16 *win_q, const bf16 *win_k, const bf16 *win_v, const float *S_in,
                    float *S_out, bf16 *o, float l2_eps, const float *a_log,
                    const float *dt_bias, float *smem) {
  static_assert(THREADS % CHUNK == 0, "CHUNK must divide THREADS");
  static_assert(DK % (THREADS / CHUNK) == 0, "DK must split over the thread rows");
  constexpr int TR = THREADS / CHUNK;  // thread rows
  constexpr int RPT = DK / TR;         // state rows per thread
  constexpr int NCH = DK / CHUNK;
  const int h = task / NCH;
  const int j0 = (task % NCH) * CHUNK;
  const int hc = h * DK;

  float *qf = smem, *kf = qf + DK, *eg = kf + DK, *vf = eg + DK;
  float *red = vf + CHUNK; // [TR][CHUNK]
  float *red2 = red + TR * CHUNK;

  const int j = threadIdx.x % CHUNK;
  const int tr = threadIdx.x / CHUNK;
  const int i0 = tr * RPT;
  const float *sin_ = S_in + (size_t)h * DK * DK + j0 + j;
  float *sout = S_out + (size_t)h * DK * DK + j0 + j;

  // The state slice depends on nothing of this step: its HBM round trip is
  // issued first and runs under the short convs' loads of the projections
  // (loaded after them it cost 1 us per step, perf notes #63).
  float s[RPT];
#pragma unroll
  for (int r = 0; r < RPT; ++r)
    s[r] = __ldcg(sin_ + (size_t)(i0 + r) * DK);

  // beta's load too goes out with the short convs' (it is used after them).
  const float beta_logit = bf2f(__ldcg(beta_logits + h));
  const float qscale = 1.f / sqrtf(float(DK));
  float rate = 0.f; // the low-rank decay's exp(a_log[h])
  if constexpr (LOW_RANK)
    rate = expf(__ldg(a_log + h));
  else
    (void)a_log, (void)dt_bias;
  for (int i = threadIdx.x; i < DK; i += THREADS) {
    // With L2 q is scaled after its norm (below).
    qf[i] = short_conv_channel<CONV>(q_raw, win_q, conv_w, C, hc + i) * (L2 ? 1.f : qscale);
    kf[i] = short_conv_channel<CONV>(k_raw, win_k, conv_w + (size_t)C * CONV, C, hc + i);
    if constexpr (LOW_RANK)
      eg[i] = expf(-rate * softplusf_(bf2f(__ldcg(g_raw + hc + i)) + __ldg(dt_bias + hc + i)));
    else
      eg[i] = expf(-softplusf_(bf2f(__ldcg(g_raw + hc + i))));
  }
  for (int j = threadIdx.x; j < CHUNK; j += THREADS)
    vf[j] = short_conv_channel<CONV>(v_raw, win_v, conv_w + (size_t)2 * C * CONV, C, hc + j0 + j);
  __syncthreads();
  // The factors q and k take where they are read: q's scale, and with L2
  // the head's norms.
  float qmul = 1.f, kmul = 1.f;
  if constexpr (L2) {
    float sq = 0.f, sk = 0.f;
    for (int i = threadIdx.x & 31; i < DK; i += 32) {
      sq = fmaf(qf[i], qf[i], sq);
      sk = fmaf(kf[i], kf[i], sk);
    }
    qmul = qscale / sqrtf(warp_sum(sq) + l2_eps);
    kmul = 1.f / sqrtf(warp_sum(sk) + l2_eps);
  } else {
    (void)l2_eps;
  }
  auto kval = [&](int i) { return L2 ? kf[i] * kmul : kf[i]; };
  auto qval = [&](int i) { return L2 ? qf[i] * qmul : qf[i]; };

  float pred = 0.f;
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    s[r] *= eg[i0 + r];
    pred = fmaf(s[r], kval(i0 + r), pred);
  }
  red[tr * CHUNK + j] = pred;
  __syncthreads();
  pred = 0.f;
#pragma unroll 8
  for (int t = 0; t < TR; ++t)
    pred += red[t * CHUNK + j];
  const float delta = sigmoidf_(beta_logit) * (vf[j] - pred);
  float out = 0.f;
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    s[r] = fmaf(kval(i0 + r), delta, s[r]);
    out = fmaf(s[r], qval(i0 + r), out);
    sout[(size_t)(i0 + r) * DK] = s[r];
  }
  red2[tr * CHUNK + j] = out;
  __syncthreads();
  if (tr == 0) {
    float v = 0.f;
#pragma unroll 8
    for (int t = 0; t < TR; ++t)
      v += red2[t * CHUNK + j];
    o[hc + j0 + j] = f2bf(v);
    // `red` is free: every thread read its partial sums before the barrier
    // above.
    red[j] = round_bf16(v);
  }
  __syncthreads();
}

/// The unit's form: q scaled, the decay -softplus(g).
template <int THREADS, int DK, int CHUNK, int CONV>
__device__ void kda_head_chunk_task(int task, int C, const bf16 *q_raw, const bf16 *k_raw,
                                    const bf16 *v_raw, const bf16 *g_raw, const bf16 *beta_logits,
                                    const bf16 *conv_w, const bf16 *win_q, const bf16 *win_k,
                                    const bf16 *win_v, const float *S_in, float *S_out, bf16 *o,
                                    float *smem) {
  kda_head_chunk_with<THREADS, DK, CHUNK, CONV, false, false>(
      task, C, q_raw, k_raw, v_raw, g_raw, beta_logits, conv_w, win_q, win_k, win_v, S_in, S_out,
      o, 0.f, nullptr, nullptr, smem);
}

/// The released model's forms (L2 norms, low-rank decay: see
/// kda_head_chunk_with).
template <int THREADS, int DK, int CHUNK, int CONV, bool L2, bool LOW_RANK>
__device__ void kda_head_chunk_form(int task, int C, const bf16 *q_raw, const bf16 *k_raw,
                                    const bf16 *v_raw, const bf16 *g_raw, const bf16 *beta_logits,
                                    const bf16 *conv_w, const bf16 *win_q, const bf16 *win_k,
                                    const bf16 *win_v, const float *S_in, float *S_out, bf16 *o,
                                    float l2_eps, const float *a_log, const float *dt_bias,
                                    float *smem) {
  kda_head_chunk_with<THREADS, DK, CHUNK, CONV, L2, LOW_RANK>(
      task, C, q_raw, k_raw, v_raw, g_raw, beta_logits, conv_w, win_q, win_k, win_v, S_in, S_out,
      o, l2_eps, a_log, dt_bias, smem);
}

/// The released model's gated output norm of head `h` (one task per head):
/// with x = o[h, :] (bf16, the gated delta rule's output),
/// z[h, i] = bf16(x_i * rsqrt(mean(x^2) + eps) * w[i] * sigmoid(gate[h, i])),
/// fp32 until that one rounding. Every warp sums the head's squares itself
/// (DK / 32 loads per lane): no shared memory, no block barrier.
template <int THREADS, int DK>
__device__ void kda_gated_norm_task(int h, const bf16 *o, const bf16 *gate, const bf16 *w,
                                    float eps, bf16 *z) {
  const bf16 *oh = o + (size_t)h * DK;
  float ss = 0.f;
  for (int i = threadIdx.x & 31; i < DK; i += 32) {
    const float x = bf2f(__ldcg(oh + i));
    ss = fmaf(x, x, ss);
  }
  const float r = 1.f / sqrtf(warp_sum(ss) / float(DK) + eps);
  for (int i = threadIdx.x; i < DK; i += THREADS) {
    const size_t c = (size_t)h * DK + i;
    z[c] = f2bf(bf2f(__ldcg(oh + i)) * r * bf2f(w[i]) * sigmoidf_(bf2f(__ldcg(gate + c))));
  }
}

/// kda_gated_norm_task's values of heads k0 / DK .. k1 / DK - 1 (k0 and k1
/// multiples of DK), as a GEMV stages its input: stage[c - k0] =
/// bf2f(z[c]), the float of the bf16 the norm task would store, so a
/// projection that stages these reads what it would read from the norm's
/// output. Each warp takes whole heads and computes them as the task's
/// warps do (the same lane order of the sums of squares, warp_sum, the one
/// rounding): the same bits, with the head's values, gate and weight
/// loaded at once (one round trip). Caller synchronizes.
template <int THREADS, int DK>
__device__ __forceinline__ void kda_gated_norm_stage(const bf16 *o, const bf16 *gate,
                                                     const bf16 *w, float eps, float *stage,
                                                     int k0, int k1) {
  static_assert(DK % 32 == 0, "a head is whole lane steps");
  constexpr int PER = DK / 32; // values per lane
  const int lane = threadIdx.x & 31;
  for (int h = k0 / DK + (threadIdx.x >> 5); h < k1 / DK; h += THREADS / 32) {
    // One round trip: the head's values, gate and weight at once.
    const size_t c0 = (size_t)h * DK;
    float x[PER], g[PER], wt[PER];
#pragma unroll
    for (int j = 0; j < PER; ++j) {
      x[j] = bf2f(__ldcg(o + c0 + lane + 32 * j));
      g[j] = bf2f(__ldcg(gate + c0 + lane + 32 * j));
      wt[j] = bf2f(w[lane + 32 * j]);
    }
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < PER; ++j)
      ss = fmaf(x[j], x[j], ss);
    const float r = 1.f / sqrtf(warp_sum(ss) / float(DK) + eps);
#pragma unroll
    for (int j = 0; j < PER; ++j)
      stage[c0 + lane + 32 * j - k0] = bf2f(f2bf(x[j] * r * wt[j] * sigmoidf_(g[j])));
  }
}

/// w4a16_gemv_tile_staged_waiting whose input is the released KDA's gated
/// output norm of the gated delta's output `o` (schedule-fuse-kda-gated-norm):
/// after its first weights are asked for and `wait()` returns, the tile
/// stages its k-slice's heads through kda_gated_norm_stage, so the norm
/// needs no task, counter or buffer of its own.
template <int THREADS, int TN, int GROUP, class Epi, bool FP32X, int ORDER, int DK, class Wait>
__device__ void w4a16_gemv_tile_gated_norm_staged_waiting(
    const bf16 *o, const bf16 *gate, const bf16 *w, float eps, float *stage,
    const uint8_t *__restrict__ wq, const bf16 *__restrict__ scales,
    const bf16 *__restrict__ zeros, int N, int n0, int nvalid, int k0, int k1, float *red,
    Epi epi, bool prefetched, Wait wait) {
  auto pro = [&] {
    wait();
    kda_gated_norm_stage<THREADS, DK>(o, gate, w, eps, stage, k0, k1);
    __syncthreads();
  };
  w4a16_gemv_tile_with<THREADS, TN, GROUP, Epi, FP32X, ORDER>(
      stage - k0, wq, scales, zeros, N, n0, nvalid, k0, k1, red, epi, prefetched, pro);
}

/// The same without a wait in the prologue (the task's waits ran before it).
template <int THREADS, int TN, int GROUP, class Epi, bool FP32X, int ORDER, int DK>
__device__ void w4a16_gemv_tile_gated_norm_staged(
    const bf16 *o, const bf16 *gate, const bf16 *w, float eps, float *stage,
    const uint8_t *__restrict__ wq, const bf16 *__restrict__ scales,
    const bf16 *__restrict__ zeros, int N, int n0, int nvalid, int k0, int k1, float *red,
    Epi epi, bool prefetched = false) {
  w4a16_gemv_tile_gated_norm_staged_waiting<THREADS, TN, GROUP, Epi, FP32X, ORDER, DK>(
      o, gate, w, eps, stage, wq, scales, zeros, N, n0, nvalid, k0, k1, red, epi, prefetched,
      [] {});
}

/// Asks L2 for what kda_head_chunk_task `task` reads that does not depend
/// on this step (its state slice, its conv weights and old windows), so
/// that after its counter wait those loads hit L2. A hint: nothing is copied
/// or waited for. Every thread calls it (the state slice's DK rows are one
/// line request per thread); thread 0 asks for the contiguous ranges.
template <int DK, int CHUNK, int CONV>
__device__ void kda_head_chunk_l2_prefetch(int task, int C, const bf16 *conv_w,
                                           const bf16 *win_q, const bf16 *win_k,
                                           const bf16 *win_v, const float *S_in) {
  constexpr int NCH = DK / CHUNK;
  const int h = task / NCH, j0 = (task % NCH) * CHUNK, hc = h * DK;
  for (int r = threadIdx.x; r < DK; r += blockDim.x)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(S_in + (size_t)h * DK * DK + (size_t)r * DK + j0));
  if (threadIdx.x == 0) {
    l2_prefetch_range(conv_w + (size_t)hc * CONV, DK * CONV * 2);
    l2_prefetch_range(conv_w + ((size_t)C + hc) * CONV, DK * CONV * 2);
    l2_prefetch_range(conv_w + ((size_t)2 * C + hc + j0) * CONV, CHUNK * CONV * 2);
#pragma unroll
    for (int t = 0; t < CONV - 1; ++t) {
      l2_prefetch_range(win_q + (size_t)t * C + hc, DK * 2);
      l2_prefetch_range(win_k + (size_t)t * C + hc, DK * 2);
      l2_prefetch_range(win_v + (size_t)t * C + hc + j0, CHUNK * 2);
    }
  }
}

/// Shared memory for kda_head_chunk_o_proj_task, in floats: the KDA task's,
/// then the staged row slice of the output projection.
template <int THREADS, int DK, int CHUNK, int N>
__host__ __device__ constexpr int kda_o_proj_smem_floats() {
  return (kda_smem_floats<THREADS, DK, CHUNK>() + 3) / 4 * 4 + row_slice_smem_bytes<CHUNK, N>() / 4;
}

/// kda_head_chunk_task with the output projection folded in: the task's
/// CHUNK outputs o[h, j0 .. j0 + CHUNK) are rows h*DK + j0 .. of W_o [C, N],
/// so it adds bf16(o) @ W_o[those rows] to the fp32 sums `o_acc` [N] itself
/// (w4a16_row_slice_atomic) instead of a later split-K GEMV phase waiting
/// for every head. The rows of W_o are requested first and land under the
/// state update. ORDER / TILED: W_o's storage (w4a16_row_slice_stage).
template <int THREADS, int DK, int CHUNK, int CONV, int GROUP, int N, int ORDER, bool TILED>
__device__ void kda_head_chunk_o_proj_task(int task, int C, const bf16 *q_raw, const bf16 *k_raw,
                                           const bf16 *v_raw, const bf16 *g_raw,
                                           const bf16 *beta_logits, const bf16 *conv_w,
                                           const bf16 *win_q, const bf16 *win_k,
                                           const bf16 *win_v, const float *S_in, float *S_out,
                                           bf16 *o, const uint8_t *o_wq, const bf16 *o_scales,
                                           const bf16 *o_zeros, float *o_acc, float *smem) {
  constexpr int NCH = DK / CHUNK;
  const int r0 = (task / NCH) * DK + (task % NCH) * CHUNK;
  uint8_t *stage = reinterpret_cast<uint8_t *>(
      smem + (kda_smem_floats<THREADS, DK, CHUNK>() + 3) / 4 * 4);
  w4a16_row_slice_stage<THREADS, CHUNK, GROUP, N, ORDER, TILED>(o_wq, o_scales, o_zeros, C, r0,
                                                               stage);
  kda_head_chunk_task<THREADS, DK, CHUNK, CONV>(task, C, q_raw, k_raw, v_raw, g_raw, beta_logits,
                                                conv_w, win_q, win_k, win_v, S_in, S_out, o,
                                                smem);
  cp_async_wait<0>();
  __syncthreads();
  w4a16_row_slice_atomic<THREADS, CHUNK, N, ORDER>(smem + kda_o_smem_offset<DK, CHUNK>(), stage,
                                                   o_acc, 1.f);
  __syncthreads(); // the stage is free for the block's next task
}

/// Shifts the three conv windows ([prev1, prev2, new], pre-convolution
/// values), channels [c0, c1). In place is safe: one thread owns a channel.
template <int CONV>
__device__ void conv_window_commit(int c0, int c1, int C, const bf16 *const new_rows[3],
                                   const bf16 *const win_in[3], bf16 *const win_out[3]) {
  for (int c = c0 + (int)threadIdx.x; c < c1; c += blockDim.x) {
#pragma unroll
    for (int w = 0; w < 3; ++w) {
      bf16 rows[CONV - 1];
#pragma unroll
      for (int t = 0; t + 1 < CONV - 1; ++t)
        rows[t] = __ldcg(win_in[w] + (size_t)(t + 1) * C + c);
      rows[CONV - 2] = __ldcg(new_rows[w] + c);
#pragma unroll
      for (int t = 0; t < CONV - 1; ++t)
        win_out[w][(size_t)t * C + c] = rows[t];
    }
  }
}

} // namespace mk
