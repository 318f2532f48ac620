//===- mk-bench.cpp - Time decode steps of a generated kernel -------------===//
//
//   mk-bench [--kernel-dir DIR ...] [--ctx 2048,8192] [--iters 200]
//            [--warmup 20] [--rounds 1] [--weights FILE.safetensors]
//            [--seed N] [--bandwidth BYTES_PER_S] [--measure-bandwidth]
//            [--phase-timing] [--json FILE] [--trace FILE]
//
// Each step is one device-pointer step() bracketed by CUDA events, all at the
// same context length; prints the median ms/token, the achieved GB/s for the
// bytes a token must move, and the HBM floor (bytes / bandwidth).
//
// --kernel-dir given several times benches the kernels (which must take the
// same weights: a schedule variant against its default, say) on ONE set of
// weights, each in its own session, in alternating rounds (--rounds): the
// released model's 26 GB of random weights are generated once, not once per
// kernel. Each round is every kernel at every context; with more than one
// round or kernel a summary follows: per kernel and context, the median of
// the rounds' medians (of an even count the mean of the middle two) and its
// difference against the first kernel. Each session holds its own copy of
// the weights on the device; --weights FILE is read once per kernel.
//
// --json FILE also writes the results, after the table, as one JSON object:
//
//   {"gpu": "NVIDIA H200", "kernel": {"name", "source", "source_sha256",
//    "cache_key"}, "kernel_dir", "iters", "warmup", "rounds",
//    "bandwidth_bytes_per_s", "bandwidth_measured", "phase_timing",
//    "rows": [{"context", "ms_per_token_median", "ms_per_token_min",
//              "gb_per_s", "floor_ms", "fraction_of_floor"}, ...]}
//
// (rows: the summary's, which for one round are that round's). --json and
// --trace take one kernel.
//
// source_sha256 is the SHA-256 of the emitted .cu source; cache_key is the
// kernel cache's key (source, headers, architecture, NVRTC version and
// options). A file that cannot be written is an error (exit status 1).
//
// --phase-timing builds the kernel with -DMK_PHASE_TIMING and prints, after
// each context's row, per-phase medians of the blocks' stamps over 20 steps,
// then the task stages a StageClock times (phase_timing.cuh: the MLA
// attention's and the packed GEMV tile's), in SM cycles converted at the
// device's peak clock, over the step and per phase (with the every-block
// norm, the router's top-k and the counter signals).
// --trace FILE (same build) writes one of those steps at the last --ctx of
// the last round, the median by stamped span, as a Chrome/Perfetto trace
// (chrome://tracing, ui.perfetto.dev): a track per block, a slice per phase
// from the block's entry to its done stamp, a nested "counter wait" slice
// where it waited (format in mk/runtime/Trace.h). A file that cannot be written is an error
// (exit status 1).
//
//===----------------------------------------------------------------------===//

#include "mk/Oracle.h"
#include "mk/runtime/PhaseBands.h"
#include "mk/runtime/Roofline.h"
#include "mk/Json.h"
#include "mk/runtime/Session.h"
#include "mk/runtime/Sha256.h"
#include "mk/runtime/Trace.h"

#include "ToolOptions.h"
#include "stage_slots.cuh"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstddef>
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

/// One row of the table, kept for --json.
struct BenchRow {
  int64_t ctx = 0;
  double medianMs = 0, minMs = 0, gbPerS = 0, floorMs = 0;
};

/// Slots per phase in the timing tables; mk::kMaxGrid in grid_sync.cuh.
constexpr size_t kTimingSlots = 1024;
/// The number of task stages a StageClock times (stage_slots.cuh's
/// mk::kStageSlots, as a size).
constexpr size_t kNumStageSlots = mk::kStageSlots;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

/// The phase stamps of one step of a -DMK_PHASE_TIMING build, compacted to
/// the grid: entry and wait [phases + 1][grid] (the last entry row is the
/// end mark), done [phases][grid]; global timer ns.
struct StepStamps {
  std::vector<uint64_t> entry, wait, done;
  /// Task stages (phase_timing.cuh's StageClock): SM cycles and laps so
  /// far at each phase entry, [phases + 1][kNumStageSlots][grid] (the last row
  /// is the step's).
  std::vector<uint64_t> stageCycles;
  std::vector<uint32_t> stageLaps;
  uint64_t start = 0; ///< the earliest phase-0 entry
  uint64_t span = 0;  ///< from start to the last block's end mark
};

