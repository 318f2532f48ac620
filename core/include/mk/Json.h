//===- Json.h - A small strict JSON DOM ---------------------------*- C++ -*-===//
//
// Just enough JSON for block specs, manifests and safetensors headers, without
// pulling in LLVM: a strict RFC 8259 parser (no comments, no trailing commas,
// no NaN) into a DOM whose objects keep their keys in file order and whose
// values remember where they started, so that callers can report
// "line 3, column 17: unknown key 'foo'".
//
//===----------------------------------------------------------------------===//

#ifndef MK_JSON_H
#define MK_JSON_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mk {
namespace json {

enum class Kind { Null, Bool, Number, String, Array, Object };

/// Returns "null", "bool", "number", "string", "array" or "object".
const char *kindName(Kind k);

class Value {
public:
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  /// The number's text as written (empty for non-numbers); lets callers tell
  /// `3` from `3.0` and read large integers exactly.
  std::string numberText;
  std::string string;
  std::vector<Value> array;
  /// Members in file order. Duplicate keys are rejected by the parser.
  std::vector<std::pair<std::string, Value>> object;
  /// 1-based position of the value's first character (0 if built in code).
  int line = 0, column = 0;
  /// For object members: 1-based position of the member's key.
  int keyLine = 0, keyColumn = 0;

  Value() = default;
  static Value null() { return Value(); }
  static Value fromBool(bool b);
  static Value fromNumber(double d);
  static Value fromInt(int64_t i);
  static Value fromString(std::string s);
  static Value makeArray();
  static Value makeObject();

  bool isNull() const { return kind == Kind::Null; }
  bool isBool() const { return kind == Kind::Bool; }
  bool isNumber() const { return kind == Kind::Number; }
  bool isString() const { return kind == Kind::String; }
  bool isArray() const { return kind == Kind::Array; }
  bool isObject() const { return kind == Kind::Object; }

  /// True for a number written without fraction or exponent that fits in
  /// int64 (or a number built with fromInt); stores it in `out`.
  bool getInt(int64_t &out) const;

  /// Object member lookup; nullptr if absent or not an object.
  const Value *find(const std::string &key) const;
  /// Appends a member (objects) or element (arrays); returns the new value.
  Value &set(const std::string &key, Value v);
  Value &push(Value v);

  /// "line L, column C" (or "<generated>" for values built in code).
  std::string where() const;
  /// "line L, column C" of the member's key (falls back to where()).
  std::string keyWhere() const;
};

/// Parses `text` as one JSON value (surrounding whitespace allowed). On
/// failure returns false and sets `error` to one line such as
/// "line 3, column 17: expected ',' or '}'".
bool parse(const std::string &text, Value &out, std::string &error);

/// A JSON string literal for `s`, with quotes and escapes.
std::string quote(const std::string &s);
/// The shortest decimal text that parses back to exactly `d` (integral values
/// print without a fraction: 10000 -> "10000"). Non-finite values print as
/// "null", since JSON has no NaN or infinity.
std::string formatNumber(double d);
/// Serializes `v`. indent < 0: one line; otherwise pretty-printed with that
/// many spaces per level, arrays of scalars kept on one line.
std::string write(const Value &v, int indent = 2);

} // namespace json
} // namespace mk

#endif // MK_JSON_H
