//===- TemplateTests.cu - Device templates vs CPU references -------------===//
//
// Each test drives one template on fresh random inputs and compares it with a
// straightforward CPU reference written from the spec. Skips without a GPU.
//
//===----------------------------------------------------------------------===//

#include "mk/BFloat16.h"
#include "mk/DenseGqaOracle.h"
#include "mk/gqa.cuh"
#include "mk/megakernel.cuh"
#include "mk/runtime/WeightLayout.h"

#include <cooperative_groups.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <type_traits>
#include <vector>

namespace {

using HB = mk::BFloat16;

bool haveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define REQUIRE_GPU()                                                          \
  do {                                                                         \
    if (!haveGpu())                                                            \
      GTEST_SKIP() << "no CUDA GPU on this machine";                           \
  } while (0)

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    ASSERT_EQ(e_, cudaSuccess) << #x << ": " << cudaGetErrorString(e_);        \
  } while (0)

template <class T> struct Dev {
  T *p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) {
    if (cudaMalloc(&p, n * sizeof(T)) != cudaSuccess)
      p = nullptr;
    else
      cudaMemset(p, 0xff, n * sizeof(T)); // poison
  }
  explicit Dev(const std::vector<T> &v) : Dev(v.size()) {
    if (p)
      cudaMemcpy(p, v.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~Dev() { cudaFree(p); }
  std::vector<T> get() const {
    std::vector<T> v(n);
    cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }
  void zero() { cudaMemset(p, 0, n * sizeof(T)); }
  template <class U> U *as() const { return reinterpret_cast<U *>(p); }
};

struct Rng {
  std::mt19937_64 g;
  explicit Rng(uint64_t seed) : g(seed) {}
  float normal(float sd) { return std::normal_distribution<float>(0.f, sd)(g); }
  float uniform(float a, float b) { return std::uniform_real_distribution<float>(a, b)(g); }
  int integer(int a, int b) { return std::uniform_int_distribution<int>(a, b)(g); }
};

std::vector<HB> randBf16(Rng &r, size_t n, float sd) {
  std::vector<HB> v(n);
  for (auto &x : v)
    x = HB(r.normal(sd));
  return v;
}

/// A random W4A16 matrix [K, N] in the spec's storage.
struct QMat {
  int K, N, G;
  std::vector<uint8_t> wq;
  std::vector<HB> s, z;
  QMat(Rng &r, int K_, int N_, int G_) : K(K_), N(N_), G(G_) {
    wq.resize((size_t)K / 2 * N);
    for (auto &b : wq)
      b = uint8_t(r.integer(0, 255));
    s.resize((size_t)K / G * N);
    z.resize(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
      s[i] = HB(r.uniform(0.001f, 0.004f));
      z[i] = HB(float(r.integer(0, 15)));
    }
  }
  int q(int k, int n) const {
    uint8_t b = wq[(size_t)(k / 2) * N + n];
    return (k & 1) ? b >> 4 : b & 15;
  }
  /// The spec's dequantized weight, rounded to bf16.
  float w(int k, int n) const {
    size_t gi = (size_t)(k / G) * N + n;
    return mk::roundBf16((float(q(k, n)) - z[gi].toFloat()) * s[gi].toFloat());
  }
  /// The same, unrounded (what the factored GEMV computes).
  double wExact(int k, int n) const {
    size_t gi = (size_t)(k / G) * N + n;
    return (double(q(k, n)) - z[gi].toFloat()) * double(s[gi].toFloat());
  }
};

double relErr(const std::vector<float> &a, const std::vector<double> &ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - ref[i]) * (a[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

double cosine(const std::vector<float> &a, const std::vector<double> &b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += a[i] * b[i];
    aa += double(a[i]) * a[i];
    bb += b[i] * b[i];
  }
  return ab / std::sqrt(aa * bb + 1e-300);
}

std::vector<float> toFloat(const std::vector<HB> &v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    f[i] = v[i].toFloat();
  return f;
}

constexpr int T = 512;

//===----------------------------------------------------------------------===//
// W4A16 GEMV tile
//===----------------------------------------------------------------------===//

template <int TN, int GROUP, bool FP32X>
__global__ void __launch_bounds__(T, 1)
    gemvKernel(const float *x, int K, const uint8_t *wq, const mk::bf16 *s, const mk::bf16 *z,
               int N, int ksplit, float *y) {
  extern __shared__ float smem[];
  float *xs = smem, *red = smem + K;
  for (int i = threadIdx.x; i < K; i += T)
    xs[i] = x[i];
  __syncthreads();
  const int tiles = (N + TN - 1) / TN;
  for (int t = blockIdx.x; t < tiles * ksplit; t += gridDim.x) {
    const int tile = t % tiles, ks = t / tiles;
    const int k0 = (K / 2) * ks / ksplit * 2, k1 = (K / 2) * (ks + 1) / ksplit * 2;
    const int n0 = tile * TN;
    mk::w4a16_gemv_tile<T, TN, GROUP, mk::EpiAtomicAddF32, FP32X>(
        xs, wq, s, z, N, n0, min(TN, N - n0), k0, k1, red, mk::EpiAtomicAddF32{y, 1.f, 0});
  }
}

/// x: bf16 values (what most GEMVs see) or, with `fp32x`, arbitrary fp32
/// values (the MoE down projection's silu(g) * u). The scales and zeros are
/// followed by NaNs, so a tile that reads past its matrix's groups fails.
template <int TN, int GROUP = 128, bool FP32X = false>
void runGemv(int K, int N, int ksplit, uint64_t seed) {
  const bool fp32x = FP32X;
  Rng r(seed);
  QMat m(r, K, N, GROUP);
  std::vector<float> x(K);
  for (int k = 0; k < K; ++k)
    x[k] = fp32x ? r.normal(1.f) : HB(r.normal(1.f)).toFloat();
  std::vector<HB> sPad = m.s, zPad = m.z;
  const HB nan = HB::fromBits(0x7fc0);
  sPad.resize(m.s.size() + 4 * N, nan);
  zPad.resize(m.z.size() + 4 * N, nan);
  Dev<float> dx(x);
  Dev<HB> ds(sPad), dz(zPad);
  Dev<uint8_t> dw(m.wq);
  Dev<float> dy(N);
  dy.zero();
  const size_t smem = (K + mk::w4a16_red_floats<T, TN>()) * sizeof(float);
  CK(cudaFuncSetAttribute(gemvKernel<TN, GROUP, FP32X>,
                          cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  gemvKernel<TN, GROUP, FP32X><<<37, T, smem>>>(dx.p, K, dw.p, ds.as<mk::bf16>(), dz.as<mk::bf16>(), N,
                                         ksplit, dy.p);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  auto y = dy.get();
  std::vector<double> exact(N, 0.0), rounded(N, 0.0);
  for (int k = 0; k < K; ++k) {
    const double xv = x[k];
    for (int n = 0; n < N; ++n) {
      exact[n] += xv * m.wExact(k, n);
      rounded[n] += xv * m.w(k, n);
    }
  }
  for (float v : y)
    ASSERT_TRUE(std::isfinite(v)) << "TN=" << TN << " K=" << K << " N=" << N;
  // The spec rounds each dequantized weight to bf16 once; so does the tile,
  // so only the fp32 summation order differs (and, for an fp32 x on the
  // tensor cores, x carried to 16 significant bits).
  EXPECT_LT(relErr(y, rounded), fp32x ? 2e-5 : 2e-6)
      << "TN=" << TN << " K=" << K << " N=" << N << " GROUP=" << GROUP;
  EXPECT_GT(cosine(y, exact), 0.999);
}

TEST(W4A16Gemv, FullKMatchesReference) {
  REQUIRE_GPU();
  runGemv<128>(2304, 528, 1, 1);
}
TEST(W4A16Gemv, SplitKUnalignedSlices) {
  REQUIRE_GPU();
  runGemv<128>(2304, 512, 3, 2);
  runGemv<128>(4096, 256, 7, 3);
}
TEST(W4A16Gemv, NarrowTiles) {
  REQUIRE_GPU();
  runGemv<32>(256, 144, 1, 4);
  runGemv<16>(512, 48, 2, 5);
}
/// 128- or 64-wide tiles over weights in a packed order (as the runtime
/// repacks them for a `layout=packed` kernel: ORDER kOrderMma, the exact
/// tile's, or kOrderInt8, the integer tile's), streamed with bulk copies;
/// x bf16 values (or, FP32X, any fp32), split-K slices of whole steps.
/// BEGUN: each block starts its first task's stream with
/// w4a16_gemv_begin before staging x (as the emitted kernels do before a
/// norm or counter wait), and that task's tile continues it (the grouped
/// orders: from the first scales the begin staged too).
/// A tile's prologue that stages its input: x[0, K) from global memory
/// into xs, then a block barrier (what the MoE down tile's prologue does
/// with its gate and up sums, after its counter wait).
struct StageInputPrologue {
  const float *x;
  float *xs;
  int K;
  __device__ void operator()() const {
    for (int i = threadIdx.x; i < K; i += T)
      xs[i] = __ldcg(x + i);
    __syncthreads();
  }
};

/// PRO: x staged by each tile's prologue (StageInputPrologue, under the
/// tile's first weight copies) instead of once before the tiles.
template <int TN, int ORDER = mk::kOrderMma, bool FP32X = false, bool BEGUN = false,
          bool PRO = false>
__global__ void __launch_bounds__(T, 1)
    packedGemvKernel(const float *x, int K, const uint8_t *wq, const mk::bf16 *s,
                     const mk::bf16 *z, int N, int ksplit, float *y) {
  static_assert(!(PRO && BEGUN), "a begun stream's tile stages x before the stream's begin");
  extern __shared__ float smem[];
  float *xs = smem, *red = smem + K;
  const int tiles = N / TN;
  auto slice = [&](int t, int &tile, int &k0, int &k1) {
    tile = t % tiles;
    k0 = K / ksplit * (t / tiles), k1 = k0 + K / ksplit;
  };
  if (BEGUN && blockIdx.x < tiles * ksplit) {
    int tile, k0, k1;
    slice(blockIdx.x, tile, k0, k1);
    const size_t sOff = (size_t)tile * (K / 128) * TN;
    mk::w4a16_gemv_begin<T, TN, 128, ORDER>(wq + (size_t)tile * (K / 2) * TN, s + sOff,
                                            z + sOff, TN, 0, TN, k0, k1, red);
  }
  if (!PRO) {
    for (int i = threadIdx.x; i < K; i += T)
      xs[i] = x[i];
    __syncthreads();
  }
  for (int t = blockIdx.x; t < tiles * ksplit; t += gridDim.x) {
    int tile, k0, k1;
    slice(t, tile, k0, k1);
    const size_t wOff = (size_t)tile * (K / 2) * TN, sOff = (size_t)tile * (K / 128) * TN;
    if constexpr (PRO)
      mk::w4a16_gemv_tile_with<T, TN, 128, mk::EpiAtomicAddF32, FP32X, ORDER>(
          xs, wq + wOff, s + sOff, z + sOff, TN, 0, TN, k0, k1, red,
          mk::EpiAtomicAddF32{y, 1.f, tile * TN}, false, StageInputPrologue{x, xs, K});
    else
      mk::w4a16_gemv_tile<T, TN, 128, mk::EpiAtomicAddF32, FP32X, ORDER>(
          xs, wq + wOff, s + sOff, z + sOff, TN, 0, TN, k0, k1, red,
          mk::EpiAtomicAddF32{y, 1.f, tile * TN}, BEGUN && t == (int)blockIdx.x);
  }
}

template <int TN, int ORDER = mk::kOrderMma, bool FP32X = false, bool BEGUN = false,
          bool PRO = false>
void runPackedGemv(int K, int N, int ksplit, uint64_t seed) {
  Rng r(seed);
  QMat m(r, K, N, 128);
  std::vector<float> x(K);
  for (int k = 0; k < K; ++k)
    x[k] = FP32X ? r.normal(1.f) : HB(r.normal(1.f)).toFloat();
  if (FP32X) // a group of small values beside large ones, and one of zeros
    for (int k = 0; k < 128 && k + 256 < K; ++k)
      x[k] *= 1e-3f, x[k + 128] = 0.f;
  std::vector<uint8_t> tiledW(m.wq.size()), packedW(m.wq.size());
  std::vector<HB> tiledS(m.s.size()), tiledZ(m.z.size());
  mk::rt::tileColumns(m.wq.data(), tiledW.data(), {K / 2, N}, TN, 1);
  (ORDER == mk::kOrderInt8 ? mk::rt::packInt8Steps : mk::rt::packMmaSteps)(
      tiledW.data(), packedW.data(), N / TN, K / 2, TN);
  mk::rt::tileColumns(m.s.data(), tiledS.data(), {K / 128, N}, TN, 2);
  mk::rt::tileColumns(m.z.data(), tiledZ.data(), {K / 128, N}, TN, 2);
  Dev<float> dx(x), dy(N);
  Dev<HB> ds(tiledS), dz(tiledZ);
  Dev<uint8_t> dw(packedW);
  dy.zero();
  const size_t smem = (K + mk::w4a16_red_floats<T, TN>()) * sizeof(float);
  auto kernel = packedGemvKernel<TN, ORDER, FP32X, BEGUN, PRO>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  kernel<<<37, T, smem>>>(dx.p, K, dw.p, ds.as<mk::bf16>(), dz.as<mk::bf16>(), N, ksplit, dy.p);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  auto y = dy.get();
  std::vector<double> rounded(N, 0.0), exact(N, 0.0);
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n) {
      rounded[n] += double(x[k]) * m.w(k, n);
      exact[n] += double(x[k]) * m.wExact(k, n);
    }
  for (float v : y)
    ASSERT_TRUE(std::isfinite(v));
  if (ORDER == mk::kOrderInt8) {
    // Exact integer products of x carried to ~16 bits: against the
    // unrounded weights only x's quantization and fp32 sums differ; against
    // the spec's bf16-rounded weights, their rounding (~2^-9 per weight).
    EXPECT_LT(relErr(y, exact), 5e-5)
        << "int8 TN=" << TN << " K=" << K << " N=" << N << " ks=" << ksplit;
    EXPECT_LT(relErr(y, rounded), 5e-3)
        << "int8 TN=" << TN << " K=" << K << " N=" << N << " ks=" << ksplit;
    return;
  }
  if (ORDER == mk::kOrderMmaScaled || ORDER == mk::kOrderMmaFolded) {
    // Scales applied per group to exact sums of x (q - z): against the
    // unrounded weights only the fp32 sums (and an fp32 x carried to 16
    // bits) differ; against the spec's bf16-rounded weights, that rounding
    // (~2^-9 per weight), which this tile does not do.
    // Folded zero points: also (128 + z) sum x cancelled against
    // sum (128 + q) x in fp32.
    const bool folded = ORDER == mk::kOrderMmaFolded;
    EXPECT_LT(relErr(y, exact), FP32X ? (folded ? 4e-5 : 2e-5) : (folded ? 1e-5 : 4e-6))
        << "scaled TN=" << TN << " K=" << K << " N=" << N << " ks=" << ksplit
        << (folded ? " folded" : "");
    EXPECT_LT(relErr(y, rounded), 5e-3)
        << "scaled TN=" << TN << " K=" << K << " N=" << N << " ks=" << ksplit;
    EXPECT_GT(relErr(y, rounded), 1e-5) << "the scaled tile rounds as the spec";
    return;
  }
  EXPECT_LT(relErr(y, rounded), 2e-6)
      << "packed TN=" << TN << " K=" << K << " N=" << N << " ks=" << ksplit;
}

// The packed tile with the scales applied per group (arithmetic=scaled):
// one group per warp and several, slots wrapping (4096 rows: 32 groups),
// split-K slices, fp32 inputs with a group of small values and one of
// zeros, and streams begun ahead.
template <int O> void runGroupedShapes() {
  runPackedGemv<128, O>(2304, 512, 1, 51);
  runPackedGemv<128, O>(4096, 256, 1, 52);
  runPackedGemv<128, O>(4096, 256, 8, 53);
  runPackedGemv<128, O, true>(1024, 2304, 1, 54);
  runPackedGemv<128, O, true>(3584, 256, 2, 55);
  runPackedGemv<64, O>(2304, 512, 1, 56);
  runPackedGemv<64, O>(4096, 256, 2, 57);
  runPackedGemv<64, O, true>(1024, 512, 1, 58);
  runPackedGemv<128, O, false, true>(2304, 1024, 2, 59);
  runPackedGemv<64, O, true, true>(1024, 256, 1, 60);
  // A begun stream past the ring: 32 steps per warp, 11 stages of a 3-stage
  // ring (the begun stream asks for the whole ring, the tile for each next
  // stage after the one it has read).
  runPackedGemv<128, O, false, true>(4096, 256, 1, 66);
}
TEST(W4A16Gemv, PackedScalesPerGroup) {
  REQUIRE_GPU();
  runGroupedShapes<mk::kOrderMmaScaled>();
}
// The same with the zero points folded (arithmetic=folded, the default).
TEST(W4A16Gemv, PackedZeroPointsFolded) {
  REQUIRE_GPU();
  runGroupedShapes<mk::kOrderMmaFolded>();
}

// Each tile staging its input in its prologue, under its first weight
// copies (the waiting tasks' form: the MoE down tile stages its gate and
// up sums so), several tiles per block: the exact, scaled and folded
// packed tiles (on the 2-stage ring in the forms build).
TEST(W4A16Gemv, PackedTileStagesItsInputInItsPrologue) {
  REQUIRE_GPU();
  runPackedGemv<128, mk::kOrderMma, false, false, true>(2304, 1024, 2, 61);
  runPackedGemv<128, mk::kOrderMmaScaled, false, false, true>(2304, 1024, 2, 62);
  runPackedGemv<128, mk::kOrderMmaFolded, false, false, true>(2304, 1024, 2, 63);
  runPackedGemv<128, mk::kOrderMmaFolded, true, false, true>(1024, 2304, 1, 64); // fp32 x
  runPackedGemv<64, mk::kOrderMmaFolded, false, false, true>(4096, 256, 2, 65);
}

// The integer tile needs the 3-stage weight ring (its quantized x lives
// behind the ring slices): not in the 2-stage forms build, where the
// emitter never puts it either.
#if MK_W4A16_STAGES >= 3
TEST(W4A16Gemv, Int8OrderIntegerTile) {
  REQUIRE_GPU();
  static_assert(mk::kInt8TileMaxRows == mk::kInt8MaxSliceRows, "one limit, host and device");
  runPackedGemv<128, mk::kOrderInt8>(2304, 512, 1, 21); // 9 steps per warp, groups split
  runPackedGemv<128, mk::kOrderInt8>(2304, 1024, 2, 22);
  runPackedGemv<128, mk::kOrderInt8>(4096, 256, 8, 23);  // 2 steps per warp
  runPackedGemv<64, mk::kOrderInt8>(2304, 512, 1, 24);
  runPackedGemv<64, mk::kOrderInt8>(1024, 256, 1, 25);
  runPackedGemv<128, mk::kOrderInt8, true>(1024, 2304, 1, 26); // fp32 x (MoE down)
  runPackedGemv<128, mk::kOrderInt8, true>(3584, 256, 1, 27);  // the longest slice
}
#endif

// A stream started by w4a16_gemv_begin before x is staged, continued by the
// block's first tile (prefetched = true); later tiles start their own.
TEST(W4A16Gemv, PackedStreamBegunAhead) {
  REQUIRE_GPU();
  runPackedGemv<128, mk::kOrderMma, false, true>(2304, 1024, 2, 31); // 37 blocks, 16 tasks each
  runPackedGemv<64, mk::kOrderMma, false, true>(2304, 512, 1, 32);
#if MK_W4A16_STAGES >= 3
  runPackedGemv<128, mk::kOrderInt8, false, true>(2304, 1024, 2, 33);
  runPackedGemv<64, mk::kOrderInt8, true, true>(1024, 256, 1, 34);
#endif
}

TEST(W4A16Gemv, PackedLayoutWithBulkCopies) {
  REQUIRE_GPU();
  runPackedGemv<128>(4096, 512, 1, 12); // 16 steps per warp: four chunks of 2 steps
  runPackedGemv<128>(2304, 1024, 2, 13);
  runPackedGemv<128>(4096, 256, 8, 14);
  runPackedGemv<64>(2304, 512, 1, 15); // 64-wide: 16 row pairs per step
  runPackedGemv<64>(4096, 256, 2, 16);
}

// The tiny spec's shapes: groups of 32, K shorter than one tensor-core step
// of a 16-wide tile (64 row pairs), so some k-subslices lie past the matrix.
TEST(W4A16Gemv, ShortKSmallGroups) {
  REQUIRE_GPU();
  runGemv<16, 32>(64, 256, 1, 6);
  runGemv<16, 32>(256, 144, 1, 7);
  runGemv<32, 32>(128, 64, 1, 8);
  runGemv<128, 32>(128, 256, 1, 9);
}
TEST(W4A16Gemv, Fp32Input) {
  REQUIRE_GPU();
  runGemv<128, 128, true>(1024, 2304, 2, 10);
  runGemv<16, 128, true>(1024, 256, 1, 11);
}

/// Whether `grid` blocks of `kernel` fit the GPU at once: the waiting
/// forms' tests spin on counters other blocks of the same launch signal,
/// which would hang (not fail) on a GPU too small to hold them all.
template <class K> bool allResident(K kernel, int grid, int threads, size_t smem) {
  int dev = 0, sms = 0, perSm = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, threads, smem) !=
          cudaSuccess) {
    ADD_FAILURE() << "occupancy query failed";
    return false;
  }
  return perSm * sms >= grid;
}

/// The producer side of the waiting forms' tests: this block copies its
/// share of src[0, n) to dst, then signals counter `counter`.
template <class V>
__device__ void copyShareThenSignal(const V *src, V *dst, int n, unsigned *sync, int counter) {
  const int per = (n + gridDim.x - 1) / gridDim.x;
  for (int i = blockIdx.x * per + threadIdx.x; i < min(n, (blockIdx.x + 1) * per); i += T)
    dst[i] = src[i];
  mk::counter_signal(sync, counter);
}

/// A prologue wait that also counts its calls (one per task instance).
struct CountingWait {
  mk::CounterWaits wait;
  unsigned *calls;
  __device__ void operator()() const {
    wait();
    if (threadIdx.x == 0)
      atomicAdd(calls, 1u);
  }
};

/// w4a16_gemv_tile_staged_waiting (schedule-prologue-waits gemv=true): in
/// one launch, every block first writes its share of the input to global
/// memory and signals counter 0; then the tiles, which stage that input only
/// after their prologue wait for all those signals.
template <int TN, int GROUP>
__global__ void __launch_bounds__(T, 1)
    gemvStagedWaitingKernel(const float *src, float *x, int K, const uint8_t *wq,
                            const mk::bf16 *s, const mk::bf16 *z, int N, int ksplit, float *y,
                            unsigned *sync, unsigned *calls) {
  extern __shared__ float smem[];
  copyShareThenSignal(src, x, K, sync, 0);
  const int tiles = (N + TN - 1) / TN;
  for (int t = blockIdx.x; t < tiles * ksplit; t += gridDim.x) {
    const int tile = t % tiles, ks = t / tiles;
    const int k0 = (K / 2) * ks / ksplit * 2, k1 = (K / 2) * (ks + 1) / ksplit * 2;
    const int n0 = tile * TN;
    mk::w4a16_gemv_tile_staged_waiting<T, TN, GROUP, mk::EpiAtomicAddF32, false,
                                       mk::kOrderRowMajor, float>(
        x, smem, wq, s, z, N, n0, min(TN, N - n0), k0, k1, smem + K / ksplit,
        mk::EpiAtomicAddF32{y, 1.f, 0}, false,
        CountingWait{mk::CounterWaits{sync, 0, 1, gridDim.x}, calls});
    __syncthreads();
  }
}

TEST(W4A16Gemv, StagedTileWaitsInItsPrologue) {
  REQUIRE_GPU();
  constexpr int TN = 128, G = 128;
  const int K = 2304, N = 640, ksplit = 2, grid = 23;
  Rng r(12);
  QMat m(r, K, N, G);
  std::vector<float> x(K);
  for (int k = 0; k < K; ++k)
    x[k] = HB(r.normal(1.f)).toFloat();
  Dev<float> dsrc(x), dx(K), dy(N);
  Dev<HB> ds(m.s), dz(m.z);
  Dev<uint8_t> dw(m.wq);
  Dev<unsigned> sync(mk::sync_bytes(1) / 4), calls(1);
  dy.zero();
  sync.zero();
  calls.zero();
  const size_t smem = (K / ksplit + mk::w4a16_red_floats<T, TN>()) * sizeof(float);
  auto kernel = gemvStagedWaitingKernel<TN, G>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  if (!allResident(kernel, grid, T, smem))
    GTEST_SKIP() << grid << " blocks do not fit this GPU at once";
  kernel<<<grid, T, smem>>>(dsrc.p, dx.p, K, dw.p, ds.as<mk::bf16>(), dz.as<mk::bf16>(), N,
                            ksplit, dy.p, sync.p, calls.p);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  const int tasks = (N + TN - 1) / TN * ksplit;
  EXPECT_EQ(calls.get()[0], unsigned(tasks)) << "one prologue wait per tile";
  auto y = dy.get();
  std::vector<double> rounded(N, 0.0);
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n)
      rounded[n] += double(x[k]) * m.w(k, n);
  for (float v : y)
    ASSERT_TRUE(std::isfinite(v));
  EXPECT_LT(relErr(y, rounded), 2e-6);
}

