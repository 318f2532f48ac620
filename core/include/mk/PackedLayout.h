//===- PackedLayout.h - Steps of the packed tensor-core weight tiles -*- C++ -*-===//
//
// The one statement, for the compiler and the runtime, of which W4A16 tiles
// can be stored packed (docs/kernel-abi.md, `order: "mma"`): a packed tile is
// 128 or 64 columns wide and is streamed in 1 KB steps (8 row pairs x 128
// columns, or 16 x 64), so every k-slice a task reads must be whole steps.
// The device side (templates/w4a16_gemv.cuh) has the same constants.
//
//===----------------------------------------------------------------------===//

#ifndef MK_PACKEDLAYOUT_H
#define MK_PACKEDLAYOUT_H

#include <cstdint>

namespace mk {

/// Bytes of one step of a packed tile.
constexpr int64_t kPackedStepBytes = 1024;

/// Weight rows (k) per step of a `tile`-wide packed tile: 16 at 128 wide, 32
/// at 64 wide; 0 for widths that cannot be packed.
constexpr int64_t packedStepRows(int64_t tile) {
  return tile == 128 || tile == 64 ? 2 * kPackedStepBytes / tile : 0;
}

} // namespace mk

#endif // MK_PACKEDLAYOUT_H
