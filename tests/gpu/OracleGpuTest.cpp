//===- OracleGpuTest.cpp - Generated kernels against the CPU oracle -------===//
//
// The correctness bar: from an identical fed state, one step on the GPU and
// one in the oracle agree with cosine >= 0.9999 on the output
// hidden, every KDA S and the MLA caches (the new row), for several seeds and
// contexts 2048 and 8192; outputs are finite (they are poisoned first). Then
// 8 consecutive steps, recomputation on data overwritten in place, the launch
// count (CUPTI) and bad inputs, on the full-size unit and the tiny spec.
//
// Kernels: $MK_KERNELS_DIR/kimi_linear_w4a16/ and $MK_KERNELS_DIR/tiny/.
//
//===----------------------------------------------------------------------===//

#include "CuptiLaunchCounter.h"
#include "GpuTestSupport.h"
#include "mk/HfCheckpoint.h"
#include "mk/Kimi48bOracle.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <unistd.h>
#include <cstring>
#include <sys/stat.h>
#include <cstdlib>

using namespace mk;
using namespace mk::rt;
using namespace mk::testing;

namespace {

/// One step from the same state stays within this of the oracle (output,
/// every KDA state, the MLA caches; docs/pipeline.md's error budget).
constexpr double kStepCos = 0.9999;
constexpr double kMultiStepCos = 0.99;

/// One session per (kernel, seed): weights are made and bound once.
struct Fixture {
  std::shared_ptr<Kernel> kernel;
  BlockConfig cfg;
  TensorMap weights;
  std::unique_ptr<Session> session;
  DeviceBuffer in, out;
  /// Weights bound from device pointers (WeightSource::HalfFromDevice).
  std::vector<DeviceBuffer> deviceWeights;
};

/// How the fixture binds its weights: all from host memory, or every other
/// one from a device copy in the spec's layout (the session repacks what its
/// kernel reads in another layout either way).
enum class WeightSource { Host, HalfFromDevice };

Status bindHalfFromDevice(const std::shared_ptr<Device> &dev, Fixture &f) {
  int i = 0;
  for (const auto &kv : f.weights) {
    const HostTensor &t = kv.second;
    if (i++ % 2 == 0) {
      MK_RETURN_IF_ERROR(
          f.session->bindWeightHost(kv.first, t.data.data(), t.desc.dtype, t.desc.shape));
      continue;
    }
    DeviceBuffer b;
    MK_RETURN_IF_ERROR(DeviceBuffer::allocate(dev, t.data.size(), b));
    MK_RETURN_IF_ERROR(
        cuCheck(dev->driver().cuMemcpyHtoD(b.ptr(), t.data.data(), t.data.size()), "upload"));
    MK_RETURN_IF_ERROR(f.session->bindWeightDevice({kv.first, b.ptr(), t.desc.dtype, t.desc.shape}));
    f.deviceWeights.push_back(std::move(b));
  }
  return Status::ok();
}

Status makeFixture(const std::shared_ptr<Device> &dev, const std::string &name,
                   uint64_t seed, int64_t capacity, Fixture &f,
                   WeightSource source = WeightSource::Host) {
  MK_RETURN_IF_ERROR(loadTestKernel(dev, name, f.kernel));
  f.cfg = f.kernel->manifest().config;
  f.weights = makeRandomWeights(f.cfg, seed);
  SessionOptions so;
  so.cacheCapacity = capacity;
  MK_RETURN_IF_ERROR(Session::create(dev, f.kernel, so, f.session));
  if (source == WeightSource::Host)
    MK_RETURN_IF_ERROR(bindAllWeights(*f.session, f.weights));
  else
    MK_RETURN_IF_ERROR(bindHalfFromDevice(dev, f));
  MK_RETURN_IF_ERROR(DeviceBuffer::allocate(dev, size_t(f.cfg.hidden) * 2, f.in));
  MK_RETURN_IF_ERROR(DeviceBuffer::allocate(dev, size_t(f.cfg.hidden) * 2, f.out));
  return Status::ok();
}

/// Poisons the output and free cache rows, runs one device-pointer step.
Status gpuStep(const std::shared_ptr<Device> &dev, Fixture &f,
               const std::vector<BFloat16> &hidden, std::vector<BFloat16> &out) {
  MK_RETURN_IF_ERROR(uploadHidden(dev, hidden, f.in));
  MK_RETURN_IF_ERROR(cuCheck(
      dev->driver().cuMemsetD8(f.out.ptr(), 0xff, f.out.bytes()), "poison"));
  MK_RETURN_IF_ERROR(poisonFreeCacheRows(*f.session));
  MK_RETURN_IF_ERROR(f.session->step(f.in.ptr(), f.out.ptr()));
  MK_RETURN_IF_ERROR(f.session->synchronize());
  return downloadHidden(dev, f.out, out);
}

/// Compares GPU and oracle after one step from the same state; `minCos` is
/// the bar. Adds failures naming what disagreed.
void compareStep(const BlockConfig &cfg, const std::vector<BFloat16> &gpuOut,
                 const std::vector<BFloat16> &oracleOut,
                 const DecodeState &gpuState, const DecodeState &oracleState,
                 double minCos, const std::string &label) {
  std::vector<float> g = bf16ToFloat(gpuOut), o = bf16ToFloat(oracleOut);
  EXPECT_TRUE(allFinite(g)) << label << ": non-finite output hidden";
  double c = cosine(g, o);
  EXPECT_GE(c, minCos) << label << ": output hidden cosine " << c;
  ASSERT_EQ(gpuState.ctxLen, oracleState.ctxLen) << label;
  for (const auto &kv : oracleState.tensors) {
    const std::string &name = kv.first;
    auto it = gpuState.tensors.find(name);
    ASSERT_NE(it, gpuState.tensors.end()) << label << ": " << name;
    const HostTensor &gt = it->second, &ot = kv.second;
    const bool cache = isCacheState(cfg, name);
    std::vector<float> gv = gt.toFloat(), ov = ot.toFloat();
    EXPECT_TRUE(allFinite(gv)) << label << ": non-finite " << name;
    double cs = cosine(gv, ov);
    EXPECT_GE(cs, minCos) << label << ": " << name << " cosine " << cs;
    if (cache) {
      int64_t r = oracleState.ctxLen - 1;
      std::vector<float> gRow = cacheRows(gt, r, r + 1), oRow = cacheRows(ot, r, r + 1);
      EXPECT_TRUE(allFinite(gRow)) << label << ": " << name << " new row not written";
      double cr = cosine(gRow, oRow);
      EXPECT_GE(cr, minCos) << label << ": " << name << " new row cosine " << cr;
    }
  }
}

/// Where one oracle step first parts from the device's: the lowest layer
/// whose state (KDA `S` and conv windows, the MLA caches' new row) misses
/// `minCos`, else the layer count if only the output misses it, else -1.
struct Divergence {
  int64_t layer = -1;
  double cos = 1.0;
  /// Later is better: -1 (nothing disagrees) is best.
  bool laterThan(const Divergence &o, int64_t nLayers) const {
    const int64_t a = layer < 0 ? nLayers + 1 : layer, b = o.layer < 0 ? nLayers + 1 : o.layer;
    return a != b ? a > b : cos > o.cos;
  }
};

bool sameBits(const std::vector<BFloat16> &a, const std::vector<BFloat16> &b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(),
                    [](BFloat16 x, BFloat16 y) { return x.bits == y.bits; });
}