/// Row slices (w4a16_row_slice_stage + w4a16_row_slice_atomic): instance i
/// multiplies rows [i*KS, (i+1)*KS) of x with the same rows of the weight
/// and adds into y, so all instances together are the whole GEMV (the KDA
/// output projection folded into the gated-delta tasks).
template <int KS, int GROUP, int N, int ORDER, bool TILED>
__global__ void __launch_bounds__(T, 1)
    rowSliceKernel(const float *x, int K, const uint8_t *wq, const mk::bf16 *s,
                   const mk::bf16 *z, float *y) {
  extern __shared__ float smem[];
  float *xs = smem;
  uint8_t *stage = reinterpret_cast<uint8_t *>(smem + 16 * KS);
  for (int i = blockIdx.x; i < K / KS; i += gridDim.x) {
    mk::w4a16_row_slice_stage<T, KS, GROUP, N, ORDER, TILED>(wq, s, z, K, i * KS, stage);
    for (int j = threadIdx.x; j < KS; j += T)
      xs[j] = x[i * KS + j];
    mk::cp_async_wait<0>();
    __syncthreads();
    mk::w4a16_row_slice_atomic<T, KS, N, ORDER>(xs, stage, y, 0.5f);
    __syncthreads();
  }
}

template <int KS, int GROUP, int N, int ORDER, bool TILED>
void runRowSlices(int K, uint64_t seed) {
  Rng r(seed);
  QMat m(r, K, N, GROUP);
  std::vector<float> x(K);
  for (int k = 0; k < K; ++k)
    x[k] = HB(r.normal(1.f)).toFloat();
  std::vector<uint8_t> w = m.wq;
  std::vector<HB> sc = m.s, zc = m.z;
  if (TILED) {
    std::vector<uint8_t> tiledW(m.wq.size());
    mk::rt::tileColumns(m.wq.data(), tiledW.data(), {K / 2, N}, 128, 1);
    mk::rt::tileColumns(m.s.data(), sc.data(), {K / GROUP, N}, 128, 2);
    mk::rt::tileColumns(m.z.data(), zc.data(), {K / GROUP, N}, 128, 2);
    w = tiledW;
    if (ORDER == mk::kOrderMma)
      mk::rt::packMmaSteps(tiledW.data(), w.data(), N / 128, K / 2, 128);
  }
  Dev<float> dx(x), dy(N);
  Dev<HB> ds(sc), dz(zc);
  Dev<uint8_t> dw(w);
  dy.zero();
  const size_t smem = 16 * KS * sizeof(float) + mk::row_slice_smem_bytes<KS, N>();
  auto kernel = rowSliceKernel<KS, GROUP, N, ORDER, TILED>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  kernel<<<37, T, smem>>>(dx.p, K, dw.p, ds.as<mk::bf16>(), dz.as<mk::bf16>(), dy.p);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  auto y = dy.get();
  std::vector<double> rounded(N, 0.0);
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n)
      rounded[n] += 0.5 * double(x[k]) * m.w(k, n);
  for (float v : y)
    ASSERT_TRUE(std::isfinite(v));
  EXPECT_LT(relErr(y, rounded), 2e-6)
      << "row slices KS=" << KS << " G=" << GROUP << " N=" << N << " order=" << ORDER
      << " tiled=" << TILED;
}

TEST(W4A16RowSlice, EveryLayoutMatchesTheGemv) {
  REQUIRE_GPU();
  runRowSlices<16, 128, 2304, mk::kOrderMma, true>(4096, 41); // the KDA o_proj's shape
  runRowSlices<16, 128, 2304, mk::kOrderRowMajor, true>(1024, 42);
  runRowSlices<16, 128, 2304, mk::kOrderRowMajor, false>(1024, 43);
  runRowSlices<32, 32, 512, mk::kOrderMma, true>(512, 44); // two steps, two groups
  runRowSlices<32, 32, 640, mk::kOrderRowMajor, false>(256, 45);
}

