//===- TraceTest.cpp - Phase stamps -> Chrome/Perfetto trace JSON ---------===//

#include "mk/runtime/Trace.h"

#include "mk/Json.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

using namespace mk;
using namespace mk::rt;

namespace {

/// A realistic global-timer base (~2024 in ns since the epoch): far beyond a
/// double's exact integers, so the converter must subtract before converting.
constexpr uint64_t kBase = 1'700'000'000'000'000'000ull;

/// 3 blocks x 2 phases, [phase * 3 + block]. Block b enters phase 0 at
/// base + 100 b ns and is done 1000 + 500 b ns later; phase 1 starts 2000 ns
/// after the base for everyone and lasts 3000 ns. Waits: block 1 waited 250 ns
/// in phase 0, block 2 1500 ns in phase 1, all others 0.
PhaseTrace threeBlocks() {
  PhaseTrace t;
  t.processName = "mk-bench mk_test";
  t.phaseNames = {"attn \"qkv\"", "moe\\down"};
  t.grid = 3;
  t.entryNs.resize(6);
  t.waitNs.assign(6, 0);
  t.doneNs.resize(6);
  for (uint64_t b = 0; b < 3; ++b) {
    t.entryNs[b] = kBase + 100 * b;
    t.doneNs[b] = t.entryNs[b] + 1000 + 500 * b;
    t.entryNs[3 + b] = kBase + 2000;
    t.doneNs[3 + b] = kBase + 5000;
  }
  t.waitNs[1] = 250;
  t.waitNs[3 + 2] = 1500;
  return t;
}

json::Value parseTrace(const PhaseTrace &t) {
  std::string text, err;
  Status st = phaseTraceJson(t, text);
  EXPECT_TRUE(st.isOk()) << st.toString();
  json::Value root;
  EXPECT_TRUE(json::parse(text, root, err)) << err << "\n" << text;
  return root;
}

std::string str(const json::Value &o, const char *key) {
  const json::Value *v = o.find(key);
  return v && v->isString() ? v->string : "<missing " + std::string(key) + ">";
}

double num(const json::Value &o, const char *key) {
  const json::Value *v = o.find(key);
  EXPECT_TRUE(v && v->isNumber()) << key;
  return v && v->isNumber() ? v->number : -1;
}

int64_t integer(const json::Value &o, const char *key) {
  int64_t i = -1;
  const json::Value *v = o.find(key);
  EXPECT_TRUE(v && v->getInt(i)) << key;
  return i;
}

/// "X" events of category `cat`, keyed by (tid, args.phase).
std::map<std::pair<int64_t, std::string>, const json::Value *>
slices(const json::Value &root, const std::string &cat) {
  std::map<std::pair<int64_t, std::string>, const json::Value *> out;
  for (const json::Value &e : root.find("traceEvents")->array) {
    if (str(e, "ph") != "X" || str(e, "cat") != cat)
      continue;
    const json::Value *args = e.find("args");
    EXPECT_TRUE(args && args->isObject());
    auto key = std::make_pair(integer(e, "tid"), str(*args, "phase"));
    EXPECT_EQ(out.count(key), 0u) << "two " << cat << " slices for block "
                                  << key.first << " phase " << key.second;
    out[key] = &e;
  }
  return out;
}

} // namespace

TEST(Trace, HasTraceEventsAndMetadataNames) {
  json::Value root = parseTrace(threeBlocks());
  ASSERT_TRUE(root.isObject());
  const json::Value *events = root.find("traceEvents");
  ASSERT_TRUE(events && events->isArray());
  EXPECT_EQ(str(root, "displayTimeUnit"), "ns");
  std::string process;
  std::map<int64_t, std::string> threads;
  for (const json::Value &e : events->array) {
    ASSERT_TRUE(e.isObject());
    if (str(e, "ph") != "M")
      continue;
    EXPECT_EQ(integer(e, "pid"), 1);
    const json::Value *args = e.find("args");
    ASSERT_TRUE(args);
    if (str(e, "name") == "process_name")
      process = str(*args, "name");
    else if (str(e, "name") == "thread_name")
      threads[integer(e, "tid")] = str(*args, "name");
  }
  EXPECT_EQ(process, "mk-bench mk_test");
  EXPECT_EQ(threads, (std::map<int64_t, std::string>{
                         {0, "block 0"}, {1, "block 1"}, {2, "block 2"}}));
}