/// Layer of a state tensor named `state.<layer>.<name>`, or -1.
int64_t stateLayer(const std::string &name) {
  if (name.rfind("state.", 0) != 0)
    return -1;
  return std::strtoll(name.c_str() + 6, nullptr, 10);
}

Divergence firstDivergence(const BlockConfig &cfg, const std::vector<BFloat16> &gpuOut,
                           const std::vector<BFloat16> &oracleOut,
                           const DecodeState &gpuState, const DecodeState &oracleState,
                           double minCos) {
  Divergence d;
  for (const auto &kv : oracleState.tensors) {
    auto it = gpuState.tensors.find(kv.first);
    const int64_t layer = stateLayer(kv.first);
    if (it == gpuState.tensors.end() || layer < 0 || (d.layer >= 0 && layer > d.layer))
      continue;
    const bool cache = isCacheState(cfg, kv.first);
    double c;
    if (cache) {
      const int64_t r = oracleState.ctxLen - 1;
      c = cosine(cacheRows(it->second, r, r + 1), cacheRows(kv.second, r, r + 1));
    } else {
      c = cosine(it->second.toFloat(), kv.second.toFloat());
    }
    // The lowest layer; at that layer, its worst tensor.
    if (!(c >= minCos) && (d.layer < 0 || layer < d.layer || c < d.cos)) {
      d.layer = layer;
      d.cos = c;
    }
  }
  if (d.layer < 0) {
    const double c = cosine(bf16ToFloat(gpuOut), bf16ToFloat(oracleOut));
    if (!(c >= minCos)) {
      d.layer = int64_t(cfg.pattern.size());
      d.cos = c;
    }
  }
  return d;
}

/// The same step of the oracle as `trace`'s, rerun under the options given
/// (from the same state and input), returning its trace.
using TracedStep = std::function<OracleTrace(const OracleOptions &)>;

/// kernelTieRoutings for the kernel of `f` (its manifest's arithmetic).
std::vector<OracleOptions> tieRoutings(const Fixture &f, const OracleTrace &trace,
                                       const OracleOptions &followed, const TracedStep &step,
                                       OracleTrace *declaredOut = nullptr, int ulps = -1) {
  return kernelTieRoutings(f.cfg, trace, f.kernel->manifest().packedArithmetic, followed, step,
                           declaredOut, ulps);
}

/// The oracle's step from `state` (updated in place), following the
/// device's side of router near ties, layer by layer. Where the first
/// disagreement (firstDivergence) is the state of layer l (or, l = the layer
/// count, the output) and the router of layer l - 1, which feeds it, had a
/// near tie (the weakest chosen and the strongest left-out expert within
/// the arithmetic's tieWindowUlps bf16 ulps, under the spec's arithmetic or the one the
/// kernel declares: tieRoutings, under the routings followed so far), the step is
/// recomputed with each such routing, and the best kept if the first
/// disagreement moves later (or, at the same layer, shrinks). A tie
/// is a tie up to summation order: a kernel that sums in another order may
/// land on either side, and in a deep stack such ties are common (27 layers
/// of 256 experts: several per step). Anything else that disagrees still
/// fails in compareStep.
std::vector<BFloat16> tieAwareOracleStep(const Fixture &f, DecodeState &state,
                                         const std::vector<BFloat16> &hidden,
                                         const std::vector<BFloat16> &gpuOut,
                                         const DecodeState &gpuState, double minCos,
                                         const std::string &label,
                                         Divergence *divergence = nullptr,
                                         OracleTrace *finalTrace = nullptr,
                                         OracleOptions *finalRouting = nullptr) {
  const DecodeState before = state;
  const int64_t nLayers = int64_t(f.cfg.pattern.size());
  OracleOptions followed;
  OracleTrace trace;
  std::vector<BFloat16> out = oracleStep(f.cfg, f.weights, state, hidden, &trace, &followed);
  Divergence d = firstDivergence(f.cfg, gpuOut, out, gpuState, state, minCos);
  while (d.layer > 0) {
    const int64_t router = d.layer - 1;
    if (followed.forcedExperts.count(router))
      break;
    // The same step rerun from `before`.
    const TracedStep step = [&](const OracleOptions &o) {
      DecodeState s = before;
      OracleTrace t;
      oracleStep(f.cfg, f.weights, s, hidden, &t, &o);
      return t;
    };
    bool tried = false, moved = false;
    OracleOptions best;
    OracleTrace bestTrace;
    std::vector<BFloat16> bestOut;
    DecodeState bestState;
    Divergence bestD = d;
    OracleTrace declared; // the unrounded weights' routers (a scaled / folded kernel)
    for (const OracleOptions &alt : tieRoutings(f, trace, followed, step, &declared)) {
      if (alt.forcedExperts.begin()->first != router)
        continue;
      tried = true;
      OracleOptions next = followed;
      next.forcedExperts[router] = alt.forcedExperts.begin()->second;
      DecodeState s = before;
      OracleTrace t;
      std::vector<BFloat16> o = oracleStep(f.cfg, f.weights, s, hidden, &t, &next);
      const Divergence nd = firstDivergence(f.cfg, gpuOut, o, gpuState, s, minCos);
      std::printf("[ info ] %s: router near tie at layer %lld; the other tie-break moves the "
                  "first disagreement from layer %lld (cosine %.6f) to %lld (%.6f)\n",
                  label.c_str(), (long long)router, (long long)d.layer, d.cos,
                  (long long)nd.layer, nd.cos);
      if (nd.laterThan(bestD, nLayers)) {
        moved = true;
        best = std::move(next);
        bestTrace = std::move(t);
        bestOut = std::move(o);
        bestState = std::move(s);
        bestD = nd;
      }
    }
    if (!tried) {
      // No near tie there: a real disagreement, said with how close that
      // router's choice was under the spec's arithmetic and under the
      // unrounded weights, which tells a flipped choice from a wrong sum.
      std::printf("[ info ] %s: first disagreement at layer %lld (cosine %.6f); router %lld's "
                  "k-th and (k+1)-th logits %.2f bf16 ulps apart (%.2f with unrounded "
                  "weights)\n",
                  label.c_str(), (long long)d.layer, d.cos, (long long)router,
                  routerGapUlps(f.cfg, trace, router),
                  routerGapUlps(f.cfg,
                                declared.values.empty()
                                    ? declaredRouterTrace(f.cfg, trace, followed, step)
                                    : declared,
                                router));
      break;
    }
    if (!moved)
      break;
    followed = std::move(best);
    trace = std::move(bestTrace);
    out = std::move(bestOut);
    state = std::move(bestState);
    d = bestD;
  }
  if (divergence)
    *divergence = d;
  if (finalTrace)
    *finalTrace = std::move(trace);
  if (finalRouting)
    *finalRouting = std::move(followed);
  return out;
}

