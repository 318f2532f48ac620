//===- SchedulePlanningTest.cpp - Phase planner, partitioner, allocator ---===//

#include "Transforms/Planning.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

using namespace mk::planning;

TEST(SchedulePhasePlanner, LocalEdgesNeedNoBarrier) {
  // norm (every block) -> gemv -> kda -> o_proj
  std::vector<DepEdge> e = {{0, 1, DepKind::Local},
                            {1, 2, DepKind::Grid},
                            {2, 3, DepKind::Grid}};
  PhasePlan p;
  std::string err;
  ASSERT_TRUE(planPhases(4, e, p, err)) << err;
  EXPECT_EQ(p.segment, (std::vector<int>{0, 0, 1, 2}));
  EXPECT_EQ(p.numBarriers(), 2);
  EXPECT_EQ(p.phase[0], p.phase[1]);
}

TEST(SchedulePhasePlanner, BarriersEqualLongestGridChain) {
  // Two independent chains of different lengths share barriers.
  std::vector<DepEdge> e = {{0, 2, DepKind::Grid},
                            {2, 4, DepKind::Grid},
                            {1, 3, DepKind::Grid}};
  PhasePlan p;
  std::string err;
  ASSERT_TRUE(planPhases(5, e, p, err));
  EXPECT_EQ(p.numBarriers(), 2);
  EXPECT_EQ(p.segment[1], 0);
  EXPECT_EQ(p.segment[3], 1);
  EXPECT_EQ(p.segment[4], 2);
}

TEST(SchedulePhasePlanner, RejectsBackwardEdges) {
  PhasePlan p;
  std::string err;
  EXPECT_FALSE(planPhases(2, {{1, 0, DepKind::Grid}}, p, err));
  EXPECT_NE(err.find("not forward"), std::string::npos);
}

TEST(SchedulePartition, BalancesWavesAgainstOverhead) {
  // 132 SMs: 132 tasks of 100 KB beat 133 tasks of 99 KB (two waves).
  std::vector<PartitionOption> o = {{133, 99000}, {132, 100000}};
  EXPECT_EQ(choosePartition(o, 132, {}), 1);
  // A large fixed overhead favours fewer, bigger tasks.
  std::vector<PartitionOption> o2 = {{264, 10000}, {132, 20000}};
  EXPECT_EQ(choosePartition(o2, 132, {50000, 0}), 1);
  EXPECT_EQ(choosePartition({}, 132, {}), -1);
}

TEST(SchedulePartition, ShortRowSegmentsCostMore) {
  // The same bytes in 256 tasks of 32-byte row pieces or 128 tasks of
  // 128-byte pieces: one wave each on 264 slots.
  std::vector<PartitionOption> o = {{256, 73728, 32}, {128, 147456, 128}};
  EXPECT_EQ(choosePartition(o, 264, {24576, 0}), 0); // no penalty: fewer bytes
  EXPECT_EQ(choosePartition(o, 264, {0, 128, 3.0}), 1);
  EXPECT_DOUBLE_EQ(partitionCost(o[0], 264, {0, 128}), 2.0 * 73728);
  EXPECT_DOUBLE_EQ(partitionCost(o[1], 264, {0, 128}), 147456.0);
  // Pieces at least as long as a full segment pay nothing extra.
  EXPECT_DOUBLE_EQ(partitionCost({1, 1000, 256}, 264, {0, 128}), 1000.0);
  EXPECT_DOUBLE_EQ(partitionCost({1, 1000, 0}, 264, {0, 128}), 1000.0);
}

