//===- BFloat16.h - bfloat16 with round-to-nearest-even ---------*- C++ -*-===//
//
// The project's one host-side bf16 type. Conversion from float rounds to
// nearest, ties to even (NaN stays a quiet NaN), exactly like the GPU's
// __float2bfloat16_rn, so the oracle and the kernels round identically.
//
//===----------------------------------------------------------------------===//

#ifndef MK_BFLOAT16_H
#define MK_BFLOAT16_H

#include <cstdint>
#include <cstring>

namespace mk {

struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  explicit BFloat16(float f) : bits(roundFromFloat(f)) {}

  static BFloat16 fromBits(uint16_t b) {
    BFloat16 r;
    r.bits = b;
    return r;
  }

  float toFloat() const {
    uint32_t u = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
  explicit operator float() const { return toFloat(); }

  static uint16_t roundFromFloat(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))
      return uint16_t((u >> 16) | 0x0040u); // quiet NaN
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;
    return uint16_t(u >> 16);
  }
};

static_assert(sizeof(BFloat16) == 2, "bf16 must be two bytes");

/// Rounds a float to the nearest bf16 value and returns it as a float.
inline float roundBf16(float f) { return BFloat16(f).toFloat(); }

} // namespace mk

#endif // MK_BFLOAT16_H