void oneStepAgainstOracle(const std::string &kernelName) {
  MK_REQUIRE_GPU(dev);
  for (uint64_t seed : {1ull, 2ull, 3ull}) {
    Fixture f;
    MK_ASSERT_OK(makeFixture(dev, kernelName, seed, 8192 + 8, f));
    for (int64_t ctx : {2048, 8192}) {
      std::string label = kernelName + " seed " + std::to_string(seed) +
                          " ctx " + std::to_string(ctx);
      DecodeState state = makeRandomState(f.cfg, ctx, seed * 7 + 1);
      std::vector<BFloat16> hidden = makeRandomHidden(f.cfg, seed * 7 + 2);
      MK_ASSERT_OK(writeState(*f.session, state));
      std::vector<BFloat16> gpuOut;
      MK_ASSERT_OK(gpuStep(dev, f, hidden, gpuOut));
      DecodeState gpuState;
      MK_ASSERT_OK(readState(*f.session, gpuState));
      std::vector<BFloat16> oracleOut =
          tieAwareOracleStep(f, state, hidden, gpuOut, gpuState, kStepCos, label);
      compareStep(f.cfg, gpuOut, oracleOut, gpuState, state, kStepCos, label);
      std::printf("[ info ] %s: output cosine %.6f\n", label.c_str(),
                  cosine(bf16ToFloat(gpuOut), bf16ToFloat(oracleOut)));
    }
  }
}

/// One step from a random state of `ctx` tokens (seeds seed, seed + 1)
/// against the oracle; the context grows by one.
void oneStepFrom(const std::shared_ptr<Device> &dev, Fixture &f, int64_t ctx, uint64_t seed,
                 const std::string &label) {
  DecodeState state = makeRandomState(f.cfg, ctx, seed);
  MK_ASSERT_OK(writeState(*f.session, state));
  std::vector<BFloat16> hidden = makeRandomHidden(f.cfg, seed + 1), gpuOut;
  MK_ASSERT_OK(gpuStep(dev, f, hidden, gpuOut));
  DecodeState gpuState;
  MK_ASSERT_OK(readState(*f.session, gpuState));
  EXPECT_EQ(gpuState.ctxLen, ctx + 1) << label;
  std::vector<BFloat16> oracleOut =
      tieAwareOracleStep(f, state, hidden, gpuOut, gpuState, kStepCos, label);
  compareStep(f.cfg, gpuOut, oracleOut, gpuState, state, kStepCos, label);
}

/// A fresh sequence: state at context 0 (empty caches, loaded from empty
/// host tensors), one step against the oracle.
void fromContextZero(const std::string &kernelName) {
  MK_REQUIRE_GPU(dev);
  Fixture f;
  MK_ASSERT_OK(makeFixture(dev, kernelName, 31, 16, f));
  oneStepFrom(dev, f, 0, 32, kernelName + " from context 0");
}

/// A kernel reading its weights tile-contiguous (schedule-tile-weights):
/// every other weight bound from host memory, the rest from device pointers
/// in the spec's row-major layout (the session repacks both), then one step
/// against the oracle.
void tiledWeights(const std::string &kernelName) {
  MK_REQUIRE_GPU(dev);
  Fixture f;
  MK_ASSERT_OK(makeFixture(dev, kernelName, 41, 128, f, WeightSource::HalfFromDevice));
  int tiled = 0;
  for (const ManifestParam &p : f.kernel->manifest().params)
    tiled += p.tile > 0;
  ASSERT_GT(tiled, 0) << kernelName << " has no tile-contiguous weight";
  ASSERT_TRUE(f.session->unboundWeights().empty());
  oneStepFrom(dev, f, 64, 42, kernelName + " (tile-contiguous weights)");
}

void eightSteps(const std::string &kernelName) {
  MK_REQUIRE_GPU(dev);
  Fixture f;
  MK_ASSERT_OK(makeFixture(dev, kernelName, 11, 2048 + 16, f));
  DecodeState state = makeRandomState(f.cfg, 2048, 12);
  MK_ASSERT_OK(writeState(*f.session, state));
  std::vector<BFloat16> gpuOut, oracleOut;
  for (int i = 0; i < 8; ++i) {
    std::vector<BFloat16> hidden = makeRandomHidden(f.cfg, 100 + uint64_t(i));
    MK_ASSERT_OK(gpuStep(dev, f, hidden, gpuOut));
    oracleOut = oracleStep(f.cfg, f.weights, state, hidden);
  }
  DecodeState gpuState;
  MK_ASSERT_OK(readState(*f.session, gpuState));
  EXPECT_EQ(gpuState.ctxLen, 2048 + 8);
  compareStep(f.cfg, gpuOut, oracleOut, gpuState, state, kMultiStepCos,
              kernelName + " after 8 steps");
}

/// The device's next token is the oracle's (`want`), unless the oracle's
/// logits `o` of the two are a bf16 near tie (within an ulp of the larger).
void expectOraclesTokenOrTie(const std::string &label, const std::vector<float> &o,
                             int32_t next, int64_t want) {
  if (next == want)
    return;
  const float a = o[size_t(want)], b = o[size_t(next)];
  const float ulp = std::ldexp(1.f, std::ilogb(std::fabs(a)) - 7);
  EXPECT_LE(a - b, ulp) << label << ": next token " << next << " where the oracle's is "
                        << want << " (logits " << b << " and " << a << ": no tie)";
}

/// A whole model's decode state at context `ctx` (seed `seed`): random,
/// or, at 0, a fresh sequence's (all zero); written to the session.
rt::Status writeModelState(Fixture &f, int64_t ctx, uint64_t seed, DecodeState &state) {
  state = makeRandomState(f.cfg, ctx, seed);
  if (ctx == 0)
    for (auto &kv : state.tensors)
      std::fill(kv.second.data.begin(), kv.second.data.end(), uint8_t(0));
  return writeState(*f.session, state);
}

/// The logits of the session's last token step (cfg.vocab bf16 values).
rt::Status readLogits(Fixture &f, std::vector<BFloat16> &logits) {
  std::vector<uint16_t> bits(size_t(f.cfg.vocab));
  MK_RETURN_IF_ERROR(f.session->readLogitsHost(bits.data()));
  logits.resize(bits.size());
  for (size_t v = 0; v < bits.size(); ++v)
    logits[v].bits = bits[v];
  return rt::Status::ok();
}