TEST(Trace, OnePhaseSlicePerBlockAndPhaseInMicroseconds) {
  PhaseTrace t = threeBlocks();
  json::Value root = parseTrace(t);
  auto phases = slices(root, "phase");
  ASSERT_EQ(phases.size(), 6u);
  for (int64_t b = 0; b < 3; ++b)
    for (int p = 0; p < 2; ++p) {
      const std::string &name = t.phaseNames[size_t(p)];
      auto it = phases.find({b, name});
      ASSERT_NE(it, phases.end()) << "block " << b << " phase " << p;
      const json::Value &e = *it->second;
      EXPECT_EQ(str(e, "name"), name);
      EXPECT_EQ(integer(e, "pid"), 1);
      // Relative to the earliest phase-0 entry (block 0's, = kBase).
      const double ts = p == 0 ? 0.1 * double(b) : 2.0;
      const double dur = p == 0 ? 1.0 + 0.5 * double(b) : 3.0;
      EXPECT_DOUBLE_EQ(num(e, "ts"), ts) << b << " " << p;
      EXPECT_DOUBLE_EQ(num(e, "dur"), dur) << b << " " << p;
      const json::Value &args = *e.find("args");
      EXPECT_EQ(integer(args, "phase_index"), p);
      EXPECT_EQ(integer(args, "block"), b);
      const double wait = t.waitNs[size_t(p) * 3 + size_t(b)] / 1000.0;
      EXPECT_DOUBLE_EQ(num(args, "wait_us"), wait);
      EXPECT_DOUBLE_EQ(num(args, "work_us"), dur - wait);
      // Not given: left out, not invented.
      EXPECT_EQ(args.find("phase_bytes"), nullptr);
    }
}

TEST(Trace, WaitSlicesOnlyWhereBlocksWaited) {
  PhaseTrace t = threeBlocks();
  json::Value root = parseTrace(t);
  auto waits = slices(root, "wait");
  ASSERT_EQ(waits.size(), 2u);
  auto w1 = waits.find({1, t.phaseNames[0]});
  ASSERT_NE(w1, waits.end());
  EXPECT_EQ(str(*w1->second, "name"), "counter wait");
  EXPECT_DOUBLE_EQ(num(*w1->second, "ts"), 0.1); // with its phase slice
  EXPECT_DOUBLE_EQ(num(*w1->second, "dur"), 0.25);
  auto w2 = waits.find({2, t.phaseNames[1]});
  ASSERT_NE(w2, waits.end());
  EXPECT_DOUBLE_EQ(num(*w2->second, "ts"), 2.0);
  EXPECT_DOUBLE_EQ(num(*w2->second, "dur"), 1.5);
  EXPECT_DOUBLE_EQ(num(*w2->second->find("args"), "wait_us"), 1.5);
}

TEST(Trace, NamesWithQuotesAndBackslashesRoundTrip) {
  PhaseTrace t = threeBlocks();
  t.processName = "mk-bench \"odd\\name\"\n";
  t.otherData = {{"kernel", "a\"b\\c"}, {"kernel", "d\"e"}};
  json::Value root = parseTrace(t);
  std::string process;
  for (const json::Value &e : root.find("traceEvents")->array)
    if (str(e, "name") == "process_name")
      process = str(*e.find("args"), "name");
  EXPECT_EQ(process, t.processName);
  auto phases = slices(root, "phase");
  EXPECT_EQ(phases.count({0, "attn \"qkv\""}), 1u);
  EXPECT_EQ(phases.count({0, "moe\\down"}), 1u);
  const json::Value *other = root.find("otherData");
  ASSERT_TRUE(other && other->isObject());
  EXPECT_EQ(other->object.size(), 1u); // a repeated key replaces, stays unique
  EXPECT_EQ(str(*other, "kernel"), "d\"e");
}

