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

namespace {
/// Disjoint byte ranges lo -> hi, touching and overlapping ones merged.
using Ranges = std::map<int64_t, int64_t>;

/// Adds [lo, hi) to `t`, merging every range it overlaps or touches.
void addRange(Ranges &t, int64_t lo, int64_t hi) {
  auto it = t.upper_bound(lo);
  if (it != t.begin() && std::prev(it)->second >= lo)
    --it;
  while (it != t.end() && it->first <= hi) {
    lo = std::min(lo, it->first);
    hi = std::max(hi, it->second);
    it = t.erase(it);
  }
  t[lo] = hi;
}

/// The range of `t` that meets [at, at + size), if any (end() if none).
Ranges::const_iterator meeting(const Ranges &t, int64_t at, int64_t size) {
  auto it = t.upper_bound(at); // the first range starting after at
  if (it != t.begin()) {
    auto prev = std::prev(it);
    if (prev->second > at)
      return prev;
  }
  if (it != t.end() && it->first < at + size)
    return it;
  return t.end();
}
} // namespace

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
  // First fit: a buffer's offset is the lowest `at` whose [at, at + size)
  // meets no placed buffer live in any segment of its own range. The placed
  // ones are kept in a segment tree over the segments: a buffer's bytes go
  // to `own` of the O(log S) nodes that cover its range exactly and to
  // `below` of those nodes and all their ancestors (`below`: what some
  // segment under the node holds). The buffers live somewhere in a range [f, l] are
  // then those in `below` of the nodes covering [f, l] and in `own` of
  // their ancestors (two nodes that share a segment are one inside the
  // other): O(log^2 S) range sets per query, where scanning every segment
  // of the range was quadratic in the depth (an accumulator zeroed at the
  // start lives in every segment up to its layer's).
  int lo = 0, hi = -1;
  for (const WorkspaceBuffer &b : buffers) {
    lo = std::min(lo, b.first);
    hi = std::max(hi, b.last);
  }
  const int segments = n ? hi - lo + 1 : 0;
  int leaves = 1;
  while (leaves < segments)
    leaves *= 2;
  std::vector<Ranges> own(2 * size_t(leaves)), below(2 * size_t(leaves));
  // The nodes covering segments [f, l] exactly (bottom-up decomposition).
  auto cover = [&](int f, int l) {
    std::vector<int> nodes;
    for (int a = f - lo + leaves, b = l - lo + leaves + 1; a < b; a /= 2, b /= 2) {
      if (a & 1)
        nodes.push_back(a++);
      if (b & 1)
        nodes.push_back(--b);
    }
    return nodes;
  };
  int64_t arena = 0;
  for (size_t i : order) {
    const WorkspaceBuffer &b = buffers[i];
    const int64_t size = roundUp(b.bytes);
    const std::vector<int> nodes = cover(b.first, b.last);
    // The range sets to keep clear of: each covering node's `below` and the
    // `own` of it and its ancestors (an ancestor shared by two covering
    // nodes is listed twice: harmless).
    std::vector<const Ranges *> sets;
    for (int v : nodes) {
      sets.push_back(&below[size_t(v)]);
      for (int u = v; u >= 1; u /= 2)
        sets.push_back(&own[size_t(u)]);
    }
    int64_t at = 0;
    for (bool moved = true; moved;) {
      moved = false;
      for (const Ranges *t : sets)
        for (auto it = meeting(*t, at, size); it != t->end(); it = meeting(*t, at, size)) {
          at = it->second;
          moved = true;
        }
    }
    offsets[i] = at;
    arena = std::max(arena, at + size);
    if (size == 0)
      continue;
    for (int v : nodes) {
      addRange(own[size_t(v)], at, at + size);
      for (int u = v; u >= 1; u /= 2)
        addRange(below[size_t(u)], at, at + size);
    }
  }
  return arena;
}

} // namespace mk::planning