/// The whole model (a spec with a vocabulary): 8 greedy steps from context
/// `ctx` (a random state; 0: a fresh sequence, all state zero), one launch
/// each through stepTokenHost. Every step's logits (cosine) and next token
/// are checked against the oracle's from the same input token; where the
/// kernel picks another token the oracle's two logits must be a tie up to
/// one bf16 ulp (summation order), and the oracle's token goes on to both,
/// so that such a tie does not fork the sequence. Then the state after the
/// 8 steps, and a token outside the vocabulary refused before any launch.
/// `weights`: the model's weights (else the spec's random test weights).
void modelSteps(const std::string &kernelName, int64_t ctx, const TensorMap *weights = nullptr) {
  MK_REQUIRE_GPU(dev);
  Fixture f;
  MK_ASSERT_OK(makeFixture(dev, kernelName, 41, ctx + 16, f));
  ASSERT_GT(f.cfg.vocab, 0) << kernelName << " is no whole model";
  if (weights) {
    f.weights = *weights;
    MK_ASSERT_OK(bindAllWeights(*f.session, f.weights));
  }
  DecodeState state;
  MK_ASSERT_OK(writeModelState(f, ctx, 42, state));
  const std::string label = kernelName + " ctx " + std::to_string(ctx);
  const size_t vocab = size_t(f.cfg.vocab);
  int32_t token = int32_t(7 % f.cfg.vocab);
  std::vector<BFloat16> gpuLogits(vocab);
  ModelStepResult want;
  for (int i = 0; i < 8; ++i) {
    int32_t next = -1;
    MK_ASSERT_OK(f.session->stepTokenHost(token, &next));
    MK_ASSERT_OK(readLogits(f, gpuLogits));
    const DecodeState before = state;
    OracleTrace trace;
    want = oracleModelStep(f.cfg, f.weights, state, token, &trace);
    std::vector<float> g = bf16ToFloat(gpuLogits), o = bf16ToFloat(want.logits);
    EXPECT_TRUE(allFinite(g)) << label << " step " << i << ": non-finite logits";
    double c = cosine(g, o);
    // A router near tie the kernel broke the other way (summation order):
    // the oracle's step with that tie-break, where it comes closer, and its
    // state from there on (as the one-step tests' tieAwareOracleStep).
    const TracedStep step = [&](const OracleOptions &o) {
      DecodeState s2 = before;
      OracleTrace t;
      oracleModelStep(f.cfg, f.weights, s2, token, &t, &o);
      return t;
    };
    if (c < kStepCos)
      for (const OracleOptions &alt : tieRoutings(f, trace, OracleOptions{}, step)) {
        DecodeState s2 = before;
        ModelStepResult r = oracleModelStep(f.cfg, f.weights, s2, token, nullptr, &alt);
        const double ca = cosine(g, bf16ToFloat(r.logits));
        std::printf("[ info ] %s step %d: router near tie at layer %lld; the other tie-break "
                    "gives logits cosine %.6f (was %.6f)\n",
                    label.c_str(), i, (long long)alt.forcedExperts.begin()->first, ca, c);
        if (ca > c) {
          c = ca;
          want = std::move(r);
          state = std::move(s2);
          o = bf16ToFloat(want.logits);
        }
      }
    EXPECT_GE(c, kStepCos) << label << " step " << i << ": logits cosine " << c;
    std::printf("[ info ] %s step %d: token %d -> %d (oracle %lld), logits cosine %.6f\n",
                label.c_str(), i, token, next, (long long)want.next, c);
    ASSERT_GE(next, 0) << label;
    ASSERT_LT(size_t(next), vocab) << label;
    // The kernel's token is exactly the first index of the largest of its
    // own stored logits (the argmax task's rule, and the LM-head tiles' where
    // they merge it: schedule-fuse-argmax).
    int64_t own = -1;
    for (size_t v = 0; v < vocab; ++v)
      if (!std::isnan(g[v]) && (own < 0 || g[v] > g[size_t(own)]))
        own = int64_t(v);
    EXPECT_EQ(next, own) << label << " step " << i << ": not the argmax of its own logits";
    expectOraclesTokenOrTie(label + " step " + std::to_string(i), o, next, want.next);
    token = int32_t(want.next);
  }
  DecodeState gpuState;
  MK_ASSERT_OK(readState(*f.session, gpuState));
  EXPECT_EQ(gpuState.ctxLen, ctx + 8);
  compareStep(f.cfg, gpuLogits, want.logits, gpuState, state, kMultiStepCos,
              label + " after 8 steps (logits as the output)");
  // A token outside the vocabulary: refused by name, nothing launched.
  int32_t next = 0;
  rt::Status bad = f.session->stepTokenHost(int32_t(f.cfg.vocab), &next);
  EXPECT_EQ(bad.code(), rt::ErrorCode::InvalidArgument);
  EXPECT_NE(bad.message().find("outside the vocabulary"), std::string::npos) << bad.message();
  EXPECT_EQ(f.session->contextLength(), ctx + 8);
}

void recomputeOnLiveData(const std::string &kernelName) {
  MK_REQUIRE_GPU(dev);
  Fixture f;
  MK_ASSERT_OK(makeFixture(dev, kernelName, 21, 2048 + 16, f));
  DecodeState a = makeRandomState(f.cfg, 1000, 22);
  MK_ASSERT_OK(writeState(*f.session, a));
  std::vector<BFloat16> out;
  MK_ASSERT_OK(gpuStep(dev, f, makeRandomHidden(f.cfg, 23), out));
  // Overwrite the same buffers in place: new hidden in f.in, new state in the
  // session's storage, at another context. The kernel must read the new data.
  std::vector<CUdeviceptr> before;
  for (const StateSlot &s : f.session->stateSlots()) {
    CUdeviceptr p;
    MK_ASSERT_OK(f.session->statePointer(s.desc.name, p));
    before.push_back(p);
  }
  DecodeState b = makeRandomState(f.cfg, 1500, 24);
  MK_ASSERT_OK(writeState(*f.session, b));
  std::vector<BFloat16> hidden = makeRandomHidden(f.cfg, 25);
  MK_ASSERT_OK(gpuStep(dev, f, hidden, out));
  size_t i = 0;
  for (const StateSlot &s : f.session->stateSlots()) {
    CUdeviceptr p;
    MK_ASSERT_OK(f.session->statePointer(s.desc.name, p));
    EXPECT_EQ(p, before[i++]) << "state buffers must be the same ones";
  }
  DecodeState gpuState;
  MK_ASSERT_OK(readState(*f.session, gpuState));
  std::vector<BFloat16> oracleOut = tieAwareOracleStep(
      f, b, hidden, out, gpuState, kStepCos, kernelName + " recompute on live data");
  compareStep(f.cfg, out, oracleOut, gpuState, b, kStepCos,
              kernelName + " recompute on live data");
}

void launchCount(const std::string &kernelName) {
  MK_REQUIRE_GPU(dev);
  Fixture f;
  MK_ASSERT_OK(makeFixture(dev, kernelName, 31, 512, f));
  MK_ASSERT_OK(writeState(*f.session, makeRandomState(f.cfg, 100, 32)));
  MK_ASSERT_OK(uploadHidden(dev, makeRandomHidden(f.cfg, 33), f.in));
  std::string why;
  if (!CuptiLaunchCounter::start(why))
    GTEST_SKIP() << "CUPTI unavailable: " << why;
  MK_ASSERT_OK(f.session->synchronize());
  CuptiLaunchCounter::reset();
  for (int i = 0; i < 5; ++i)
    MK_ASSERT_OK(f.session->step(f.in.ptr(), f.out.ptr()));
  MK_ASSERT_OK(f.session->synchronize());
  CuptiLaunchCounter::Counts c = CuptiLaunchCounter::read();
  EXPECT_EQ(c.kernels, 5) << "kernels executed for 5 steps";
  EXPECT_EQ(c.memcpys, 0);
  EXPECT_EQ(c.memsets, 0);
}

