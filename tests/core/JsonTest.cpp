//===- JsonTest.cpp - Tests of the strict JSON parser and writer ----------===//

#include "mk/Json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

using namespace mk::json;

namespace {

std::string parseError(const std::string &text) {
  Value v;
  std::string err;
  EXPECT_FALSE(parse(text, v, err)) << "accepted: " << text;
  return err;
}

TEST(Json, ParsesAllKinds) {
  Value v;
  std::string err;
  ASSERT_TRUE(parse(R"( {"a": null, "b": true, "c": false, "d": -1.5e2,
                          "e": "x\ty\u00e9\ud83d\ude00", "f": [1, [], {}]} )",
                    v, err))
      << err;
  ASSERT_TRUE(v.isObject());
  ASSERT_EQ(v.object.size(), 6u);
  EXPECT_EQ(v.object[0].first, "a");
  EXPECT_TRUE(v.find("a")->isNull());
  EXPECT_TRUE(v.find("b")->boolean);
  EXPECT_FALSE(v.find("c")->boolean);
  EXPECT_EQ(v.find("d")->number, -150.0);
  EXPECT_EQ(v.find("e")->string, "x\ty\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(v.find("f")->array.size(), 3u);
  EXPECT_EQ(v.find("zz"), nullptr);
}

TEST(Json, KeepsKeyOrderAndPositions) {
  Value v;
  std::string err;
  ASSERT_TRUE(parse("{\n  \"z\": 1,\n  \"a\":   [true]\n}", v, err)) << err;
  EXPECT_EQ(v.object[0].first, "z");
  EXPECT_EQ(v.object[1].first, "a");
  EXPECT_EQ(v.line, 1);
  EXPECT_EQ(v.column, 1);
  EXPECT_EQ(v.object[0].second.line, 2);
  EXPECT_EQ(v.object[0].second.column, 8);
  EXPECT_EQ(v.object[1].second.where(), "line 3, column 10");
  EXPECT_EQ(v.object[1].second.array[0].column, 11);
  EXPECT_EQ(v.object[1].second.keyWhere(), "line 3, column 3");
  EXPECT_EQ(v.keyWhere(), "line 1, column 1"); // not a member: where()
}

TEST(Json, Integers) {
  Value v;
  std::string err;
  int64_t i = 0;
  ASSERT_TRUE(parse("[2304, 2304.0, 1e3, -9007199254740993, 99999999999999999999]",
                    v, err));
  EXPECT_TRUE(v.array[0].getInt(i));
  EXPECT_EQ(i, 2304);
  EXPECT_FALSE(v.array[1].getInt(i));
  EXPECT_FALSE(v.array[2].getInt(i));
  EXPECT_TRUE(v.array[3].getInt(i));
  EXPECT_EQ(i, -9007199254740993LL);
  EXPECT_FALSE(v.array[4].getInt(i)); // out of int64 range
}

TEST(Json, ErrorsHaveLineAndColumn) {
  EXPECT_EQ(parseError("{\n  \"a\": 1,\n  \"b\": 2\n  \"c\": 3\n}"),
            "line 4, column 3: expected ',' or '}', found '\"'");
  EXPECT_EQ(parseError("[1, 2,]"), "line 1, column 7: expected a value, found ']'");
  EXPECT_EQ(parseError("{\"a\": 1,}"),
            "line 1, column 9: expected a string key, found '}'");
  EXPECT_EQ(parseError("{\"a\" 1}"),
            "line 1, column 6: expected ':' after key, found '1'");
  EXPECT_EQ(parseError("[1 2]"), "line 1, column 4: expected ',' or ']', found '2'");
  EXPECT_EQ(parseError(""), "line 1, column 1: expected a value, found end of input");
  EXPECT_EQ(parseError("{} x"),
            "line 1, column 4: unexpected text after the JSON value");
  EXPECT_EQ(parseError("\"abc"), "line 1, column 5: unterminated string");
  EXPECT_EQ(parseError("tru"), "line 1, column 1: invalid literal, expected 'true'");
  EXPECT_EQ(parseError("{\"a\": 1, \"a\": 2}"),
            "line 1, column 10: duplicate key 'a'");
}

TEST(Json, RejectsNonStandardSyntax) {
  for (const char *bad :
       {"01", "1.", ".5", "+1", "-", "1e", "NaN", "Infinity", "'a'",
        "[1] // c", "\"\\x\"", "\"a\nb\"", "\"\\ud800\"", "1e400",
        "{\"a\":1", "[", "\"\\u12G4\""}) {
    Value v;
    std::string err;
    EXPECT_FALSE(parse(bad, v, err)) << bad;
    EXPECT_EQ(err.rfind("line ", 0), 0u) << bad << " -> " << err;
  }
}

TEST(Json, DeepNestingIsAnErrorNotACrash) {
  std::string s(10000, '[');
  EXPECT_NE(parseError(s).find("nesting"), std::string::npos);
}

TEST(Json, QuoteEscapes) {
  EXPECT_EQ(quote("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
  Value v;
  std::string err;
  std::string weird = "tab\t quote\" nl\n bell\x07 \xc3\xa9";
  ASSERT_TRUE(parse(quote(weird), v, err)) << err;
  EXPECT_EQ(v.string, weird);
}

TEST(Json, NumbersRoundTrip) {
  EXPECT_EQ(formatNumber(10000), "10000");
  EXPECT_EQ(formatNumber(2.446), "2.446");
  EXPECT_EQ(formatNumber(1e-6), "1e-06");
  EXPECT_EQ(formatNumber(0.1), "0.1");
  EXPECT_EQ(formatNumber(NAN), "null");
  for (double d : {1.0 / 3.0, 2.446, 1e-6, 6.02214076e23, -0.1, 5e-324,
                   1.7976931348623157e308, 123456789.123456789, 0.5}) {
    Value v;
    std::string err;
    ASSERT_TRUE(parse(formatNumber(d), v, err)) << formatNumber(d);
    EXPECT_EQ(v.number, d) << formatNumber(d);
  }
}

TEST(Json, WriteParsesBack) {
  Value root = Value::makeObject();
  root.set("name", Value::fromString("x\"y"));
  Value arr = Value::makeArray();
  arr.push(Value::fromInt(1));
  arr.push(Value::fromNumber(0.25));
  arr.push(Value::fromBool(true));
  arr.push(Value::null());
  root.set("arr", arr);
  Value nested = Value::makeObject();
  nested.set("k", Value::makeArray());
  root.set("nested", nested);
  for (int indent : {-1, 0, 2}) {
    std::string text = write(root, indent);
    Value back;
    std::string err;
    ASSERT_TRUE(parse(text, back, err)) << err << "\n" << text;
    EXPECT_EQ(write(back, -1), write(root, -1));
  }
  EXPECT_EQ(write(root, -1),
            "{\"name\":\"x\\\"y\",\"arr\":[1,0.25,true,null],\"nested\":{\"k\":[]}}");
}

} // namespace