// The phase load from whole rounds and a difference array equals the
// instance-by-instance round-robin deal, on random phases.
TEST(SchedulePhaseLoad, MatchesTheDealInstanceByInstance) {
  std::mt19937 rng(7);
  for (int it = 0; it < 5000; ++it) {
    const int64_t blocks = 1 + rng() % 40;
    std::vector<std::pair<int64_t, int64_t>> tasks;
    for (int k = 0, n = rng() % 6; k < n; ++k)
      tasks.push_back({1 + int64_t(rng() % 100), 1 + int64_t(rng() % 1000)});
    std::vector<int64_t> load(blocks, 0);
    int64_t i = 0;
    for (auto [count, cost] : tasks)
      for (int64_t j = 0; j < count; ++j, ++i)
        load[i % blocks] += cost;
    double squares = 0;
    for (int64_t v : load)
      squares += double(v) * double(v);
    const PhaseLoad l = phaseLoad(tasks, blocks);
    ASSERT_EQ(l.busiest, *std::max_element(load.begin(), load.end())) << "case " << it;
    ASSERT_EQ(l.squares, squares) << "case " << it;
  }
  // 264 blocks: 256 tiles of 100, then 144 of 10 wrap onto blocks 0..135.
  const PhaseLoad l = phaseLoad({{256, 100}, {144, 10}}, 264);
  EXPECT_EQ(l.busiest, 110);
}

TEST(WorkspacePlanner, DisjointLiveRangesShare) {
  std::vector<WorkspaceBuffer> b = {{1000, 0, 1}, {1000, 2, 3}, {500, 1, 2}};
  std::vector<int64_t> off;
  int64_t size = planWorkspace(b, off, 256);
  EXPECT_EQ(off[0], off[1]); // a barrier apart: same memory
  EXPECT_GE(off[2], 1024);   // overlaps both
  EXPECT_EQ(size, 1024 + 512);
}

TEST(WorkspacePlanner, OverlappingNeverCollide) {
  std::vector<WorkspaceBuffer> b;
  for (int i = 0; i < 20; ++i)
    b.push_back({(i % 5 + 1) * 300, i % 4, i % 4 + 2});
  std::vector<int64_t> off;
  planWorkspace(b, off, 256);
  for (size_t i = 0; i < b.size(); ++i)
    for (size_t j = i + 1; j < b.size(); ++j) {
      bool live = !(b[i].last < b[j].first || b[j].last < b[i].first);
      bool mem = off[i] < off[j] + b[j].bytes && off[j] < off[i] + b[i].bytes;
      EXPECT_FALSE(live && mem) << i << " and " << j;
      EXPECT_EQ(off[i] % 256, 0);
    }
}

/// First fit by size, each buffer at the lowest offset clear of every placed
/// buffer live at the same time: the plain form (every pair checked, the
/// conflicts sorted), against which the planner's segment tree of placed
/// ranges is checked.
static std::vector<int64_t> firstFitByPairs(const std::vector<WorkspaceBuffer> &b,
                                            int64_t align) {
  std::vector<size_t> order(b.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return b[x].bytes > b[y].bytes; });
  auto up = [&](int64_t x) { return (x + align - 1) / align * align; };
  std::vector<int64_t> off(b.size(), -1);
  std::vector<size_t> placed;
  for (size_t i : order) {
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (size_t j : placed)
      if (!(b[j].last < b[i].first || b[i].last < b[j].first))
        taken.push_back({off[j], off[j] + up(b[j].bytes)});
    std::sort(taken.begin(), taken.end());
    int64_t at = 0;
    for (auto [lo, hi] : taken) {
      if (at + up(b[i].bytes) <= lo)
        break;
      at = std::max(at, hi);
    }
    off[i] = at;
    placed.push_back(i);
  }
  return off;
}

TEST(WorkspacePlanner, SameOffsetsAsPairwiseFirstFit) {
  uint64_t state = 12345;
  auto next = [&](int64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return int64_t((state >> 33) % uint64_t(n));
  };
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<WorkspaceBuffer> b;
    // Up to 12 segments, and in every other trial up to 100 (a deeper tree).
    const int n = 1 + int(next(60)), segments = 1 + int(next(trial % 2 ? 100 : 12));
    for (int i = 0; i < n; ++i) {
      const int first = int(next(segments));
      // Some buffers live from segment 0 on (zeroed at the start), some
      // for one segment, some in between; sizes with ties.
      const int last = next(3) == 0 ? segments - 1 : first + int(next(segments - first));
      b.push_back({(1 + next(8)) * 200, next(4) == 0 ? 0 : first, last});
    }
    std::vector<int64_t> off;
    planWorkspace(b, off, 256);
    EXPECT_EQ(off, firstFitByPairs(b, 256)) << "trial " << trial;
  }
}