//===----------------------------------------------------------------------===//
// Residual + RMSNorm (per block)
//===----------------------------------------------------------------------===//

/// Shared memory of the norm kernels below: x, the scratch, the resident
/// residual (D bf16) and the staged form's stage.
int normSmemBytes(int D) {
  return ((D + 3) / 4 * 4 + 32 + (D + 7) / 8 * 4) * 4 + mk::residual_rmsnorm_stage_bytes(D);
}

/// A norm's random inputs (base bf16, weight bf16, fp32 sums) of length D and
/// what the host makes of them: x = bf16(base + bf16(acc)) and the scale
/// 1 / sqrt(mean(x^2) + 1e-6).
struct NormInputs {
  std::vector<HB> base, w;
  std::vector<float> acc, x;
  float scale = 0.f;
  NormInputs(Rng &r, int D) : base(randBf16(r, D, 1.f)), w(randBf16(r, D, 0.5f)), acc(D), x(D) {
    for (float &a : acc)
      a = r.normal(0.5f);
    double ss = 0;
    for (int i = 0; i < D; ++i) {
      x[i] = mk::roundBf16(base[i].toFloat() + mk::roundBf16(acc[i]));
      ss += double(x[i]) * x[i];
    }
    scale = 1.f / std::sqrt(float(ss / D) + 1e-6f);
  }
};

/// The norm's forms: kFused, block_residual_rmsnorm (its loads into x and
/// the resident residual behind the scratch; -DMK_NORM_STAGED: through the
/// stage behind it); kSplit, the same in two calls
/// (block_residual_rmsnorm_loads, then block_residual_rmsnorm_rest_outlined,
/// the form a phase that asks for its first weights in between calls); else
/// block_residual then block_rmsnorm.
enum NormForm { kElementWise, kFused, kSplit };
__global__ void __launch_bounds__(T, 1)
    normKernel(const mk::bf16 *base, const float *acc, const mk::bf16 *w, int D, float *y,
               mk::bf16 *out, NormForm form) {
  extern __shared__ float smem[];
  const int d4 = (D + 3) / 4 * 4;
  mk::bf16 *resid = reinterpret_cast<mk::bf16 *>(smem + d4 + 32);
  if (form == kFused) {
    mk::block_residual_rmsnorm<T>(base, acc, w, D, 1e-6f, smem, out, smem + d4,
                                  smem + d4 + 32 + (D + 7) / 8 * 4, resid, false);
  } else if (form == kSplit) {
    const mk::NormLoads l =
        mk::block_residual_rmsnorm_loads<T>(base, acc, w, D, smem, out, resid, false);
    mk::block_residual_rmsnorm_rest_outlined<T>(base, acc, w, D, 1e-6f, smem, out, smem + d4,
                                                resid, false, l);
  } else {
    mk::block_residual<T>(base, acc, D, smem, out);
    mk::block_rmsnorm<T>(smem, w, D, 1e-6f, smem, smem + d4);
  }
  for (int i = threadIdx.x; i < D; i += T)
    y[blockIdx.x * D + i] = smem[i];
}

// Every form; the fused and split ones on shapes that take their vector
// path (2304, 256, 7000: more than one vector per thread; 9216: past the
// weight quads a thread holds in registers, 4 x T) and their element-wise
// fallback (2300: not a multiple of 8; `shift`: an input not 16-byte
// aligned).
TEST(Norm, ResidualThenRmsNormAsTheSpec) {
  REQUIRE_GPU();
  struct Case {
    int D;
    NormForm form;
    int shift;
  };
  for (Case c : {Case{2304, kElementWise, 0}, Case{256, kElementWise, 0},
                 Case{7000, kElementWise, 0}, Case{2304, kFused, 0}, Case{256, kFused, 0},
                 Case{7000, kFused, 0}, Case{2300, kFused, 0}, Case{2304, kFused, 1},
                 Case{9216, kFused, 0}, Case{2304, kSplit, 0}, Case{256, kSplit, 0},
                 Case{7000, kSplit, 0}, Case{9216, kSplit, 0}, Case{2300, kSplit, 0},
                 Case{2304, kSplit, 1}}) {
    const int D = c.D;
    Rng r(D);
    const NormInputs in(r, D);
    const std::vector<HB> &base = in.base, &w = in.w;
    const std::vector<float> &acc = in.acc, &x = in.x;
    // `shift` moves the residual base one element off its allocation's
    // 16-byte alignment.
    std::vector<HB> baseBuf(base);
    baseBuf.insert(baseBuf.begin(), c.shift, HB{});
    Dev<HB> db(baseBuf), dw(w), dout(D);
    Dev<float> da(acc), dy((size_t)3 * D);
    const int smemBytes = normSmemBytes(D);
    CK(cudaFuncSetAttribute(normKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smemBytes));
    normKernel<<<3, T, smemBytes>>>(db.as<mk::bf16>() + c.shift, da.p, dw.as<mk::bf16>(), D,
                                    dy.p, dout.as<mk::bf16>(), c.form);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    const float rr = in.scale;
    auto y = dy.get();
    auto out = dout.get();
    int bad = 0;
    for (int b = 0; b < 3; ++b)
      for (int i = 0; i < D; ++i) {
        const float want = mk::roundBf16(x[i] * rr * w[i].toFloat());
        // The block sum's order differs from the host's: at most one bf16
        // ulp apart.
        bad += std::abs(y[size_t(b) * D + i] - want) > 0.0079f * std::abs(want) + 1e-6f;
      }
    EXPECT_EQ(bad, 0) << "D=" << D << " form=" << c.form << " shift=" << c.shift;
    for (int i = 0; i < D; ++i)
      ASSERT_EQ(out[i].toFloat(), x[i])
          << "residual base stored by block 0, D=" << D << " form=" << c.form;
  }
}

// The split form does the fused form's operations in the same order: the
// same values bit for bit, on the vector path (one and more vectors per
// thread, past the register-held weight quads) and the fallback.
TEST(Norm, SplitFormIsTheFusedBitForBit) {
  REQUIRE_GPU();
  for (int D : {2304, 9216, 2300}) {
    Rng r(D + 3);
    const NormInputs in(r, D);
    Dev<HB> db(in.base), dw(in.w), dout(D);
    Dev<float> da(in.acc), dy((size_t)3 * D);
    const int smemBytes = normSmemBytes(D);
    CK(cudaFuncSetAttribute(normKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smemBytes));
    std::vector<float> y[2];
    std::vector<HB> out[2];
    for (int f = 0; f < 2; ++f) {
      dy.zero();
      dout.zero();
      normKernel<<<3, T, smemBytes>>>(db.as<mk::bf16>(), da.p, dw.as<mk::bf16>(), D, dy.p,
                                      dout.as<mk::bf16>(), f ? kSplit : kFused);
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      y[f] = dy.get();
      out[f] = dout.get();
    }
    int differ = 0;
    for (size_t i = 0; i < y[0].size(); ++i)
      differ += std::memcmp(&y[0][i], &y[1][i], sizeof(float)) != 0;
    EXPECT_EQ(differ, 0) << "D=" << D;
    for (int i = 0; i < D; ++i)
      ASSERT_EQ(out[0][i].toFloat(), out[1][i].toFloat()) << "residual, D=" << D;
  }
}

/// The norm rounded twice (ROUND_TWICE: the released model's), its loads by
/// cp.async or through registers (REG_LOADS, the form after a begun stream).
template <bool REG>
__global__ void __launch_bounds__(T, 1)
    normTwiceKernel(const mk::bf16 *base, const float *acc, const mk::bf16 *w, int D, float *y,
                    mk::bf16 *out) {
  extern __shared__ float smem[];
  const int d4 = (D + 3) / 4 * 4;
  mk::bf16 *resid = reinterpret_cast<mk::bf16 *>(smem + d4 + 32);
  mk::block_residual_rmsnorm<T, false, REG, true>(base, acc, w, D, 1e-6f, smem, out, smem + d4,
                                                  nullptr, resid, false);
  for (int i = threadIdx.x; i < D; i += T)
    y[blockIdx.x * D + i] = smem[i];
}

// The two roundings differ by at most one ulp, so the tolerance of the test
// above cannot tell them apart: where they differ, the kernel must give the
// twice-rounded value (all but the few elements whose scale the block sum's
// order moves). The vector path (2304) in both load forms and the
// element-wise fallback (2300).
TEST(Norm, RoundedTwice) {
  REQUIRE_GPU();
  for (int D : {2304, 2300}) {
    for (bool reg : {false, true}) {
      Rng r(D + 7);
      const NormInputs in(r, D);
      const std::vector<HB> &w = in.w;
      const std::vector<float> &x = in.x;
      Dev<HB> db(in.base), dw(w), dout(D);
      Dev<float> da(in.acc), dy(D);
      const int smemBytes = normSmemBytes(D);
      auto kernel = reg ? normTwiceKernel<true> : normTwiceKernel<false>;
      CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smemBytes));
      kernel<<<1, T, smemBytes>>>(db.as<mk::bf16>(), da.p, dw.as<mk::bf16>(), D, dy.p,
                                  dout.as<mk::bf16>());
      CK(cudaGetLastError());
      CK(cudaDeviceSynchronize());
      const float rr = in.scale;
      auto y = dy.get();
      int differ = 0, twice = 0, once = 0;
      for (int i = 0; i < D; ++i) {
        const float w1 = mk::roundBf16(x[i] * rr * w[i].toFloat());
        const float w2 = mk::roundBf16(mk::roundBf16(x[i] * rr) * w[i].toFloat());
        if (w1 == w2)
          continue;
        ++differ;
        twice += y[i] == w2;
        once += y[i] == w1;
      }
      EXPECT_GT(differ, D / 50) << "D=" << D << ": the roundings should differ often";
      EXPECT_GE(twice, differ * 9 / 10) << "D=" << D << " reg=" << reg << ": " << once
                                         << " of " << differ << " rounded once";
    }
  }
}

/// Two norms in a row as the emitted kernels chain them: the first keeps its
/// residual in `resid` (shared memory), the second reads its base from
/// there, not from `out1` (which only block 0 writes, in this same launch).
/// `split`: the second norm in two parts (block_residual_rmsnorm_loads and
/// _rest_outlined), as a projection phase with an early stream has it.
__global__ void __launch_bounds__(T, 1)
    chainedNormKernel(const mk::bf16 *base, const float *acc1, const float *acc2,
                      const mk::bf16 *w1, const mk::bf16 *w2, int D, float *y, mk::bf16 *out1,
                      mk::bf16 *out2, bool split) {
  extern __shared__ float smem[];
  const int d4 = (D + 3) / 4 * 4;
  mk::bf16 *resid = reinterpret_cast<mk::bf16 *>(smem + d4 + 32);
  void *stage = smem + d4 + 32 + (D + 7) / 8 * 4;
  mk::block_residual_rmsnorm<T>(base, acc1, w1, D, 1e-6f, smem, out1, smem + d4, stage, resid,
                                false);
  __syncthreads();
  if (split) {
    const mk::NormLoads l =
        mk::block_residual_rmsnorm_loads<T>(out1, acc2, w2, D, smem, out2, resid, true);
    mk::block_residual_rmsnorm_rest_outlined<T>(out1, acc2, w2, D, 1e-6f, smem, out2, smem + d4,
                                                resid, true, l);
  } else {
    mk::block_residual_rmsnorm<T>(out1, acc2, w2, D, 1e-6f, smem, out2, smem + d4, stage, resid,
                                  true);
  }
  for (int i = threadIdx.x; i < D; i += T)
    y[blockIdx.x * D + i] = smem[i];
}

// The staged form (2304, 7000) and the element-wise fallback (2300), each
// with a resident residual between the two norms, the second fused or
// split.
TEST(Norm, ChainedNormsKeepTheResidualResident) {
  REQUIRE_GPU();
  for (int D : {2304, 7000, 2300})
  for (bool split : {false, true}) {
    Rng r(D + 1);
    auto base = randBf16(r, D, 1.f), w1 = randBf16(r, D, 0.5f), w2 = randBf16(r, D, 0.5f);
    std::vector<float> acc1(D), acc2(D);
    for (int i = 0; i < D; ++i) {
      acc1[i] = r.normal(0.5f);
      acc2[i] = r.normal(0.5f);
    }
    Dev<HB> db(base), dw1(w1), dw2(w2), dout1(D), dout2(D);
    Dev<float> da1(acc1), da2(acc2), dy((size_t)3 * D);
    dout1.zero();
    const int smemBytes = normSmemBytes(D);
    CK(cudaFuncSetAttribute(chainedNormKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            smemBytes));
    chainedNormKernel<<<3, T, smemBytes>>>(db.as<mk::bf16>(), da1.p, da2.p, dw1.as<mk::bf16>(),
                                           dw2.as<mk::bf16>(), D, dy.p, dout1.as<mk::bf16>(),
                                           dout2.as<mk::bf16>(), split);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<float> x1(D), x2(D);
    double ss = 0;
    for (int i = 0; i < D; ++i) {
      x1[i] = mk::roundBf16(base[i].toFloat() + mk::roundBf16(acc1[i]));
      x2[i] = mk::roundBf16(x1[i] + mk::roundBf16(acc2[i]));
      ss += double(x2[i]) * x2[i];
    }
    const float rr = 1.f / std::sqrt(float(ss / D) + 1e-6f);
    auto y = dy.get();
    auto out1 = dout1.get(), out2 = dout2.get();
    int bad = 0;
    for (int b = 0; b < 3; ++b)
      for (int i = 0; i < D; ++i) {
        const float want = mk::roundBf16(x2[i] * rr * w2[i].toFloat());
        bad += std::abs(y[size_t(b) * D + i] - want) > 0.0079f * std::abs(want) + 1e-6f;
      }
    EXPECT_EQ(bad, 0) << "D=" << D << " split=" << split;
    for (int i = 0; i < D; ++i) {
      ASSERT_EQ(out1[i].toFloat(), x1[i]) << "first residual, D=" << D;
      ASSERT_EQ(out2[i].toFloat(), x2[i]) << "second residual, D=" << D << " split=" << split;
    }
  }
}

//===----------------------------------------------------------------------===//
// Dense GQA attention (the second family's templates, mk/gqa.cuh)
//===----------------------------------------------------------------------===//

template <int HQ, int HKV, int HD>
__global__ void __launch_bounds__(T, 1)
    gqaAppendKernel(int pos, double theta, float eps, const mk::bf16 *q, const mk::bf16 *k,
                    const mk::bf16 *v, const mk::bf16 *qn, const mk::bf16 *kn, mk::bf16 *qo,
                    const mk::bf16 *kin, const mk::bf16 *vin, mk::bf16 *kout, mk::bf16 *vout) {
  mk::gqa_qk_norm_rope_append<T, HQ, HKV, HD>(blockIdx.x, gridDim.x, pos, theta, eps, q, k, v,
                                              qn, kn, qo, kin, vin, kout, vout);
}

