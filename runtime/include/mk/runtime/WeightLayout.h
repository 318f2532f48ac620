//===- WeightLayout.h - Tile-contiguous storage of W4A16 weights -*- C++ -*-===//
//
// A kernel compiled with `schedule-tile-weights=layout=tiled` reads some
// W4A16 weights tile by tile (the manifest's `tile` on their w_q, scales and
// zeros): the logical row-major [outer..., rows, cols] tensor is stored as
// [outer..., cols/tile, rows, tile], so each tile's rows are contiguous. The
// session repacks such tensors when they are bound (docs/kernel-abi.md).
//
//===----------------------------------------------------------------------===//

#ifndef MK_RUNTIME_WEIGHTLAYOUT_H
#define MK_RUNTIME_WEIGHTLAYOUT_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mk::rt {

/// Copies `src` (row-major `shape`, rank >= 2, elements of `elemBytes`) to
/// `dst` in tile-contiguous order: element [o..., r, c] goes to
/// [o..., c / tile, r, c % tile]. `tile` must divide shape.back(); src and
/// dst must not overlap.
void tileColumns(const void *src, void *dst, const std::vector<int64_t> &shape,
                 int64_t tile, size_t elemBytes);

} // namespace mk::rt

#endif // MK_RUNTIME_WEIGHTLAYOUT_H