/// Runs `steps` steps at the session's context length and reads the stamps
/// after each.
Status collectPhaseStamps(Session &s, int phases, int steps,
                          std::vector<StepStamps> &out) {
  const size_t P = static_cast<size_t>(phases);
  const int grid = s.launchConfig().grid;
  if (grid <= 0 || size_t(grid) > kTimingSlots)
    return makeError(ErrorCode::InvalidArgument, "phase timing: grid of " + std::to_string(grid) +
                         " blocks does not fit the timing tables");
  const size_t G = size_t(grid);
  std::vector<unsigned long long> entry((P + 1) * kTimingSlots),
      wait((P + 1) * kTimingSlots), done(P * kTimingSlots),
      stageCycles((P + 1) * kNumStageSlots * kTimingSlots);
  std::vector<unsigned> stageLaps((P + 1) * kNumStageSlots * kTimingSlots);
  auto compact = [&](const std::vector<unsigned long long> &t, size_t rows) {
    std::vector<uint64_t> c(rows * G);
    for (size_t p = 0; p < rows; ++p)
      for (size_t b = 0; b < G; ++b)
        c[p * G + b] = t[p * kTimingSlots + b];
    return c;
  };
  const int64_t ctx0 = s.contextLength();
  out.clear();
  for (int it = 0; it < steps; ++it) {
    MK_RETURN_IF_ERROR(s.setContextLength(ctx0));
    // A whole model steps from token 0 (its embedding row), a block from the
    // staged hidden.
    MK_RETURN_IF_ERROR(s.manifest().config.vocab > 0 ? s.stepToken(0, s.stagingOut())
                                                     : s.step(s.stagingIn(), s.stagingOut()));
    MK_RETURN_IF_ERROR(s.readModuleGlobal("mk_phase_ns", entry.data(), entry.size() * 8));
    MK_RETURN_IF_ERROR(s.readModuleGlobal("mk_phase_wait_ns", wait.data(), wait.size() * 8));
    MK_RETURN_IF_ERROR(s.readModuleGlobal("mk_phase_done_ns", done.data(), done.size() * 8));
    MK_RETURN_IF_ERROR(
        s.readModuleGlobal("mk_stage_cycles", stageCycles.data(), stageCycles.size() * 8));
    MK_RETURN_IF_ERROR(
        s.readModuleGlobal("mk_stage_laps", stageLaps.data(), stageLaps.size() * 4));
    StepStamps st;
    st.stageCycles = compact(stageCycles, (P + 1) * kNumStageSlots);
    for (size_t k = 0; k < (P + 1) * kNumStageSlots; ++k)
      for (size_t b = 0; b < G; ++b)
        st.stageLaps.push_back(stageLaps[k * kTimingSlots + b]);
    st.entry = compact(entry, P + 1);
    st.wait = compact(wait, P + 1);
    st.done = compact(done, P);
    st.start = ~uint64_t(0);
    uint64_t end = 0;
    for (size_t b = 0; b < G; ++b) {
      st.start = std::min(st.start, st.entry[b]);
      end = std::max(end, st.entry[P * G + b]);
    }
    st.span = end > st.start ? end - st.start : 0;
    out.push_back(std::move(st));
  }
  return s.setContextLength(ctx0);
}

/// What the manifest says of each phase: its name ("phase_names"; "?"
/// where missing) and its static bytes ("phase_bytes"; empty where the
/// manifest has none, not one per phase, or an entry that is no
/// non-negative number: a kernel emitted before session 29, or a bad one).
struct PhaseInfo {
  std::vector<std::string> names;
  std::vector<double> bytes;
};
PhaseInfo phaseInfo(const std::string &manifestText, int phases) {
  PhaseInfo info;
  info.names.assign(static_cast<size_t>(phases), "?");
  json::Value root;
  std::string err;
  if (!json::parse(manifestText, root, err))
    return info;
  if (const json::Value *n = root.find("phase_names"))
    for (size_t i = 0; i < n->array.size() && i < info.names.size(); ++i)
      info.names[i] = n->array[i].string;
  if (const json::Value *b = root.find("phase_bytes"))
    if (b->array.size() == size_t(phases))
      for (const json::Value &v : b->array) {
        if (!v.isNumber() || !(v.number >= 0)) {
          info.bytes.clear();
          break;
        }
        info.bytes.push_back(v.number);
      }
  return info;
}