TEST(Trace, BlockThatNeverEnteredAPhaseHasNoSlice) {
  PhaseTrace t = threeBlocks();
  t.entryNs[3 + 1] = 0; // block 1 never entered phase 1
  t.doneNs[3 + 1] = 0;
  t.doneNs[2] = 0;      // block 2 entered phase 0 but has no done stamp
  json::Value root = parseTrace(t);
  auto phases = slices(root, "phase");
  EXPECT_EQ(phases.size(), 4u);
  EXPECT_EQ(phases.count({1, t.phaseNames[1]}), 0u);
  EXPECT_EQ(phases.count({2, t.phaseNames[0]}), 0u);
  EXPECT_EQ(phases.count({1, t.phaseNames[0]}), 1u);
  EXPECT_EQ(phases.count({2, t.phaseNames[1]}), 1u);
  // Block 1's phase-0 wait is still there; no orphan wait slices.
  EXPECT_EQ(slices(root, "wait").size(), 2u);
  // The origin is still the earliest phase-0 entry, so times do not move.
  EXPECT_DOUBLE_EQ(num(*phases.at({2, t.phaseNames[1]}), "ts"), 2.0);
}

TEST(Trace, OriginIsTheEarliestPhaseZeroEntryOfAnyBlock) {
  PhaseTrace t = threeBlocks();
  t.entryNs[0] = kBase + 300; // block 0 now enters last; block 1 first
  t.doneNs[0] = kBase + 1300;
  json::Value root = parseTrace(t);
  auto phases = slices(root, "phase");
  EXPECT_DOUBLE_EQ(num(*phases.at({1, t.phaseNames[0]}), "ts"), 0.0);
  EXPECT_DOUBLE_EQ(num(*phases.at({0, t.phaseNames[0]}), "ts"), 0.2);
  EXPECT_DOUBLE_EQ(num(*phases.at({0, t.phaseNames[1]}), "ts"), 1.9);
}

TEST(Trace, KnownPhaseBytesAreArgs) {
  PhaseTrace t = threeBlocks();
  t.phaseBytes = {1.5e9, 4096};
  json::Value root = parseTrace(t);
  auto phases = slices(root, "phase");
  EXPECT_DOUBLE_EQ(num(*phases.at({2, t.phaseNames[0]})->find("args"), "phase_bytes"), 1.5e9);
  EXPECT_DOUBLE_EQ(num(*phases.at({0, t.phaseNames[1]})->find("args"), "phase_bytes"), 4096);
}

TEST(Trace, RejectsBadShapes) {
  std::string text;
  PhaseTrace t = threeBlocks();
  t.doneNs.resize(5);
  EXPECT_EQ(phaseTraceJson(t, text).code(), ErrorCode::InvalidArgument);
  t = threeBlocks();
  t.grid = 0;
  EXPECT_EQ(phaseTraceJson(t, text).code(), ErrorCode::InvalidArgument);
  t = threeBlocks();
  t.phaseBytes = {1};
  EXPECT_EQ(phaseTraceJson(t, text).code(), ErrorCode::InvalidArgument);
}

TEST(Trace, WriteFailureIsAnIoError) {
  Status st = writePhaseTrace(threeBlocks(), "/nonexistent-dir/trace.json");
  EXPECT_EQ(st.code(), ErrorCode::Io);
  EXPECT_NE(st.message().find("/nonexistent-dir/trace.json"), std::string::npos)
      << st.message();
}

TEST(Trace, WritesTheFile) {
  const std::string path = ::testing::TempDir() + "mk_trace_test.json";
  ASSERT_TRUE(writePhaseTrace(threeBlocks(), path).isOk());
  FILE *f = std::fopen(path.c_str(), "rb");
  ASSERT_TRUE(f);
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;)
    text.append(buf, n);
  std::fclose(f);
  std::remove(path.c_str());
  std::string expected, err;
  ASSERT_TRUE(phaseTraceJson(threeBlocks(), expected).isOk());
  EXPECT_EQ(text, expected);
  json::Value root;
  EXPECT_TRUE(json::parse(text, root, err)) << err;
}
