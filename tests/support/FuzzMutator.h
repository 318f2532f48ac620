//===- FuzzMutator.h - The tests' seeded mutator of text inputs -*- C++ -*-===//
//
// What the fuzz tests (the compiler's spec and IR targets, the core's and
// the runtime's readers) share: a deterministic mutator of text (and byte)
// inputs, so that a failure reproduces from its seed, and the environment
// knobs MK_FUZZ_SEED (another deterministic sequence) and MK_FUZZ_ITERS
// (how many mutants).
//
// Every draw from the generator is its own statement (or declarator), so
// that no draw order is left to the compiler: a seed means the same mutants
// under every compiler.
//
// Mutations: byte flips, deletions, duplications and insertions of
// separators, numbers replaced by boundary values (0, -1, 1, 2^24, 2^31,
// 1e308, 3.5) or neighbours, truncation, splicing two seeds, swapped lines.
//
//===----------------------------------------------------------------------===//

#ifndef MK_TESTS_SUPPORT_FUZZMUTATOR_H
#define MK_TESTS_SUPPORT_FUZZMUTATOR_H

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace mk {
namespace testing {

/// MK_FUZZ_SEED varies the run (a failure prints the mutant it found).
inline uint64_t seedOr(uint64_t dflt) {
  if (const char *e = std::getenv("MK_FUZZ_SEED"); e && *e)
    return std::strtoull(e, nullptr, 10);
  return dflt;
}

inline int iterations(int dflt) {
  if (const char *e = std::getenv("MK_FUZZ_ITERS"); e && *e)
    return std::max(1, std::atoi(e));
  return dflt;
}

/// One mutation of `s` (or a splice with `other`), drawn from `rng`.
inline std::string mutate(std::string s, const std::string &other, std::mt19937_64 &rng) {
  auto pick = [&](size_t n) { return n ? size_t(rng() % n) : size_t(0); };
  static const char *kValues[] = {"0", "-1", "1", "16777216", "2147483648", "1e308",
                                  "3.5", "-0", "65", "7", "\"\"", "null", "[]", "{}"};
  static const char *kBytes[] = {"{", "}", "[", "]", ",", ":", "\"", "@", "<", ">",
                                 "=", "\n", " ", "-", "x"};
  const int rounds = 1 + int(rng() % 3);
  for (int r = 0; r < rounds && !s.empty(); ++r) {
    // Half the mutations replace a number, which keeps the text well formed
    // and reaches the checks past the parser.
    const unsigned op = rng() % 2 ? 4u : unsigned(rng() % 8);
    switch (op) {
    case 0: { // flip a byte
      const size_t at = pick(s.size());
      s[at] ^= char(1 << (rng() % 7));
      break;
    }
    case 1: { // delete a span
      size_t at = pick(s.size()), n = 1 + pick(16);
      s.erase(at, std::min(n, s.size() - at));
      break;
    }
    case 2: { // duplicate a span
      size_t at = pick(s.size()), n = 1 + pick(64);
      s.insert(at, s.substr(at, n));
      break;
    }
    case 3: { // insert a separator
      const size_t at = pick(s.size() + 1);
      s.insert(at, kBytes[pick(std::size(kBytes))]);
      break;
    }
    case 4: { // replace a number by a boundary value
      std::vector<std::pair<size_t, size_t>> nums;
      for (size_t i = 0; i < s.size();) {
        if (isdigit((unsigned char)s[i])) {
          size_t j = i;
          while (j < s.size() && (isdigit((unsigned char)s[j]) || s[j] == '.' || s[j] == 'e'))
            ++j;
          nums.push_back({i, j - i});
          i = j;
        } else {
          ++i;
        }
      }
      if (!nums.empty()) {
        auto [at, n] = nums[pick(nums.size())];
        const std::string num = s.substr(at, n);
        std::string repl = kValues[pick(std::size(kValues))];
        // Or a neighbour of the value that often stays valid: doubled,
        // halved, plus or minus one.
        if (num.find_first_of(".e") == std::string::npos && n < 9 && rng() % 2) {
          const long long v = std::stoll(num);
          const long long cand[] = {2 * v, v / 2, v + 1, v - 1};
          repl = std::to_string(cand[pick(4)]);
        }
        s.replace(at, n, repl);
      }
      break;
    }
    case 5: // truncate
      s.resize(pick(s.size()));
      break;
    case 6: { // splice with another seed
      if (!other.empty()) {
        const size_t keep = pick(s.size()), from = pick(other.size());
        s = s.substr(0, keep) + other.substr(from);
      }
      break;
    }
    default: { // swap two lines
      std::vector<std::string> lines;
      std::stringstream in(s);
      for (std::string l; std::getline(in, l);)
        lines.push_back(l);
      if (lines.size() > 1) {
        const size_t a = pick(lines.size()), b = pick(lines.size());
        std::swap(lines[a], lines[b]);
      }
      s.clear();
      for (const std::string &l : lines)
        s += l + "\n";
      break;
    }
    }
  }
  return s;
}

} // namespace testing
} // namespace mk

#endif // MK_TESTS_SUPPORT_FUZZMUTATOR_H