/// Prints the phases' median spans (and floors, where known) by band
/// (PhaseBands.h): per kind of band, how many, their time's mean, least and
/// most, the mean floor and the kind's share of the step. Only where some
/// kind repeats (a kernel of two or more layers).
void printBandProfile(const std::vector<std::string> &names, const std::vector<double> &spans,
                      const std::vector<double> &floorsUs, double stepUs) {
  const std::vector<rt::BandKindSummary> kinds =
      rt::summarizeBands(rt::phaseBands(names), spans, floorsUs);
  if (std::none_of(kinds.begin(), kinds.end(),
                   [](const rt::BandKindSummary &k) { return k.count > 1; }))
    return;
  std::printf("  by band (a layer's attention or feed-forward phases; kinds by their phase "
              "list; us):\n");
  std::printf("  %5s %8s %8s %8s", "count", "mean", "least", "most");
  if (!floorsUs.empty())
    std::printf(" %8s %8s", "floor", "x floor");
  std::printf(" %7s  %s\n", "of step", "phases");
  for (const rt::BandKindSummary &k : kinds) {
    std::printf("  %5d %8.2f %8.2f %8.2f", k.count, k.meanUs, k.minUs, k.maxUs);
    if (!floorsUs.empty()) {
      if (k.meanFloorUs > 0)
        std::printf(" %8.2f %8.1f", k.meanFloorUs, k.meanUs / k.meanFloorUs);
      else
        std::printf(" %8.2f %8s", k.meanFloorUs, "-");
    }
    std::printf(" %6.1f%%  %s\n", stepUs > 0 ? 100.0 * k.totalUs / stepUs : 0.0, k.kind.c_str());
  }
}