void badInputs(const std::string &kernelName) {
  MK_REQUIRE_GPU(dev);
  std::shared_ptr<Kernel> k;
  MK_ASSERT_OK(loadTestKernel(dev, kernelName, k));
  const BlockConfig &cfg = k->manifest().config;
  SessionOptions so;
  so.cacheCapacity = 4;
  std::unique_ptr<Session> s;
  MK_ASSERT_OK(Session::create(dev, k, so, s));
  Status st = s->step(s->stagingIn(), s->stagingOut());
  EXPECT_EQ(st.code(), ErrorCode::NotBound);
  EXPECT_NE(st.message().find(parameterTensors(cfg)[0].name), std::string::npos)
      << st.message();
  TensorMap w = makeRandomWeights(cfg, 41);
  MK_ASSERT_OK(bindAllWeights(*s, w));
  const HostTensor &norm = w.at("blocks.0.attn_norm");
  st = s->bindWeightHost("blocks.0.attn_norm", norm.data.data(), DType::F32,
                         norm.desc.shape);
  EXPECT_EQ(st.code(), ErrorCode::Binding);
  MK_ASSERT_OK(s->setContextLength(4));
  st = s->step(s->stagingIn(), s->stagingOut());
  EXPECT_EQ(st.code(), ErrorCode::CacheFull);
  EXPECT_EQ(st.message(), "cache full: ctx_len 4, capacity 4");
  EXPECT_EQ(s->launchCount(), 0u);
}

/// $MK_FULL_KERNEL selects another full-size kernel directory under
/// $MK_KERNELS_DIR (a schedule variant, e.g. kimi_linear_w4a16_t512).
std::string fullName() {
  const char *v = std::getenv("MK_FULL_KERNEL");
  return v && *v ? v : "kimi_linear_w4a16";
}
std::string tinyName() { return "tiny"; }

/// Whether a kernel that is generated only on request (MK_DEEP_KERNELS=1
/// scripts/make-gpu-kernels.sh) is under $MK_KERNELS_DIR.
bool kernelGenerated(const std::string &kernelName) {
  const char *root = std::getenv("MK_KERNELS_DIR");
  struct stat st;
  return root && stat((std::string(root) + "/" + kernelName).c_str(), &st) == 0;
}

/// One device step of a deep spec's fixture from a random state of `ctx`
/// rows (seed 8) and token (seed 9): the state it started from, the token,
/// the output and the state after.
struct DeviceStep {
  DecodeState before, after;
  std::vector<BFloat16> hidden, out;
};
void deviceStepFromRandom(const std::shared_ptr<Device> &dev, Fixture &f, int64_t ctx,
                          DeviceStep &s) {
  s.before = makeRandomState(f.cfg, ctx, 8);
  s.hidden = makeRandomHidden(f.cfg, 9);
  MK_ASSERT_OK(writeState(*f.session, s.before));
  MK_ASSERT_OK(gpuStep(dev, f, s.hidden, s.out));
  MK_ASSERT_OK(readState(*f.session, s.after));
}

/// A deep spec's kernel (examples/specs/kimi_linear_27l.json: 27 layers of
/// the unit's widths with 256 experts, the released model's depth and
/// expert count), generated only on request (MK_DEEP_KERNELS=1
/// scripts/make-gpu-kernels.sh; its weights are ~24 GB): one seed, contexts
/// 0 and 2048, one step end to end. Output and state are finite, and the
/// step agrees with the oracle (following the device's side of router near
/// ties, tieAwareOracleStep) on every layer up to the first router whose
/// near tie it cannot tell apart, past which a random deep stack compounds
/// rounding differences (deepSpecLayerByLayer checks those layers one by
/// one); for a spec without routers (the dense 36-layer one) the step's
/// agreement is reported, not required (the layer-by-layer test is its
/// check). Skipped when its kernel directory is absent.
void deepSpecOneStep(const std::string &kernelName) {
  MK_REQUIRE_GPU(dev);
  if (!kernelGenerated(kernelName))
    GTEST_SKIP() << kernelName << " not generated (MK_DEEP_KERNELS=1 scripts/make-gpu-kernels.sh)";
  Fixture f;
  MK_ASSERT_OK(makeFixture(dev, kernelName, 1, 2048 + 8, f));
  const int64_t nLayers = int64_t(f.cfg.pattern.size());
  for (int64_t ctx : {0, 2048}) {
    const std::string label = kernelName + " seed 1 ctx " + std::to_string(ctx);
    DeviceStep ds;
    deviceStepFromRandom(dev, f, ctx, ds);
    if (::testing::Test::HasFatalFailure())
      return;
    DecodeState &state = ds.before, &gpuState = ds.after;
    const std::vector<BFloat16> &hidden = ds.hidden, &gpuOut = ds.out;
    EXPECT_EQ(gpuState.ctxLen, ctx + 1) << label;
    EXPECT_TRUE(allFinite(bf16ToFloat(gpuOut))) << label << ": non-finite output";
    for (const auto &kv : gpuState.tensors)
      EXPECT_TRUE(allFinite(kv.second.toFloat())) << label << ": non-finite " << kv.first;
    Divergence d;
    OracleTrace trace;
    OracleOptions followed;
    const DecodeState stateBefore = state;
    std::vector<BFloat16> oracleOut = tieAwareOracleStep(
        f, state, hidden, gpuOut, gpuState, kStepCos, label, &d, &trace, &followed);
    const TracedStep step = [&](const OracleOptions &o) {
      DecodeState s = stateBefore;
      OracleTrace t;
      oracleStep(f.cfg, f.weights, s, hidden, &t, &o);
      return t;
    };
    // The first router (under the routings followed) with a near tie left,
    // in the spec's 2-ulp window whatever the kernel's arithmetic: the
    // declared arithmetics' wider one would end the check below earlier
    // (the layer-by-layer test takes every layer's ties in it).
    int64_t firstTie = nLayers;
    for (const OracleOptions &alt : tieRoutings(f, trace, followed, step, nullptr, kSpecTieUlps))
      firstTie = std::min(firstTie, alt.forcedExperts.begin()->first);
    // A stack with routers must agree up to its first near tie; one
    // without (every FFN dense) has no discrete choice to follow, and 36
    // random layers compound the summation-order differences past the
    // unit's bar end to end (run #116: first state below 0.9999 at layer 11,
    // output 0.99963): deepSpecLayerByLayer is its check, this one only
    // reports.
    const bool routed = f.cfg.denseLayers < nLayers;
    if (d.layer >= 0 && routed)
      EXPECT_GT(d.layer, firstTie) << label << ": layer " << d.layer << " disagrees (cosine "
                                   << d.cos << ") before any router near tie (first at layer "
                                   << firstTie << ")";
    std::printf("[ info ] %s: output cosine %.6f; first disagreement at layer %lld (cosine "
                "%.6f; -1: none), first router near tie left at layer %lld\n",
                label.c_str(), cosine(bf16ToFloat(gpuOut), bf16ToFloat(oracleOut)),
                (long long)d.layer, d.cos, (long long)firstTie);
  }
}

/// A wide spec's kernel (examples/specs/kimi_wide_dsv3.json: one MLA + MoE
/// layer at DeepSeek-V3's width, hidden 7168, 128 MLA heads, 256 experts
/// 2048 wide, 90240 B of shared memory with the input vector lent;
/// kimi_wide_mixtral.json: K, M at Mixtral's width, hidden 4096, 8 experts
/// 14336 wide, 93920 B with the 2-stage ring and the down tasks' staged
/// slices), generated only on request (MK_DEEP_KERNELS=1
/// scripts/make-gpu-kernels.sh; the DeepSeek-width weights are ~6 GB): one
/// seed, one step from context 2048 against the oracle. Skipped when its
/// kernel directory is absent.
void wideSpecOneStep(const std::string &kernelName) {
  MK_REQUIRE_GPU(dev);
  if (!kernelGenerated(kernelName))
    GTEST_SKIP() << kernelName << " not generated (MK_DEEP_KERNELS=1 scripts/make-gpu-kernels.sh)";
  Fixture f;
  MK_ASSERT_OK(makeFixture(dev, kernelName, 1, 2048 + 8, f));
  oneStepFrom(dev, f, 2048, 2, kernelName + " seed 1 ctx 2048");
}

