//===- TemplateBench.cu - Bandwidth of the W4A16 GEMV tile ----------------===//
//
// How fast w4a16_gemv_tile streams weights inside a megakernel: `reps`
// GEMV phases of one cooperative launch separated by grid barriers, each on
// the next of several weight copies (more than L2 holds), for the unit's
// shapes, and per configuration:
//   - block shape: 256 threads x 2 blocks per SM (the emitted kernel) or
//     512 x 1;
//   - tile width TN (64, 128) and split-K;
//   - weight layout: the spec's row-major w_q [K/2, N] (a tile reads TN
//     bytes of each row) or tile-contiguous (each tile's [K/2, TN] bytes and
//     [K/G, TN] scales and zeros stored together, which a runtime could
//     repack to at bind time): tells whether the phases are bound by the
//     access pattern or by each block's stream;
//   - and the same bytes streamed with no math ("stream only": 16-byte
//     cp.async per thread as the tile does; "bulk copies": one thread moving
//     each tile-contiguous range with cp.async.bulk + an mbarrier): the
//     memory system's ceiling per access pattern and load mechanism.
// Prints us per phase and GB/s next to the copy bandwidth of the same run.
// The default build uses the tensor-core tile; -DMK_GEMV_SIMT the SIMT one.
//
//===----------------------------------------------------------------------===//

#include "mk/megakernel.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));      \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

constexpr int kGroup = 128;

struct Shape {
  const char *name;
  int K, N, ksplit;
};

/// Weight copies, each big enough for the largest shape.
struct Weights {
  std::vector<uint8_t *> wq;
  std::vector<mk::bf16 *> s, z;
};

/// `reps` phases; phase r streams copy r % copies. TILED: tile t's weights
/// start at wq + t * (K/2) * TN with row stride TN (scales likewise);
/// ORDER (mk::WeightOrder): the same tiles in a packed order (the exact
/// tile's lane order, streamed with per-lane cp.async, as the grouped tile
/// of the default `folded` arithmetic streams it too, or the integer
/// tile's, with bulk copies; the bytes' order does not matter to the time).
template <int THREADS, int BPS, int TN, bool TILED, int ORDER = mk::kOrderRowMajor>
__global__ void __launch_bounds__(THREADS, BPS)
    gemvPhases(const mk::bf16 *x, int K, uint8_t *const *wq, mk::bf16 *const *s,
               mk::bf16 *const *z, int copies, int N, int ksplit, float *y, unsigned *sync,
               int reps) {
  extern __shared__ float smem[];
  float *xs = smem, *red = smem + K;
  for (int i = threadIdx.x; i < K; i += THREADS)
    xs[i] = mk::bf2f(x[i]);
  __syncthreads();
  const int tiles = (N + TN - 1) / TN;
  for (int rep = 0; rep < reps; ++rep) {
    const int c = rep % copies;
    for (int t = blockIdx.x; t < tiles * ksplit; t += gridDim.x) {
      const int tile = t % tiles, ks = t / tiles;
      const int k0 = (K / 2) * ks / ksplit * 2, k1 = (K / 2) * (ks + 1) / ksplit * 2;
      const int n0 = tile * TN, nv = min(TN, N - n0);
      if (TILED) {
        const size_t wOff = (size_t)tile * (K / 2) * TN, sOff = (size_t)tile * (K / kGroup) * TN;
        mk::w4a16_gemv_tile<THREADS, TN, kGroup, mk::EpiAtomicAddF32, false, ORDER>(
            xs, wq[c] + wOff, s[c] + sOff, z[c] + sOff, TN, 0, nv, k0, k1, red,
            mk::EpiAtomicAddF32{y, 1.f, n0});
      } else {
        mk::w4a16_gemv_tile<THREADS, TN, kGroup>(xs, wq[c], s[c], z[c], N, n0, nv, k0, k1, red,
                                                 mk::EpiAtomicAddF32{y, 1.f, 0});
      }
    }
    mk::grid_barrier(sync);
  }
}

