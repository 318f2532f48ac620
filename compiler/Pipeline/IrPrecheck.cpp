//===- IrPrecheck.cpp - Lexical checks on IR text before MLIR parses it ---===//

#include "Pipeline/IrPrecheck.h"

#include "llvm/ADT/Twine.h"

#include <cctype>
#include <vector>

using namespace mk;

namespace {
bool isIdStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool isIdChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.' ||
         c == '-';
}
} // namespace

std::optional<TextLocation> mk::findValueOutsideFunctions(llvm::StringRef text) {
  // Open braces: whether each is a function body. A func.func keyword makes
  // its signature "pending" until its body's brace (not an attribute or
  // property dictionary) opens, or the next operation starts (a dotted
  // name at the nesting where the keyword was: a declaration has no body).
  std::vector<bool> braces;
  int functionBodies = 0, parens = 0;
  bool pending = false, pendingGeneric = false;
  size_t pendingBraces = 0;
  int pendingParens = 0;
  char prev = 0;           // the last significant character
  bool prevAttributes = false; // the last token was the keyword `attributes`
  unsigned line = 1, column = 1;
  const size_t n = text.size();
  auto advance = [&](size_t &i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
    ++i;
  };
  for (size_t i = 0; i < n;) {
    const char c = text[i];
    if (c == '/' && i + 1 < n && text[i + 1] == '/') {
      while (i < n && text[i] != '\n')
        advance(i);
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      advance(i);
      continue;
    }
    if (c == '"') {
      advance(i);
      const size_t start = i;
      while (i < n && text[i] != '"') {
        if (text[i] == '\\' && i + 1 < n)
          advance(i);
        advance(i);
      }
      if (text.slice(start, i) == "func.func") { // the generic form: "func.func"() ({...})
        pending = pendingGeneric = true;
        pendingBraces = braces.size();
        pendingParens = parens;
      }
      if (i < n)
        advance(i);
      prev = '"';
      prevAttributes = false;
      continue;
    }
    if (c == '%' && i + 1 < n && (isIdChar(text[i + 1]) || text[i + 1] == '#')) {
      if (!pending && functionBodies == 0)
        return TextLocation{line, column};
      advance(i);
      while (i < n && isIdChar(text[i]))
        advance(i);
      prev = '%';
      prevAttributes = false;
      continue;
    }
    if (isIdStart(c)) {
      const size_t start = i;
      while (i < n && isIdChar(text[i]))
        advance(i);
      const llvm::StringRef word = text.slice(start, i);
      if (word == "func.func") {
        pending = true;
        pendingGeneric = false;
        pendingBraces = braces.size();
        pendingParens = parens;
      } else if (pending && word.contains('.') && prev != '!' && prev != '#' &&
                 braces.size() == pendingBraces && parens == pendingParens) {
        pending = false; // the next operation: the function had no body
      }
      prevAttributes = word == "attributes";
      prev = 'a';
      continue;
    }
    if (c == '(')
      ++parens;
    else if (c == ')')
      --parens;
    else if (c == '{') {
      // The body: in the custom form outside the signature's parentheses
      // (argument and result attributes are inside them) and not after
      // `attributes`; in the generic form the region inside the operand
      // list's parentheses, not the properties `<{...}>`.
      const bool body = pending && !prevAttributes && prev != '<' &&
                        parens == pendingParens + (pendingGeneric ? 1 : 0);
      braces.push_back(body);
      if (body) {
        ++functionBodies;
        pending = false;
      }
    } else if (c == '}' && !braces.empty()) {
      if (braces.back())
        --functionBodies;
      braces.pop_back();
    }
    prev = c;
    prevAttributes = false;
    advance(i);
  }
  return std::nullopt;
}

std::string mk::checkValuesInsideFunctions(llvm::StringRef text, llvm::StringRef path,
                                           bool severity) {
  std::optional<TextLocation> at = findValueOutsideFunctions(text);
  if (!at)
    return {};
  return (path + ":" + llvm::Twine(at->line) + ":" + llvm::Twine(at->column) +
          (severity ? ": error" : "") + ": an SSA value outside every func.func: this compiler's IR defines values only "
          "inside functions (top-level operations refer to weights and state by symbol)")
      .str();
}
