//===- Json.cpp - A small strict JSON DOM ---------------------------------===//

#include "mk/Json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace mk {
namespace json {

const char *kindName(Kind k) {
  switch (k) {
  case Kind::Null:
    return "null";
  case Kind::Bool:
    return "bool";
  case Kind::Number:
    return "number";
  case Kind::String:
    return "string";
  case Kind::Array:
    return "array";
  case Kind::Object:
    return "object";
  }
  return "?";
}

Value Value::fromBool(bool b) {
  Value v;
  v.kind = Kind::Bool;
  v.boolean = b;
  return v;
}

Value Value::fromNumber(double d) {
  Value v;
  v.kind = Kind::Number;
  v.number = d;
  v.numberText = formatNumber(d);
  return v;
}

Value Value::fromInt(int64_t i) {
  Value v;
  v.kind = Kind::Number;
  v.number = double(i);
  v.numberText = std::to_string(i);
  return v;
}

Value Value::fromString(std::string s) {
  Value v;
  v.kind = Kind::String;
  v.string = std::move(s);
  return v;
}

Value Value::makeArray() {
  Value v;
  v.kind = Kind::Array;
  return v;
}

Value Value::makeObject() {
  Value v;
  v.kind = Kind::Object;
  return v;
}

bool Value::getInt(int64_t &out) const {
  if (kind != Kind::Number || numberText.empty())
    return false;
  if (numberText.find_first_of(".eE") != std::string::npos)
    return false;
  errno = 0;
  char *end = nullptr;
  long long r = std::strtoll(numberText.c_str(), &end, 10);
  if (errno == ERANGE || *end != '\0')
    return false;
  out = int64_t(r);
  return true;
}

const Value *Value::find(const std::string &key) const {
  if (kind != Kind::Object)
    return nullptr;
  for (const auto &kv : object)
    if (kv.first == key)
      return &kv.second;
  return nullptr;
}

Value &Value::set(const std::string &key, Value v) {
  kind = Kind::Object;
  for (auto &kv : object)
    if (kv.first == key) {
      kv.second = std::move(v);
      return kv.second;
    }
  object.emplace_back(key, std::move(v));
  return object.back().second;
}

Value &Value::push(Value v) {
  kind = Kind::Array;
  array.push_back(std::move(v));
  return array.back();
}

std::string Value::keyWhere() const {
  if (keyLine == 0)
    return where();
  return "line " + std::to_string(keyLine) + ", column " +
         std::to_string(keyColumn);
}

std::string Value::where() const {
  if (line == 0)
    return "<generated>";
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

//===----------------------------------------------------------------------===//
// Parser
//===----------------------------------------------------------------------===//

namespace {

class Parser {
public:
  explicit Parser(const std::string &text) : text(text) {}

  bool run(Value &out, std::string &error) {
    skipSpace();
    if (!parseValue(out, 0)) {
      error = message;
      return false;
    }
    skipSpace();
    if (pos != text.size()) {
      fail("unexpected text after the JSON value");
      error = message;
      return false;
    }
    return true;
  }

private:
  static constexpr int kMaxDepth = 256;

  const std::string &text;
  size_t pos = 0;
  int line = 1, column = 1;
  std::string message;

  bool atEnd() const { return pos >= text.size(); }
  char peek() const { return atEnd() ? '\0' : text[pos]; }

  void advance() {
    if (text[pos] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
    ++pos;
  }

  bool fail(const std::string &what) {
    if (message.empty())
      message = "line " + std::to_string(line) + ", column " +
                std::to_string(column) + ": " + what;
    return false;
  }

  /// Describes the character at the cursor for error messages.
  std::string found() const {
    if (atEnd())
      return "end of input";
    unsigned char c = text[pos];
    if (c >= 0x20 && c < 0x7f)
      return std::string("'") + char(c) + "'";
    char buf[16];
    std::snprintf(buf, sizeof buf, "byte 0x%02x", c);
    return buf;
  }

  void skipSpace() {
    while (!atEnd()) {
      char c = text[pos];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
        advance();
      else
        break;
    }
  }

  bool literal(const char *word) {
    size_t n = std::char_traits<char>::length(word);
    if (text.compare(pos, n, word) != 0)
      return fail("invalid literal, expected '" + std::string(word) + "'");
    for (size_t i = 0; i < n; ++i)
      advance();
    return true;
  }

  bool parseValue(Value &v, int depth) {
    if (depth > kMaxDepth)
      return fail("nesting deeper than 256 levels");
    v = Value();
    v.line = line;
    v.column = column;
    switch (peek()) {
    case '{':
      return parseObject(v, depth);
    case '[':
      return parseArray(v, depth);
    case '"':
      v.kind = Kind::String;
      return parseString(v.string);
    case 't':
      v.kind = Kind::Bool;
      v.boolean = true;
      return literal("true");
    case 'f':
      v.kind = Kind::Bool;
      v.boolean = false;
      return literal("false");
    case 'n':
      return literal("null");
    default:
      if (peek() == '-' || (peek() >= '0' && peek() <= '9'))
        return parseNumber(v);
      return fail("expected a value, found " + found());
    }
  }

  bool parseObject(Value &v, int depth) {
    v.kind = Kind::Object;
    advance(); // '{'
    skipSpace();
    if (peek() == '}') {
      advance();
      return true;
    }
    std::set<std::string> seen;
    while (true) {
      if (peek() != '"')
        return fail("expected a string key, found " + found());
      int keyLine = line, keyColumn = column;
      std::string key;
      if (!parseString(key))
        return false;
      if (!seen.insert(key).second) {
        line = keyLine;
        column = keyColumn;
        return fail("duplicate key '" + key + "'");
      }
      skipSpace();
      if (peek() != ':')
        return fail("expected ':' after key, found " + found());
      advance();
      skipSpace();
      Value member;
      if (!parseValue(member, depth + 1))
        return false;
      member.keyLine = keyLine;
      member.keyColumn = keyColumn;
      v.object.emplace_back(std::move(key), std::move(member));
      skipSpace();
      if (peek() == ',') {
        advance();
        skipSpace();
        continue;
      }
      if (peek() == '}') {
        advance();
        return true;
      }
      return fail("expected ',' or '}', found " + found());
    }
  }

  bool parseArray(Value &v, int depth) {
    v.kind = Kind::Array;
    advance(); // '['
    skipSpace();
    if (peek() == ']') {
      advance();
      return true;
    }
    while (true) {
      Value elem;
      if (!parseValue(elem, depth + 1))
        return false;
      v.array.push_back(std::move(elem));
      skipSpace();
      if (peek() == ',') {
        advance();
        skipSpace();
        continue;
      }
      if (peek() == ']') {
        advance();
        return true;
      }
      return fail("expected ',' or ']', found " + found());
    }
  }

  static void appendUtf8(std::string &s, uint32_t cp) {
    if (cp < 0x80) {
      s += char(cp);
    } else if (cp < 0x800) {
      s += char(0xc0 | (cp >> 6));
      s += char(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      s += char(0xe0 | (cp >> 12));
      s += char(0x80 | ((cp >> 6) & 0x3f));
      s += char(0x80 | (cp & 0x3f));
    } else {
      s += char(0xf0 | (cp >> 18));
      s += char(0x80 | ((cp >> 12) & 0x3f));
      s += char(0x80 | ((cp >> 6) & 0x3f));
      s += char(0x80 | (cp & 0x3f));
    }
  }

  bool hex4(uint32_t &out) {
    out = 0;
    for (int i = 0; i < 4; ++i) {
      char c = peek();
      uint32_t d;
      if (c >= '0' && c <= '9')
        d = c - '0';
      else if (c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
      else
        return fail("expected four hex digits after \\u, found " + found());
      out = out * 16 + d;
      advance();
    }
    return true;
  }

  bool parseString(std::string &s) {
    advance(); // '"'
    while (true) {
      if (atEnd())
        return fail("unterminated string");
      unsigned char c = text[pos];
      if (c == '"') {
        advance();
        return true;
      }
      if (c < 0x20)
        return fail("control character in string (escape it)");
      if (c != '\\') {
        s += char(c);
        advance();
        continue;
      }
      advance(); // backslash
      char e = peek();
      switch (e) {
      case '"':
      case '\\':
      case '/':
        s += e;
        break;
      case 'b':
        s += '\b';
        break;
      case 'f':
        s += '\f';
        break;
      case 'n':
        s += '\n';
        break;
      case 'r':
        s += '\r';
        break;
      case 't':
        s += '\t';
        break;
      case 'u': {
        advance();
        uint32_t cp;
        if (!hex4(cp))
          return false;
        if (cp >= 0xd800 && cp < 0xdc00) {
          if (text.compare(pos, 2, "\\u") != 0)
            return fail("unpaired UTF-16 surrogate in \\u escape");
          advance();
          advance();
          uint32_t lo;
          if (!hex4(lo))
            return false;
          if (lo < 0xdc00 || lo >= 0xe000)
            return fail("unpaired UTF-16 surrogate in \\u escape");
          cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        } else if (cp >= 0xdc00 && cp < 0xe000) {
          return fail("unpaired UTF-16 surrogate in \\u escape");
        }
        appendUtf8(s, cp);
        continue;
      }
      default:
        return fail("invalid escape '\\" + std::string(1, e) + "' in string");
      }
      advance();
    }
  }

  bool digits() {
    if (!(peek() >= '0' && peek() <= '9'))
      return fail("expected a digit, found " + found());
    while (peek() >= '0' && peek() <= '9')
      advance();
    return true;
  }

  bool parseNumber(Value &v) {
    size_t start = pos;
    int startLine = line, startColumn = column;
    if (peek() == '-')
      advance();
    if (peek() == '0') {
      advance();
      if (peek() >= '0' && peek() <= '9')
        return fail("leading zeros are not allowed in numbers");
    } else if (!digits()) {
      return false;
    }
    if (peek() == '.') {
      advance();
      if (!digits())
        return false;
    }
    if (peek() == 'e' || peek() == 'E') {
      advance();
      if (peek() == '+' || peek() == '-')
        advance();
      if (!digits())
        return false;
    }
    v.kind = Kind::Number;
    v.numberText = text.substr(start, pos - start);
    errno = 0;
    v.number = std::strtod(v.numberText.c_str(), nullptr);
    if (std::isinf(v.number)) {
      line = startLine;
      column = startColumn;
      return fail("number " + v.numberText + " is out of range");
    }
    return true;
  }
};

} // namespace

bool parse(const std::string &text, Value &out, std::string &error) {
  Parser p(text);
  Value v;
  if (!p.run(v, error))
    return false;
  out = std::move(v);
  return true;
}

//===----------------------------------------------------------------------===//
// Writer
//===----------------------------------------------------------------------===//

std::string quote(const std::string &s) {
  std::string r = "\"";
  for (unsigned char c : s) {
    switch (c) {
    case '"':
      r += "\\\"";
      break;
    case '\\':
      r += "\\\\";
      break;
    case '\n':
      r += "\\n";
      break;
    case '\r':
      r += "\\r";
      break;
    case '\t':
      r += "\\t";
      break;
    case '\b':
      r += "\\b";
      break;
    case '\f':
      r += "\\f";
      break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        r += buf;
      } else {
        r += char(c);
      }
    }
  }
  r += '"';
  return r;
}

std::string formatNumber(double d) {
  if (!std::isfinite(d))
    return "null";
  if (d == 0)
    return std::signbit(d) ? "-0" : "0";
  char buf[40];
  // Integers that double holds exactly print without exponent or fraction.
  if (std::fabs(d) < 9007199254740992.0 && d == std::trunc(d)) {
    std::snprintf(buf, sizeof buf, "%.0f", d);
    return buf;
  }
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, d);
    if (std::strtod(buf, nullptr) == d)
      break;
  }
  return buf;
}

namespace {

bool isScalar(const Value &v) {
  return !(v.isArray() || v.isObject()) ||
         (v.isArray() && v.array.empty()) || (v.isObject() && v.object.empty());
}

void writeTo(std::string &out, const Value &v, int indent, int level) {
  auto newline = [&](int lvl) {
    if (indent < 0)
      return;
    out += '\n';
    out.append(size_t(indent) * size_t(lvl), ' ');
  };
  switch (v.kind) {
  case Kind::Null:
    out += "null";
    return;
  case Kind::Bool:
    out += v.boolean ? "true" : "false";
    return;
  case Kind::Number:
    out += v.numberText.empty() ? formatNumber(v.number) : v.numberText;
    return;
  case Kind::String:
    out += quote(v.string);
    return;
  case Kind::Array: {
    bool flat = indent < 0;
    if (!flat) {
      flat = true;
      for (const Value &e : v.array)
        flat = flat && isScalar(e);
    }
    out += '[';
    for (size_t i = 0; i < v.array.size(); ++i) {
      if (i)
        out += flat && indent >= 0 ? ", " : ",";
      if (!flat)
        newline(level + 1);
      writeTo(out, v.array[i], flat ? -1 : indent, level + 1);
    }
    if (!flat && !v.array.empty())
      newline(level);
    out += ']';
    return;
  }
  case Kind::Object:
    out += '{';
    for (size_t i = 0; i < v.object.size(); ++i) {
      if (i)
        out += ',';
      newline(level + 1);
      out += quote(v.object[i].first);
      out += indent < 0 ? ":" : ": ";
      writeTo(out, v.object[i].second, indent, level + 1);
    }
    if (!v.object.empty())
      newline(level);
    out += '}';
    return;
  }
}

} // namespace

std::string write(const Value &v, int indent) {
  std::string out;
  writeTo(out, v, indent, 0);
  return out;
}

} // namespace json
} // namespace mk
