//===- mk-diff.cpp - Name the first phase that disagrees with the oracle --===//
//
//   mk-diff --kernel-dir DIR [--ctx 2048] [--seed 1] [--weights F.safetensors]
//           [--threshold 0.999]
//
// DIR holds a kernel generated with debug_capture: true. Runs one step on
// random (or given) weights and a random state and token, runs the oracle
// with an OracleTrace, and compares every capture in manifest order (cosine
// and max |diff|), marking the first that disagrees (cosine below the
// threshold, or non-finite values). Exit status 1 if any capture disagrees.
//
//===----------------------------------------------------------------------===//

#include "mk/Oracle.h"
#include "mk/runtime/Session.h"

#include "ToolOptions.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace mk;
using namespace mk::rt;

namespace {

int fail(const Status &st, const char *what) {
  std::fprintf(stderr, "mk-diff: %s: %s\n", what, st.toString().c_str());
  return 1;
}

std::vector<float> toFloats(const std::vector<uint8_t> &bytes, DType dt) {
  std::vector<float> out;
  size_t n = bytes.size() / size_t(dtypeBytes(dt));
  out.resize(n);
  for (size_t i = 0; i < n; ++i) {
    switch (dt) {
    case DType::BF16: {
      uint16_t b;
      std::memcpy(&b, &bytes[2 * i], 2);
      out[i] = BFloat16::fromBits(b).toFloat();
      break;
    }
    case DType::F32:
      std::memcpy(&out[i], &bytes[4 * i], 4);
      break;
    case DType::I32: {
      int32_t v;
      std::memcpy(&v, &bytes[4 * i], 4);
      out[i] = float(v);
      break;
    }
    case DType::U8:
      out[i] = float(bytes[i]);
      break;
    }
  }
  return out;
}

} // namespace

int main(int argc, char **argv) {
  std::string dir, weightsPath;
  int64_t ctx = 2048;
  uint64_t seed = 1;
  double threshold = 0.999;
  CLI::App app{"Runs one step of a debug-capture kernel and compares every captured "
               "intermediate with the oracle's trace",
               "mk-diff"};
  app.add_option("--kernel-dir", dir, "kernel directory generated with --debug-capture")
      ->required()
      ->check(CLI::ExistingDirectory);
  tools::addCtxOption(app, ctx, "context length of the step");
  tools::addSeedOption(app, seed, "seed of the random weights, state and inputs");
  tools::addWeightsOption(app, weightsPath);
  app.add_option("--threshold", threshold, "least cosine a captured value must reach")
      ->check(CLI::Range(-1.0, 1.0))
      ->capture_default_str();
  if (int rc = tools::parseOrExitCode(app, argc, argv); rc >= 0)
    return rc;
  if (dir.empty()) {
    std::fprintf(stderr, "mk-diff: --kernel-dir is required\n");
    return 2;
  }
  std::shared_ptr<Device> dev;
  Status st = Device::open(0, dev);
  if (!st.isOk())
    return fail(st, "opening the GPU");
  std::shared_ptr<Kernel> kernel;
  if (!(st = buildKernelFromDir(dir, dev->arch(), {}, kernel)).isOk())
    return fail(st, "compiling");
  const Manifest &m = kernel->manifest();
  if (!m.debugCapture) {
    std::fprintf(stderr, "mk-diff: %s was not generated with debug_capture: "
                         "true (no captures to compare)\n", dir.c_str());
    return 2;
  }
  const BlockConfig &cfg = m.config;
  if (cfg.vocab > 0) {
    std::fprintf(stderr, "mk-diff: %s is a whole model (config 'vocab'): mk-diff compares a "
                 "block's step from a hidden vector; the whole model's tests compare its "
                 "logits and tokens (OracleGpu.*Model*)\n", dir.c_str());
    return 2;
  }
  SessionOptions so;
  so.cacheCapacity = ctx + 1;
  std::unique_ptr<Session> s;
  if (!(st = Session::create(dev, kernel, so, s)).isOk())
    return fail(st, "creating the session");

  TensorMap weights;
  if (!weightsPath.empty()) {
    std::vector<std::string> problems;
    if (!loadCheckedSafetensors(weightsPath, parameterTensors(cfg), weights,
                                problems)) {
      for (const std::string &p : problems)
        std::fprintf(stderr, "mk-diff: %s\n", p.c_str());
      return 1;
    }
  } else {
    weights = makeRandomWeights(cfg, seed);
  }
  if (!(st = s->bindWeightsHost(weights)).isOk())
    return fail(st, "binding weights");
  DecodeState state = makeRandomState(cfg, ctx, seed + 1);
  std::vector<BFloat16> hidden = makeRandomHidden(cfg, seed + 2);
  if (!(st = s->loadStateHost(state.tensors, ctx)).isOk())
    return fail(st, "writing state");
  std::vector<uint16_t> in(hidden.size()), out(hidden.size());
  for (size_t i = 0; i < hidden.size(); ++i)
    in[i] = hidden[i].bits;
  if (!(st = s->stepHost(in.data(), out.data())).isOk())
    return fail(st, "step");

  OracleTrace trace;
  std::vector<BFloat16> want = oracleStep(cfg, weights, state, hidden, &trace);

  std::printf("%-28s %-6s %10s %12s %12s  %s\n", "capture", "dtype", "elements",
              "cosine", "max |diff|", "");
  std::string firstBad;
  int compared = 0;
  auto row = [&](const std::string &name, const char *dtype,
                 const std::vector<float> &g, const std::vector<float> *o) {
    if (!o) {
      std::printf("%-28s %-6s %10zu %12s %12s  (no oracle value)\n", name.c_str(),
                  dtype, g.size(), "-", "-");
      return;
    }
    bool finite = true;
    double maxDiff = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      finite &= std::isfinite(g[i]);
      if (i < o->size())
        maxDiff = std::max(maxDiff, double(std::fabs(g[i] - (*o)[i])));
    }
    double cos = g.size() == o->size() ? cosineSimilarity(g.data(), o->data(), g.size())
                                       : NAN;
    bool bad = !finite || !(cos >= threshold);
    const char *mark = "";
    if (bad && firstBad.empty()) {
      firstBad = name;
      mark = "<== first disagreement";
    } else if (bad) {
      mark = "x";
    }
    ++compared;
    std::printf("%-28s %-6s %10zu %12.6f %12.4g  %s%s\n", name.c_str(), dtype,
                g.size(), cos, maxDiff, mark,
                g.size() != o->size() ? " (size differs)" : "");
  };
  for (const Capture &c : m.captures) {
    std::vector<uint8_t> bytes;
    if (!(st = s->readCapture(c.name, bytes)).isOk())
      return fail(st, "reading a capture");
    auto it = trace.values.find(c.name);
    row(c.name, dtypeName(c.dtype), toFloats(bytes, c.dtype),
        it == trace.values.end() ? nullptr : &it->second);
  }
  std::vector<float> g(out.size()), o(want.size());
  for (size_t i = 0; i < out.size(); ++i) {
    g[i] = BFloat16::fromBits(out[i]).toFloat();
    o[i] = want[i].toFloat();
  }
  row("hidden_out", "bf16", g, &o);
  if (firstBad.empty()) {
    std::printf("all %d compared values agree (cosine >= %g)\n", compared, threshold);
    return 0;
  }
  std::printf("first disagreement: %s\n", firstBad.c_str());
  return 1;
}