template <int HD, int REP>
__global__ void __launch_bounds__(T, 1)
    gqaAttentionKernel(int chunks, int hkv, int rows, const mk::bf16 *q, const mk::bf16 *kc,
                       const mk::bf16 *vc, float *pm, float *pl, float *pa) {
  extern __shared__ float smem[];
  for (int t = blockIdx.x; t < chunks * hkv; t += gridDim.x)
    mk::gqa_attention_chunk<T, HD, REP>(t, chunks, hkv, rows, q, kc, vc, pm, pl, pa, smem);
}

template <int HD>
__global__ void __launch_bounds__(T, 1)
    gqaCombineKernel(int perTask, int hq, int chunks, const float *pm, const float *pl,
                     const float *pa, mk::bf16 *o) {
  extern __shared__ float smem[];
  for (int t = blockIdx.x; t * perTask < hq; t += gridDim.x)
    mk::gqa_combine<T, HD>(t, perTask, hq, chunks, pm, pl, pa, o, smem);
}

/// Values within one bf16 rounding step of the reference (summation orders
/// differ), and most of them equal.
void expectBf16Close(const std::vector<HB> &got, const std::vector<HB> &want,
                     const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t far = 0, exact = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float g = got[i].toFloat(), w = want[i].toFloat();
    far += !(std::abs(g - w) <= 0.0079f * std::abs(w) + 1e-6f);
    exact += g == w;
  }
  EXPECT_EQ(far, 0u) << what << ": values more than one bf16 step from the oracle";
  EXPECT_GE(double(exact), 0.9 * double(got.size())) << what;
}

// The q / k heads' norm and rotate-half RoPE against the oracle's rmsNorm
// and ropeRotateHalf, the new rows appended, and a foreign cache's earlier
// rows copied (k_in != k_out) or left in place.
TEST(Gqa, NormRopeAppendAsTheOracle) {
  REQUIRE_GPU();
  constexpr int HQ = 8, HKV = 2, HD = 128;
  const double theta = 1e6;
  const float eps = 1e-6f;
  for (int pos : {0, 37, 4095}) {
    Rng r(pos + 5);
    auto q = randBf16(r, HQ * HD, 1.f), k = randBf16(r, HKV * HD, 1.f),
         v = randBf16(r, HKV * HD, 1.f), qn = randBf16(r, HD, 0.5f), kn = randBf16(r, HD, 0.5f);
    const size_t cacheElems = size_t(pos + 1) * HKV * HD;
    auto kin = randBf16(r, cacheElems, 1.f), vin = randBf16(r, cacheElems, 1.f);
    Dev<HB> dq(q), dk(k), dv(v), dqn(qn), dkn(kn), dqo(HQ * HD), dkin(kin), dvin(vin),
        dkout(cacheElems), dvout(cacheElems);
    gqaAppendKernel<HQ, HKV, HD><<<3, T>>>(pos, theta, eps, dq.as<mk::bf16>(), dk.as<mk::bf16>(),
                                           dv.as<mk::bf16>(), dqn.as<mk::bf16>(),
                                           dkn.as<mk::bf16>(), dqo.as<mk::bf16>(),
                                           dkin.as<mk::bf16>(), dvin.as<mk::bf16>(),
                                           dkout.as<mk::bf16>(), dvout.as<mk::bf16>());
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<HB> wantQ(HQ * HD), wantK(HKV * HD);
    for (int h = 0; h < HQ; ++h) {
      mk::oracle::rmsNorm(q.data() + h * HD, qn.data(), HD, eps, wantQ.data() + h * HD);
      mk::oracle::ropeRotateHalf(wantQ.data() + h * HD, HD, pos, theta);
    }
    for (int g = 0; g < HKV; ++g) {
      mk::oracle::rmsNorm(k.data() + g * HD, kn.data(), HD, eps, wantK.data() + g * HD);
      mk::oracle::ropeRotateHalf(wantK.data() + g * HD, HD, pos, theta);
    }
    expectBf16Close(dqo.get(), wantQ, "q, pos " + std::to_string(pos));
    auto kout = dkout.get(), vout = dvout.get();
    const size_t row = size_t(pos) * HKV * HD;
    expectBf16Close(std::vector<HB>(kout.begin() + row, kout.end()), wantK,
                    "k row, pos " + std::to_string(pos));
    for (size_t i = 0; i < size_t(HKV) * HD; ++i)
      ASSERT_EQ(vout[row + i].toFloat(), v[i].toFloat()) << "v row, pos " << pos;
    for (size_t i = 0; i < row; ++i) {
      ASSERT_EQ(kout[i].toFloat(), kin[i].toFloat()) << "copied k rows, pos " << pos;
      ASSERT_EQ(vout[i].toFloat(), vin[i].toFloat()) << "copied v rows, pos " << pos;
    }
  }
}