/// Every layer of one device step checked from the device's own input to
/// it (layer 0 from `in`, layer l from the capture "layer{l-1}.out") against
/// oracleLayerStep on `oracleState` (the state the step started from): the
/// layer's output and state tensors (caches: the new row, at ctx) within
/// kStepCos, a router near tie taken either way; `gpuState` is the state
/// after the step. Leaves the last layer's captured output in `last`.
void checkLayersFromDeviceInputs(Fixture &f, const std::string &label, int64_t ctx,
                                 DecodeState oracleState, const DecodeState &gpuState,
                                 std::vector<BFloat16> in, std::vector<BFloat16> &last) {
  const int64_t nLayers = int64_t(f.cfg.pattern.size());
  // Layer l's agreement: its output against the capture, its state
  // tensors against the device's (caches: the new row, at ctx).
  auto agreement = [&](int64_t l, const std::vector<BFloat16> &out,
                       const std::vector<BFloat16> &gpuLayerOut, const DecodeState &os) {
    double worst = cosine(bf16ToFloat(gpuLayerOut), bf16ToFloat(out));
    const std::string pre = "state." + std::to_string(l) + ".";
    for (const auto &kv : os.tensors) {
      if (kv.first.rfind(pre, 0) != 0)
        continue;
      const HostTensor &gt = gpuState.tensors.at(kv.first);
      const bool cache = isCacheState(f.cfg, kv.first);
      const double c = cache ? cosine(cacheRows(gt, ctx, ctx + 1), cacheRows(kv.second, ctx, ctx + 1))
                             : cosine(gt.toFloat(), kv.second.toFloat());
      EXPECT_TRUE(allFinite(gt.toFloat())) << label << ": non-finite " << kv.first;
      worst = std::min(worst, c);
    }
    return worst;
  };
  // Layer l's own state tensors, all oracleLayerStep reads and writes: what
  // a near tie's re-runs start from (not a copy of every layer's state).
  auto layerState = [&](int64_t l) {
    DecodeState s;
    s.ctxLen = oracleState.ctxLen;
    const std::string pre = "state." + std::to_string(l) + ".";
    for (const auto &kv : oracleState.tensors)
      if (kv.first.rfind(pre, 0) == 0)
        s.tensors.emplace(kv.first, kv.second);
    return s;
  };
  std::vector<BFloat16> &gpuLayerOut = last;
  double worstAll = 1.0;
  int ties = 0;
  for (int64_t l = 0; l < nLayers; ++l) {
    std::vector<uint8_t> bytes;
    MK_ASSERT_OK(f.session->readCapture("layer" + std::to_string(l) + ".out", bytes));
    ASSERT_EQ(bytes.size(), size_t(f.cfg.hidden) * 2) << label << " layer " << l;
    gpuLayerOut.resize(size_t(f.cfg.hidden));
    std::memcpy(gpuLayerOut.data(), bytes.data(), bytes.size());
    EXPECT_TRUE(allFinite(bf16ToFloat(gpuLayerOut))) << label << ": layer " << l << " output";
    const DecodeState before = layerState(l);
    OracleTrace trace;
    std::vector<BFloat16> out = oracleLayerStep(f.cfg, f.weights, oracleState, l, in, &trace);
    double c = agreement(l, out, gpuLayerOut, oracleState);
    const TracedStep step = [&](const OracleOptions &o) {
      DecodeState s = before;
      OracleTrace t;
      oracleLayerStep(f.cfg, f.weights, s, l, in, &t, &o);
      return t;
    };
    bool tookTie = false;
    if (c < kStepCos) {
      for (const OracleOptions &alt : tieRoutings(f, trace, OracleOptions{}, step)) {
        DecodeState s = before;
        std::vector<BFloat16> o = oracleLayerStep(f.cfg, f.weights, s, l, in, nullptr, &alt);
        const double ca = agreement(l, o, gpuLayerOut, s);
        std::printf("[ info ] %s: router near tie at layer %lld; the other tie-break "
                    "gives cosine %.6f (oracle's own: %.6f)\n",
                    label.c_str(), (long long)l, ca, c);
        if (ca > c) {
          c = ca;
          for (auto &kv : s.tensors)
            oracleState.tensors.at(kv.first) = std::move(kv.second);
          tookTie = true;
        }
      }
      ties += tookTie;
    }
    EXPECT_GE(c, kStepCos) << label << ": layer " << l << " (output or state) cosine " << c;
    worstAll = std::min(worstAll, c);
    in = gpuLayerOut; // the next layer from the device's own input
  }
  std::printf("[ info ] %s: %lld layers, each against the oracle from the device's input: "
              "lowest cosine %.6f, %d near ties taken the other way\n",
              label.c_str(), (long long)nLayers, worstAll, ties);
}

/// Every layer of a deep spec's step checked on its own: the oracle runs
/// layer l (oracleLayerStep) on the device's input to it (the step's input,
/// then the debug-capture kernel's `layer<l-1>.out`), and its output and
/// state must agree with the device's `layer<l>.out` and layer l's state at
/// the unit's bar (the caches' new row), a router near tie of that layer
/// broken either way. End to end, a deep stack of random layers compounds
/// rounding differences (the oracle and the kernel sum in other orders, and
/// the kernel's split-K atomics in no fixed order) and flips near ties
/// (27 layers of 256 experts: several per step), so the whole step's
/// cosine says little about a layer's correctness; this comparison does
/// not compound. Also: the step's output is the last layer's capture, bit
/// for bit, and every capture is finite.
void deepSpecLayerByLayer(const std::string &kernelName) {
  MK_REQUIRE_GPU(dev);
  if (!kernelGenerated(kernelName))
    GTEST_SKIP() << kernelName << " not generated (MK_DEEP_KERNELS=1 scripts/make-gpu-kernels.sh)";
  Fixture f;
  MK_ASSERT_OK(makeFixture(dev, kernelName, 1, 2048 + 8, f));
  ASSERT_TRUE(f.kernel->manifest().debugCapture) << kernelName << " has no captures";
  for (int64_t ctx : {0, 2048}) {
    const std::string label = kernelName + " seed 1 ctx " + std::to_string(ctx);
    DeviceStep ds;
    deviceStepFromRandom(dev, f, ctx, ds);
    if (::testing::Test::HasFatalFailure())
      return;
    std::vector<BFloat16> last;
    checkLayersFromDeviceInputs(f, label, ctx, ds.before, ds.after, ds.hidden, last);
    if (::testing::Test::HasFatalFailure())
      return;
    EXPECT_TRUE(sameBits(ds.out, last)) << label << ": output is not the last layer's";
  }
}

