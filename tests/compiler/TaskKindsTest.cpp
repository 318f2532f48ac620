//===- TaskKindsTest.cpp - The schedule dialect's registry of task kinds ---===//
//
// Every kind has one entry, a unique name that maps back to it, argument
// names that do not repeat, and a line in docs/schedule.md.
//
//===----------------------------------------------------------------------===//

#include "mk/Dialect/Schedule/TaskKinds.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

using namespace mk::schedule;

TEST(TaskKinds, NamesMapBackToTheirKinds) {
  std::set<std::string> names;
  for (const TaskKindInfo &k : taskKinds()) {
    EXPECT_TRUE(names.insert(k.name.str()).second) << "kind name " << k.name.str() << " twice";
    const TaskKindInfo *found = lookupTaskKind(k.name);
    ASSERT_NE(found, nullptr) << k.name.str();
    EXPECT_EQ(found->kind, k.kind);
    EXPECT_EQ(taskKindName(k.kind), k.name);
  }
  EXPECT_EQ(lookupTaskKind("no_such_kind"), nullptr);
  EXPECT_EQ(names.size(), 13u) << "a kind was added or removed: update this count and the docs";
}

TEST(TaskKinds, ArgumentNamesAreUniquePerKind) {
  for (const TaskKindInfo &k : taskKinds()) {
    std::set<std::string> args;
    for (auto list : {k.args, k.familyArgs})
      for (const TaskArgSpec &a : list)
        EXPECT_TRUE(args.insert(a.name.str()).second)
            << k.name.str() << ": argument " << a.name.str() << " twice";
  }
}

TEST(TaskKinds, DocsNameEveryKind) {
  std::ifstream f(std::string(MK_SOURCE_DIR) + "/docs/schedule.md");
  ASSERT_TRUE(f) << "docs/schedule.md";
  std::stringstream text;
  text << f.rdbuf();
  for (const TaskKindInfo &k : taskKinds())
    EXPECT_NE(text.str().find("`" + k.name.str() + "`"), std::string::npos)
        << "docs/schedule.md does not name kind `" << k.name.str() << "`";
}
