//===- TestData.cpp - Deterministic test weights, state and tokens --------===//
//
// Built with -ffp-contract=off (see oracle/CMakeLists.txt): a fused
// multiply-add would change bits between machines.
//
//===----------------------------------------------------------------------===//

#include "mk/TestData.h"
#include "ParallelFor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

namespace mk {
namespace testdata {

uint64_t mix64(uint64_t z) {
  z ^= z >> 30;
  z *= 0xbf58476d1ce4e5b9ULL;
  z ^= z >> 27;
  z *= 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t streamFor(uint64_t seed, const std::string &name) {
  uint64_t h = 0xcbf29ce484222325ULL; // FNV-1a
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return mix64(h ^ mix64(seed + 0x9e3779b97f4a7c15ULL));
}

double detLog(double x) {
  // x = m * 2^e with m in [sqrt(1/2), sqrt(2)); log m = 2 atanh((m-1)/(m+1)).
  // Branch-free: the Box-Muller inputs are random, so a branch mispredicts.
  uint64_t b;
  std::memcpy(&b, &x, 8);
  const uint64_t mant = b & 0x000fffffffffffffULL;
  const uint64_t big = mant >= 0x6a09e667f3bcdULL; // mantissa >= sqrt(2)
  const int e = int((b >> 52) & 0x7ff) - 1023 + int(big);
  b = mant | ((1023 - big) << 52);
  double m;
  std::memcpy(&m, &b, 8);
  double t = (m - 1) / (m + 1), t2 = t * t;
  double p = 1.0 / 17;
  for (double d : {15.0, 13.0, 11.0, 9.0, 7.0, 5.0, 3.0, 1.0})
    p = p * t2 + 1.0 / d;
  return 2 * t * p + e * 0.6931471805599453;
}

double logUniform1To16(uint64_t stream, uint64_t index) {
  const double u01 = double(mix64(stream + index) >> 11) * 0x1.0p-53;
  return -detLog(1.0 / (1.0 + 15.0 * u01));
}

void detSinCos(double a, double &s, double &c) {
  // Taylor series to a^17 / a^18: below 1e-15 absolute on [0, pi/2].
  double a2 = a * a;
  double ps = 1.0 / 355687428096000.0; // 1/17!
  for (double f : {-1307674368000.0, 6227020800.0, -39916800.0, 362880.0,
                   -5040.0, 120.0, -6.0})
    ps = 1.0 / f + a2 * ps;
  s = a + a * a2 * ps;
  double pc = -1.0 / 6402373705728000.0; // -1/18!
  for (double f : {20922789888000.0, -87178291200.0, 479001600.0, -3628800.0,
                   40320.0, -720.0, 24.0, -2.0})
    pc = 1.0 / f + a2 * pc;
  c = 1.0 + a2 * pc;
}

namespace {

/// The pair (z0, z1) of Box-Muller pair `pair` of `stream`.
inline void normalPair(uint64_t stream, uint64_t pair, double &z0,
                       double &z1) {
  uint64_t h = mix64(stream + pair * 0x9e3779b97f4a7c15ULL);
  double u1 = (double(h >> 32) + 1.0) * (1.0 / 4294967296.0); // (0, 1]
  uint32_t lo = uint32_t(h);
  unsigned quadrant = lo >> 30;
  double f = double(lo & 0x3fffffffu) * (1.0 / 1073741824.0); // [0, 1)
  // angle = (quadrant + f) * pi/2: (cos, sin) of the quadrant's start
  // rotate (c, s) by a quarter turn per quadrant; table lookups, no branches.
  static const double sign0[4] = {1, -1, -1, 1}, sign1[4] = {1, 1, -1, -1};
  double sc[2];
  detSinCos(f * 1.5707963267948966, sc[1], sc[0]);
  double r = std::sqrt(-2.0 * detLog(u1));
  z0 = (r * sc[quadrant & 1]) * sign0[quadrant];
  z1 = (r * sc[(quadrant & 1) ^ 1]) * sign1[quadrant];
}

//===----------------------------------------------------------------------===//
// The same pairs, several at a time
//===----------------------------------------------------------------------===//
//
// normalPair's arithmetic on four lanes (GCC vector extensions), operation
// for operation in the same order: every operation is an IEEE add, multiply,
// divide or square root (correctly rounded, lane by lane), a bit operation,
// or an exact integer-to-double conversion, so each lane's result is bit for
// bit the scalar one (TestData.BatchedPairsEqualTheScalarPairs checks it).
// Table lookups become selects, and a product with -1 a flip of the sign
// bit, which is the same IEEE result. Where the CPU has AVX2 the four lanes
// are one 256-bit register (a clone picked at load time, GCC on x86-64),
// else what the target has (two SSE2 halves on x86-64). The Box-Muller draws are most of makeRandomWeights' time.

typedef double V4d __attribute__((vector_size(32)));
typedef uint64_t V4u __attribute__((vector_size(32)));
typedef int64_t V4i __attribute__((vector_size(32)));

// The helpers take and give vectors by reference: a vector passed by value
// would change its calling convention between the clones.

/// Each lane of x (0 <= x < 2^52) as a double, exactly: 2^52 + x has x as
/// its mantissa bits.
inline void exactDouble(const V4u &x, V4d &out) {
  out = (V4d)(x | 0x4330000000000000ULL) - 4503599627370496.0;
}

inline void mix64x4(V4u &z) {
  z ^= z >> 30;
  z *= 0xbf58476d1ce4e5b9ULL;
  z ^= z >> 27;
  z *= 0x94d049bb133111ebULL;
  z ^= z >> 31;
}

inline void detLogx4(const V4d &x, V4d &out) {
  const V4u b = (V4u)x;
  const V4u mant = b & 0x000fffffffffffffULL;
  const V4u big = (V4u)(-((V4i)mant >= int64_t(0x6a09e667f3bcdLL)));
  const V4u exponent = (b >> 52) & 0x7ffULL;
  const V4d m = (V4d)(mant | ((1023 - big) << 52));
  V4d e;
  exactDouble(exponent + big, e);
  e -= 1023.0;
  const V4d t = (m - 1) / (m + 1), t2 = t * t;
  V4d p = V4d{} + 1.0 / 17;
  for (double d : {15.0, 13.0, 11.0, 9.0, 7.0, 5.0, 3.0, 1.0})
    p = p * t2 + 1.0 / d;
  out = 2 * t * p + e * 0.6931471805599453;
}

inline void detSinCosx4(const V4d &a, V4d &s, V4d &c) {
  const V4d a2 = a * a;
  V4d ps = V4d{} + 1.0 / 355687428096000.0;
  for (double f : {-1307674368000.0, 6227020800.0, -39916800.0, 362880.0,
                   -5040.0, 120.0, -6.0})
    ps = 1.0 / f + a2 * ps;
  s = a + a * a2 * ps;
  V4d pc = V4d{} + -1.0 / 6402373705728000.0;
  for (double f : {20922789888000.0, -87178291200.0, 479001600.0, -3628800.0,
                   40320.0, -720.0, 24.0, -2.0})
    pc = 1.0 / f + a2 * pc;
  c = 1.0 + a2 * pc;
}

constexpr int64_t kPairBatch = 256;

// GCC on x86-64: an AVX2 clone beside the default, picked at load time
// (clang refuses target_clones with noinline; other CPUs have no "avx2").
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MK_AVX2_CLONE __attribute__((target_clones("avx2", "default"), noinline))
#else
#define MK_AVX2_CLONE
#endif

/// Pairs firstPair .. firstPair + pairs - 1 (pairs a multiple of 4, at most
/// kPairBatch) of `stream`, scaled by stddev and rounded to float:
/// out[2j], out[2j + 1] = pair j's (z0, z1).
MK_AVX2_CLONE void normalPairsx4(uint64_t stream, uint64_t firstPair, int64_t pairs,
              double stddev, float *out) {
  const V4u lane = {0, 1, 2, 3};
  const V4u signBit = V4u{} + 0x8000000000000000ULL;
  for (int64_t j = 0; j < pairs; j += 4) {
    const V4u pair = (firstPair + uint64_t(j)) + lane;
    V4u h = stream + pair * 0x9e3779b97f4a7c15ULL;
    mix64x4(h);
    V4d hi, f, sn, cs, logU1, r;
    exactDouble(h >> 32, hi);
    const V4d u1 = (hi + 1.0) * (1.0 / 4294967296.0);
    const V4u lo = h & 0xffffffffULL;
    const V4u quadrant = lo >> 30;
    exactDouble(lo & 0x3fffffffULL, f);
    f *= 1.0 / 1073741824.0;
    detSinCosx4(f * 1.5707963267948966, sn, cs);
    detLogx4(u1, logU1);
    const V4d r2 = -2.0 * logU1;
    for (int l = 0; l < 4; ++l)
      r[l] = __builtin_sqrt(r2[l]);
    const V4i odd = (V4i)(quadrant & 1) != 0;
    // sign0 = {1, -1, -1, 1}: negative in quadrants 1 and 2; sign1 = {1, 1,
    // -1, -1}: negative in quadrants 2 and 3.
    const V4u neg0 = (V4u)((V4i)((quadrant + 1) & 2) != 0) & signBit;
    const V4u neg1 = (V4u)((V4i)(quadrant & 2) != 0) & signBit;
    const V4d z0 = (V4d)((V4u)(r * (odd ? sn : cs)) ^ neg0);
    const V4d z1 = (V4d)((V4u)(r * (odd ? cs : sn)) ^ neg1);
    for (int l = 0; l < 4; ++l) {
      out[2 * (j + l)] = float(z0[l] * stddev);
      out[2 * (j + l) + 1] = float(z1[l] * stddev);
    }
  }
}

template <typename Store>
void fillWith(uint64_t stream, uint64_t first, int64_t count, double stddev,
              const Store &store) {
  int64_t i = 0;
  double z0, z1;
  if (count > 0 && (first & 1)) {
    normalPair(stream, first >> 1, z0, z1);
    store(0, float(z1 * stddev));
    i = 1;
  }
  // Whole pairs, four at a time in batches.
  float batch[2 * kPairBatch];
  while (count - i >= 8) {
    const int64_t pairs = std::min<int64_t>(kPairBatch, (count - i) / 8 * 4);
    normalPairsx4(stream, (first + i) >> 1, pairs, stddev, batch);
    for (int64_t k = 0; k < 2 * pairs; ++k)
      store(i + k, batch[k]);
    i += 2 * pairs;
  }
  for (; i + 1 < count; i += 2) {
    normalPair(stream, (first + i) >> 1, z0, z1);
    store(i, float(z0 * stddev));
    store(i + 1, float(z1 * stddev));
  }
  if (i < count) {
    normalPair(stream, (first + i) >> 1, z0, z1);
    store(i, float(z0 * stddev));
  }
}

} // namespace

double standardNormal(uint64_t stream, uint64_t index) {
  double z0, z1;
  normalPair(stream, index >> 1, z0, z1);
  return (index & 1) ? z1 : z0;
}

void fillNormal(uint64_t stream, uint64_t first, int64_t count, double stddev,
                float *out) {
  fillWith(stream, first, count, stddev,
           [out](int64_t i, float v) { out[i] = v; });
}

void fillNormalBf16(uint64_t stream, uint64_t first, int64_t count,
                    double stddev, BFloat16 *out) {
  fillWith(stream, first, count, stddev,
           [out](int64_t i, float v) { out[i] = BFloat16(v); });
}

} // namespace testdata

//===----------------------------------------------------------------------===//
// Quantization
//===----------------------------------------------------------------------===//

namespace {

/// nearbyint (round half to even) for |x| <= 2^22, which the callers
/// guarantee by clamping; adding and subtracting 1.5 * 2^23 rounds in the
/// default rounding mode and vectorizes, unlike a libm call. (Compiled
/// without -ffast-math, the compiler may not fold it away.)
inline float roundHalfEven(float x) {
  const float magic = 12582912.0f;
  return (x + magic) - magic;
}

inline float clampQ(float x) { return std::min(std::max(x, -1.0f), 16.0f); }

} // namespace

void quantizeW4A16(const float *w, int64_t in, int64_t out, int64_t group,
                   uint8_t *wq, BFloat16 *scales, BFloat16 *zeros) {
  std::vector<float> scale(static_cast<size_t>(out)), zero(static_cast<size_t>(out)), lo(static_cast<size_t>(out)),
      hi(static_cast<size_t>(out));
  for (int64_t g = 0; g < in / group; ++g) {
    const float *blk = w + g * group * out;
    for (int64_t n = 0; n < out; ++n)
      lo[n] = hi[n] = blk[n];
    for (int64_t k = 1; k < group; ++k)
      for (int64_t n = 0; n < out; ++n) {
        float v = blk[k * out + n];
        lo[n] = std::min(lo[n], v);
        hi[n] = std::max(hi[n], v);
      }
    for (int64_t n = 0; n < out; ++n) {
      scale[n] = std::max(hi[n] - lo[n], 1e-8f) / 15.0f;
      float z = roundHalfEven(clampQ(-lo[n] / scale[n]));
      zero[n] = std::min(std::max(z, 0.0f), 15.0f);
      scales[g * out + n] = BFloat16(scale[n]);
      zeros[g * out + n] = BFloat16(zero[n]);
    }
    for (int64_t k = 0; k < group; k += 2) {
      uint8_t *row = wq + (g * group + k) / 2 * out;
      for (int64_t n = 0; n < out; ++n) {
        float q0 = roundHalfEven(clampQ(blk[k * out + n] / scale[n] + zero[n]));
        float q1 =
            roundHalfEven(clampQ(blk[(k + 1) * out + n] / scale[n] + zero[n]));
        q0 = std::min(std::max(q0, 0.0f), 15.0f);
        q1 = std::min(std::max(q1, 0.0f), 15.0f);
        row[n] = uint8_t(int(q0) | (int(q1) << 4));
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// Weights, state, tokens
//===----------------------------------------------------------------------===//

namespace {

using Job = std::function<void()>;

constexpr int64_t kFillChunk = int64_t(1) << 16;

/// Queues the normal fill of a whole bf16/f32 tensor in chunks.
void queueFill(std::vector<Job> &jobs, HostTensor &t, uint64_t stream,
               double stddev) {
  int64_t n = t.numel();
  for (int64_t b = 0; b < n; b += kFillChunk) {
    int64_t cnt = std::min(kFillChunk, n - b);
    HostTensor *tp = &t;
    jobs.push_back([tp, stream, stddev, b, cnt] {
      if (tp->desc.dtype == DType::F32)
        testdata::fillNormal(stream, uint64_t(b), cnt, stddev, tp->f32() + b);
      else
        testdata::fillNormalBf16(stream, uint64_t(b), cnt, stddev,
                                 tp->bf16() + b);
    });
  }
}

void runJobs(const std::vector<Job> &jobs) {
  detail::parallelFor(int64_t(jobs.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      jobs[size_t(i)]();
  });
}

bool endsWith(const std::string &s, const char *suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

} // namespace

TensorMap makeRandomWeights(const BlockConfig &cfg, uint64_t seed) {
  TensorMap m;
  for (const TensorDesc &d : parameterTensors(cfg))
    m.emplace(d.name, HostTensor(d));
  std::vector<Job> jobs;
  for (auto &kv : m) {
    HostTensor &t = kv.second;
    const std::string &name = kv.first;
    if (endsWith(name, "_norm")) {
      for (int64_t i = 0; i < t.numel(); ++i)
        t.bf16()[i] = BFloat16(1.0f);
    } else if (name == "embed.weight") {
      queueFill(jobs, t, testdata::streamFor(seed, name), testdata::kEmbeddingStddev);
    } else if (endsWith(name, ".weight")) {
      queueFill(jobs, t, testdata::streamFor(seed, name),
                testdata::kBf16LinearStddev);
    } else if (endsWith(name, ".conv_w")) {
      queueFill(jobs, t, testdata::streamFor(seed, name),
                testdata::kConvStddev);
    } else if (endsWith(name, ".A_log")) {
      // log(U(1, 16)) per head: a uniform from the hash of (stream, h).
      const uint64_t st = testdata::streamFor(seed, name);
      for (int64_t h = 0; h < t.numel(); ++h)
        t.f32()[h] = float(testdata::logUniform1To16(st, uint64_t(h)));
    } else if (endsWith(name, ".dt_bias")) {
      queueFill(jobs, t, testdata::streamFor(seed, name), testdata::kDtBiasStddev);
    } else if (endsWith(name, ".router.bias")) {
      queueFill(jobs, t, testdata::streamFor(seed, name),
                testdata::kRouterBiasStddev);
    }
  }
  // Quantized linears: one job per (expert, group of input rows), generating
  // that block of the float weight and quantizing it.
  for (const QuantLinearDesc &q : quantLinears(cfg)) {
    uint8_t *wq = m.at(q.prefix + ".w_q").u8();
    BFloat16 *sc = m.at(q.prefix + ".scales").bf16();
    BFloat16 *ze = m.at(q.prefix + ".zeros").bf16();
    uint64_t stream = testdata::streamFor(seed, q.prefix);
    int64_t experts = std::max<int64_t>(q.experts, 1), groups = q.in / cfg.group;
    int64_t out = q.out, in = q.in, group = cfg.group;
    for (int64_t e = 0; e < experts; ++e)
      for (int64_t g = 0; g < groups; ++g)
        jobs.push_back([=] {
          std::vector<float> blk(size_t(group * out));
          uint64_t first = uint64_t((e * in + g * group) * out);
          testdata::fillNormal(stream, first, group * out,
                               testdata::kQuantStddev, blk.data());
          quantizeW4A16(blk.data(), group, out, group,
                        wq + (e * in + g * group) / 2 * out,
                        sc + (e * groups + g) * out,
                        ze + (e * groups + g) * out);
        });
  }
  runJobs(jobs);
  return m;
}

DecodeState makeRandomState(const BlockConfig &cfg, int64_t ctxLen,
                            uint64_t seed) {
  DecodeState st;
  st.ctxLen = ctxLen;
  for (const TensorDesc &d : stateTensors(cfg, ctxLen))
    st.tensors.emplace(d.name, HostTensor(d));
  std::vector<Job> jobs;
  for (auto &kv : st.tensors)
    queueFill(jobs, kv.second, testdata::streamFor(seed, kv.first),
              kv.second.desc.dtype == DType::F32 ? testdata::kStateSStddev
                                                 : testdata::kStateBf16Stddev);
  runJobs(jobs);
  return st;
}

std::vector<BFloat16> makeRandomHidden(const BlockConfig &cfg, uint64_t seed) {
  std::vector<BFloat16> h(size_t(cfg.hidden));
  testdata::fillNormalBf16(testdata::streamFor(seed, "hidden"), 0, cfg.hidden,
                           testdata::kHiddenStddev, h.data());
  return h;
}

} // namespace mk
