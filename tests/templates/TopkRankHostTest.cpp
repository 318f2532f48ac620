//===- TopkRankHostTest.cpp - The router top-k's rank count on the host ---===//
//
// templates/topk_rank.cuh, the file itself, compiled for the host against
// emulated CUDA threads: one std::thread per thread of the block, a shared
// barrier for __syncthreads and a per-warp exchange for the warp
// intrinsics it uses (__match_any_sync, __shfl_xor_sync). It checks the
// two-level rank count against the one-level count, bit for bit, and both
// against a stable sort, where CI has no GPU; the GPU template tests
// (MoeTopk.*) run the same count inside moe_topk and moe_topk_sigmoid.
//
//===----------------------------------------------------------------------===//

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

namespace {

/// A reusable barrier of `n` threads (a generation count).
class Barrier {
public:
  explicit Barrier(int n) : n(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mu);
    const uint64_t gen = generation;
    if (++arrived == n) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    cv.wait(lock, [&] { return generation != gen; });
  }

private:
  std::mutex mu;
  std::condition_variable cv;
  const int n;
  int arrived = 0;
  uint64_t generation = 0;
};

struct Dim3 {
  int x = 0;
};
thread_local Dim3 threadIdx;
Dim3 blockDim;
std::unique_ptr<Barrier> blockBarrier;
std::vector<std::unique_ptr<Barrier>> warpBarriers;
uint64_t warpExchange[1024];

void __syncthreads() { blockBarrier->wait(); }
unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
int __popc(unsigned x) { return __builtin_popcount(x); }
/// Every lane of the calling warp publishes `v`; `read` sees all 32.
template <class Read> auto exchange(uint64_t v, Read read) {
  const int warp = threadIdx.x / 32;
  warpExchange[threadIdx.x] = v;
  warpBarriers[warp]->wait();
  auto r = read(&warpExchange[warp * 32]);
  warpBarriers[warp]->wait();
  return r;
}
int __shfl_xor_sync(unsigned, int v, int laneMask) {
  return exchange(uint32_t(v), [&](const uint64_t *lanes) {
    return int(uint32_t(lanes[(threadIdx.x & 31) ^ laneMask]));
  });
}
unsigned __match_any_sync(unsigned, unsigned v) {
  return exchange(v, [&](const uint64_t *lanes) {
    unsigned same = 0;
    for (int l = 0; l < 32; ++l)
      same |= (lanes[l] == v ? 1u : 0u) << l;
    return same;
  });
}

} // namespace

#define __shared__ static
#define __device__
#define __host__
#define __forceinline__
// (Its `#pragma unroll` is nvcc's: CMakeLists.txt builds this file with
// -Wno-unknown-pragmas.)
#include "topk_rank.cuh"
#undef __shared__
#undef __device__
#undef __host__
#undef __forceinline__

namespace {

struct TopK {
  std::vector<float> w;
  std::vector<int> idx;
};

/// topk_by_rank<E, K, TWO_LEVEL> by `threads` emulated threads.
template <int E, int K, bool TWO_LEVEL>
TopK runBlock(int threads, const std::vector<float> &sel, const std::vector<float> &score) {
  blockDim.x = threads;
  blockBarrier = std::make_unique<Barrier>(threads);
  warpBarriers.clear();
  for (int w = 0; w < threads / 32; ++w)
    warpBarriers.push_back(std::make_unique<Barrier>(32));
  std::vector<float> w(K, -1.f);
  std::vector<int> idx(K, -1);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      threadIdx.x = t;
      mk::detail::topk_by_rank<E, K, TWO_LEVEL>(sel.data(), score.data(), 1e-20f, 2.446f,
                                                 w.data(), idx.data());
    });
  for (std::thread &t : pool)
    t.join();
  return {w, idx};
}

/// Values with ties of several kinds: distinct (mode 0), a few levels (1:
/// ties across the warps' runs and at the K-th place), +0 against -0 (2),
/// negative levels (3), and levels with NaNs and infinities among them (4).
std::vector<float> values(std::mt19937 &rng, int n, int mode) {
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::uniform_int_distribution<int> level(0, 7);
  std::vector<float> v(n);
  for (float &x : v) {
    switch (mode) {
    case 0:
      x = u(rng);
      break;
    case 1:
      x = level(rng) * 0.125f;
      break;
    case 2:
      x = level(rng) == 0 ? 1.f : (level(rng) < 4 ? 0.f : -0.f);
      break;
    case 3:
      x = -float(level(rng));
      break;
    default: {
      const int l = level(rng);
      x = l == 0 ? std::numeric_limits<float>::quiet_NaN()
                 : l == 1 ? -std::numeric_limits<float>::infinity()
                          : l == 2 ? std::numeric_limits<float>::infinity() : float(l);
    }
    }
  }
  return v;
}