/// The same weight bytes as gemvPhases<...> with no math: each block copies
/// its tasks' rows (TN bytes of each of K/2 rows, or the tile's contiguous
/// block) into shared memory with 16-byte cp.async, all in flight, and
/// waits. The memory system's ceiling for the access pattern.
template <int THREADS, int BPS, int TN, bool TILED>
__global__ void __launch_bounds__(THREADS, BPS)
    streamPhases(int K, uint8_t *const *wq, int copies, int N, int ksplit, unsigned *sync,
                 int reps, float *sink) {
  extern __shared__ float smem[];
  uint4 *ring = reinterpret_cast<uint4 *>(smem);
  constexpr int RING = mk::kW4A16Stages * mk::kW4A16StageRows * THREADS; // 16-byte slots
  const int tiles = (N + TN - 1) / TN;
  constexpr int PER_ROW = TN / 16; // 16-byte pieces per row of a tile
  for (int rep = 0; rep < reps; ++rep) {
    const uint8_t *w = wq[rep % copies];
    for (int t = blockIdx.x; t < tiles * ksplit; t += gridDim.x) {
      const int tile = t % tiles, ks = t / tiles;
      const int p0 = (K / 2) * ks / ksplit, p1 = (K / 2) * (ks + 1) / ksplit;
      const int pieces = (p1 - p0) * PER_ROW;
      for (int i = threadIdx.x; i < pieces; i += THREADS) {
        const int r = p0 + i / PER_ROW, c = (i % PER_ROW) * 16;
        const uint8_t *src = TILED ? w + (size_t)tile * (K / 2) * TN + (size_t)r * TN + c
                                   : w + (size_t)r * N + (size_t)tile * TN + c;
        mk::cp_async16(ring + (i % RING), src);
      }
      mk::cp_async_commit();
      mk::cp_async_wait<0>();
      __syncthreads();
    }
    mk::grid_barrier(sync);
  }
  if (threadIdx.x == 0 && blockIdx.x == 0)
    sink[0] = smem[0]; // keep the copies
}

/// Tile-contiguous weights streamed with bulk copies: per task its
/// (p1 - p0) * TN contiguous bytes, in rounds of at most the ring's size,
/// issued by thread 0 in pieces of kBulkPiece bytes. No math.
constexpr unsigned kBulkPiece = 8192;
template <int THREADS, int BPS, int TN>
__global__ void __launch_bounds__(THREADS, BPS)
    bulkStreamPhases(int K, uint8_t *const *wq, int copies, int N, int ksplit, unsigned *sync,
                     int reps, float *sink) {
  extern __shared__ __align__(128) float smem[];
  __shared__ __align__(8) unsigned long long bar;
  uint8_t *ring = reinterpret_cast<uint8_t *>(smem);
  constexpr unsigned RING = mk::kW4A16Stages * mk::kW4A16StageRows * THREADS * 16;
  if (threadIdx.x == 0) {
    mk::detail::mbar_init(&bar, 1);
    mk::detail::mbar_init_fence();
  }
  __syncthreads();
  unsigned phase = 0;
  const int tiles = (N + TN - 1) / TN;
  for (int rep = 0; rep < reps; ++rep) {
    const uint8_t *w = wq[rep % copies];
    for (int t = blockIdx.x; t < tiles * ksplit; t += gridDim.x) {
      const int tile = t % tiles, ks = t / tiles;
      const int p0 = (K / 2) * ks / ksplit, p1 = (K / 2) * (ks + 1) / ksplit;
      const uint8_t *src = w + (size_t)tile * (K / 2) * TN + (size_t)p0 * TN;
      const unsigned total = unsigned(p1 - p0) * TN;
      for (unsigned done = 0; done < total; done += RING) {
        const unsigned round = min(RING, total - done);
        if (threadIdx.x == 0) {
          mk::detail::mbar_expect_tx(&bar, round);
          for (unsigned off = 0; off < round; off += kBulkPiece)
            mk::detail::bulk_copy(ring + off, src + done + off, min(kBulkPiece, round - off), &bar);
        }
        mk::detail::mbar_wait(&bar, phase);
        phase ^= 1u;
        __syncthreads(); // the ring is read (here: not at all) before it is refilled
      }
    }
    mk::grid_barrier(sync);
  }
  if (threadIdx.x == 0 && blockIdx.x == 0)
    sink[0] = smem[0];
}

__global__ void barriersOnly(unsigned *sync, int reps) {
  for (int rep = 0; rep < reps; ++rep)
    mk::grid_barrier(sync);
}