/// A whole model's debug-capture kernel, one token step from contexts 0 and
/// 2048, checked layer by layer from the device's own input to each layer
/// (the first layer's input is the token's embedding row), then its head
/// (final norm, LM head, argmax) from the device's last layer output: the
/// logits within kStepCos of oracleModelHead's, the next token the same
/// unless the two logits are a bf16 near tie. A deep random stack's
/// rounding and router near ties compound end to end (deepSpecOneStep
/// reports that); from each layer's own input they do not.
/// `deep`: a kernel only MK_DEEP_KERNELS=1 makes (skipped without it).
void modelLayerByLayer(const std::string &kernelName, bool deep) {
  MK_REQUIRE_GPU(dev);
  if (deep && !kernelGenerated(kernelName))
    GTEST_SKIP() << kernelName << " not generated (MK_DEEP_KERNELS=1 scripts/make-gpu-kernels.sh)";
  Fixture f;
  MK_ASSERT_OK(makeFixture(dev, kernelName, 1, 2048 + 8, f));
  ASSERT_TRUE(f.kernel->manifest().debugCapture) << kernelName << " has no captures";
  ASSERT_GT(f.cfg.vocab, 0) << kernelName << " is no whole model";
  const size_t vocab = size_t(f.cfg.vocab), hidden = size_t(f.cfg.hidden);
  for (int64_t ctx : {0, 2048}) {
    const std::string label = kernelName + " seed 1 ctx " + std::to_string(ctx);
    DecodeState before;
    MK_ASSERT_OK(writeModelState(f, ctx, 8, before));
    const int32_t token = int32_t(7 % f.cfg.vocab);
    int32_t next = -1;
    MK_ASSERT_OK(f.session->stepTokenHost(token, &next));
    std::vector<BFloat16> gpuLogits;
    MK_ASSERT_OK(readLogits(f, gpuLogits));
    DecodeState after;
    MK_ASSERT_OK(readState(*f.session, after));
    EXPECT_EQ(after.ctxLen, ctx + 1) << label;
    const BFloat16 *row = f.weights.at("embed.weight").bf16() + size_t(token) * hidden;
    std::vector<BFloat16> last;
    checkLayersFromDeviceInputs(f, label, ctx, before, after,
                                std::vector<BFloat16>(row, row + hidden), last);
    if (::testing::Test::HasFatalFailure())
      return;
    const ModelStepResult want = oracleModelHead(f.cfg, f.weights, last);
    const std::vector<float> g = bf16ToFloat(gpuLogits), o = bf16ToFloat(want.logits);
    EXPECT_TRUE(allFinite(g)) << label << ": non-finite logits";
    const double c = cosine(g, o);
    EXPECT_GE(c, kStepCos) << label << ": logits cosine " << c
                           << " (the head from the device's last layer output)";
    ASSERT_GE(next, 0) << label;
    ASSERT_LT(size_t(next), vocab) << label;
    // The device's token is the argmax of its own logits (the first of the
    // largest, as the oracle's).
    size_t best = 0;
    for (size_t v = 1; v < vocab; ++v)
      if (g[v] > g[best])
        best = v;
    EXPECT_EQ(size_t(next), best) << label << ": the token is not its logits' argmax";
    expectOraclesTokenOrTie(label, o, next, want.next);
    std::printf("[ info ] %s: the head from the device's last layer output: logits cosine "
                "%.6f, token %d -> %d (oracle %lld)\n",
                label.c_str(), c, token, next, (long long)want.next);
  }
}

} // namespace

