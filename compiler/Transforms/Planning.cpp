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
  // Per segment, the memory its placed buffers take, as disjoint ranges
  // (touching ones merged: lo -> hi). First fit depends only on the union
  // of what the buffers live at the same time take, so a buffer's offset is
  // the lowest `at` whose [at, at + size) meets no range of any segment it
  // lives in. Kept per segment instead of re-sorting every placed buffer
  // that overlaps the new one (the accumulators zeroed at the start live
  // from segment 0 on: quadratic in a deep kernel's buffers).
  int lo = 0, hi = -1;
  for (const WorkspaceBuffer &b : buffers) {
    lo = std::min(lo, b.first);
    hi = std::max(hi, b.last);
  }
  std::vector<std::map<int64_t, int64_t>> taken(n ? size_t(hi - lo + 1) : 0);
  // The range of `t` that meets [at, at + size), if any (end() if none).
  auto meeting = [](const std::map<int64_t, int64_t> &t, int64_t at, int64_t size) {
    auto it = t.upper_bound(at); // the first range starting after at
    if (it != t.begin()) {
      auto prev = std::prev(it);
      if (prev->second > at)
        return prev;
    }
    if (it != t.end() && it->first < at + size)
      return it;
    return t.end();
  };
  int64_t arena = 0;
  for (size_t i : order) {
    const WorkspaceBuffer &b = buffers[i];
    const int64_t size = roundUp(b.bytes);
    int64_t at = 0;
    for (bool moved = true; moved;) {
      moved = false;
      for (int s = b.first; s <= b.last; ++s) {
        const std::map<int64_t, int64_t> &t = taken[size_t(s - lo)];
        for (auto it = meeting(t, at, size); it != t.end(); it = meeting(t, at, size)) {
          at = it->second;
          moved = true;
        }
      }
    }
    offsets[i] = at;
    arena = std::max(arena, at + size);
    if (size == 0)
      continue;
    for (int s = b.first; s <= b.last; ++s) {
      std::map<int64_t, int64_t> &t = taken[size_t(s - lo)];
      int64_t rlo = at, rhi = at + size;
      // Merge with the ranges it touches (none overlap it: it was placed
      // clear of them).
      auto it = t.lower_bound(rlo);
      if (it != t.begin() && std::prev(it)->second == rlo) {
        --it;
        rlo = it->first;
        it = t.erase(it);
      }
      if (it != t.end() && it->first == rhi) {
        rhi = it->second;
        t.erase(it);
      }
      t[rlo] = rhi;
    }
  }
  return arena;
}

} // namespace mk::planning
