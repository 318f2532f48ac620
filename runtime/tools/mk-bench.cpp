//===- mk-bench.cpp - Time decode steps of a generated kernel -------------===//
//
//   mk-bench [--kernel-dir DIR] [--ctx 2048,8192] [--iters 200] [--warmup 20]
//            [--weights FILE.safetensors] [--seed N] [--bandwidth BYTES_PER_S]
//            [--measure-bandwidth] [--phase-timing] [--json FILE]
//
// Each step is one device-pointer step() bracketed by CUDA events, all at the
// same context length; prints the median ms/token, the achieved GB/s for the
// bytes a token must move, and the HBM floor (bytes / bandwidth).
//
// --json FILE also writes the results, after the table, as one JSON object:
//
//   {"gpu": "NVIDIA H200", "kernel": {"name", "source", "source_sha256",
//    "cache_key"}, "kernel_dir", "iters", "warmup", "bandwidth_bytes_per_s",
//    "bandwidth_measured", "phase_timing",
//    "rows": [{"context", "ms_per_token_median", "ms_per_token_min",
//              "gb_per_s", "floor_ms", "fraction_of_floor"}, ...]}
//
// source_sha256 is the SHA-256 of the emitted .cu source; cache_key is the
// kernel cache's key (source, headers, architecture, NVRTC version and
// options). A file that cannot be written is an error (exit status 1).
//
//===----------------------------------------------------------------------===//

#include "mk/Oracle.h"
#include "mk/runtime/Roofline.h"
#include "mk/Json.h"
#include "mk/runtime/Session.h"
#include "mk/runtime/Sha256.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

using namespace mk;
using namespace mk::rt;

namespace {

int fail(const Status &st, const char *what) {
  std::fprintf(stderr, "mk-bench: %s: %s\n", what, st.toString().c_str());
  return 1;
}

/// Device-to-device copy bandwidth (bytes read + written per second).
Status measureBandwidth(const std::shared_ptr<Device> &dev, double &bw) {
  const size_t bytes = size_t(1) << 31;
  DeviceBuffer a, b;
  MK_RETURN_IF_ERROR(DeviceBuffer::allocate(dev, bytes, a));
  MK_RETURN_IF_ERROR(DeviceBuffer::allocate(dev, bytes, b));
  const DriverApi &drv = dev->driver();
  CUevent e0, e1;
  MK_RETURN_IF_ERROR(cuCheck(drv.cuEventCreate(&e0, 0), "event"));
  MK_RETURN_IF_ERROR(cuCheck(drv.cuEventCreate(&e1, 0), "event"));
  for (int i = 0; i < 3; ++i)
    MK_RETURN_IF_ERROR(cuCheck(drv.cuMemcpyDtoD(b.ptr(), a.ptr(), bytes), "copy"));
  std::vector<float> ms;
  for (int i = 0; i < 10; ++i) {
    drv.cuEventRecord(e0, nullptr);
    MK_RETURN_IF_ERROR(cuCheck(drv.cuMemcpyDtoD(b.ptr(), a.ptr(), bytes), "copy"));
    drv.cuEventRecord(e1, nullptr);
    drv.cuEventSynchronize(e1);
    float t = 0;
    drv.cuEventElapsedTime(&t, e0, e1);
    ms.push_back(t);
  }
  drv.cuEventDestroy(e0);
  drv.cuEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  bw = 2.0 * double(bytes) / (double(ms[ms.size() / 2]) * 1e-3);
  return Status::ok();
}

/// Writes `text` to `path` (created or truncated). On failure returns false
/// and sets `err` to the system's reason.
bool writeTextFile(const std::string &path, const std::string &text,
                   std::string &err) {
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f) {
    err = std::strerror(errno);
    return false;
  }
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() &&
            std::fflush(f) == 0;
  int e = errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    e = errno;
  }
  if (!ok)
    err = e ? std::strerror(e) : "write failed";
  return ok;
}

/// One row of the table, kept for --json.
struct BenchRow {
  int64_t ctx = 0;
  double medianMs = 0, minMs = 0, gbPerS = 0, floorMs = 0;
};

