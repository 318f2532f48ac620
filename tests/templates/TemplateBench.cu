//===- TemplateBench.cu - Bandwidth of the W4A16 GEMV tile ----------------===//
//
// Streams the unit's GEMV shapes through w4a16_gemv_tile on a persistent grid
// (one block per SM, like the megakernel), rotating among weight copies so
// that L2 (60 MB on H200) cannot serve them, and prints achieved GB/s next to
// the copy bandwidth measured in the same run.
//
//===----------------------------------------------------------------------===//

#include "mk/megakernel.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));      \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

constexpr int T = 512;

template <int TN>
__global__ void __launch_bounds__(T, 1)
    gemv(const mk::bf16 *x, int K, const uint8_t *wq, const mk::bf16 *s, const mk::bf16 *z, int N,
         int ksplit, float *y) {
  extern __shared__ float smem[];
  float *xs = smem, *red = smem + K;
  for (int i = threadIdx.x; i < K; i += T)
    xs[i] = mk::bf2f(x[i]);
  __syncthreads();
  const int tiles = (N + TN - 1) / TN;
  for (int t = blockIdx.x; t < tiles * ksplit; t += gridDim.x) {
    const int tile = t % tiles, ks = t / tiles;
    const int k0 = (K / 2) * ks / ksplit * 2, k1 = (K / 2) * (ks + 1) / ksplit * 2;
    mk::w4a16_gemv_tile<T, TN, 128>(xs, wq, s, z, N, tile * TN, min(TN, N - tile * TN), k0,
                                            k1, red, mk::EpiAtomicAddF32{y, 1.f, 0});
  }
}

/// `reps` back-to-back GEMV phases separated by grid barriers, each on the
/// next weight copy: the per-phase cost inside a megakernel.
template <int TN>
__global__ void __launch_bounds__(T, 1)
    gemvPhases(const mk::bf16 *x, int K, uint8_t *const *wq, mk::bf16 *const *s,
               mk::bf16 *const *z, int copies, int N, int ksplit, float *y, unsigned *sync, int reps, bool prefetch) {
  extern __shared__ float smem[];
  float *xs = smem, *red = smem + K;
  for (int i = threadIdx.x; i < K; i += T)
    xs[i] = mk::bf2f(x[i]);
  __syncthreads();
  const int tiles = (N + TN - 1) / TN;
  auto geom = [&](int t, int &n0, int &nv, int &k0, int &k1) {
    const int tile = t % tiles, ks = t / tiles;
    k0 = (K / 2) * ks / ksplit * 2;
    k1 = (K / 2) * (ks + 1) / ksplit * 2;
    n0 = tile * TN;
    nv = min(TN, N - n0);
  };
  bool pre = false;
  for (int rep = 0; rep < reps; ++rep) {
    const int c = rep % copies;
    for (int t = blockIdx.x; t < tiles * ksplit; t += gridDim.x) {
      int n0, nv, k0, k1;
      geom(t, n0, nv, k0, k1);
      mk::w4a16_gemv_tile<T, TN, 128>(xs, wq[c], s[c], z[c], N, n0, nv, k0, k1, red,
                                      mk::EpiAtomicAddF32{y, 1.f, 0}, pre && t == (int)blockIdx.x);
    }
    pre = prefetch && blockIdx.x < tiles * ksplit;
    if (pre) { // start the next phase's weights before waiting
      int n0, nv, k0, k1;
      geom(blockIdx.x, n0, nv, k0, k1);
      mk::w4a16_prefetch<T, TN>(wq[(rep + 1) % copies], N, n0, nv, k0, k1, red);
    }
    mk::grid_barrier(sync);
  }
}

__global__ void barriersOnly(unsigned *sync, int reps) {
  for (int rep = 0; rep < reps; ++rep)
    mk::grid_barrier(sync);
}

struct Shape {
  const char *name;
  int K, N, ksplit;
};

