//===- Sha256.h - SHA-256 for cache keys and checksums ----------*- C++ -*-===//
//
// The kernel cache keys entries by a SHA-256 of everything that determines
// the compiled code and checks each entry's payload with another; a small
// self-contained implementation keeps the runtime free of crypto libraries.
//
//===----------------------------------------------------------------------===//

#ifndef MK_RUNTIME_SHA256_H
#define MK_RUNTIME_SHA256_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace mk {
namespace rt {

class Sha256 {
public:
  Sha256();
  void update(const void *data, size_t len);
  void update(const std::string &s) { update(s.data(), s.size()); }
  /// Feeds the length first, so that ("ab","c") and ("a","bc") differ.
  void updateField(const std::string &s);
  std::array<uint8_t, 32> digest();
  /// Lower-case hex of digest().
  std::string hexDigest();

  static std::string hex(const void *data, size_t len);

private:
  void block(const uint8_t *p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t bufLen_ = 0;
  uint64_t total_ = 0;
};

} // namespace rt
} // namespace mk

#endif // MK_RUNTIME_SHA256_H