template <int E, int K> void checkBothCounts(std::mt19937 &rng) {
  SCOPED_TRACE(testing::Message() << "E " << E << ", K " << K);
  for (int mode = 0; mode < 5; ++mode)
    for (int threads : {128, 256}) {
      SCOPED_TRACE(testing::Message() << "mode " << mode << ", " << threads << " threads");
      const std::vector<float> sel = values(rng, E, mode), score = values(rng, E, 0);
      const bool nans = mode == 4;
      const TopK two = runBlock<E, K, true>(threads, sel, score);
      // The choice: a stable sort by value, the lower index first on ties;
      // a NaN as -inf (the two-level count's rule; the one-level count
      // leaves a NaN's rank undefined, so it is checked without them).
      auto key = [](float v) { return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v; };
      std::vector<int> order(E);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return key(sel[a]) > key(sel[b]); });
      float wsum = 0.f;
      for (int k = 0; k < K; ++k)
        wsum += score[order[k]];
      const TopK one = nans ? TopK{} : runBlock<E, K, false>(threads, sel, score);
      for (int k = 0; k < K; ++k) {
        EXPECT_EQ(two.idx[k], order[k]) << "two levels, slot " << k;
        // The same float operations in the same order: equal bits.
        const float w = score[order[k]] / (wsum + 1e-20f) * 2.446f;
        EXPECT_EQ(__float_as_uint(two.w[k]), __float_as_uint(w)) << "two levels, slot " << k;
        if (nans)
          continue;
        EXPECT_EQ(one.idx[k], order[k]) << "one level, slot " << k;
        EXPECT_EQ(__float_as_uint(one.w[k]), __float_as_uint(w)) << "one level, slot " << k;
      }
    }
}

TEST(TopkRank, TwoLevelCountChoosesAsTheOneLevelCount) {
  std::mt19937 rng(38);
  checkBothCounts<256, 8>(rng); // the released model's router
  checkBothCounts<64, 8>(rng);  // the unit's, under -DMK_TOPK_TWO_LEVEL_ALL
  checkBothCounts<160, 6>(rng);
  checkBothCounts<200, 31>(rng); // a last run of 8 values, fewer than K
  checkBothCounts<384, 16>(rng); // more runs than warps
  checkBothCounts<129, 1>(rng);
  checkBothCounts<8, 2>(rng); // one short run
}

TEST(TopkRank, DefaultFormAndSharedBytes) {
  // The two-level count from 128 experts (K < 32), one level below; its
  // candidates' shared bytes, which the emitter's static bound counts.
  static_assert(mk::detail::topk_two_level<256, 8>());
  static_assert(!mk::detail::topk_two_level<256, 32>());
  static_assert(mk::topk_rank_shared_bytes<256, 8>() == 8 * 64);
  static_assert(mk::topk_rank_shared_bytes<200, 31>() == 8 * (31 * 6 + 8));
#ifndef MK_TOPK_TWO_LEVEL_ALL
  static_assert(!mk::detail::topk_two_level<64, 8>());
  static_assert(mk::topk_rank_shared_bytes<64, 8>() == 0);
#endif
  // The default's choice on the released model's width, with a tie at the
  // K-th place that straddles two runs.
  std::vector<float> sel(256), score(256, 1.f);
  for (int e = 0; e < 256; ++e)
    sel[e] = float(e % 37) / 37.f;
  sel[40] = sel[200] = 2.f;
  sel[3] = sel[100] = sel[250] = 1.5f;
  sel[31] = sel[32] = sel[33] = 1.25f; // places 6-8 of the top 8: 31, 32, 33
  const TopK got = runBlock<256, 8, mk::detail::topk_two_level<256, 8>()>(256, sel, score);
  EXPECT_EQ(got.idx, (std::vector<int>{40, 200, 3, 100, 250, 31, 32, 33}));
}

} // namespace
