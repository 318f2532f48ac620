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

#include "mk/PackedLayout.h"

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

using mk::kPackedStepBytes; // one step: 8 row pairs x 128 columns, or 16 x 64
using mk::PackedOrder;

/// Reorders tile-contiguous int4 weights (u8 [blocks, rows, tile], as
/// tileColumns leaves them, `blocks` = outer x cols/tile; tile 128 or 64)
/// into the lane order of the tensor-core tile (`order: "mma"` in the
/// manifest): each step of R = 1024 / tile rows becomes [half h][lane][16
/// bytes] with, for lane = 4g + t and P = tile / 16 column groups,
///   packed[s][h][lane][b] = tile[R s + 8 (g / P) + 4h + t][16 (g % P) + b],
/// the two 16-byte pieces lane (g, t) of a warp loads for rows t and t + 4
/// of its k-subslice g / P and its 16 columns; then, within every 4-byte
/// word (little-endian), the nibbles are reordered by packMmaWordNibbles.
/// `rows` % R == 0.
void packMmaSteps(const void *tiled, void *dst, int64_t blocks, int64_t rows, int64_t tile);

/// Reorders the nibbles of one 4-byte word of byte pairs (byte j = lo_j |
/// hi_j << 4, for column j): nibble j becomes lo_j, nibble 4 + j hi_j, so
/// that column j's pair sits at bits 4j and 16 + 4j.
void packMmaWordNibbles(uint8_t *word);

/// Reorders tile-contiguous int4 weights (as for packMmaSteps) into the
/// integer tile's order (`order: "int8"`): each step of 32 weight rows (16
/// row pairs) becomes [piece i < tile/32][lane][16 bytes]; piece i of lane
/// 4g + t holds mma tiles m = 2i, 2i + 1 as two words each, word w's byte b
/// being the nibbles of rows k = 16w + 4t + b of columns c(m, g) (low
/// nibble) and c(m, g + 8) (high), where
///   c(m, r) = (tile / 32) * (4 (r % 8) + m % 4) + 2 (m / 4) + r / 8.
/// `rows` (row pairs) % 16 == 0.
void packInt8Steps(const void *tiled, void *dst, int64_t blocks, int64_t rows, int64_t tile);

/// The stored form of a weight that a kernel reads tile by tile (its
/// manifest entry's `tile` and `order`): tileColumns of `src`, then, for an
/// int4 order, packMmaSteps or packInt8Steps, written to `dst` (as large as
/// `src`, not overlapping it) in one pass over each [rows, tile] block. The
/// blocks are independent: up to `threads` threads each take a contiguous
/// range of them (0: the hardware's count, and no more than one per 8 MB,
/// so that small tensors use one). The bytes written never depend on the
/// thread count.
void layoutTiledWeight(const void *src, void *dst, const std::vector<int64_t> &shape,
                       int64_t tile, size_t elemBytes, PackedOrder order,
                       unsigned threads = 0);

/// Byte offset within a step of the integer order of the byte holding rows
/// (k, c(m, g)) and (k, c(m, g + 8)): packInt8Steps' one statement of the
/// order (tests read the layout back through it). k < 32, m < tile / 16.
int64_t int8StepByte(int64_t tile, int64_t m, int64_t g, int64_t k);

/// Column of a tile that row r of mma tile m holds in the integer order.
constexpr int64_t int8Column(int64_t tile, int64_t m, int64_t r) {
  return (tile / 32) * (4 * (r % 8) + m % 4) + 2 * (m / 4) + r / 8;
}

} // namespace mk::rt

#endif // MK_RUNTIME_WEIGHTLAYOUT_H
