//===- Planning.cpp - Phase, partition and workspace planning -------------===//

#include "Transforms/Planning.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace mk::planning {

bool planPhases(int n, const std::vector<DepEdge> &edges, PhasePlan &plan,
                std::string &error) {
  plan = PhasePlan();
  plan.segment.assign(n, 0);
  std::vector<int> depth(n, 0);
  std::vector<std::vector<const DepEdge *>> preds(n);
  for (const DepEdge &e : edges) {
    if (e.from < 0 || e.to >= n || e.from >= e.to) {
      error = "dependency " + std::to_string(e.from) + " -> " +
              std::to_string(e.to) + " is not forward in program order";
      return false;
    }
    preds[e.to].push_back(&e);
  }
  for (int v = 0; v < n; ++v) {
    int seg = 0;
    for (const DepEdge *e : preds[v])
      seg = std::max(seg, plan.segment[e->from] +
                              (e->kind == DepKind::Grid ? 1 : 0));
    plan.segment[v] = seg;
    int d = 0;
    for (const DepEdge *e : preds[v])
      if (plan.segment[e->from] == seg)
        d = std::max(d, depth[e->from] + (e->kind == DepKind::Grid ? 1 : 0));
    depth[v] = d;
  }
  std::map<std::pair<int, int>, int> phaseOf;
  for (int v = 0; v < n; ++v)
    phaseOf[{plan.segment[v], depth[v]}] = 0;
  int next = 0;
  for (auto &kv : phaseOf)
    kv.second = next++;
  plan.phase.resize(n);
  for (int v = 0; v < n; ++v)
    plan.phase[v] = phaseOf[{plan.segment[v], depth[v]}];
  plan.numPhases = next;
  plan.numSegments =
      n ? *std::max_element(plan.segment.begin(), plan.segment.end()) + 1 : 0;
  return true;
}

double partitionCost(const PartitionOption &o, int64_t sms, const CostModel &model) {
  int64_t waves = (o.count + sms - 1) / sms;
  double penalty = 1.0;
  if (model.fullSegmentBytes > 0 && o.segmentBytes > 0 &&
      o.segmentBytes < model.fullSegmentBytes)
    penalty = model.shortSegmentPenalty;
  return double(waves) * (double(o.bytesPerTask) * penalty + double(model.overheadBytes));
}

int choosePartition(const std::vector<PartitionOption> &options, int64_t sms,
                    const CostModel &model) {
  int best = -1;
  double bestCost = 0;
  for (size_t i = 0; i < options.size(); ++i) {
    double c = partitionCost(options[i], sms, model);
    if (best < 0 || c < bestCost) {
      best = int(i);
      bestCost = c;
    }
  }
  return best;
}

PhaseLoad phaseLoad(const std::vector<std::pair<int64_t, int64_t>> &tasks, int64_t blocks) {
  // Per task: whole rounds add to every block; the rest of its instances,
  // a run of blocks from where the deal stands, through a difference array.
  std::vector<int64_t> step(blocks + 1, 0);
  int64_t at = 0, everywhere = 0;
  for (auto [count, cost] : tasks) {
    everywhere += (count / blocks) * cost;
    const int64_t end = at + count % blocks;
    step[at] += cost;
    if (end <= blocks) {
      step[end] -= cost;
    } else {
      step[blocks] -= cost;
      step[0] += cost;
      step[end - blocks] -= cost;
    }
    at = end % blocks;
  }
  PhaseLoad l;
  int64_t run = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    run += step[b];
    const int64_t v = everywhere + run;
    l.busiest = std::max(l.busiest, v);
    l.squares += double(v) * double(v);
  }
  return l;
}

int64_t planWorkspace(const std::vector<WorkspaceBuffer> &buffers,
                      std::vector<int64_t> &offsets, int64_t align) {
  const size_t n = buffers.size();
  offsets.assign(n, -1);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return buffers[a].bytes > buffers[b].bytes;
  });
  auto roundUp = [&](int64_t x) { return (x + align - 1) / align * align; };
  int64_t arena = 0;
  std::vector<size_t> placed;
  for (size_t i : order) {
    const WorkspaceBuffer &b = buffers[i];
    // Intervals of memory taken by placed buffers live at the same time.
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (size_t j : placed) {
      const WorkspaceBuffer &o = buffers[j];
      if (o.last < b.first || b.last < o.first)
        continue;
      taken.push_back({offsets[j], offsets[j] + roundUp(o.bytes)});
    }
    std::sort(taken.begin(), taken.end());
    int64_t at = 0;
    for (auto [lo, hi] : taken) {
      if (at + roundUp(b.bytes) <= lo)
        break;
      at = std::max(at, hi);
    }
    offsets[i] = at;
    arena = std::max(arena, at + roundUp(b.bytes));
    placed.push_back(i);
  }
  return arena;
}

} // namespace mk::planning
