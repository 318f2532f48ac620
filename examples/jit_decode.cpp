//===- jit_decode.cpp - Spec in, decoding session out, in one call --------===//
//
//   mk-jit-decode SPEC.json [--tokens 64] [--ctx 0] [--seed 1]
//                 [--weights F.safetensors]
//
// The embedded JIT (compiler/Jit/Jit.h): one mk::jit::createSession call
// compiles the block spec in this process (the whole pipeline, no mkc, no
// files), builds it with NVRTC for the GPU (or takes the CUBIN from the
// cache) and returns a session. Then: bind weights (random test weights of
// the spec, or a safetensors file), decode --tokens tokens from a random
// state of --ctx tokens, each output feeding the next step, and print the
// time per token.
//
//===----------------------------------------------------------------------===//

#include "Jit/Jit.h"

#include "DecodeLoop.h"
#include "mk/Oracle.h"

#include "ToolOptions.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace mk;
using namespace mk::rt;

static void check(const Status &st, const char *what) {
  if (st.isOk())
    return;
  std::fprintf(stderr, "mk-jit-decode: %s: %s\n", what, st.toString().c_str());
  std::exit(1);
}

int main(int argc, char **argv) {
  std::string spec, weightsPath;
  int tokens = 64;
  int64_t ctx = 0;
  uint64_t seed = 1;
  CLI::App app{"Compiles a block spec in-process (the embedded JIT) and decodes tokens with "
               "the kernel",
               "mk-jit-decode"};
  app.add_option("SPEC", spec, "block spec (JSON)")->required()->check(CLI::ExistingFile);
  tools::addTokensOption(app, tokens);
  tools::addCtxOption(app, ctx, "context length of the random starting state");
  tools::addSeedOption(app, seed, "seed of the random weights, state and token");
  tools::addWeightsOption(app, weightsPath);
  if (int rc = tools::parseOrExitCode(app, argc, argv); rc >= 0)
    return rc;

  // The one call: device 0 (null), spec compiled in-process, session ready.
  SessionOptions so;
  so.cacheCapacity = ctx + tokens + 1;
  std::unique_ptr<Session> s;
  auto t0 = std::chrono::steady_clock::now();
  check(jit::createSession(nullptr, spec, jit::JitOptions(), so, s),
        "compiling the spec into a session");
  double setupMs = std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - t0)
                       .count();
  const std::shared_ptr<Device> &dev = s->device();

  // Weights, a starting state, and N steps, one cooperative launch each, the
  // output feeding the next input (examples/DecodeLoop.h).
  examples::DecodeResult run;
  check(examples::decodeTokens(*s, weightsPath, seed, ctx, /*warmup=*/0, tokens, run),
        "decoding");
  std::vector<float> ms = run.msPerToken;
  std::sort(ms.begin(), ms.end());

  std::printf("%s on %s: compiled and loaded in %.0f ms (grid %d x %d)\n",
              s->manifest().kernel.c_str(), dev->name().c_str(), setupMs,
              s->launchConfig().grid, s->launchConfig().threadsPerBlock);
  std::printf("%d tokens from context %lld: median %.4f ms/token (first %.4f)\n",
              tokens, (long long)ctx, double(ms[ms.size() / 2]),
              double(run.msPerToken.front()));
  return 0;
}