TEST(OracleGpu, FullUnitOneStep) { oneStepAgainstOracle(fullName()); }
TEST(OracleGpu, DeepSpecOneStep) { deepSpecOneStep("kimi_linear_27l"); }
TEST(OracleGpu, DeepSpecLayerByLayer) { deepSpecLayerByLayer("kimi_linear_27l_debug"); }
// Whole models layer by layer, then the head: the tiny model, and the
// released model's 27 layers with its 163840-token head (its kernels with
// MK_DEEP_KERNELS=1; ~26 GB of random weights).
TEST(OracleGpu, TinyModelLayerByLayer) { modelLayerByLayer("tiny_model_debug", false); }
TEST(OracleGpu, ReleasedModelLayerByLayer) { modelLayerByLayer("kimi_linear_48b_debug", true); }
TEST(OracleGpu, WideDeepSeekOneStep) { wideSpecOneStep("kimi_wide_dsv3"); }
TEST(OracleGpu, WideMixtralOneStep) { wideSpecOneStep("kimi_wide_mixtral"); }
TEST(OracleGpu, TinyOneStep) { oneStepAgainstOracle(tinyName()); }
// Layer 0 with a dense SwiGLU FFN instead of the MoE (dense_layers = 1).
TEST(OracleGpu, TinyDenseFirstOneStep) { oneStepAgainstOracle("tiny_dense_first"); }
TEST(OracleGpu, TinyDenseFirstEightSteps) { eightSteps("tiny_dense_first"); }
TEST(OracleGpu, DenseFirstOneStep) { oneStepAgainstOracle("kimi_linear_dense_first"); }
// The released model's router: sigmoid scores, the correction bias choosing.
TEST(OracleGpu, TinySigmoidRouterOneStep) { oneStepAgainstOracle("tiny_sigmoid_router"); }
TEST(OracleGpu, TinySigmoidRouterEightSteps) { eightSteps("tiny_sigmoid_router"); }
TEST(OracleGpu, SigmoidRouterOneStep) { oneStepAgainstOracle("kimi_linear_sigmoid_router"); }
// The released model's MLA form: the rope parts unrotated, the latent
// normalized before it is cached.
TEST(OracleGpu, TinyMlaNopeOneStep) { oneStepAgainstOracle("tiny_mla_nope"); }
TEST(OracleGpu, TinyMlaNopeEightSteps) { eightSteps("tiny_mla_nope"); }
TEST(OracleGpu, MlaNopeOneStep) { oneStepAgainstOracle("kimi_linear_mla_nope"); }
// Every form of the released model the family expresses, at once: the MLA
// form, the sigmoid router, a dense first layer, norms rounded twice.
TEST(OracleGpu, TinyReleasedFormsOneStep) { oneStepAgainstOracle("tiny_released_forms"); }
TEST(OracleGpu, TinyReleasedFormsEightSteps) { eightSteps("tiny_released_forms"); }
TEST(OracleGpu, TinyModelFromContext0) { modelSteps("tiny_model", 0); }
// A block's kernel takes no token id, a whole model's no hidden vector:
// each refuses the other's step by name, before any launch.
TEST(OracleGpu, StepKindsAreTheKernels) {
  MK_REQUIRE_GPU(dev);
  Fixture block, model;
  MK_ASSERT_OK(makeFixture(dev, "tiny", 51, 64, block));
  MK_ASSERT_OK(makeFixture(dev, "tiny_model", 52, 64, model));
  int32_t next = 0;
  rt::Status a = block.session->stepTokenHost(1, &next);
  EXPECT_EQ(a.code(), rt::ErrorCode::InvalidArgument);
  EXPECT_NE(a.message().find("is a block"), std::string::npos) << a.message();
  rt::Status b = model.session->step(model.in.ptr(), model.out.ptr());
  EXPECT_EQ(b.code(), rt::ErrorCode::InvalidArgument);
  EXPECT_NE(b.message().find("is a whole model"), std::string::npos) << b.message();
  EXPECT_EQ(block.session->launchCount(), 0u);
  EXPECT_EQ(model.session->launchCount(), 0u);
  EXPECT_EQ(block.session->logits(), 0u);
  EXPECT_NE(model.session->logits(), 0u);
}
TEST(OracleGpu, TinyModelFromContext2048) { modelSteps("tiny_model", 2048); }
TEST(OracleGpu, TinyModelFromContext8192) { modelSteps("tiny_model", 8192); }
TEST(OracleGpu, TinyModelBf16HeadFromContext2048) { modelSteps("tiny_model_bf16_head", 2048); }
// The unit's width with the released model's 163840-token LM head: the
// argmax merged by its 1280 tiles (schedule-fuse-argmax; the argmax task's
// 40 slices in ModelArgmaxTaskFromContext0 below).
TEST(OracleGpu, ModelFromContext0) { modelSteps("kimi_linear_model", 0); }
TEST(OracleGpu, ModelFromContext8192) { modelSteps("kimi_linear_model", 8192); }
// The greedy argmax as its own task after the LM head (schedule-fuse-argmax=
// enabled=false; the kernels above merge it in the head's tiles, the
// default): the same tokens and logits, from contexts 0 and 2048.
TEST(OracleGpu, TinyModelArgmaxTask) { modelSteps("tiny_model_argmax_task", 2048); }
TEST(OracleGpu, ModelArgmaxTaskFromContext0) { modelSteps("kimi_linear_model_argmax_task", 0); }
// A Hugging Face checkpoint of the released model's layout (the reduced
// config tests/python/configs/kimi48b_tiny.json; random weights under its
// state-dict names, written as safetensors): the kernel mkc compiled from
// that config.json (--from-hf, scripts/make-gpu-kernels.sh), the weights
// convertHfCheckpoint made of the checkpoint, 8 greedy steps from a fresh
// sequence against the oracle on the same weights.
TEST(OracleGpu, TinyHfCheckpointDecodes) {
  MK_REQUIRE_GPU(dev);
  const std::string config = std::string(MK_SOURCE_DIR) + "/tests/python/configs/kimi48b_tiny.json";
  oracle::Kimi48bConfig c;
  std::string error;
  ASSERT_TRUE(oracle::parseKimi48bConfig(config, c, error)) << error;
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("mk-gpu-hf-" + std::to_string(::getpid())))
                              .string();
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(writeSafetensors(dir + "/model.safetensors", oracle::makeRandomKimi48bWeights(c, 7),
                               error))
      << error;
  std::shared_ptr<Kernel> kernel;
  MK_ASSERT_OK(loadTestKernel(dev, "kimi48b_tiny", kernel));
  TensorMap w;
  std::vector<std::string> problems;
  ASSERT_TRUE(convertHfCheckpoint(kernel->manifest().config, dir, w, problems))
      << (problems.empty() ? "" : problems.front());
  std::filesystem::remove_all(dir);
  modelSteps("kimi48b_tiny", 0, &w);
}
TEST(OracleGpu, ReleasedFormsOneStep) { oneStepAgainstOracle("kimi_linear_released_forms"); }
// The same with the gated output norms staged by the output projections
// (schedule-fuse-kda-gated-norm; make-gpu-kernels.sh generates it).
TEST(OracleGpu, ReleasedFormsGatedNormFusedOneStep) {
  oneStepAgainstOracle("kimi_linear_released_forms_tgnorm");
}
// The routed experts waiting for the router's counter instead of polling
// its logits (schedule-poll-router-logits=enabled=false, the default until
// session 35; make-gpu-kernels.sh generates them): the softmax router over 8
// steps, the sigmoid router at the unit's width. Every default kernel whose
// routers have at most 64 experts polls (wider ones, the 48B's, keep their
// counters: schedule-poll-router-logits max-experts); the unit's counted
// form is kimi_linear_w4a16_tcounted (the schedule variants' oracle test).
TEST(OracleGpu, TinyRouterCountedEightSteps) { eightSteps("tiny_tcounted"); }
TEST(OracleGpu, ReleasedFormsRouterCountedOneStep) {
  oneStepAgainstOracle("kimi_linear_released_forms_tcounted");
}
// The dense GQA family: a tiny two-layer spec and a Qwen3-8B-sized layer.
TEST(OracleGpu, TinyDenseGqaOneStep) { oneStepAgainstOracle("tiny_dense_gqa"); }
TEST(OracleGpu, TinyDenseGqaEightSteps) { eightSteps("tiny_dense_gqa"); }
TEST(OracleGpu, TinyDenseGqaFromContextZero) { fromContextZero("tiny_dense_gqa"); }
TEST(OracleGpu, TinyDenseGqaRecomputeOnLiveData) { recomputeOnLiveData("tiny_dense_gqa"); }
TEST(OracleGpu, TinyDenseGqaOneLaunchPerStep) { launchCount("tiny_dense_gqa"); }
TEST(OracleGpu, TinyDenseGqaBadInputs) { badInputs("tiny_dense_gqa"); }
TEST(OracleGpu, Qwen3LayerOneStep) { oneStepAgainstOracle("qwen3_8b_layer"); }
TEST(OracleGpu, Qwen3LayerEightSteps) { eightSteps("qwen3_8b_layer"); }
TEST(OracleGpu, Qwen3LayerFromContextZero) { fromContextZero("qwen3_8b_layer"); }
// A GQA layer in the hybrid family's pattern (K, G, K, M with MoE FFNs).
TEST(OracleGpu, TinyGqaHybridOneStep) { oneStepAgainstOracle("tiny_gqa_hybrid"); }
TEST(OracleGpu, TinyGqaHybridEightSteps) { eightSteps("tiny_gqa_hybrid"); }
// 36 Qwen3-8B-sized layers: end to end (finite, one more row; agreement
// reported) and layer by layer against the oracle from the kernel's own
// input to each layer (the debug-capture kernel).
TEST(OracleGpu, Qwen3ThirtySixLayersOneStep) { deepSpecOneStep("qwen3_8b_36l"); }
TEST(OracleGpu, Qwen3ThirtySixLayersLayerByLayer) {
  deepSpecLayerByLayer("qwen3_8b_36l_debug");
}
TEST(OracleGpu, FullUnitFromContextZero) { fromContextZero(fullName()); }
TEST(OracleGpu, TinyFromContextZero) { fromContextZero(tinyName()); }
TEST(OracleGpu, TinyTiledWeights) { tiledWeights("tiny_tiled"); }
TEST(OracleGpu, FullUnitEightSteps) { eightSteps(fullName()); }
TEST(OracleGpu, TinyEightSteps) { eightSteps(tinyName()); }
TEST(OracleGpu, FullUnitRecomputeOnLiveData) { recomputeOnLiveData(fullName()); }
TEST(OracleGpu, TinyRecomputeOnLiveData) { recomputeOnLiveData(tinyName()); }
TEST(OracleGpu, FullUnitOneLaunchPerStep) { launchCount(fullName()); }
TEST(OracleGpu, TinyOneLaunchPerStep) { launchCount(tinyName()); }
TEST(OracleGpu, FullUnitBadInputs) { badInputs(fullName()); }
TEST(OracleGpu, TinyBadInputs) { badInputs(tinyName()); }
