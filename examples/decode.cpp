//===- decode.cpp - Decode tokens with a generated megakernel -------------===//
//
//   mk-decode KERNEL_DIR [--tokens 64] [--ctx 2048] [--weights F.safetensors]
//             [--seed 1] [--bandwidth B/s]
//
// Loads the kernel the compiler wrote (mkc SPEC --emit=cuda -o KERNEL_DIR),
// binds weights (random test weights of the spec, or a safetensors file),
// starts from a random state of --ctx tokens, and decodes --tokens tokens,
// each step's output hidden feeding the next (one cooperative launch per
// token, device pointers only). Prints the median ms/token (CUDA events,
// after warm-up) and the HBM floor for this configuration.
//
//===----------------------------------------------------------------------===//

#include "DecodeLoop.h"
#include "mk/Oracle.h"
#include "mk/runtime/Roofline.h"
#include "mk/runtime/Session.h"

#include "ToolOptions.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace mk;
using namespace mk::rt;

static int check(const Status &st, const char *what) {
  if (st.isOk())
    return 0;
  std::fprintf(stderr, "mk-decode: %s: %s\n", what, st.toString().c_str());
  std::exit(1);
}

int main(int argc, char **argv) {
  std::string dir, weightsPath;
  int tokens = 64, warmup = 8;
  int64_t ctx = 2048;
  uint64_t seed = 1;
  double bandwidth = kH200Bandwidth;
  CLI::App app{"Decodes tokens with a generated megakernel and reports ms/token against "
               "the HBM floor",
               "mk-decode"};
  app.add_option("KERNEL_DIR", dir, "kernel directory (mkc SPEC --emit=cuda -o KERNEL_DIR)")
      ->required()
      ->check(CLI::ExistingDirectory);
  tools::addTokensOption(app, tokens);
  tools::addCtxOption(app, ctx, "context length of the random starting state");
  tools::addWeightsOption(app, weightsPath);
  tools::addSeedOption(app, seed, "seed of the random weights, state and token");
  app.add_option("--bandwidth", bandwidth, "HBM bandwidth for the floor, bytes/s")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  if (int rc = tools::parseOrExitCode(app, argc, argv); rc >= 0)
    return rc;

  // 1. The GPU, and the kernel compiled for it (cached on disk).
  std::shared_ptr<Device> dev;
  check(Device::open(0, dev), "opening the GPU");
  std::shared_ptr<Kernel> kernel;
  check(buildKernelFromDir(dir, dev->arch(), {}, kernel), "compiling the kernel");
  const BlockConfig &cfg = kernel->manifest().config;

  // 2. A session with room for every token we decode.
  SessionOptions so;
  so.cacheCapacity = ctx + warmup + tokens + 1;
  std::unique_ptr<Session> s;
  check(Session::create(dev, kernel, so, s), "creating the session");

  // 3.-4. Weights, a starting state of `ctx` tokens, then decode: the output
  // of one step is the input of the next (examples/DecodeLoop.h).
  examples::DecodeResult run;
  check(examples::decodeTokens(*s, weightsPath, seed, ctx, warmup, tokens, run),
        "decoding");
  std::vector<float> ms = run.msPerToken;
  const double norm = run.lastHiddenNorm;

  std::sort(ms.begin(), ms.end());
  double med = ms[ms.size() / 2];
  double bytes = bytesPerToken(cfg, ctx + warmup + tokens / 2).total();
  double floorMs = bytes / bandwidth * 1e3;
  std::printf("%s on %s: %d tokens from context %lld (grid %d x %d)\n",
              kernel->manifest().kernel.c_str(), dev->name().c_str(), tokens,
              (long long)ctx, s->launchConfig().grid,
              s->launchConfig().threadsPerBlock);
  std::printf("median %.4f ms/token (min %.4f, max %.4f), %.1f GB/s\n", med,
              double(ms.front()), double(ms.back()), bytes / (med * 1e-3) / 1e9);
  std::printf("roofline: %.1f MB/token at %.2f TB/s -> %.4f ms floor (%.1f%% "
              "of it reached)\n",
              bytes / 1e6, bandwidth / 1e12, floorMs, 100.0 * floorMs / med);
  std::printf("final context %lld, |hidden| = %.4f%s\n",
              (long long)s->contextLength(), norm,
              std::isfinite(norm) ? "" : " (NOT FINITE)");
  return std::isfinite(norm) ? 0 : 1;
}