/// Slots per phase in the timing tables; mk::kMaxGrid in grid_sync.cuh.
constexpr size_t kTimingSlots = 1024;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

/// Runs 20 steps of a -DMK_PHASE_TIMING build and prints, per phase, medians
/// over the steps of: span (first block entering it to first block entering
/// the next; the spans add up to the step), the work of the slowest and the
/// average block (done - entry - counter waits), the longest counter wait,
/// and when the last block was done (from the first entry). A phase whose
/// slowest block works much longer than the average is imbalanced; one whose
/// waits are long is waiting for its producers.
Status printPhaseProfile(Session &s, const std::string &manifestText, int phases) {
  std::vector<std::string> names(static_cast<size_t>(phases), "?");
  json::Value root;
  std::string err;
  if (json::parse(manifestText, root, err))
    if (const json::Value *n = root.find("phase_names"))
      for (size_t i = 0; i < n->array.size() && i < names.size(); ++i)
        names[i] = n->array[i].string;
  const size_t P = static_cast<size_t>(phases);
  const int grid = s.launchConfig().grid;
  if (grid <= 0 || size_t(grid) > kTimingSlots)
    return makeError(ErrorCode::InvalidArgument, "phase timing: grid of " + std::to_string(grid) +
                         " blocks does not fit the timing tables");
  std::vector<unsigned long long> entry((P + 1) * kTimingSlots),
      wait((P + 1) * kTimingSlots), done(P * kTimingSlots);
  enum { kSpan, kWorkMax, kWorkMean, kWaitMax, kTail, kStats };
  std::vector<std::vector<double>> stat(P * kStats);
  const int64_t ctx0 = s.contextLength();
  for (int it = 0; it < 20; ++it) {
    MK_RETURN_IF_ERROR(s.setContextLength(ctx0));
    MK_RETURN_IF_ERROR(s.step(s.stagingIn(), s.stagingOut()));
    MK_RETURN_IF_ERROR(s.readModuleGlobal("mk_phase_ns", entry.data(), entry.size() * 8));
    MK_RETURN_IF_ERROR(s.readModuleGlobal("mk_phase_wait_ns", wait.data(), wait.size() * 8));
    MK_RETURN_IF_ERROR(s.readModuleGlobal("mk_phase_done_ns", done.data(), done.size() * 8));
    auto at = [&](const std::vector<unsigned long long> &t, size_t p, int b) {
      return double(t[p * kTimingSlots + size_t(b)]);
    };
    for (size_t p = 0; p < P; ++p) {
      double start = 1e300, next = 1e300, last = 0, workMax = 0, workSum = 0, waitMax = 0;
      for (int b = 0; b < grid; ++b) {
        start = std::min(start, at(entry, p, b));
        next = std::min(next, at(entry, p + 1, b));
        last = std::max(last, at(done, p, b));
        double w = at(wait, p, b);
        double work = at(done, p, b) - at(entry, p, b) - w;
        workMax = std::max(workMax, work);
        workSum += work;
        waitMax = std::max(waitMax, w);
      }
      stat[p * kStats + kSpan].push_back((next - start) * 1e-3);
      stat[p * kStats + kWorkMax].push_back(workMax * 1e-3);
      stat[p * kStats + kWorkMean].push_back(workSum / grid * 1e-3);
      stat[p * kStats + kWaitMax].push_back(waitMax * 1e-3);
      stat[p * kStats + kTail].push_back((last - start) * 1e-3);
    }
  }
  MK_RETURN_IF_ERROR(s.setContextLength(ctx0));
  double total = 0;
  std::printf("  phase profile (all %d blocks, median of 20 steps, us):\n", grid);
  std::printf("  %3s %8s %9s %10s %9s %9s  %s\n", "#", "span", "work max",
              "work mean", "wait max", "last done", "phase");
  for (size_t p = 0; p < P; ++p) {
    double v[kStats];
    for (int k = 0; k < kStats; ++k)
      v[k] = median(stat[p * kStats + size_t(k)]);
    total += v[kSpan];
    std::printf("  %3zu %8.2f %9.2f %10.2f %9.2f %9.2f  %s\n", p, v[kSpan], v[kWorkMax],
                v[kWorkMean], v[kWaitMax], v[kTail], names[p].c_str());
  }
  std::printf("  sum %8.2f\n", total);
  return Status::ok();
}

} // namespace

