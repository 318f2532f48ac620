//===- OracleTestUtil.h - Helpers the oracle tests share ----------*- C++ -*-===//

#ifndef MK_TESTS_ORACLETESTUTIL_H
#define MK_TESTS_ORACLETESTUTIL_H

#include "mk/BFloat16.h"

#include <initializer_list>
#include <vector>

namespace mk::oracle::test_util {

/// The values rounded to bf16, in order.
inline std::vector<BFloat16> bf(std::initializer_list<float> v) {
  std::vector<BFloat16> r;
  for (float f : v)
    r.push_back(BFloat16(f));
  return r;
}

} // namespace mk::oracle::test_util

#endif // MK_TESTS_ORACLETESTUTIL_H