template <int HQ, int HKV, int HD> void runGqaAttention(int rows, int chunks, uint64_t seed) {
  constexpr int REP = HQ / HKV;
  Rng r(seed);
  auto q = randBf16(r, HQ * HD, 1.f), kc = randBf16(r, size_t(rows) * HKV * HD, 1.f),
       vc = randBf16(r, size_t(rows) * HKV * HD, 1.f);
  Dev<HB> dq(q), dk(kc), dv(vc), dout(HQ * HD);
  Dev<float> pm(size_t(HQ) * chunks), pl(size_t(HQ) * chunks), pa(size_t(HQ) * chunks * HD);
  const int smem = mk::gqa_attention_smem_floats<T, HD, REP>() * 4;
  auto attn = gqaAttentionKernel<HD, REP>;
  CK(cudaFuncSetAttribute(attn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  attn<<<37, T, smem>>>(chunks, HKV, rows, dq.as<mk::bf16>(), dk.as<mk::bf16>(),
                        dv.as<mk::bf16>(), pm.p, pl.p, pa.p);
  CK(cudaGetLastError());
  gqaCombineKernel<HD><<<5, T, 2 * chunks * 4>>>(3, HQ, chunks, pm.p, pl.p, pa.p,
                                                 dout.as<mk::bf16>());
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<HB> want(HQ * HD);
  mk::oracle::gqaAttention(q.data(), kc.data(), vc.data(), rows, HQ, HKV, HD, want.data());
  auto got = dout.get();
  std::vector<float> g(got.size());
  std::vector<double> w(got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    g[i] = got[i].toFloat();
    w[i] = want[i].toFloat();
  }
  EXPECT_LT(relErr(g, w), 4e-3) << "rows " << rows << " chunks " << chunks;
  size_t far = 0;
  for (size_t i = 0; i < got.size(); ++i)
    far += !(std::abs(g[i] - w[i]) <= 0.016 * std::abs(w[i]) + 2e-3);
  EXPECT_EQ(far, 0u) << "rows " << rows << " chunks " << chunks
                     << ": outputs more than two bf16 steps from the oracle";
}

// Chunked attention + combine against the oracle's gqaAttention: a
// Qwen3-8B layer's heads (32 query heads over 8 kv heads of 128), one row
// (context 0), fewer rows than chunks (empty chunks), and long contexts;
// and a shape with one query head per kv head (64 wide).
TEST(Gqa, ChunkedAttentionMatchesTheOracle) {
  REQUIRE_GPU();
  runGqaAttention<32, 8, 128>(1, 16, 1);
  runGqaAttention<32, 8, 128>(7, 16, 2);
  runGqaAttention<32, 8, 128>(300, 1, 3);
  runGqaAttention<32, 8, 128>(2049, 64, 4);
  runGqaAttention<4, 4, 64>(513, 8, 5);
}

//===----------------------------------------------------------------------===//
// KDA head chunk + conv window commit
//===----------------------------------------------------------------------===//

constexpr int KH = 2, KDK = 128, KCH = 32, KCONV = 4, KC = KH * KDK;

__global__ void __launch_bounds__(T, 1)
    kdaKernel(const mk::bf16 *q, const mk::bf16 *k, const mk::bf16 *v, const mk::bf16 *g,
              const mk::bf16 *b, const mk::bf16 *cw, const mk::bf16 *wq, const mk::bf16 *wk,
              const mk::bf16 *wv, const float *Sin, float *Sout, mk::bf16 *o) {
  extern __shared__ float smem[];
  for (int t = blockIdx.x; t < KH * KDK / KCH; t += gridDim.x)
    mk::kda_head_chunk_task<T, KDK, KCH, KCONV>(t, KC, q, k, v, g, b, cw, wq, wk, wv, Sin, Sout,
                                                o, smem);
}

__global__ void commitKernel(const mk::bf16 *q, const mk::bf16 *k, const mk::bf16 *v,
                             mk::bf16 *wq, mk::bf16 *wk, mk::bf16 *wv) {
  const mk::bf16 *nr[3] = {q, k, v};
  const mk::bf16 *wi[3] = {wq, wk, wv};
  mk::bf16 *wo[3] = {wq, wk, wv};
  const int per = (KC + gridDim.x - 1) / gridDim.x;
  mk::conv_window_commit<KCONV>(blockIdx.x * per, min(KC, (int)(blockIdx.x + 1) * per), KC, nr,
                                wi, wo);
}

TEST(Kda, HeadChunksMatchDeltaRule) {
  REQUIRE_GPU();
  Rng r(11);
  auto q = randBf16(r, KC, 0.5f), k = randBf16(r, KC, 0.5f), v = randBf16(r, KC, 0.5f);
  auto g = randBf16(r, KC, 1.f), b = randBf16(r, KH, 1.f);
  auto cw = randBf16(r, 3 * KC * KCONV, 0.3f);
  std::vector<std::vector<HB>> win(3);
  for (auto &w : win)
    w = randBf16(r, (KCONV - 1) * KC, 0.1f);
  std::vector<float> S(KH * KDK * KDK);
  for (auto &s : S)
    s = r.normal(0.05f);
  Dev<HB> dq(q), dk(k), dv(v), dg(g), db(b), dcw(cw), dw0(win[0]), dw1(win[1]), dw2(win[2]);
  Dev<float> dS(S);
  Dev<HB> dO(KC);
  const size_t smem = mk::kda_smem_floats<T, KDK, KCH>() * sizeof(float);
  kdaKernel<<<5, T, smem>>>(dq.as<mk::bf16>(), dk.as<mk::bf16>(), dv.as<mk::bf16>(),
                            dg.as<mk::bf16>(), db.as<mk::bf16>(), dcw.as<mk::bf16>(),
                            dw0.as<mk::bf16>(), dw1.as<mk::bf16>(), dw2.as<mk::bf16>(), dS.p,
                            dS.p, dO.as<mk::bf16>());
  CK(cudaGetLastError());
  commitKernel<<<3, 128>>>(dq.as<mk::bf16>(), dk.as<mk::bf16>(), dv.as<mk::bf16>(),
                           dw0.as<mk::bf16>(), dw1.as<mk::bf16>(), dw2.as<mk::bf16>());
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());

  // CPU reference, straight from the spec.
  auto conv = [&](const std::vector<HB> &x, const std::vector<HB> &w, int idx, int c) {
    double acc = 0;
    for (int t = 0; t < KCONV - 1; ++t)
      acc += double(w[(size_t)t * KC + c].toFloat()) *
             cw[((size_t)idx * KC + c) * KCONV + t].toFloat();
    acc += double(x[c].toFloat()) * cw[((size_t)idx * KC + c) * KCONV + KCONV - 1].toFloat();
    float a = float(acc);
    return mk::roundBf16(a / (1.f + std::exp(-a)));
  };
  std::vector<double> Sref(S.begin(), S.end()), oref(KC);
  for (int h = 0; h < KH; ++h) {
    std::vector<double> qf(KDK), kf(KDK), vf(KDK), eg(KDK);
    for (int i = 0; i < KDK; ++i) {
      const int c = h * KDK + i;
      qf[i] = conv(q, win[0], 0, c) / std::sqrt(double(KDK));
      kf[i] = conv(k, win[1], 1, c);
      vf[i] = conv(v, win[2], 2, c);
      const double gr = g[c].toFloat();
      eg[i] = std::exp(-std::log1p(std::exp(gr)));
    }
    const double beta = 1.0 / (1.0 + std::exp(-double(b[h].toFloat())));
    double *Sh = &Sref[(size_t)h * KDK * KDK];
    for (int j = 0; j < KDK; ++j) {
      double pred = 0;
      for (int i = 0; i < KDK; ++i) {
        Sh[i * KDK + j] *= eg[i];
        pred += Sh[i * KDK + j] * kf[i];
      }
      double o = 0;
      for (int i = 0; i < KDK; ++i) {
        Sh[i * KDK + j] += beta * kf[i] * (vf[j] - pred);
        o += Sh[i * KDK + j] * qf[i];
      }
      oref[h * KDK + j] = o;
    }
  }
  auto Sg = dS.get();
  EXPECT_LT(relErr(Sg, Sref), 1e-5);
  auto og = toFloat(dO.get());
  EXPECT_GT(cosine(og, oref), 0.9999);
  for (int c = 0; c < KC; ++c)
    EXPECT_NEAR(og[c], oref[c], 0.01 * std::abs(oref[c]) + 1e-4) << "channel " << c;
  // Windows: [prev1, prev2, new], pre-convolution values.
  const std::vector<HB> *news[3] = {&q, &k, &v};
  for (int w = 0; w < 3; ++w) {
    Dev<HB> *dw = w == 0 ? &dw0 : w == 1 ? &dw1 : &dw2;
    auto got = dw->get();
    for (int c = 0; c < KC; ++c) {
      ASSERT_EQ(got[c].bits, win[w][KC + c].bits);
      ASSERT_EQ(got[KC + c].bits, win[w][2 * KC + c].bits);
      ASSERT_EQ(got[2 * KC + c].bits, (*news[w])[c].bits);
    }
  }
}

/// The released KDA's gated output norm as its own task (one block per
/// head) and as the output projection stages it (kda_gated_norm_stage over
/// a slice of whole heads, heads [k0 / DK, k1 / DK)).
constexpr int GNH = 20, GNC = GNH * KDK;
__global__ void __launch_bounds__(T, 1)
    gatedNormTaskKernel(const mk::bf16 *o, const mk::bf16 *gate, const mk::bf16 *w, mk::bf16 *z) {
  mk::kda_gated_norm_task<T, KDK>(blockIdx.x, o, gate, w, 1e-5f, z);
}
__global__ void __launch_bounds__(T, 1)
    gatedNormStageKernel(const mk::bf16 *o, const mk::bf16 *gate, const mk::bf16 *w, int k0,
                         int k1, float *out) {
  __shared__ float stage[GNC];
  mk::kda_gated_norm_stage<T, KDK>(o, gate, w, 1e-5f, stage, k0, k1);
  __syncthreads();
  for (int i = threadIdx.x; i < k1 - k0; i += T)
    out[k0 + i] = stage[i];
}

TEST(Kda, GatedNormStagedAsItsTaskWritesIt) {
  REQUIRE_GPU();
  Rng r(12);
  auto o = randBf16(r, GNC, 0.7f), gate = randBf16(r, GNC, 2.f), w = randBf16(r, KDK, 1.f);
  Dev<HB> dO(o), dG(gate), dW(w), dZ(GNC);
  Dev<float> dS(GNC);
  gatedNormTaskKernel<<<GNH, T>>>(dO.as<mk::bf16>(), dG.as<mk::bf16>(), dW.as<mk::bf16>(),
                                  dZ.as<mk::bf16>());
  CK(cudaGetLastError());
  // Slices of 1, 2 and 17 heads: fewer heads than the block's warps (T /
  // 32), and more (a warp then takes a second head).
  static_assert(17 > T / 32, "the last slice has more heads than warps");
  for (auto [h0, h1] : {std::pair{0, 1}, std::pair{1, 3}, std::pair{3, 20}})
    gatedNormStageKernel<<<1, T>>>(dO.as<mk::bf16>(), dG.as<mk::bf16>(), dW.as<mk::bf16>(),
                                   h0 * KDK, h1 * KDK, dS.p);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  auto z = dZ.get();
  auto staged = dS.get();
  for (int c = 0; c < GNC; ++c) {
    uint32_t got, want;
    const float zf = z[c].toFloat();
    std::memcpy(&got, &staged[c], 4);
    std::memcpy(&want, &zf, 4);
    ASSERT_EQ(got, want) << "value " << c << ": staged " << staged[c] << ", task " << zf;
  }
  // And the task against the formula (fp32 until the one rounding).
  for (int h = 0; h < GNH; ++h) {
    double ss = 0;
    for (int i = 0; i < KDK; ++i)
      ss += double(o[h * KDK + i].toFloat()) * o[h * KDK + i].toFloat();
    const double rr = 1.0 / std::sqrt(ss / KDK + 1e-5);
    for (int i = 0; i < KDK; ++i) {
      const int c = h * KDK + i;
      const double want = o[c].toFloat() * rr * w[i].toFloat() /
                          (1.0 + std::exp(-double(gate[c].toFloat())));
      EXPECT_NEAR(z[c].toFloat(), want, 0.01 * std::abs(want) + 1e-5) << "value " << c;
    }
  }
}

//===----------------------------------------------------------------------===//
// MLA: rope + append, absorbed attention, combine + W_v
//===----------------------------------------------------------------------===//

constexpr int NOPE = 128, ROPE = 64, VH = 128, LORA = 512, QD = NOPE + ROPE;

template <int HM>
__global__ void ropeKernel(int pos, const mk::bf16 *q, const mk::bf16 *kv, mk::bf16 *qr,
                           const mk::bf16 *ckvIn, const mk::bf16 *krIn, mk::bf16 *ckvOut,
                           mk::bf16 *krOut) {
  mk::mla_rope_append<T, HM, NOPE, ROPE, LORA>(blockIdx.x, gridDim.x, pos, 10000.f, q, kv, qr,
                                               ckvIn, krIn, ckvOut, krOut);
}
template <int HM>
__global__ void __launch_bounds__(T, 1)
    absorbKernel(const mk::bf16 *q, const uint8_t *wq, const mk::bf16 *s, const mk::bf16 *z,
                 float *qabs) {
  extern __shared__ float smem[];
  constexpr int tasks = HM * LORA / mk::mla_absorb_rows<T, NOPE, LORA>();
  for (int t = blockIdx.x; t < tasks; t += gridDim.x)
    mk::mla_q_absorb_task<T, HM, NOPE, ROPE, VH, LORA, 128>(t, q, wq, s, z, qabs, smem);
}
// The attention form a test runs: the one mla_attention_chunk_task picks
// (the block-wide one, or with -DMK_MLA_ATTENTION_SLICED the sliced one
// where it fits), the sliced one, or the block-wide one with its
// probabilities formed in every warp (WARP_SOFTMAX), or the block-wide one
// with its rows moved by bulk copies (BULK_ROWS), or the block-wide one with
// its query fragments in registers (QUERY_REGS), its softmax half-warps on
// adjacent heads (SOFTMAX_ADJACENT), or every warp scoring all rows of a
// sub-chunk (SCORE_ALL_ROWS), whatever the build's macros.
enum MlaForm : int {
  kMlaPicked = 0,
  kMlaSliced = 1,
  kMlaWarpSoftmaxForm = 2,
  kMlaBulkRowsForm = 3,
  kMlaQueryRegsForm = 4,
  kMlaSoftmaxAdjacentForm = 5,
  kMlaScoreAllRowsForm = 6
};
// AT threads, FORM an MlaForm, the queries and probabilities in PARTS
// parts, a chunk per CROWS rows at most.
template <int HM, int HG, int SUB, int AT, int FORM, int PARTS = 2, int CROWS = 16,
          class PT = float>
__global__ void __launch_bounds__(AT, 1)
    attnKernel(int rows, float scale, const float *qabs, const mk::bf16 *qr, const mk::bf16 *ckv,
               const mk::bf16 *kr, float *pm, float *pl, PT *pa, int *nchOut) {
  extern __shared__ float smem[];
  const int nch = mk::mla_num_chunks(rows, gridDim.x, 64, CROWS);
  if (blockIdx.x == 0 && threadIdx.x == 0)
    *nchOut = nch;
  // Head groups of HG: HM / HG tasks per chunk.
  for (int t = blockIdx.x; t < nch * (HM / HG); t += gridDim.x)
    if constexpr (FORM == kMlaSliced)
      mk::mla_attention_chunk_task_sliced<AT, HM, HG, LORA, ROPE>(t, nch, rows, scale, qabs, qr,
                                                                  ckv, kr, pm, pl, pa, smem);
    else if constexpr (FORM == kMlaPicked)
      mk::mla_attention_chunk_task<AT, HM, HG, LORA, ROPE, SUB, PARTS, PT>(
          t, nch, rows, scale, qabs, qr, ckv, kr, pm, pl, pa, smem);
    else // the block-wide form, FORM's parameter on, the others the build's
         // (the query-register form with SCORE_ALL_ROWS off, which it yields to)
      mk::mla_attention_chunk_task_blockwide<
          AT, HM, HG, LORA, ROPE, SUB, mk::NoPrologue, PARTS,
          FORM == kMlaWarpSoftmaxForm || mk::kMlaWarpSoftmax,
          FORM == kMlaBulkRowsForm || mk::kMlaBulkRows,
          FORM == kMlaQueryRegsForm || mk::kMlaQueryRegs,
          FORM == kMlaSoftmaxAdjacentForm || mk::kMlaSoftmaxAdjacent,
          FORM == kMlaScoreAllRowsForm || (FORM != kMlaQueryRegsForm && mk::kMlaScoreAllRows)>(
          t, nch, rows, scale, qabs, qr, ckv, kr, pm, pl, pa, smem);
}
// Latent-dim slices per head, as the partition cuts them (fp32 sums).
constexpr int kCombineSlices = 4;
// The queries' copy, the absorb tasks, the attention chunks and the
// combine tasks in one launch, the last three in their waiting forms
// (schedule-prologue-waits absorb=true, attention, combine=true): every
// block copies its share of the projected queries and signals counter 1;
// each absorb task loads its first weights, waits for those signals,
// stages q_nope and signals counter 0; each chunk asks for its first cache
// rows, waits for every absorb task's signal, then stages the absorbed
// queries, and signals counter 2; each combine task asks for its first W_v
// rows, waits for every chunk's signal, then merges the partials.
// calls[0] counts the chunks' waits, calls[1] the absorb tasks', calls[2]
// the combine tasks'.
template <int HM, int HG, int SUB, class PT = float>
__global__ void __launch_bounds__(T, 1)
    absorbAttnWaitingKernel(const mk::bf16 *qsrc, mk::bf16 *q, int qn, const uint8_t *wq,
                            const mk::bf16 *s, const mk::bf16 *z, float *qabs, int rows,
                            float scale, const mk::bf16 *qr, const mk::bf16 *ckv,
                            const mk::bf16 *kr, float *pm, float *pl, PT *pa, int *nchOut,
                            float *o, unsigned *sync, unsigned *calls) {
  extern __shared__ float smem[];
  copyShareThenSignal(qsrc, q, qn, sync, 1);
  constexpr int absorbTasks = HM * LORA / mk::mla_absorb_rows<T, NOPE, LORA>();
  for (int t = blockIdx.x; t < absorbTasks; t += gridDim.x) {
    mk::mla_q_absorb_task_waiting<T, HM, NOPE, ROPE, VH, LORA, 128>(
        t, q, wq, s, z, qabs, smem,
        CountingWait{mk::CounterWaits{sync, 1, 1, gridDim.x}, calls + 1});
    mk::counter_signal(sync, 0);
  }
  __syncthreads();
  const int nch = mk::mla_num_chunks(rows, gridDim.x, 64);
  if (blockIdx.x == 0 && threadIdx.x == 0)
    *nchOut = nch;
  for (int t = blockIdx.x; t < nch * (HM / HG); t += gridDim.x) {
    mk::mla_attention_chunk_task_waiting<T, HM, HG, LORA, ROPE, SUB>(
        t, nch, rows, scale, qabs, qr, ckv, kr, pm, pl, pa, smem,
        CountingWait{mk::CounterWaits{sync, 0, 1, unsigned(absorbTasks)}, calls});
    mk::counter_signal(sync, 2);
  }
  __syncthreads();
  constexpr int span = LORA / kCombineSlices;
  for (int t = blockIdx.x; t < HM * kCombineSlices; t += gridDim.x) {
    const int h = t / kCombineSlices, d0 = (t % kCombineSlices) * span;
    mk::mla_combine_wv_task_waiting<T, HM, NOPE, VH, LORA, 128>(
        h, d0, d0 + span, nch, pm, pl, pa, wq, s, z, o, smem,
        CountingWait{mk::CounterWaits{sync, 2, 1, unsigned(nch * (HM / HG))}, calls + 2});
    __syncthreads();
  }
}
template <int HM, class PT = float>
__global__ void __launch_bounds__(T, 1)
    combineKernel(const int *nch, const float *pm, const float *pl, const PT *pa,
                  const uint8_t *wq, const mk::bf16 *s, const mk::bf16 *z, float *o) {
  extern __shared__ float smem[];
  constexpr int span = LORA / kCombineSlices;
  for (int t = blockIdx.x; t < HM * kCombineSlices; t += gridDim.x) {
    const int h = t / kCombineSlices, d0 = (t % kCombineSlices) * span;
    mk::mla_combine_wv_task<T, HM, NOPE, VH, LORA, 128>(h, d0, d0 + span, *nch, pm, pl, pa, wq, s,
                                                        z, o, smem);
  }
}

/// HM heads in attention tasks of HG heads (2: A rows 8-15 carry the lo
/// parts; 16: they carry heads), sub-chunks of SUB cache rows, the
/// attention in blocks of AT threads in form FORM (an MlaForm), its queries
/// and probabilities in PARTS bf16 parts, a chunk per CROWS rows at most
/// (PARTS and CROWS: the separate launches, not WAITING's).
template <int HM = 4, int HG = 2, int SUB = mk::kMlaSub, int AT = T, int FORM = kMlaPicked,
          bool WAITING = false, int PARTS = 2, int CROWS = 16, class PT = float>
void runMla(int ctx, bool adopt, uint64_t seed) {
  static_assert(!WAITING || (AT == T && FORM == kMlaPicked),
                "the waiting form runs in the absorb's blocks");
  Rng r(seed);
  const int rows = ctx + 1;
  auto q = randBf16(r, HM * QD, 1.f), kv = randBf16(r, LORA + ROPE, 1.f);
  auto ckv = randBf16(r, (size_t)ctx * LORA, 0.1f), kr = randBf16(r, (size_t)ctx * ROPE, 0.1f);
  QMat kvb(r, LORA, HM * (NOPE + VH), 128);
  Dev<HB> dq(q), dkv(kv), dqr(HM * ROPE);
  // In place, the in caches need room for the new row; adopting, the out
  // caches are separate (and larger, like a runtime's capacity).
  std::vector<HB> cIn = ckv, kIn = kr;
  if (!adopt) {
    cIn.resize((size_t)rows * LORA);
    kIn.resize((size_t)rows * ROPE);
  }
  Dev<HB> ckvIn(cIn), krIn(kIn);
  Dev<HB> ckvOut(adopt ? (size_t)(rows + 3) * LORA : 1), krOut(adopt ? (size_t)(rows + 3) * ROPE : 1);
  HB *co = adopt ? ckvOut.p : ckvIn.p, *ko = adopt ? krOut.p : krIn.p;
  Dev<uint8_t> dw(kvb.wq);
  Dev<HB> ds(kvb.s), dz(kvb.z);
  Dev<float> qabs(HM * LORA), pm(64 * HM), pl(64 * HM), pa((size_t)64 * HM * LORA);
  Dev<int> nch(1);
  Dev<float> dO(HM * VH);
  dO.zero();
  ropeKernel<HM><<<7, T>>>(ctx, dq.as<mk::bf16>(), dkv.as<mk::bf16>(), dqr.as<mk::bf16>(),
                       ckvIn.as<mk::bf16>(), krIn.as<mk::bf16>(), (mk::bf16 *)co, (mk::bf16 *)ko);
  CK(cudaGetLastError());
  static_assert(!WAITING || (PARTS == 2 && CROWS == 16), "the fused launch takes the defaults");
  const size_t asmem =
      mk::mla_attention_smem_floats<AT, HG, LORA, ROPE, SUB, PARTS>() * sizeof(float);
  const float scale = 1.f / std::sqrt(float(QD));
  Dev<unsigned> sync(mk::sync_bytes(3) / 4), calls(3);
  Dev<HB> qcopy(q.size());
  if constexpr (WAITING) {
    // One launch: the queries' copy and the absorb tasks signal, the absorb
    // tasks and the chunks wait in their prologues.
    sync.zero();
    calls.zero();
    const size_t wsmem =
        std::max({asmem, NOPE * sizeof(float),
                  mk::mla_combine_waiting_smem_floats<T, VH, LORA>(LORA / kCombineSlices, 64) *
                      sizeof(float)});
    auto fused = absorbAttnWaitingKernel<HM, HG, SUB, PT>;
    CK(cudaFuncSetAttribute(fused, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)wsmem));
    if (!allResident(fused, 23, T, wsmem))
      GTEST_SKIP() << "23 blocks do not fit this GPU at once";
    fused<<<23, T, wsmem>>>(dq.as<mk::bf16>(), qcopy.as<mk::bf16>(), int(q.size()), dw.p,
                            ds.as<mk::bf16>(), dz.as<mk::bf16>(), qabs.p, rows, scale,
                            dqr.as<mk::bf16>(), (mk::bf16 *)co, (mk::bf16 *)ko, pm.p, pl.p,
                            reinterpret_cast<PT *>(pa.p), nch.p, dO.p, sync.p, calls.p);
    CK(cudaGetLastError());
  } else {
    absorbKernel<HM><<<9, T, NOPE * sizeof(float)>>>(dq.as<mk::bf16>(), dw.p,
                                                     ds.as<mk::bf16>(), dz.as<mk::bf16>(), qabs.p);
    CK(cudaGetLastError());
    auto attn = attnKernel<HM, HG, SUB, AT, FORM, PARTS, CROWS, PT>;
    CK(cudaFuncSetAttribute(attn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)asmem));
    attn<<<23, AT, asmem>>>(rows, scale, qabs.p, dqr.as<mk::bf16>(), (mk::bf16 *)co,
                            (mk::bf16 *)ko, pm.p, pl.p, reinterpret_cast<PT *>(pa.p), nch.p);
    CK(cudaGetLastError());
  }
  if constexpr (!WAITING) { // else the fused launch's combine tasks
    // At most a chunk per CROWS rows, one per block (23), 64 at most.
    EXPECT_EQ(nch.get()[0], std::max(1, std::min({(rows + CROWS - 1) / CROWS, 23, 64})))
        << "chunks of ctx " << ctx;
    const size_t csmem = mk::mla_combine_smem_floats<T, VH, LORA>() * sizeof(float);
    CK(cudaFuncSetAttribute(combineKernel<HM, PT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)csmem));
    combineKernel<HM, PT><<<3, T, csmem>>>(nch.p, pm.p, pl.p, reinterpret_cast<const PT *>(pa.p),
                                           dw.p, ds.as<mk::bf16>(), dz.as<mk::bf16>(), dO.p);
    CK(cudaGetLastError());
  }
  CK(cudaDeviceSynchronize());
  if constexpr (WAITING) {
    const std::vector<unsigned> c = calls.get();
    EXPECT_EQ(c[0], unsigned(nch.get()[0] * (HM / HG))) << "one wait per chunk task";
    EXPECT_EQ(c[1], unsigned(HM * LORA / mk::mla_absorb_rows<T, NOPE, LORA>()))
        << "one wait per absorb task";
    EXPECT_EQ(c[2], unsigned(HM * kCombineSlices)) << "one wait per combine task";
  }

  // Reference: materialized form in double, from the spec.
  auto rope = [&](float x0, float x1, int p, float *out) {
    const float inv = std::pow(10000.f, -float(2 * p) / float(ROPE));
    const float a = float(ctx) * inv;
    out[0] = mk::roundBf16(x0 * std::cos(a) - x1 * std::sin(a));
    out[1] = mk::roundBf16(x1 * std::cos(a) + x0 * std::sin(a));
  };
  std::vector<float> C((size_t)rows * LORA), KR((size_t)rows * ROPE), QR(HM * ROPE);
  for (size_t i = 0; i < (size_t)ctx * LORA; ++i)
    C[i] = ckv[i].toFloat();
  for (size_t i = 0; i < (size_t)ctx * ROPE; ++i)
    KR[i] = kr[i].toFloat();
  for (int d = 0; d < LORA; ++d)
    C[(size_t)ctx * LORA + d] = kv[d].toFloat();
  for (int p = 0; p < ROPE / 2; ++p)
    rope(kv[LORA + 2 * p].toFloat(), kv[LORA + 2 * p + 1].toFloat(), p,
         &KR[(size_t)ctx * ROPE + 2 * p]);
  for (int h = 0; h < HM; ++h)
    for (int p = 0; p < ROPE / 2; ++p)
      rope(q[h * QD + NOPE + 2 * p].toFloat(), q[h * QD + NOPE + 2 * p + 1].toFloat(), p,
           &QR[h * ROPE + 2 * p]);
  // Appended cache rows must match exactly (copy + rope in fp32 like the GPU).
  auto cg = (adopt ? ckvOut : ckvIn).get(), kg = (adopt ? krOut : krIn).get();
  for (size_t i = 0; i < (size_t)rows * LORA; ++i)
    ASSERT_EQ(cg[i].toFloat(), C[i]) << "c_kv element " << i;
  int krMismatch = 0;
  for (size_t i = 0; i < (size_t)rows * ROPE; ++i)
    krMismatch += std::abs(kg[i].toFloat() - KR[i]) > 0.01f * std::abs(KR[i]) + 1e-6f;
  EXPECT_EQ(krMismatch, 0);
  std::vector<double> oref(HM * VH);
  for (int h = 0; h < HM; ++h) {
    std::vector<double> sc(rows);
    double mx = -1e300;
    for (int l = 0; l < rows; ++l) {
      double s = 0;
      for (int n = 0; n < NOPE; ++n) {
        double kn = 0;
        for (int c = 0; c < LORA; ++c)
          kn += double(C[(size_t)l * LORA + c]) * kvb.w(c, h * (NOPE + VH) + n);
        s += double(q[h * QD + n].toFloat()) * kn;
      }
      for (int d = 0; d < ROPE; ++d)
        s += double(QR[h * ROPE + d]) * KR[(size_t)l * ROPE + d];
      sc[l] = s / std::sqrt(double(QD));
      mx = std::max(mx, sc[l]);
    }
    double den = 0;
    for (int l = 0; l < rows; ++l)
      den += std::exp(sc[l] - mx);
    std::vector<double> olat(LORA, 0.0);
    for (int l = 0; l < rows; ++l) {
      const double p = std::exp(sc[l] - mx) / den;
      for (int c = 0; c < LORA; ++c)
        olat[c] += p * C[(size_t)l * LORA + c];
    }
    for (int n = 0; n < VH; ++n) {
      double o = 0;
      for (int c = 0; c < LORA; ++c)
        o += olat[c] * kvb.w(c, h * (NOPE + VH) + NOPE + n);
      oref[h * VH + n] = o;
    }
  }
  std::vector<float> og = dO.get();
  for (float &v : og)
    v = mk::roundBf16(v); // what o's consumer reads
  for (float v : og)
    ASSERT_TRUE(std::isfinite(v));
  EXPECT_GT(cosine(og, oref), 0.9999) << "ctx " << ctx;
  EXPECT_LT(relErr(og, oref), 1e-2) << "ctx " << ctx;
}

