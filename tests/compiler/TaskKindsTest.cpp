//===- TaskKindsTest.cpp - The schedule dialect's registry of task kinds ---===//
//
// Every kind but `opaque` has one registry entry, its keyword maps back to
// it, argument names do not repeat, and docs/schedule.md names it.
//
//===----------------------------------------------------------------------===//

#include "mk/Dialect/Schedule/TaskKinds.h"

#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>

using namespace mk::schedule;

TEST(TaskKinds, NamesMapBackToTheirKinds) {
  std::set<TaskKind> kinds;
  for (const TaskKindInfo &k : taskKinds()) {
    const std::string name = taskKindName(k.kind).str();
    EXPECT_TRUE(kinds.insert(k.kind).second) << "kind " << name << " twice";
    EXPECT_NE(k.kind, TaskKind::Opaque);
    const TaskKindInfo *found = lookupTaskKind(k.kind);
    ASSERT_NE(found, nullptr) << name;
    EXPECT_EQ(found, &k);
    std::optional<TaskKind> parsed = symbolizeTaskKind(name);
    ASSERT_TRUE(parsed.has_value()) << name;
    EXPECT_EQ(*parsed, k.kind);
  }
  // Every enum case but `opaque` has its entry.
  for (uint32_t i = 0; i <= getMaxEnumValForTaskKind(); ++i) {
    std::optional<TaskKind> k = symbolizeTaskKind(i);
    ASSERT_TRUE(k.has_value()) << i;
    EXPECT_EQ(lookupTaskKind(*k) == nullptr, *k == TaskKind::Opaque) << taskKindName(*k).str();
  }
  EXPECT_FALSE(symbolizeTaskKind("no_such_kind").has_value());
  EXPECT_EQ(kinds.size(), 13u) << "a kind was added or removed: update this count and the docs";
}

TEST(TaskKinds, ArgumentNamesAreUniquePerKind) {
  for (const TaskKindInfo &k : taskKinds()) {
    std::set<std::string> args;
    for (auto list : {k.args, k.familyArgs})
      for (const TaskArgSpec &a : list)
        EXPECT_TRUE(args.insert(a.name.str()).second)
            << taskKindName(k.kind).str() << ": argument " << a.name.str() << " twice";
  }
}

TEST(TaskKinds, DocsNameEveryKind) {
  std::ifstream f(std::string(MK_SOURCE_DIR) + "/docs/schedule.md");
  ASSERT_TRUE(f) << "docs/schedule.md";
  std::stringstream text;
  text << f.rdbuf();
  for (const TaskKindInfo &k : taskKinds()) {
    const std::string name = taskKindName(k.kind).str();
    EXPECT_NE(text.str().find("`" + name + "`"), std::string::npos)
        << "docs/schedule.md does not name kind `" << name << "`";
  }
}
