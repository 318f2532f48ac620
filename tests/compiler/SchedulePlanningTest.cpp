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