/// The combine's merge alone (mla_combine_merge): 256 threads, a block per
/// (head, latent slice of SPAN dims) task, the slice's merged values to
/// `out` ([head][LORA]). LENT: the partials staged in a stage area past the
/// scratch (the waiting form's), of `stageFloats` floats.
template <int HM, int LORA, int SPAN, bool LENT, class PT>
__global__ void __launch_bounds__(256, 1)
    mergeKernel(int nchunks, const float *pm, const float *pl, const PT *pa, float *out,
                int scratchFloats, int stageFloats) {
  extern __shared__ float smem[];
  const int h = blockIdx.x / (LORA / SPAN), d0 = blockIdx.x % (LORA / SPAN) * SPAN;
  float *xs = smem, *scratch = smem + LORA, *stage = scratch + scratchFloats;
  mk::StageClock clk;
  mk::mla_combine_merge<256, HM, LORA, LENT, PT>(h, d0, d0 + SPAN, nchunks, pm, pl, pa, xs,
                                                 scratch, scratchFloats, clk,
                                                 LENT ? stage : nullptr, stageFloats);
  for (int d = threadIdx.x; d < SPAN; d += 256)
    out[h * LORA + d0 + d] = xs[d0 + d];
}

/// mla_combine_merge on synthetic partials of `nchunks` chunks (every 7th
/// empty: maximum -inf, sum 0) against a double reference of the merge
/// sum_c w_c acc_c / sum_c w_c l_c, w_c = exp(m_c - max m). STAGE: room to
/// stage the partials (in the scratch, or LENT in a stage area), else the
/// merge reads them from L2.
template <int SPAN, bool LENT, class PT> void runMerge(int nchunks, bool stage, uint64_t seed) {
  constexpr int HM = 3, LORA = 256;
  Rng r(seed);
  std::vector<float> m((size_t)HM * nchunks), l(m.size());
  // The partials on the host: float, or mk::BFloat16 for bf16 (the same bits).
  using HostPT = std::conditional_t<std::is_same_v<PT, float>, float, HB>;
  std::vector<HostPT> acc((size_t)nchunks * HM * LORA);
  std::vector<double> accd(acc.size());
  for (int c = 0; c < nchunks; ++c)
    for (int h = 0; h < HM; ++h) {
      const bool empty = c % 7 == 3;
      // The statistics head-major (mla_stat_at), the sums [chunk][head][LORA].
      m[(size_t)h * nchunks + c] = empty ? -INFINITY : r.normal(2.f);
      l[(size_t)h * nchunks + c] = empty ? 0.f : r.uniform(0.5f, 4.f);
      for (int d = 0; d < LORA; ++d) {
        const size_t i = ((size_t)c * HM + h) * LORA + d;
        // An empty chunk's sums are junk: its weight, 0, must drop them.
        acc[i] = HostPT(empty ? 1e3f + d : r.normal(1.f));
        accd[i] = double(float(acc[i]));
      }
    }
  const int mergeFloats = (mk::mla_combine_merge_floats<256>(SPAN, nchunks) + 3) / 4 * 4;
  const int stagedFloats = nchunks * SPAN * (int)sizeof(PT) / 4;
  const int scratchFloats = stage && !LENT ? mergeFloats + stagedFloats : mergeFloats;
  // LENT without room: a stage area one piece short of the partials.
  const int stageFloats = LENT ? (stage ? stagedFloats : stagedFloats - 4) : 0;
  const size_t smem = (LORA + scratchFloats + std::max(stageFloats, 0)) * sizeof(float);
  Dev<float> dm(m), dl(l), out((size_t)HM * LORA);
  Dev<HostPT> da(acc);
  auto k = mergeKernel<HM, LORA, SPAN, LENT, PT>;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  k<<<HM * (LORA / SPAN), 256, smem>>>(nchunks, dm.p, dl.p, da.template as<PT>(), out.p,
                                       scratchFloats, stageFloats);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  const std::vector<float> got = out.get();
  for (int h = 0; h < HM; ++h) {
    double M = -INFINITY;
    for (int c = 0; c < nchunks; ++c)
      M = std::max(M, double(m[(size_t)h * nchunks + c]));
    double W = 0;
    std::vector<double> w(nchunks);
    for (int c = 0; c < nchunks; ++c) {
      const double mc = m[(size_t)h * nchunks + c];
      w[c] = mc == -INFINITY ? 0.0 : std::exp(mc - M);
      W += w[c] * l[(size_t)h * nchunks + c];
    }
    for (int d = 0; d < LORA; ++d) {
      double want = 0, mag = 0;
      for (int c = 0; c < nchunks; ++c) {
        const double x = w[c] * accd[((size_t)c * HM + h) * LORA + d];
        want += x;
        mag += std::fabs(x);
      }
      // fp32 sums: a relative rounding of ~2^-24 per term, over at most 300.
      const double tol = (2e-5 * mag + 1e-7) / W;
      ASSERT_NEAR(got[(size_t)h * LORA + d], want / W, tol)
          << "head " << h << " dim " << d << " of " << nchunks << " chunks";
    }
  }
}

// The merge at more chunks than the attention tests reach (their grids
// cap the chunks at 23): 40, 300 (more chunks than threads: each thread
// loads several chunks' statistics), 130, 23 and 5; staged in the scratch,
// in a lent stage area, and read from L2; fp32 and bf16 partials; slices
// of 64 dims (4 chunk shares per dim) and of 256 (one).
TEST(Mla, MergeManyChunks) {
  REQUIRE_GPU();
  runMerge<64, false, mk::bf16>(40, true, 131);
  runMerge<64, false, float>(300, true, 132);
  runMerge<64, true, mk::bf16>(300, true, 133);
  runMerge<64, true, float>(40, false, 134);
  runMerge<64, false, float>(40, false, 135);
  runMerge<64, false, mk::bf16>(300, false, 139);
  runMerge<256, false, float>(5, true, 136);
  runMerge<256, false, mk::bf16>(130, true, 137);
  runMerge<256, true, mk::bf16>(23, true, 138);
}

TEST(Mla, AbsorbedAttentionInPlace) {
  REQUIRE_GPU();
  runMla(300, false, 21);
}
TEST(Mla, AbsorbedAttentionAdoptsForeignCache) {
  REQUIRE_GPU();
  runMla(1000, true, 22);
}
TEST(Mla, SingleRowContext) {
  REQUIRE_GPU();
  runMla(0, false, 23);
}
TEST(Mla, SixteenHeadGroups) {
  REQUIRE_GPU();
  runMla<16, 16>(300, false, 24); // A rows 8-15 carry heads 8-15
  runMla<32, 16>(40, false, 25);  // two groups per chunk, a short last sub-chunk
}
// attention-query-parts=1: 16 heads' queries and probabilities in one bf16
// part each (one mma per step, the ring's third slot); with
// attention-chunk-rows=32, at most a chunk per 32 rows. The same bounds as
// the two-part form against the fp32 reference.
static_assert(mk::mla_attention_stages<16, 16, 1>() == 3 &&
                  mk::mla_attention_stages<16, 16, 2>() == 2 &&
                  mk::mla_attention_mma_smem_floats<256, 16, LORA, ROPE, 16, 1>() ==
                      mk::mla_attention_mma_smem_floats<256, 16, LORA, ROPE, 16, 2>(),
              "one part: the query rows' lo half becomes the ring's third slot");
TEST(Mla, OnePartSixteenHeads) {
  REQUIRE_GPU();
  runMla<16, 16, 16, T, kMlaPicked, false, 1>(300, false, 26);
  runMla<32, 16, 16, T, kMlaPicked, false, 1>(40, false, 27); // a short last sub-chunk
  runMla<32, 16, 16, T, kMlaPicked, false, 1, 32>(300, true, 28); // 10 chunks, not 19
  runMla<32, 16, 16, T, kMlaPicked, false, 1, 32>(0, false, 29);  // the new row alone
  // At the unit's 256 threads (8 warps) 16 heads outnumber the warps: the
  // softmax stage takes a head per 16 lanes, in one part and in two.
  runMla<32, 16, 16, 256, kMlaPicked, false, 1, 32>(300, false, 30);
  runMla<16, 16, 16, 256>(40, false, 31);
}
// The sliced form (-DMK_MLA_ATTENTION_SLICED; up to 16 heads, 16-row
// sub-chunks): at the unit's 256 threads 8 warps of 64 latent dims, 3 ring
// slots; at 512 threads 16 warps of 32 dims, 2 slots; 16 heads fill the A
// rows with heads. (The forms build runs the tests above in it too.)
static_assert(mk::mla_attention_sliced_fits<256, 8, LORA, ROPE>() &&
                  mk::mla_sliced_stages<256, 8, LORA, ROPE>() == 3 &&
                  mk::mla_attention_sliced_fits<256, 16, LORA, ROPE>() &&
                  mk::mla_attention_sliced_fits<T, 2, LORA, ROPE>() &&
                  mk::mla_sliced_stages<T, 2, LORA, ROPE>() == 2,
              "the sliced form's shapes these tests mean to cover");