/// Prints, per phase, medians over the steps of: span (first block entering
/// it to first block entering the next; the spans add up to the step), the
/// work of the slowest and the average block (done - entry - counter waits),
/// the longest counter wait, and when the last block was done (from the
/// first entry). A phase whose slowest block works much longer than the
/// average is imbalanced; one whose waits are long is waiting for its
/// producers. With `bytes` (one per phase) also each phase's floor, its
/// static bytes at `bandwidth` (B/s; the attention's cache rows are not in
/// them), and its span against it.
void printPhaseProfile(const std::vector<StepStamps> &steps,
                       const std::vector<std::string> &names, int grid,
                       const std::vector<double> &bytes, double bandwidth) {
  const size_t P = names.size(), G = size_t(grid);
  enum { kSpan, kWorkMax, kWorkMean, kWaitMax, kTail, kStats };
  std::vector<std::vector<double>> stat(P * kStats);
  for (const StepStamps &st : steps) {
    // Stamps relative to the step's start, subtracted as integers: the raw
    // timer (~1e18 ns) is not exact in a double.
    auto at = [&](const std::vector<uint64_t> &t, size_t p, size_t b) {
      return double(int64_t(t[p * G + b] - st.start));
    };
    for (size_t p = 0; p < P; ++p) {
      double start = 1e300, next = 1e300, last = -1e300, workMax = 0, workSum = 0, waitMax = 0;
      for (size_t b = 0; b < G; ++b) {
        start = std::min(start, at(st.entry, p, b));
        next = std::min(next, at(st.entry, p + 1, b));
        last = std::max(last, at(st.done, p, b));
        double w = double(st.wait[p * G + b]);
        double work = at(st.done, p, b) - at(st.entry, p, b) - w;
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
  double total = 0, totalFloor = 0;
  std::vector<double> spans, floorsUs;
  const bool floors = bytes.size() == P && bandwidth > 0;
  std::printf("  phase profile (all %d blocks, median of %zu steps, us%s):\n", grid,
              steps.size(),
              floors ? "; floor: the phase's static bytes at the bench's bandwidth" : "");
  std::printf("  %3s %8s %9s %10s %9s %9s", "#", "span", "work max", "work mean", "wait max",
              "last done");
  if (floors)
    std::printf(" %8s %8s", "floor", "x floor");
  std::printf("  %s\n", "phase");
  for (size_t p = 0; p < P; ++p) {
    double v[kStats];
    for (int k = 0; k < kStats; ++k)
      v[k] = median(stat[p * kStats + size_t(k)]);
    total += v[kSpan];
    spans.push_back(v[kSpan]);
    std::printf("  %3zu %8.2f %9.2f %10.2f %9.2f %9.2f", p, v[kSpan], v[kWorkMax],
                v[kWorkMean], v[kWaitMax], v[kTail]);
    if (floors) {
      const double floorUs = bytes[p] / bandwidth * 1e6;
      totalFloor += floorUs;
      floorsUs.push_back(floorUs);
      if (floorUs > 0)
        std::printf(" %8.2f %8.1f", floorUs, v[kSpan] / floorUs);
      else
        std::printf(" %8.2f %8s", floorUs, "-");
    }
    std::printf("  %s\n", names[p].c_str());
  }
  std::printf("  sum %8.2f", total);
  if (floors && totalFloor > 0)
    std::printf("  (floor of the static bytes %.2f, x %.1f)", totalFloor, total / totalFloor);
  std::printf("\n");
  printBandProfile(names, spans, floors ? floorsUs : std::vector<double>{}, total);
}

/// Prints, per task stage that ran (phase_timing.cuh's StageClock), medians
/// over the steps of: the blocks that ran it, its laps per such block, and
/// its time per step in the median and the slowest of those blocks (SM
/// cycles at the device's peak clock).
void printStageProfile(const std::vector<StepStamps> &steps, int phases, int grid,
                       int clockKHz) {
  const size_t G = size_t(grid), last = size_t(phases) * kNumStageSlots;
  bool header = false;
  for (size_t k = 0; k < kNumStageSlots; ++k) {
    std::vector<double> blocks, laps, mid, slow;
    for (const StepStamps &st : steps) {
      std::vector<double> us, n;
      for (size_t b = 0; b < G; ++b)
        if (st.stageLaps[(last + k) * G + b]) {
          us.push_back(double(st.stageCycles[(last + k) * G + b]) / clockKHz * 1e3);
          n.push_back(st.stageLaps[(last + k) * G + b]);
        }
      if (us.empty())
        continue;
      blocks.push_back(double(us.size()));
      laps.push_back(median(n));
      mid.push_back(median(us));
      slow.push_back(*std::max_element(us.begin(), us.end()));
    }
    if (blocks.empty())
      continue;
    if (!header) {
      std::printf("  task stages (SM cycles at %.2f GHz, median of %zu steps, us per step):\n",
                  clockKHz * 1e-6, steps.size());
      std::printf("  %6s %6s %8s %8s  %s\n", "blocks", "laps", "median", "slowest", "stage");
      header = true;
    }
    std::printf("  %6.0f %6.0f %8.2f %8.2f  %s\n", median(blocks), median(laps), median(mid),
                median(slow), kStageNames[k]);
  }
}

/// Prints, per phase in which any block timed a stage, each of the stages
/// below in that phase as the mean over all blocks of the grid (median over
/// the steps; us at the device's peak clock), and the blocks that ran a
/// packed GEMV tile: what a phase's average block spends on its norm, top-k,
/// tile stages and counter signals (the rest of its work is other tasks).
void printStagesPerPhase(const std::vector<StepStamps> &steps,
                         const std::vector<std::string> &names, int grid, int clockKHz) {
  // Norm, top-k, the five tile stages, signals.
  constexpr size_t kCols[] = {mk::kStageNorm,      mk::kStageTopk,          mk::kStageTileIssue,
                              mk::kStageTileFirstData, mk::kStageTileSteps, mk::kStageTileWarps,
                              mk::kStageTileReduce, mk::kStageSignal};
  constexpr size_t kTileIssue = mk::kStageTileIssue, kNumCols = sizeof(kCols) / sizeof(kCols[0]);
  const size_t P = names.size(), G = size_t(grid);
  bool header = false;
  for (size_t p = 0; p < P; ++p) {
    std::vector<double> tileBlocks, col[kNumCols];
    bool any = false;
    for (const StepStamps &st : steps) {
      auto diff = [&](const auto &t, size_t k, size_t b) {
        return t[((p + 1) * kNumStageSlots + k) * G + b] - t[(p * kNumStageSlots + k) * G + b];
      };
      double tiles = 0;
      for (size_t c = 0; c < kNumCols; ++c) {
        double sum = 0;
        for (size_t b = 0; b < G; ++b) {
          if (!diff(st.stageLaps, kCols[c], b))
            continue;
          any = true;
          sum += double(diff(st.stageCycles, kCols[c], b)) / clockKHz * 1e3;
          tiles += kCols[c] == kTileIssue;
        }
        col[c].push_back(sum / double(G));
      }
      tileBlocks.push_back(tiles);
    }
    if (!any)
      continue;
    if (!header) {
      std::printf("  stages per phase (mean over all %d blocks, median of %zu steps, us):\n", grid,
                  steps.size());
      std::printf("  %3s %6s %6s %6s | %6s %6s %6s %6s %6s | %6s  %s\n", "#", "norm", "top-k",
                  "tiles", "issue", "first", "steps", "warps", "reduce", "signal", "phase");
      header = true;
    }
    std::printf("  %3zu %6.2f %6.2f %6.0f |", p, median(col[0]), median(col[1]), median(tileBlocks));
    for (size_t c = 2; c + 1 < kNumCols; ++c)
      std::printf(" %6.2f", median(col[c]));
    std::printf(" | %6.2f  %s\n", median(col[kNumCols - 1]), names[p].c_str());
  }
}

/// The step whose stamped span (first phase-0 entry to the last block's end
/// mark) is the median of `steps` (the upper one of an even count).
size_t medianStep(const std::vector<StepStamps> &steps) {
  std::vector<size_t> order(steps.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return steps[a].span < steps[b].span;
  });
  return order[order.size() / 2];
}

/// One kernel under test: its directory, source, build, session and rows
/// (every round's, in order).
struct BenchKernel {
  std::string dir;
  KernelSource src;
  std::shared_ptr<Kernel> kernel;
  std::unique_ptr<Session> session;
  std::vector<BenchRow> rows;
};

/// The first difference between two kernels' parameter lists ("" if they
/// take the same weights: the same names, dtypes and shapes, in order).
std::string weightsDifference(const BlockConfig &a, const BlockConfig &b) {
  const std::vector<TensorDesc> pa = parameterTensors(a), pb = parameterTensors(b);
  for (size_t i = 0; i < std::min(pa.size(), pb.size()); ++i)
    if (pa[i].name != pb[i].name || pa[i].dtype != pb[i].dtype || pa[i].shape != pb[i].shape)
      return "parameter " + std::to_string(i) + " is '" + pa[i].name + "' against '" +
             pb[i].name + "' (or its dtype or shape differs)";
  if (pa.size() != pb.size())
    return std::to_string(pa.size()) + " parameters against " + std::to_string(pb.size());
  return "";
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> dirs;
  std::string weightsPath, jsonPath, tracePath;
  std::vector<int64_t> ctxs = {2048, 8192};
  int iters = 200, warmup = 20, rounds = 1;
  uint64_t seed = 1;
  double bandwidth = kH200Bandwidth;
  bool measure = false, phaseTiming = false;
  CLI::App app{"Times decode steps of a generated kernel: median ms/token, GB/s and the HBM "
               "floor at each context (one cooperative launch per step)",
               "mk-bench"};
  app.add_option("--kernel-dir", dirs,
                 "kernel directory (mkc --emit=cuda output); default: "
                 "$MK_KERNELS_DIR/kimi_linear_w4a16. Given more than once, the kernels "
                 "(which must take the same weights) are benched in alternating rounds "
                 "on one set of weights")
      ->check(CLI::ExistingDirectory);
  app.add_option("--ctx", ctxs, "context lengths, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(int64_t(0), int64_t(1) << 24))
      ->capture_default_str();
  app.add_option("--iters", iters, "timed steps per context")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps first")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  app.add_option("--rounds", rounds,
                 "rounds over the kernels (each: every kernel at every context); with more "
                 "than one, a summary of the rounds' medians follows")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  tools::addSeedOption(app, seed, "seed of the random weights, state and inputs");
  tools::addWeightsOption(app, weightsPath);
  app.add_option("--bandwidth", bandwidth, "HBM bandwidth for the floor, bytes/s")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--measure-bandwidth", measure,
               "measure the copy bandwidth first and use it for the floor");
  app.add_flag("--phase-timing", phaseTiming, "per-phase profile of the blocks' stamps");
  app.add_option("--json", jsonPath, "also write the results as JSON to FILE (one kernel)");
  app.add_option("--trace", tracePath,
                 "write one step as a Chrome/Perfetto trace to FILE (one kernel)")
      ->check([](const std::string &v) { return v.empty() ? "needs a file name" : ""; });
  if (int rc = tools::parseOrExitCode(app, argc, argv); rc >= 0)
    return rc;
  if (dirs.empty()) {
    if (const char *k = std::getenv("MK_KERNELS_DIR"))
      dirs.push_back(std::string(k) + "/kimi_linear_w4a16");
  }
  if (ctxs.empty()) {
    std::fprintf(stderr, "mk-bench: --ctx needs at least one context\n");
    return 2;
  }
  if (dirs.empty()) {
    std::fprintf(stderr, "mk-bench: no kernel: pass --kernel-dir or set MK_KERNELS_DIR\n");
    return 2;
  }
  if (dirs.size() > 1 && (!jsonPath.empty() || !tracePath.empty())) {
    std::fprintf(stderr, "mk-bench: --json and --trace take one --kernel-dir, got %zu\n",
                 dirs.size());
    return 2;
  }

  std::shared_ptr<Device> dev;
  Status st = Device::open(0, dev);
  if (!st.isOk())
    return fail(st, "opening the GPU");
  KernelBuildOptions bo;
  // Every block stamps the global timer as it enters and finishes each
  // phase (phase_timing.cuh): a per-phase profile without hardware counters.
  // --trace lays the same stamps out as a timeline.
  if (phaseTiming || !tracePath.empty())
    bo.compile.extraOptions.push_back("-DMK_PHASE_TIMING");
  bo.compile.arch = dev->arch();
  int64_t maxCtx = *std::max_element(ctxs.begin(), ctxs.end());
  std::vector<BenchKernel> kernels(dirs.size());
  for (size_t k = 0; k < dirs.size(); ++k) {
    BenchKernel &b = kernels[k];
    b.dir = dirs[k];
    // What buildKernelFromDir does, keeping the source to hash it for --json.
    if (!(st = readKernelDir(b.dir, "", b.src)).isOk())
      return fail(st, ("reading the kernel in " + b.dir).c_str());
    if (!(st = Kernel::build(b.src, bo, b.kernel)).isOk())
      return fail(st, ("compiling " + b.dir).c_str());
    if (k > 0) {
      const std::string diff = weightsDifference(kernels[0].kernel->manifest().config,
                                                 b.kernel->manifest().config);
      if (!diff.empty()) {
        std::fprintf(stderr, "mk-bench: %s and %s take different weights (%s): bench them "
                             "separately\n",
                     kernels[0].dir.c_str(), b.dir.c_str(), diff.c_str());
        return 2;
      }
    }
    SessionOptions so;
    so.cacheCapacity = maxCtx + 1;
    if (!(st = Session::create(dev, b.kernel, so, b.session)).isOk())
      return fail(st, "creating the session");
  }
  // One set of weights for every kernel: random ones are generated once.
  TensorMap randomWeights;
  if (weightsPath.empty())
    randomWeights = makeRandomWeights(kernels[0].kernel->manifest().config, seed);
  for (BenchKernel &b : kernels) {
    if (!(st = weightsPath.empty() ? b.session->bindWeightsHost(randomWeights)
                                   : b.session->bindSafetensors(weightsPath))
             .isOk())
      return fail(st, "binding weights");
    if (!b.session->unboundWeights().empty()) {
      std::fprintf(stderr, "mk-bench: weight '%s' missing\n",
                   b.session->unboundWeights()[0].c_str());
      return 1;
    }
  }
  randomWeights.clear();
  if (measure && !(st = measureBandwidth(dev, bandwidth)).isOk())
    return fail(st, "measuring bandwidth");

  std::printf("device   %s (%s, %d SMs)\n", dev->name().c_str(), dev->arch().c_str(),
              dev->multiprocessors());
  for (const BenchKernel &b : kernels) {
    std::printf("kernel   %s%s%s%s\n", b.kernel->manifest().kernel.c_str(),
                b.kernel->fromCache() ? " (cached)" : "", kernels.size() > 1 ? ", " : "",
                kernels.size() > 1 ? b.dir.c_str() : "");
    std::printf("launch   grid %d x %d threads, %d blocks/SM, %d B dynamic smem\n",
                b.session->launchConfig().grid, b.session->launchConfig().threadsPerBlock,
                b.session->launchConfig().blocksPerSm,
                b.session->launchConfig().dynamicSharedBytes);
  }
  std::printf("bandwidth %.2f TB/s (%s)\n", bandwidth / 1e12,
              measure ? "measured copy" : "constant");
  const bool labelled = kernels.size() > 1 || rounds > 1;
  PhaseTrace trace;
  // One random hidden vector and one random state per context, for every
  // kernel and round (the kernels take the same weights, so the same
  // shapes).
  const BlockConfig &cfg0 = kernels[0].kernel->manifest().config;
  const std::vector<BFloat16> hidden = makeRandomHidden(cfg0, seed + 2);
  std::vector<DecodeState> states;
  for (int64_t ctx : ctxs)
    states.push_back(makeRandomState(cfg0, ctx, seed + 1));
  for (int r = 0; r < rounds; ++r) {
    for (BenchKernel &b : kernels) {
      Session &s = *b.session;
      const Kernel &kernel = *b.kernel;
      const BlockConfig &cfg = kernel.manifest().config;
      if (labelled)
        std::printf("round %d of %d: %s\n", r + 1, rounds,
                    kernels.size() > 1 ? b.dir.c_str() : kernel.manifest().kernel.c_str());
      std::printf("%8s %12s %12s %10s %12s %9s\n", "ctx", "ms/token", "min ms", "GB/s",
                  "floor ms", "of floor");
      const int phases = int(kernel.manifest().phases);
      const PhaseInfo phaseInfoOf = phaseInfo(kernel.manifestText(), phases);
      const std::vector<std::string> &names = phaseInfoOf.names;
      const std::vector<double> &bytesOfPhases = phaseInfoOf.bytes;
      for (size_t ci = 0; ci < ctxs.size(); ++ci) {
        const int64_t ctx = ctxs[ci];
        if (!(st = s.loadStateHost(states[ci].tensors, ctx)).isOk())
          return fail(st, "writing state");
        const DriverApi &drv = dev->driver();
        drv.cuMemcpyHtoD(s.stagingIn(), hidden.data(), hidden.size() * 2);
        std::vector<float> ms;
        if (!(st = cfg.vocab > 0
                       ? s.timeTokenSteps(0, s.stagingOut(), warmup, iters, ms)
                       : s.timeSteps(s.stagingIn(), s.stagingOut(), warmup, iters, ms))
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
        b.rows.push_back(row);
        std::printf("%8lld %12.4f %12.4f %10.1f %12.4f %8.1f%%\n", (long long)ctx, med,
                    row.minMs, row.gbPerS, floorMs, 100.0 * floorMs / med);
        // --trace: one step at the last context of the last round, the
        // median by stamped span of the 20 that --phase-timing summarizes.
        const bool traceHere =
            !tracePath.empty() && ci + 1 == ctxs.size() && r + 1 == rounds;
        if (phaseTiming || traceHere) {
          std::vector<StepStamps> steps;
          if (!(st = collectPhaseStamps(s, phases, 20, steps)).isOk())
            return fail(st, "phase timing");
          if (phaseTiming) {
            printPhaseProfile(steps, names, s.launchConfig().grid, bytesOfPhases, bandwidth);
            printStageProfile(steps, phases, s.launchConfig().grid, dev->clockKHz());
            printStagesPerPhase(steps, names, s.launchConfig().grid, dev->clockKHz());
          }
          if (traceHere) {
            const size_t pick = medianStep(steps);
            const StepStamps &one = steps[pick];
            const size_t n = size_t(phases) * size_t(s.launchConfig().grid);
            trace.processName = "mk-bench " + kernel.manifest().kernel;
            trace.phaseNames = names;
            trace.grid = s.launchConfig().grid;
            trace.entryNs.assign(one.entry.begin(), one.entry.begin() + std::ptrdiff_t(n));
            trace.waitNs.assign(one.wait.begin(), one.wait.begin() + std::ptrdiff_t(n));
            trace.doneNs = one.done;
            // Each phase's static bytes (the manifest's phase_bytes; none
            // from a manifest without them).
            trace.phaseBytes = bytesOfPhases;
            char span[32];
            std::snprintf(span, sizeof span, "%.3f", double(one.span) * 1e-3);
            trace.otherData = {
                {"gpu", dev->name()},
                {"kernel", kernel.manifest().kernel},
                {"kernel_dir", b.dir},
                {"context", std::to_string(ctx)},
                {"grid", std::to_string(trace.grid)},
                {"step", "median by stamped span of " + std::to_string(steps.size()) +
                             " steps (step " + std::to_string(pick) + ")"},
                {"step_span_us", span},
                {"counter_wait_slices",
                 "a block's total counter-wait time in the phase, drawn from the "
                 "phase's start (the stamps do not say when it waited)"}};
          }
        }
      }
    }
  }

  // Each kernel's rows over the rounds: per context, the median of the
  // rounds' medians and the lowest step.
  std::vector<std::vector<BenchRow>> summary(kernels.size());
  for (size_t k = 0; k < kernels.size(); ++k)
    for (size_t ci = 0; ci < ctxs.size(); ++ci) {
      std::vector<double> meds;
      BenchRow row = kernels[k].rows[ci];
      for (int r = 0; r < rounds; ++r) {
        const BenchRow &x = kernels[k].rows[size_t(r) * ctxs.size() + ci];
        meds.push_back(x.medianMs);
        row.minMs = std::min(row.minMs, x.minMs);
      }
      // The middle value, or the mean of the middle two of an even count
      // (median() gives the upper one, which for two rounds is the slower).
      std::sort(meds.begin(), meds.end());
      const size_t h = meds.size() / 2;
      row.medianMs = meds.size() % 2 ? meds[h] : 0.5 * (meds[h - 1] + meds[h]);
      row.gbPerS = row.gbPerS * kernels[k].rows[ci].medianMs / row.medianMs;
      summary[k].push_back(row);
    }
  if (labelled) {
    std::printf("summary: median of %d round%s' medians, ms/token (difference against the "
                "first kernel, us)\n",
                rounds, rounds > 1 ? "s" : "");
    for (size_t k = 0; k < kernels.size(); ++k) {
      std::printf("  %s:", kernels.size() > 1 ? kernels[k].dir.c_str()
                                              : kernels[k].kernel->manifest().kernel.c_str());
      for (size_t ci = 0; ci < ctxs.size(); ++ci) {
        std::printf("  ctx %lld %.4f", (long long)ctxs[ci], summary[k][ci].medianMs);
        if (k > 0)
          std::printf(" (%+.1f)", (summary[k][ci].medianMs - summary[0][ci].medianMs) * 1e3);
      }
      std::printf("\n");
    }
  }

  if (!tracePath.empty()) {
    if (!(st = writePhaseTrace(trace, tracePath)).isOk()) {
      std::fprintf(stderr, "mk-bench: %s\n", st.message().c_str());
      return 1;
    }
    std::printf("trace    %s (ctx %lld, %d blocks x %d phases)\n", tracePath.c_str(),
                (long long)ctxs.back(), trace.grid, int(kernels[0].kernel->manifest().phases));
  }

  if (!jsonPath.empty()) {
    const BenchKernel &b = kernels[0];
    Sha256 h;
    h.update(b.src.source);
    json::Value k = json::Value::makeObject();
    k.set("name", json::Value::fromString(b.kernel->manifest().kernel));
    k.set("source", json::Value::fromString(b.src.sourceName));
    k.set("source_sha256", json::Value::fromString(h.hexDigest()));
    k.set("cache_key", json::Value::fromString(b.kernel->cacheKey()));
    json::Value out = json::Value::makeObject();
    out.set("gpu", json::Value::fromString(dev->name()));
    out.set("kernel", std::move(k));
    out.set("kernel_dir", json::Value::fromString(b.dir));
    out.set("iters", json::Value::fromInt(iters));
    out.set("warmup", json::Value::fromInt(warmup));
    out.set("rounds", json::Value::fromInt(rounds));
    out.set("bandwidth_bytes_per_s", json::Value::fromNumber(bandwidth));
    out.set("bandwidth_measured", json::Value::fromBool(measure));
    // Whether the timed kernel carried the timing stamps (their cost is in
    // the ms/token): --phase-timing or --trace.
    out.set("phase_timing", json::Value::fromBool(phaseTiming || !tracePath.empty()));
    json::Value arr = json::Value::makeArray();
    for (const BenchRow &r : summary[0]) {
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
    if (Status st = writeTextFile(jsonPath, json::write(out) + "\n"); !st.isOk()) {
      std::fprintf(stderr, "mk-bench: %s\n", st.message().c_str());
      return 1;
    }
  }
  return 0;
}