int main(int argc, char **argv) {
  std::string dir, weightsPath, jsonPath;
  std::vector<int64_t> ctxs = {2048, 8192};
  int iters = 200, warmup = 20;
  uint64_t seed = 1;
  double bandwidth = kH200Bandwidth;
  bool measure = false, phaseTiming = false;
  if (const char *k = std::getenv("MK_KERNELS_DIR"))
    dir = std::string(k) + "/kimi_linear_w4a16";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "mk-bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--kernel-dir")
      dir = next();
    else if (a == "--ctx") {
      ctxs.clear();
      std::stringstream ss(next());
      std::string item;
      while (std::getline(ss, item, ','))
        ctxs.push_back(std::atoll(item.c_str()));
    } else if (a == "--iters")
      iters = std::atoi(next().c_str());
    else if (a == "--warmup")
      warmup = std::atoi(next().c_str());
    else if (a == "--seed")
      seed = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--weights")
      weightsPath = next();
    else if (a == "--bandwidth")
      bandwidth = std::atof(next().c_str());
    else if (a == "--measure-bandwidth")
      measure = true;
    else if (a == "--phase-timing")
      phaseTiming = true;
    else if (a == "--json")
      jsonPath = next();
    else {
      std::fprintf(stderr,
                   "usage: mk-bench [--kernel-dir DIR] [--ctx 2048,8192] "
                   "[--iters N] [--warmup N] [--weights F.safetensors] "
                   "[--seed N] [--bandwidth B/s] [--measure-bandwidth] "
                   "[--phase-timing] [--json FILE]\n");
      return 2;
    }
  }
  if (dir.empty()) {
    std::fprintf(stderr, "mk-bench: no kernel: pass --kernel-dir or set MK_KERNELS_DIR\n");
    return 2;
  }

  std::shared_ptr<Device> dev;
  Status st = Device::open(0, dev);
  if (!st.isOk())
    return fail(st, "opening the GPU");
  KernelBuildOptions bo;
  // Every block stamps the global timer as it enters and finishes each
  // phase (phase_timing.cuh): a per-phase profile without hardware counters.
  if (phaseTiming)
    bo.compile.extraOptions.push_back("-DMK_PHASE_TIMING");
  // What buildKernelFromDir does, keeping the source to hash it for --json.
  KernelSource src;
  if (!(st = readKernelDir(dir, "", src)).isOk())
    return fail(st, "reading the kernel");
  bo.compile.arch = dev->arch();
  std::shared_ptr<Kernel> kernel;
  if (!(st = Kernel::build(src, bo, kernel)).isOk())
    return fail(st, "compiling");
  const BlockConfig &cfg = kernel->manifest().config;
  int64_t maxCtx = *std::max_element(ctxs.begin(), ctxs.end());
  SessionOptions so;
  so.cacheCapacity = maxCtx + 1;
  std::unique_ptr<Session> s;
  if (!(st = Session::create(dev, kernel, so, s)).isOk())
    return fail(st, "creating the session");
  if (!weightsPath.empty()) {
    if (!(st = s->bindSafetensors(weightsPath)).isOk())
      return fail(st, "binding weights");
  } else {
    if (!(st = s->bindWeightsHost(makeRandomWeights(cfg, seed))).isOk())
      return fail(st, "binding weights");
  }
  if (!s->unboundWeights().empty()) {
    std::fprintf(stderr, "mk-bench: weight '%s' missing\n",
                 s->unboundWeights()[0].c_str());
    return 1;
  }
  if (measure && !(st = measureBandwidth(dev, bandwidth)).isOk())
    return fail(st, "measuring bandwidth");

  std::printf("device   %s (%s, %d SMs), kernel %s%s\n", dev->name().c_str(),
              dev->arch().c_str(), dev->multiprocessors(),
              kernel->manifest().kernel.c_str(),
              kernel->fromCache() ? " (cached)" : "");
  std::printf("launch   grid %d x %d threads, %d blocks/SM, %d B dynamic smem\n",
              s->launchConfig().grid, s->launchConfig().threadsPerBlock,
              s->launchConfig().blocksPerSm, s->launchConfig().dynamicSharedBytes);
  std::printf("bandwidth %.2f TB/s (%s)\n", bandwidth / 1e12,
              measure ? "measured copy" : "constant");
  std::printf("%8s %12s %12s %10s %12s %9s\n", "ctx", "ms/token", "min ms",
              "GB/s", "floor ms", "of floor");
  std::vector<BFloat16> hidden = makeRandomHidden(cfg, seed + 2);
  std::vector<BenchRow> rows;
  for (int64_t ctx : ctxs) {
    DecodeState state = makeRandomState(cfg, ctx, seed + 1);
    if (!(st = s->loadStateHost(state.tensors, ctx)).isOk())
      return fail(st, "writing state");
    const DriverApi &drv = dev->driver();
    drv.cuMemcpyHtoD(s->stagingIn(), hidden.data(), hidden.size() * 2);
    std::vector<float> ms;
    if (!(st = s->timeSteps(s->stagingIn(), s->stagingOut(), warmup, iters, ms))
             .isOk())
      return fail(st, "timing");
    std::sort(ms.begin(), ms.end());
    double med = ms[ms.size() / 2];
    double bytes = bytesPerToken(cfg, ctx).total();
    double floorMs = bytes / bandwidth * 1e3;
    BenchRow row;
    row.ctx = ctx;
    row.medianMs = med;
    row.minMs = double(ms.front());
    row.gbPerS = bytes / (med * 1e-3) / 1e9;
    row.floorMs = floorMs;
    rows.push_back(row);
    std::printf("%8lld %12.4f %12.4f %10.1f %12.4f %8.1f%%\n", (long long)ctx,
                med, row.minMs, row.gbPerS, floorMs, 100.0 * floorMs / med);
    if (phaseTiming && !(st = printPhaseProfile(*s, kernel->manifestText(),
                                                int(kernel->manifest().phases)))
                             .isOk())
      return fail(st, "phase timing");
  }

  if (!jsonPath.empty()) {
    Sha256 h;
    h.update(src.source);
    json::Value k = json::Value::makeObject();
    k.set("name", json::Value::fromString(kernel->manifest().kernel));
    k.set("source", json::Value::fromString(src.sourceName));
    k.set("source_sha256", json::Value::fromString(h.hexDigest()));
    k.set("cache_key", json::Value::fromString(kernel->cacheKey()));
    json::Value out = json::Value::makeObject();
    out.set("gpu", json::Value::fromString(dev->name()));
    out.set("kernel", std::move(k));
    out.set("kernel_dir", json::Value::fromString(dir));
    out.set("iters", json::Value::fromInt(iters));
    out.set("warmup", json::Value::fromInt(warmup));
    out.set("bandwidth_bytes_per_s", json::Value::fromNumber(bandwidth));
    out.set("bandwidth_measured", json::Value::fromBool(measure));
    out.set("phase_timing", json::Value::fromBool(phaseTiming));
    json::Value arr = json::Value::makeArray();
    for (const BenchRow &r : rows) {
      json::Value o = json::Value::makeObject();
      o.set("context", json::Value::fromInt(r.ctx));
      o.set("ms_per_token_median", json::Value::fromNumber(r.medianMs));
      o.set("ms_per_token_min", json::Value::fromNumber(r.minMs));
      o.set("gb_per_s", json::Value::fromNumber(r.gbPerS));
      o.set("floor_ms", json::Value::fromNumber(r.floorMs));
      o.set("fraction_of_floor", json::Value::fromNumber(r.floorMs / r.medianMs));
      arr.push(std::move(o));
    }
    out.set("rows", std::move(arr));
    std::string err;
    if (!writeTextFile(jsonPath, json::write(out) + "\n", err)) {
      std::fprintf(stderr, "mk-bench: cannot write %s: %s\n", jsonPath.c_str(),
                   err.c_str());
      return 1;
    }
  }
  return 0;
}
