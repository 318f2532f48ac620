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

/// Bytes per step of a lane-order packed 128-wide tile: 8 row pairs x 128
/// columns of int4 pairs.
constexpr int64_t kPackedStepBytes = 1024;

/// Reorders tile-contiguous int4 weights (u8 [blocks, rows, 128], as
/// tileColumns leaves them, `blocks` = outer x cols/128) into the lane order
/// of the 128-wide tensor-core tile (`order: "mma"` in the manifest): each
/// step of 8 rows becomes [half h][lane][16 bytes] with
///   packed[s][h][lane][b] = tile[8s + 4h + lane % 4][16 (lane / 4) + b],
/// the two 16-byte pieces lane (g = lane / 4, t = lane % 4) of a warp loads
/// for rows 8s + t and 8s + t + 4 and its 16 columns. `rows` % 8 == 0.
void packMmaSteps(const void *tiled, void *dst, int64_t blocks, int64_t rows);

} // namespace mk::rt

#endif // MK_RUNTIME_WEIGHTLAYOUT_H