TEST(Mla, SlicedForm) {
  REQUIRE_GPU();
  runMla<32, 8, 16, 256, kMlaSliced>(2000, false, 30); // the unit's heads and head group
  runMla<4, 2, 16, 256, kMlaSliced>(300, true, 31);
  runMla<4, 2, 16, 256, kMlaSliced>(0, false, 32);
  runMla<32, 8, 16, 256, kMlaSliced>(40, false, 33); // a short last sub-chunk
  runMla<32, 16, 16, 256, kMlaSliced>(2000, false, 34); // 16 heads: A rows 8-15 carry heads 8-15
  runMla<16, 16, 16, 256, kMlaSliced>(40, true, 35);
  runMla<4, 2, 16, T, kMlaSliced>(300, false, 36);
}
// The waiting forms (schedule-prologue-waits absorb=true, attention,
// combine=true): the queries' copy, the absorb tasks, the chunks and the
// combine tasks in one launch, each absorb task waiting for the queries
// after its first weights are loaded, each chunk for the absorbed queries
// after its first rows are asked for, each combine task for every chunk's
// partials after its first W_v rows are; the unit's head group, 16 heads,
// a short context and a single row.
TEST(Mla, WaitingFormWaitsInItsPrologue) {
  REQUIRE_GPU();
  runMla<32, 8, mk::kMlaSub, T, kMlaPicked, true>(2000, false, 37);
  runMla<16, 16, mk::kMlaSub, T, kMlaPicked, true>(300, true, 38);
  runMla<4, 2, mk::kMlaSub, T, kMlaPicked, true>(40, false, 39);
  runMla<4, 2, mk::kMlaSub, T, kMlaPicked, true>(0, false, 40);
}
// The block-wide form with its probabilities formed in every warp
// (-DMK_MLA_WARP_SOFTMAX, opt-in), in every build: the unit's heads and
// head group (the conflict-free partial scores), a short last sub-chunk, a
// single row, adopting a foreign cache, 4 heads (A rows 4-7 past the heads:
// the [KQ][HG][SUB] partial scores), and 16 heads (where the form does not
// apply: the softmax stage's).
TEST(Mla, WarpSoftmaxForm) {
  REQUIRE_GPU();
  runMla<32, 8, 16, T, kMlaWarpSoftmaxForm>(2000, false, 41);
  runMla<32, 8, 16, T, kMlaWarpSoftmaxForm>(40, false, 42);
  runMla<4, 2, 16, T, kMlaWarpSoftmaxForm>(0, false, 43);
  runMla<4, 2, 16, T, kMlaWarpSoftmaxForm>(300, true, 44);
  runMla<16, 16, 16, T, kMlaWarpSoftmaxForm>(300, false, 45);
  runMla<16, 4, 16, T, kMlaWarpSoftmaxForm>(300, false, 46);
  runMla<16, 4, 16, T, kMlaWarpSoftmaxForm>(40, true, 47);
}
// The block-wide form with its rows moved by bulk copies (-DMK_MLA_BULK_ROWS,
// opt-in), in every build: the unit's heads and head group with each ring
// slot filled 3-4 times (its mbarrier's parity back to 0) and several tasks
// per block, a short sub-chunk, a single row, adopting a foreign cache, 16
// heads (the 2-slot ring, refilled; two head groups per chunk) and 32-row
// sub-chunks.
TEST(Mla, BulkRowsForm) {
  REQUIRE_GPU();
  runMla<32, 8, 16, T, kMlaBulkRowsForm>(4000, false, 61);
  runMla<32, 8, 16, T, kMlaBulkRowsForm>(40, false, 62);
  runMla<4, 2, 16, T, kMlaBulkRowsForm>(0, false, 63);
  runMla<4, 2, 16, T, kMlaBulkRowsForm>(300, true, 64);
  runMla<32, 16, 16, T, kMlaBulkRowsForm>(2000, false, 65);
  runMla<4, 2, 32, T, kMlaBulkRowsForm>(300, false, 66);
}
// The one-part 16-head form with its query fragments in registers
// (-DMK_MLA_QUERY_REGS, opt-in), in the default and variants builds (the
// forms build's MK_MLA_SCORE_CHAIN turns it off): the unit's 32 heads in 16-head
// tasks at its 256 threads (the first 5 of a warp's 9 k-steps from
// registers), a short last sub-chunk, a single row adopting a foreign
// cache, and 32-row chunks. (At T threads the form does not apply: 8
// k-groups of 5 steps, the last ones rope steps.)
TEST(Mla, QueryRegsForm) {
  REQUIRE_GPU();
  runMla<32, 16, 16, 256, kMlaQueryRegsForm, false, 1>(2000, false, 71);
  runMla<32, 16, 16, 256, kMlaQueryRegsForm, false, 1>(40, false, 72);
  runMla<16, 16, 16, 256, kMlaQueryRegsForm, false, 1>(0, true, 73);
  runMla<32, 16, 16, 256, kMlaQueryRegsForm, false, 1, 32>(300, false, 74);
  runMla<16, 16, 16, 256, kMlaQueryRegsForm, false, 1, 32>(1000, true, 75);
}
// The 16-head softmax stage with its half-warps on adjacent heads
// (-DMK_MLA_SOFTMAX_ADJACENT, opt-in), in every build: one part and two at
// the unit's 256 threads (16 heads, 8 warps: a head per 16 lanes), a short
// last sub-chunk, a single row adopting a foreign cache.
TEST(Mla, SoftmaxAdjacentForm) {
  REQUIRE_GPU();
  runMla<32, 16, 16, 256, kMlaSoftmaxAdjacentForm, false, 1>(2000, false, 76);
  runMla<32, 16, 16, 256, kMlaSoftmaxAdjacentForm, false, 1>(40, false, 77);
  runMla<16, 16, 16, 256, kMlaSoftmaxAdjacentForm, false, 1>(0, true, 78);
  runMla<32, 16, 16, 256, kMlaSoftmaxAdjacentForm>(300, false, 79);
}
// The one-part 16-head form with every warp scoring both row tiles of a
// sub-chunk over its own k-steps (-DMK_MLA_SCORE_ALL_ROWS, opt-in), in the
// default and variants builds (the forms build's MK_MLA_SCORE_CHAIN turns
// it off): the unit's 32 heads in 16-head tasks at its 256 threads (warps of
// 4 and 5 of the 36 k-steps, the 4 rope steps in the last warp's), a short last
// sub-chunk, a single row adopting a foreign cache, 32-row chunks, 12 heads
// (A rows 12-15 past the heads) and 128 threads (4 warps of 9 steps).
TEST(Mla, ScoreAllRowsForm) {
  REQUIRE_GPU();
  runMla<32, 16, 16, 256, kMlaScoreAllRowsForm, false, 1>(2000, false, 81);
  runMla<32, 16, 16, 256, kMlaScoreAllRowsForm, false, 1>(40, false, 82);
  runMla<16, 16, 16, 256, kMlaScoreAllRowsForm, false, 1>(0, true, 83);
  runMla<32, 16, 16, 256, kMlaScoreAllRowsForm, false, 1, 32>(300, false, 84);
  runMla<24, 12, 16, 256, kMlaScoreAllRowsForm, false, 1>(300, false, 85);
  runMla<16, 16, 16, 128, kMlaScoreAllRowsForm, false, 1>(300, true, 86);
}
// The partial sums in bf16 (schedule-form-phases mla-partials=bf16): the
// attention stores them rounded, the combine's merge copies half the bytes
// (and in the waiting form stages them in the GEMV's ring); the output
// within the same bounds of the double reference: the unit's one-part
// 16-head tasks at 256 threads, two parts with 2 heads, the new row alone,
// and the fused waiting forms.
TEST(Mla, BfloatPartials) {
  REQUIRE_GPU();
  runMla<32, 16, 16, 256, kMlaPicked, false, 1, 32, mk::bf16>(2000, false, 111);
  runMla<4, 2, 16, T, kMlaPicked, false, 2, 16, mk::bf16>(300, true, 112);
  runMla<32, 16, 16, 256, kMlaPicked, false, 1, 32, mk::bf16>(0, false, 113);
  runMla<32, 8, mk::kMlaSub, T, kMlaPicked, true, 2, 16, mk::bf16>(2000, false, 114);
  runMla<4, 2, mk::kMlaSub, T, kMlaPicked, true, 2, 16, mk::bf16>(40, false, 115);
}
// 32-row sub-chunks (attention-sub-rows=32): two ring slots, a k-step of
// the weighted sum per 16 rows; short and single-row contexts included.
TEST(Mla, ThirtyTwoRowSubChunks) {
  REQUIRE_GPU();
  runMla<4, 2, 32>(300, false, 26);
  runMla<8, 8, 32>(1000, true, 27);
  runMla<4, 2, 32>(0, false, 28);
  runMla<32, 8, 32>(40, false, 29); // four groups per chunk, a short last sub-chunk
}

//===----------------------------------------------------------------------===//
// MoE down projection
//===----------------------------------------------------------------------===//

/// The block's share of the down tiles of an N-column output in `ksplit`
/// k-slices of `inter` rows (tile t on block t % gridDim.x, the emitter's
/// instance order: k-slice, then column tile): task(n0, nvalid, k0, k1)
/// for each, a block barrier after each.
template <int TN, class Task>
__device__ void forEachDownTile(int inter, int N, int ksplit, Task &&task) {
  const int tiles = (N + TN - 1) / TN, kslice = inter / ksplit;
  for (int t = blockIdx.x; t < tiles * ksplit; t += gridDim.x) {
    const int k0 = (t / tiles) * kslice, n0 = (t % tiles) * TN;
    task(n0, min(TN, N - n0), k0, k0 + kslice);
    __syncthreads();
  }
}

/// acc += weight * (silu(gate) * up) @ W_down by moe_down_task tiles of TN
/// columns in `ksplit` k-slices; SLICE: each task stages only its k-slice
/// of hmid (the emitter's form for experts wider than the schedule's
/// kMoeDownMaxStagedRows), else all `inter` rows at their own index.
template <int TN, bool SLICE>
__global__ void __launch_bounds__(T, 1)
    moeDownKernel(const float *gate_up, int inter, const uint8_t *wq, const mk::bf16 *s,
                  const mk::bf16 *z, int N, int ksplit, float weight, float *acc) {
  extern __shared__ float smem[];
  forEachDownTile<TN>(inter, N, ksplit, [&](int n0, int nvalid, int k0, int k1) {
    mk::moe_down_task<T, TN, 128, mk::kOrderRowMajor, SLICE>(gate_up, inter, wq, s, z, N, n0,
                                                             nvalid, k0, k1, weight, acc, 0, smem);
  });
}

/// weight * (silu(gate) * up) @ W_down in double, gate and up the halves of
/// `gu`.
std::vector<double> moeDownReference(const QMat &m, const std::vector<float> &gu, int inter,
                                     int N, float weight) {
  std::vector<double> ref(N, 0.0);
  for (int k = 0; k < inter; ++k) {
    const double g = gu[k], hm = g / (1.0 + std::exp(-g)) * gu[inter + k];
    for (int n = 0; n < N; ++n)
      ref[n] += weight * hm * m.w(k, n);
  }
  return ref;
}

template <int TN, bool SLICE> void runMoeDown(int inter, int N, int ksplit, uint64_t seed) {
  Rng r(seed);
  QMat m(r, inter, N, 128);
  std::vector<float> gu(2 * inter);
  for (float &v : gu)
    v = r.normal(1.f);
  const float weight = 0.37f;
  Dev<float> dgu(gu);
  Dev<HB> ds(m.s), dz(m.z);
  Dev<uint8_t> dw(m.wq);
  Dev<float> dacc(N);
  dacc.zero();
  const size_t smem =
      mk::moe_down_smem_floats<T, TN>(SLICE ? inter / ksplit : inter) * sizeof(float);
  CK(cudaFuncSetAttribute(moeDownKernel<TN, SLICE>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          (int)smem));
  moeDownKernel<TN, SLICE><<<5, T, smem>>>(dgu.p, inter, dw.p, ds.as<mk::bf16>(),
                                           dz.as<mk::bf16>(), N, ksplit, weight, dacc.p);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  auto y = dacc.get();
  const std::vector<double> ref = moeDownReference(m, gu, inter, N, weight);
  // hmid is fp32, carried to 16 significant bits on the tensor cores.
  EXPECT_LT(relErr(y, ref), 2e-5) << "SLICE=" << SLICE << " ksplit=" << ksplit;
}

TEST(MoeDown, WholeAndSliceStagingMatchReference) {
  REQUIRE_GPU();
  runMoeDown<128, false>(1024, 384, 1, 41);
  runMoeDown<128, false>(1024, 384, 4, 42);
  runMoeDown<128, true>(1024, 384, 4, 43); // each task stages 256 rows
  runMoeDown<64, true>(2048, 320, 2, 44);
}

/// One producer's signal of counter 0, sent before the waiting tiles' launch.
__global__ void signalCounterZero(unsigned *sync) { mk::counter_signal(sync, 0); }

/// moe_down_task_waiting (the MoE down tiles' waiting form) with its
/// CounterWaits prologue: PRODUCE, every block first copies its share of
/// the gate and up sums into place and signals counter 0, and the tiles
/// wait for all of them (a block's first tile may find the counter reached
/// or not, as the blocks' timing falls; a block's later tiles find it
/// reached); else the sums are in place and the counter reached (1) before
/// the launch, so every tile finds it reached.
template <int TN, bool SLICE, bool PRODUCE>
__global__ void __launch_bounds__(T, 1)
    moeDownWaitingKernel(const float *src, float *gate_up, int inter, const uint8_t *wq,
                         const mk::bf16 *s, const mk::bf16 *z, int N, int ksplit, float weight,
                         float *acc, unsigned *sync) {
  extern __shared__ float smem[];
  if constexpr (PRODUCE)
    copyShareThenSignal(src, gate_up, 2 * inter, sync, 0);
  forEachDownTile<TN>(inter, N, ksplit, [&](int n0, int nvalid, int k0, int k1) {
    mk::moe_down_task_waiting<T, TN, 128, mk::kOrderRowMajor, SLICE>(
        gate_up, inter, wq, s, z, N, n0, nvalid, k0, k1, weight, acc, 0, smem,
        mk::CounterWaits{sync, 0, 1, PRODUCE ? gridDim.x : 1u});
  });
}