float medianOf(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Median time of one phase of `kernel` (a cooperative launch of `reps`
/// phases, `args` its arguments), or -1 if BPS blocks do not fit an SM.
template <class Kernel>
double phaseMs(Kernel kernel, int sms, int threads, int bps, size_t smem, void **args,
               int reps, int launches = 10) {
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  int fit = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, kernel, threads, smem));
  if (fit < bps)
    return -1.0;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> per;
  for (int it = 0; it < launches + 2; ++it) {
    CK(cudaEventRecord(a));
    CK(cudaLaunchCooperativeKernel((void *)kernel, sms * bps, threads, args, smem, 0));
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    CK(cudaGetLastError());
    float t;
    CK(cudaEventElapsedTime(&t, a, b));
    if (it >= 2)
      per.push_back(t / reps);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return medianOf(per);
}

/// A device copy of the host array of `copies` pointers.
template <class P>
P *devicePointers(const std::vector<P> &host) {
  P *d;
  CK(cudaMalloc(&d, host.size() * sizeof(P)));
  CK(cudaMemcpy(d, host.data(), host.size() * sizeof(P), cudaMemcpyHostToDevice));
  return d;
}

void report(const Shape &sh, int threads, int bps, int tn, const char *how, double ms,
            double bytes) {
  if (ms < 0) {
    std::printf("%-26s %3dx%d TN=%3d %-22s does not fit\n", sh.name, threads, bps, tn, how);
    return;
  }
  std::printf("%-26s %3dx%d TN=%3d %-22s %7.2f us  %7.1f GB/s\n", sh.name, threads, bps, tn, how,
              ms * 1e3, bytes / (ms * 1e-3) / 1e9);
}

constexpr int kReps = 48;

/// The GEMV tile as phases (weights, scales and zeros counted).
template <int THREADS, int BPS, int TN, bool TILED, int ORDER = mk::kOrderRowMajor>
void bench(const Shape &sh, int sms, const Weights &w, const mk::bf16 *x, float *y,
           unsigned *sync, int launches = 10) {
  uint8_t **dw = devicePointers(w.wq);
  mk::bf16 **ds = devicePointers(w.s), **dz = devicePointers(w.z);
  int K = sh.K, N = sh.N, ks = sh.ksplit, reps = kReps, copies = (int)w.wq.size();
  void *args[] = {(void *)&x, &K, &dw, &ds, &dz, &copies, &N, &ks, &y, &sync, &reps};
  const size_t smem = (sh.K + mk::w4a16_red_floats<THREADS, TN>()) * 4;
  const double ms =
      phaseMs(gemvPhases<THREADS, BPS, TN, TILED, ORDER>, sms, THREADS, BPS, smem, args, reps,
              launches);
  report(sh, THREADS, BPS, TN,
         ORDER == mk::kOrderInt8          ? "int8, bulk copies"
         : ORDER == mk::kOrderMma         ? "packed"
         : ORDER == mk::kOrderMmaFolded   ? "packed, folded"
         : TILED                          ? "tiled"
                                          : "row-major",
         ms,
         (double)sh.K / 2 * sh.N + 2.0 * 2 * sh.K / kGroup * sh.N);
  CK(cudaFree(dw));
  CK(cudaFree(ds));
  CK(cudaFree(dz));
}

/// The same weight bytes with no math: 16-byte cp.async, or (BULK) bulk
/// copies of tile-contiguous ranges.
template <int THREADS, int BPS, int TN, bool TILED, bool BULK>
void benchStream(const Shape &sh, int sms, const Weights &w, float *y, unsigned *sync) {
  uint8_t **dw = devicePointers(w.wq);
  int K = sh.K, N = sh.N, ks = sh.ksplit, reps = kReps, copies = (int)w.wq.size();
  void *args[] = {&K, &dw, &copies, &N, &ks, &sync, &reps, &y};
  const size_t smem = (size_t)mk::kW4A16Stages * mk::kW4A16StageRows * THREADS * 16;
  double ms;
  if constexpr (BULK)
    ms = phaseMs(bulkStreamPhases<THREADS, BPS, TN>, sms, THREADS, BPS, smem, args, reps);
  else
    ms = phaseMs(streamPhases<THREADS, BPS, TN, TILED>, sms, THREADS, BPS, smem, args, reps);
  report(sh, THREADS, BPS, TN,
         BULK ? "tiled, bulk copies" : TILED ? "tiled, stream only" : "row-major, stream only", ms,
         (double)sh.K / 2 * sh.N);
  CK(cudaFree(dw));
}

template <int THREADS, int BPS>
void benchAll(const Shape &sh, int sms, const Weights &w, const mk::bf16 *x, float *y,
              unsigned *sync) {
  bench<THREADS, BPS, 128, false>(sh, sms, w, x, y, sync);
  bench<THREADS, BPS, 128, true>(sh, sms, w, x, y, sync);
  bench<THREADS, BPS, 128, true, mk::kOrderMma>(sh, sms, w, x, y, sync);
  bench<THREADS, BPS, 128, true, mk::kOrderMmaFolded>(sh, sms, w, x, y, sync);
  bench<THREADS, BPS, 128, true, mk::kOrderInt8>(sh, sms, w, x, y, sync);
  bench<THREADS, BPS, 64, false>(sh, sms, w, x, y, sync);
  bench<THREADS, BPS, 64, true>(sh, sms, w, x, y, sync);
  bench<THREADS, BPS, 64, true, mk::kOrderMma>(sh, sms, w, x, y, sync);
  bench<THREADS, BPS, 64, true, mk::kOrderMmaFolded>(sh, sms, w, x, y, sync);
  bench<THREADS, BPS, 64, true, mk::kOrderInt8>(sh, sms, w, x, y, sync);
  benchStream<THREADS, BPS, 128, false, false>(sh, sms, w, y, sync);
  benchStream<THREADS, BPS, 128, true, false>(sh, sms, w, y, sync);
  benchStream<THREADS, BPS, 64, false, false>(sh, sms, w, y, sync);
  benchStream<THREADS, BPS, 128, true, true>(sh, sms, w, y, sync);
}

#ifdef MK_TILE_TRACE
/// One launch of `reps` phases of the packed exact tile; prints, over the
/// warps of the last phase, percentiles of each stage stamp (us from the
/// phase's first tile entry) and of the durations between stages.
template <int TN>
void traceTile(const Shape &sh, int sms, const Weights &w, const mk::bf16 *x, float *y,
               unsigned *sync) {
  using Trace = unsigned long long[mk::kTileTraceWarps][mk::kTileTraceStages];
  const size_t bytes = sizeof(Trace) * mk::kTileTraceBlocks;
  void *dtrace = nullptr;
  CK(cudaGetSymbolAddress(&dtrace, mk::mk_tile_trace));
  for (int pass = 0; pass < 2; ++pass) { // the first pass warms the clocks
    CK(cudaMemset(dtrace, 0, bytes));
    bench<256, 2, TN, true, mk::kOrderMma>(sh, sms, w, x, y, sync, 1);
  }
  std::vector<unsigned long long> h(bytes / 8);
  CK(cudaMemcpy(h.data(), dtrace, bytes, cudaMemcpyDeviceToHost));
  const int W = 256 / 32, S = mk::kTileTraceStages;
  unsigned long long t0 = ~0ull;
  std::vector<const unsigned long long *> warps;
  for (int b = 0; b < 2 * sms; ++b)
    for (int wi = 0; wi < W; ++wi) {
      const unsigned long long *st = &h[((size_t)b * mk::kTileTraceWarps + wi) * S];
      if (st[0] == 0 || st[S - 1] == 0)
        continue;
      warps.push_back(st);
      t0 = std::min(t0, st[0]);
    }
  std::printf("trace %s TN=%d: %zu warps (p10 / p50 / p90 / max, us)\n", sh.name, TN,
              warps.size());
  auto pct = [](std::vector<float> v) {
    std::sort(v.begin(), v.end());
    char buf[96];
    std::snprintf(buf, sizeof buf, "%6.2f %6.2f %6.2f %6.2f", v[v.size() / 10], v[v.size() / 2],
                  v[v.size() * 9 / 10], v.back());
    return std::string(buf);
  };
  // Stages in time order (stage 8, the stream start's barrier, lies between
  // 1 and 2); stages 1, 8 and 2 only in a -DMK_PACKED_BULK build.
#ifdef MK_PACKED_BULK
  const std::vector<int> order = {0, 1, 8, 2, 3, 4, 5, 6, 7, 9};
#else
  const std::vector<int> order = {0, 3, 4, 5, 6, 7, 9};
#endif
  const char *names[] = {"entry", "scales issued", "stream started", "prologue done",
                         "first chunk", "last step", "all warps done", "sums in smem",
                         "start barrier", "exit"};
  for (int i : order) {
    std::vector<float> v;
    for (auto *st : warps)
      v.push_back((st[i] - t0) * 1e-3f);
    std::printf("  at %-16s %s\n", names[i], pct(v).c_str());
  }
  for (size_t k = 1; k < order.size(); ++k) {
    const int a = order[k - 1], b = order[k];
    std::vector<float> v;
    for (auto *st : warps)
      v.push_back((st[b] - st[a]) * 1e-3f);
    std::printf("  %-16s -> %-16s %s\n", names[a], names[b], pct(v).c_str());
  }
}
#endif

/// mk_template_bench [SHAPE]: every shape, or only those whose name
/// contains SHAPE (then without the warm-up launches, so that a profiler's
/// first gemvPhases launch is the first configuration of that shape).
int main(int argc, char **argv) {
  const char *only = argc > 1 ? argv[1] : nullptr;
  int dev = 0, sms = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  // The unit's GEMV phases: KDA q/k/v/g (fused, 4 x 4096 columns), routed
  // experts' gate or up (8 experts side by side), o_proj, one expert's down.
  const Shape shapes[] = {{"kda qkvg 2304x16384", 2304, 16384, 1},
                          {"kda qkvg 2304x16384 sk2", 2304, 16384, 2},
                          {"8 experts 2304x8192 sk2", 2304, 8192, 2},
                          {"o_proj 4096x2304 sk8", 4096, 2304, 8},
                          {"down 1024x18432", 1024, 18432, 1}};
  const int copies = 6;
  const size_t maxW = 4096 / 2 * 18432, maxS = 4096 / kGroup * 18432;
  Weights w;
  for (int c = 0; c < copies; ++c) {
    uint8_t *q;
    mk::bf16 *s, *z;
    CK(cudaMalloc(&q, maxW));
    CK(cudaMalloc(&s, maxS * 2));
    CK(cudaMalloc(&z, maxS * 2));
    CK(cudaMemset(q, 0x5a + c, maxW));
    CK(cudaMemset(s, 0x3b, maxS * 2)); // bf16 ~0.0029
    CK(cudaMemset(z, 0x40, maxS * 2)); // bf16 3.0
    w.wq.push_back(q);
    w.s.push_back(s);
    w.z.push_back(z);
  }
  mk::bf16 *x;
  float *y;
  unsigned *sync;
  CK(cudaMalloc(&x, 4096 * 2));
  CK(cudaMemset(x, 0x3c, 4096 * 2));
  CK(cudaMalloc(&y, 18432 * 4));
  CK(cudaMalloc(&sync, 1 << 16));
  CK(cudaMemset(sync, 0, 1 << 16));
  // Copy bandwidth in the same run (bytes read + written).
  {
    const size_t n = 1ull << 30;
    void *a, *b;
    CK(cudaMalloc(&a, n));
    CK(cudaMalloc(&b, n));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ms;
    for (int i = 0; i < 12; ++i) {
      CK(cudaEventRecord(e0));
      CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice));
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float t;
      CK(cudaEventElapsedTime(&t, e0, e1));
      if (i >= 2)
        ms.push_back(t);
    }
    std::printf("device copy: %.1f GB/s (read+write)\n", 2.0 * n / (medianOf(ms) * 1e-3) / 1e9);
    CK(cudaFree(a));
    CK(cudaFree(b));
  }
  {
    int reps = 1000;
    void *args[] = {&sync, &reps};
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ms;
    for (int i = 0; i < 7; ++i) {
      CK(cudaEventRecord(e0));
      CK(cudaLaunchCooperativeKernel((void *)barriersOnly, 2 * sms, 256, args, 0, 0));
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float t;
      CK(cudaEventElapsedTime(&t, e0, e1));
      ms.push_back(t);
    }
    std::printf("grid barrier (%d blocks x 256 threads): %.2f us each\n", 2 * sms,
                medianOf(ms) * 1e3 / reps);
  }
#ifdef MK_TILE_TRACE
  if (only && std::strcmp(only, "trace") == 0) {
    for (int i = 0; i < 3; ++i)
      bench<256, 2, 128, false>(shapes[0], sms, w, x, y, sync, 40);
    traceTile<64>(shapes[0], sms, w, x, y, sync);   // the unit's q/k/v/g tiles
    traceTile<128>(shapes[4], sms, w, x, y, sync);  // an expert's down
    traceTile<128>(shapes[3], sms, w, x, y, sync);  // o_proj split-K 8
    return 0;
  }
#endif
  // Let the clocks ramp up (an idle H200 sits at a few hundred MHz).
  for (int i = 0; i < 3 && !only; ++i)
    bench<256, 2, 128, false>(shapes[0], sms, w, x, y, sync, 40);
  std::printf("---- after warm-up\n");
  for (const Shape &sh : shapes) {
    if (only && !std::strstr(sh.name, only))
      continue;
    benchAll<256, 2>(sh, sms, w, x, y, sync);
    benchAll<512, 1>(sh, sms, w, x, y, sync);
  }
  return 0;
}