template <int TN>
void bench(const Shape &sh, int grid, const std::vector<uint8_t *> &w, const std::vector<mk::bf16 *> &s,
           const std::vector<mk::bf16 *> &z, const mk::bf16 *x, float *y, int iters = 100) {
  const size_t smem = (sh.K + mk::w4a16_red_floats<T, TN>()) * 4;
  CK(cudaFuncSetAttribute(gemv<TN>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> ms;
  const int copies = (int)w.size();
  for (int it = 0; it < iters; ++it) {
    const int c = it % copies;
    CK(cudaEventRecord(a));
    gemv<TN><<<grid, T, smem>>>(x, sh.K, w[c], s[c], z[c], sh.N, sh.ksplit, y);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    CK(cudaGetLastError());
    float t;
    CK(cudaEventElapsedTime(&t, a, b));
    if (it >= 10)
      ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2];
  const double bytes = (double)sh.K / 2 * sh.N + 2.0 * 2 * sh.K / 128 * sh.N;
  std::printf("%-22s TN=%3d tasks=%4d  %8.2f us  %7.1f GB/s\n", sh.name, TN,
              ((sh.N + TN - 1) / TN) * sh.ksplit, med * 1e3, bytes / (med * 1e-3) / 1e9);
  // The same shape as barrier-separated phases of one cooperative launch.
  CK(cudaFuncSetAttribute(gemvPhases<TN>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  uint8_t **dw;
  mk::bf16 **ds, **dz;
  unsigned *sync;
  CK(cudaMalloc(&dw, copies * sizeof(void *)));
  CK(cudaMalloc(&ds, copies * sizeof(void *)));
  CK(cudaMalloc(&dz, copies * sizeof(void *)));
  CK(cudaMalloc(&sync, 4096));
  CK(cudaMemset(sync, 0, 4096));
  CK(cudaMemcpy(dw, w.data(), copies * sizeof(void *), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(ds, s.data(), copies * sizeof(void *), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dz, z.data(), copies * sizeof(void *), cudaMemcpyHostToDevice));
  int K = sh.K, N = sh.N, ks = sh.ksplit, reps = 48;
  for (bool prefetch : {false, true}) {
  void *args[] = {(void *)&x, &K, &dw, &ds, &dz, (void *)&copies, &N, &ks, &y, &sync, &reps, &prefetch};
  std::vector<float> pm;
  for (int it = 0; it < 12; ++it) {
    CK(cudaEventRecord(a));
    CK(cudaLaunchCooperativeKernel((void *)gemvPhases<TN>, grid, T, args, smem, 0));
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float t;
    CK(cudaEventElapsedTime(&t, a, b));
    if (it >= 2)
      pm.push_back(t / reps);
  }
  std::sort(pm.begin(), pm.end());
  const double pmed = pm[pm.size() / 2];
  std::printf("%-22s TN=%3d   as phases%s %8.2f us  %7.1f GB/s\n", sh.name, TN,
              prefetch ? "+pref" : "     ", pmed * 1e3, bytes / (pmed * 1e-3) / 1e9);
  }
  CK(cudaFree(dw));
  CK(cudaFree(ds));
  CK(cudaFree(dz));
  CK(cudaFree(sync));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
}

int main() {
  int dev = 0, sms = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const Shape shapes[] = {{"kda qkvg 2304x16384", 2304, 16384, 1},
                          {"kda qkvg 2304x16384 sk4", 2304, 16384, 4},
                          {"o_proj 4096x2304 sk7", 4096, 2304, 7},
                          {"o_proj 4096x2304 sk14", 4096, 2304, 14},
                          {"mla q 2304x6720", 2304, 6720, 1},
                          {"expert 2304x1024 sk2", 2304, 1024, 2}};
  const int copies = 6;
  const size_t maxW = 4096 / 2 * 16384, maxS = 4096 / 128 * 16384;
  std::vector<uint8_t *> w(copies);
  std::vector<mk::bf16 *> s(copies), z(copies);
  for (int c = 0; c < copies; ++c) {
    CK(cudaMalloc(&w[c], maxW));
    CK(cudaMalloc(&s[c], maxS * 2));
    CK(cudaMalloc(&z[c], maxS * 2));
    CK(cudaMemset(w[c], 0x5a + c, maxW));
    CK(cudaMemset(s[c], 0x3b, maxS * 2)); // bf16 ~0.0029
    CK(cudaMemset(z[c], 0x40, maxS * 2)); // bf16 3.0
  }
  mk::bf16 *x;
  float *y;
  CK(cudaMalloc(&x, 4096 * 2));
  CK(cudaMemset(x, 0x3c, 4096 * 2));
  CK(cudaMalloc(&y, 16384 * 4));
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
    std::sort(ms.begin(), ms.end());
    std::printf("device copy: %.1f GB/s (read+write)\n", 2.0 * n / (ms[ms.size() / 2] * 1e-3) / 1e9);
    CK(cudaFree(a));
    CK(cudaFree(b));
  }
  {
    unsigned *sync;
    CK(cudaMalloc(&sync, 4096));
    CK(cudaMemset(sync, 0, 4096));
    int reps = 1000;
    void *args[] = {&sync, &reps};
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ms;
    for (int i = 0; i < 7; ++i) {
      CK(cudaEventRecord(e0));
      CK(cudaLaunchCooperativeKernel((void *)barriersOnly, sms, T, args, 0, 0));
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float t;
      CK(cudaEventElapsedTime(&t, e0, e1));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    std::printf("grid barrier (%d blocks x %d threads): %.2f us each\n", sms, T,
                ms[ms.size() / 2] * 1e3 / reps);
    CK(cudaFree(sync));
  }
  // Let the clocks ramp up (an idle H200 sits at a few hundred MHz).
  for (int i = 0; i < 3; ++i)
    bench<128>(shapes[0], sms, w, s, z, x, y, 400);
  std::printf("---- after warm-up\n");
  for (const Shape &sh : shapes) {
    bench<128>(sh, sms, w, s, z, x, y);
    bench<64>(sh, sms, w, s, z, x, y);
    bench<256>(sh, sms, w, s, z, x, y);
    bench<512>(sh, sms, w, s, z, x, y);
  }
  return 0;
}