template <int TN, bool SLICE, bool PRODUCE>
void runMoeDownWaiting(int inter, int N, int ksplit, int grid, uint64_t seed) {
  Rng r(seed);
  QMat m(r, inter, N, 128);
  std::vector<float> gu(2 * inter);
  for (float &v : gu)
    v = r.normal(1.f);
  const float weight = -0.61f;
  Dev<float> dsrc(gu), dgu(2 * inter);
  Dev<HB> ds(m.s), dz(m.z);
  Dev<uint8_t> dw(m.wq);
  Dev<float> dacc(N);
  Dev<unsigned> sync(mk::sync_bytes(1) / 4);
  dacc.zero();
  sync.zero();
  if (!PRODUCE) { // else the sums' buffer keeps Dev's NaN fill until the blocks copy them
    CK(cudaMemcpy(dgu.p, dsrc.p, gu.size() * sizeof(float), cudaMemcpyDeviceToDevice));
    signalCounterZero<<<1, T>>>(sync.p);
    CK(cudaGetLastError());
  }
  const size_t smem =
      mk::moe_down_smem_floats<T, TN>(SLICE ? inter / ksplit : inter) * sizeof(float);
  auto kernel = moeDownWaitingKernel<TN, SLICE, PRODUCE>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  if (!allResident(kernel, grid, T, smem))
    GTEST_SKIP() << grid << " blocks do not fit this GPU at once";
  kernel<<<grid, T, smem>>>(dsrc.p, dgu.p, inter, dw.p, ds.as<mk::bf16>(), dz.as<mk::bf16>(), N,
                            ksplit, weight, dacc.p, sync.p);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  auto y = dacc.get();
  const std::vector<double> ref = moeDownReference(m, gu, inter, N, weight);
  for (float v : y)
    ASSERT_TRUE(std::isfinite(v));
  EXPECT_LT(relErr(y, ref), 2e-5) << "SLICE=" << SLICE << " PRODUCE=" << PRODUCE
                                  << " ksplit=" << ksplit << " grid=" << grid;
}

// The waiting tiles' sums staged after their counter wait, whether a tile
// finds the counter reached at its start or not: the unit's tile (128
// columns, the whole 1024-row intermediate), 4 k-slices (12 tiles on 7
// blocks: a block's second tile finds its counter reached), and a 4096-row
// intermediate (at 512 threads, two of the staging loop's batches of 4
// rows a thread).
TEST(MoeDown, WaitingTilesStageTheSumsAfterTheirCounters) {
  REQUIRE_GPU();
  runMoeDownWaiting<128, false, true>(1024, 2304, 1, 23, 45);
  runMoeDownWaiting<128, false, false>(1024, 2304, 1, 23, 46);
  runMoeDownWaiting<128, true, true>(1024, 384, 4, 7, 47);
  runMoeDownWaiting<128, true, false>(1024, 384, 4, 7, 48);
  runMoeDownWaiting<128, false, true>(4096, 640, 1, 5, 49);
  runMoeDownWaiting<128, false, false>(4096, 640, 1, 5, 50);
}

//===----------------------------------------------------------------------===//
// MoE top-k
//===----------------------------------------------------------------------===//

template <int E, int K>
__global__ void topkKernel(const mk::bf16 *logits, float scaling, float *w, int *idx) {
  __shared__ float ws[K];
  __shared__ int is[K];
  mk::moe_topk<E, K>(logits, scaling, ws, is);
  if (threadIdx.x < K) {
    w[blockIdx.x * K + threadIdx.x] = ws[threadIdx.x];
    idx[blockIdx.x * K + threadIdx.x] = is[threadIdx.x];
  }
}

template <int E, int K> void runTopk(std::vector<HB> logits) {
  Dev<HB> dl(logits);
  Dev<float> dw(2 * K);
  Dev<int> di(2 * K);
  topkKernel<E, K><<<2, 128>>>(dl.as<mk::bf16>(), 2.446f, dw.p, di.p);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<double> p(E);
  double mx = -1e300, sum = 0;
  for (int e = 0; e < E; ++e)
    mx = std::max(mx, (double)logits[e].toFloat());
  for (int e = 0; e < E; ++e)
    sum += p[e] = std::exp(logits[e].toFloat() - mx);
  std::vector<int> order(E);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  double ws = 0;
  for (int k = 0; k < K; ++k)
    ws += p[order[k]] / sum;
  auto w = dw.get();
  auto idx = di.get();
  for (int b = 0; b < 2; ++b)
    for (int k = 0; k < K; ++k) {
      EXPECT_EQ(idx[b * K + k], order[k]) << "slot " << k;
      EXPECT_NEAR(w[b * K + k], p[order[k]] / sum / (ws + 1e-9) * 2.446, 1e-5);
    }
}

TEST(MoeTopk, PicksLargestLowerIndexOnTies) {
  REQUIRE_GPU();
  Rng r(31);
  auto l = randBf16(r, 64, 1.f);
  l[40] = l[7] = l[50] = HB(3.f); // a three-way tie at the top
  l[12] = l[13] = HB(2.5f);
  runTopk<64, 8>(l);
  runTopk<8, 2>(randBf16(r, 8, 1.f));
  // More experts than the block has threads (the released 48B's 256), ties
  // straddling the K-th slot.
  auto l256 = randBf16(r, 256, 1.f);
  l256[200] = l256[3] = l256[90] = HB(2.75f);
  l256[17] = l256[250] = HB(3.25f);
  for (int e : {30, 31, 32, 33, 160, 161})
    l256[e] = HB(2.5f);
  runTopk<256, 8>(l256);
}

template <int E, int K>
__global__ void topkSigmoidKernel(const float *logits, const mk::bf16 *bias, float scaling,
                                  float *w, int *idx) {
  __shared__ float ws[K];
  __shared__ int is[K];
  mk::moe_topk_sigmoid<E, K>(logits, bias, scaling, ws, is);
  if (threadIdx.x < K) {
    w[blockIdx.x * K + threadIdx.x] = ws[threadIdx.x];
    idx[blockIdx.x * K + threadIdx.x] = is[threadIdx.x];
  }
}

/// The sigmoid router against a double reference: the top-K of sigmoid +
/// bias (ties: the lower index), weighted by the unbiased sigmoid,
/// renormalized (+1e-20) and scaled. `moved`: how many chosen experts
/// differ from what the scores alone would choose (so that a test can ask
/// the bias to matter).
template <int E, int K>
void runTopkSigmoid(std::vector<float> logits, std::vector<HB> bias, int *moved = nullptr) {
  Dev<float> dl(logits);
  Dev<HB> db(bias);
  Dev<float> dw(2 * K);
  Dev<int> di(2 * K);
  topkSigmoidKernel<E, K><<<2, 128>>>(dl.p, db.as<mk::bf16>(), 2.446f, dw.p, di.p);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<double> s(E), sel(E);
  for (int e = 0; e < E; ++e) {
    s[e] = 1.0 / (1.0 + std::exp(-(double)logits[e]));
    sel[e] = s[e] + bias[e].toFloat();
  }
  auto topOf = [&](const std::vector<double> &v) {
    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return v[a] > v[b]; });
    order.resize(K);
    return order;
  };
  const std::vector<int> order = topOf(sel), plain = topOf(s);
  double ws = 0;
  for (int k = 0; k < K; ++k)
    ws += s[order[k]];
  auto w = dw.get();
  auto idx = di.get();
  for (int b = 0; b < 2; ++b)
    for (int k = 0; k < K; ++k) {
      EXPECT_EQ(idx[b * K + k], order[k]) << "slot " << k;
      EXPECT_NEAR(w[b * K + k], s[order[k]] / (ws + 1e-20) * 2.446, 1e-5);
    }
  if (moved) {
    *moved = 0;
    for (int e : order)
      *moved += std::find(plain.begin(), plain.end(), e) == plain.end();
  }
}

TEST(MoeTopk, SigmoidRouterChoosesWithTheBiasAndWeighsWithout) {
  REQUIRE_GPU();
  Rng r(37);
  auto widen = [](const std::vector<HB> &v) {
    std::vector<float> f;
    for (HB x : v)
      f.push_back(x.toFloat());
    return f;
  };
  auto l = widen(randBf16(r, 64, 1.f));
  auto b = randBf16(r, 64, 0.2f);
  int moved = 0;
  runTopkSigmoid<64, 8>(l, b, &moved);
  EXPECT_GT(moved, 0) << "the bias moved no choice: a weak test";
  // Ties of s + bias at the top (equal logits and biases).
  l[40] = l[7] = 2.f;
  b[40] = b[7] = HB(0.f);
  runTopkSigmoid<64, 8>(l, b);
  runTopkSigmoid<256, 8>(widen(randBf16(r, 256, 1.f)), randBf16(r, 256, 0.2f));
  // The two-level rank count (templates/topk_rank.cuh) with a short last
  // run of values (200 = 6 runs of 32 and one of 8): four equal values in
  // three runs above all others (sigmoid(8) + 1 against at most ~1.6), so
  // with K = 3 the tie straddles the K-th place and the lowest three
  // indices win.
  auto l200 = widen(randBf16(r, 200, 1.f));
  auto b200 = randBf16(r, 200, 0.2f);
  for (int e : {31, 32, 100, 195}) {
    l200[e] = 8.f;
    b200[e] = HB(1.f);
  }
  runTopkSigmoid<200, 3>(l200, b200);
  runTopkSigmoid<200, 6>(l200, b200);
}

//===----------------------------------------------------------------------===//
// Grid barrier and counters under a cooperative launch
//===----------------------------------------------------------------------===//

__global__ void barrierKernel(unsigned *sync, int *cells, int rounds, int *errors) {
  for (int r = 0; r < rounds; ++r) {
    if (threadIdx.x == 0)
      atomicAdd(&cells[r % 2], 1);
    mk::grid_barrier(sync);
    if (threadIdx.x == 0 && __ldcg(&cells[r % 2]) != (int)gridDim.x * (r / 2 + 1))
      atomicAdd(errors, 1);
    mk::grid_barrier(sync);
  }
  // Counters: block b publishes a value, block b+1 waits for it.
  if (blockIdx.x > 0)
    mk::counter_wait(sync, blockIdx.x - 1, 1);
  if (threadIdx.x == 0) {
    const int prev = blockIdx.x > 0 ? __ldcg(&cells[2 + blockIdx.x - 1]) : 0;
    cells[2 + blockIdx.x] = prev + 1;
  }
  mk::counter_signal(sync, blockIdx.x);
  mk::grid_barrier(sync);
  mk::counters_reset(sync, gridDim.x);
}

TEST(GridSync, BarriersAndCountersHoldAcrossLaunches) {
  REQUIRE_GPU();
  int dev = 0, sms = 0, coop = 0, perSm = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
  ASSERT_TRUE(coop);
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, barrierKernel, 256, 0));
  const int grid = std::min(sms * perSm, mk::kMaxGrid);
  Dev<unsigned> sync(mk::sync_bytes(grid) / 4);
  sync.zero();
  const int rounds = 200;
  for (int launch = 0; launch < 3; ++launch) {
    Dev<int> cells(2 + grid), errors(1);
    cells.zero();
    errors.zero();
    void *args[] = {&sync.p, &cells.p, (void *)&rounds, &errors.p};
    CK(cudaLaunchCooperativeKernel((void *)barrierKernel, grid, 256, args, 0, 0));
    CK(cudaDeviceSynchronize());
    EXPECT_EQ(errors.get()[0], 0) << "launch " << launch;
    auto c = cells.get();
    EXPECT_EQ(c[0], grid * (rounds / 2));
    EXPECT_EQ(c[2 + grid - 1], grid) << "counter chain broken";
  }
}

/// The argmax merged by GEMV tiles (schedule-fuse-argmax): each block
/// stores tiles of `tw` columns of src into values (as a tile's epilogue
/// does), then merges their argmax; a block takes several tiles, so the
/// early release of its warps meets the next tile's merge.
__global__ void __launch_bounds__(T, 1)
    argmaxTilesKernel(const mk::bf16 *src, mk::bf16 *values, int n, int tw, float *scratch,
                      int *out) {
  const int ntiles = (n + tw - 1) / tw;
  for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
    const int n0 = tile * tw, nvalid = min(tw, n - n0);
    for (int i = threadIdx.x; i < nvalid; i += T)
      values[n0 + i] = src[n0 + i];
    mk::argmax_of_tile<T>(n0, nvalid, ntiles, values, scratch, out);
  }
}

// The first index of the largest value (NaN never chosen, -1 if all are;
// -0 equals +0), across tiles and in a short last tile.
TEST(Argmax, MergedByTheTilesAsTheTask) {
  REQUIRE_GPU();
  const int n = 1000, tw = 128; // 8 tiles, the last of 104 columns
  Rng r(7);
  std::vector<float> base(n);
  for (float &v : base)
    v = -1.f - std::fabs(r.normal(1.f));
  struct Case {
    const char *what;
    std::vector<std::pair<int, float>> set;
    bool allNan;
  };
  const float nan = std::nanf("");
  const std::vector<Case> cases = {
      {"the largest in the short last tile", {{990, 3.f}, {5, 2.f}}, false},
      {"a tie across tiles: the first index", {{300, 5.f}, {130, 5.f}, {900, 5.f}}, false},
      {"+0 before -0, all else negative", {{700, -0.f}, {200, 0.f}}, false},
      {"-0 before +0", {{100, -0.f}, {600, 0.f}}, false},
      {"NaN beside the largest", {{50, nan}, {51, nan}, {999, 1.f}}, false},
      {"all NaN", {}, true}};
  for (const Case &c : cases) {
    std::vector<float> v = base;
    if (c.allNan)
      std::fill(v.begin(), v.end(), nan);
    for (auto [i, x] : c.set)
      v[size_t(i)] = x;
    std::vector<HB> hv(n);
    for (int i = 0; i < n; ++i)
      hv[size_t(i)] = HB(v[size_t(i)]);
    int want = -1;
    for (int i = 0; i < n; ++i) {
      const float x = hv[size_t(i)].toFloat();
      if (!std::isnan(x) && (want < 0 || x > hv[size_t(want)].toFloat()))
        want = i;
    }
    Dev<HB> dsrc(hv), dvals(static_cast<size_t>(n));
    Dev<float> scratch(4);
    Dev<int> out(1);
    scratch.zero();
    argmaxTilesKernel<<<3, T>>>(dsrc.as<mk::bf16>(), dvals.as<mk::bf16>(), n, tw, scratch.p,
                                out.p);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    EXPECT_EQ(out.get()[0], want) << c.what;
  }
}

} // namespace
