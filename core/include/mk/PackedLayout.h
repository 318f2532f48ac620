//===- PackedLayout.h - Steps of the packed tensor-core weight tiles -*- C++ -*-===//
//
// The one statement, for the compiler and the runtime, of which W4A16 tiles
// can be stored packed (docs/kernel-abi.md, `order`): a packed tile is 128 or
// 64 columns wide and is streamed in steps, so every k-slice a task reads
// must be whole steps. Two orders: `mma`, the exact tensor-core tile's (1 KB
// steps: 8 row pairs x 128 columns, or 16 x 64), and `int8`, the integer
// tile's (32 rows x the tile's width: 2 KB at 128 wide, 1 KB at 64), whose
// tasks also cover at most kInt8MaxSliceRows rows of groups of at most 128
// rows, a multiple of 32. The device side (templates/w4a16_gemv.cuh) has the
// same constants.
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

/// The order of a packed tile's steps.
enum class PackedOrder { None, Mma, Int8 };

/// Weight rows (k) per step of a `tile`-wide tile in the integer order: 32
/// at 128 or 64 wide; 0 for widths that cannot be packed.
constexpr int64_t int8StepRows(int64_t tile) { return tile == 128 || tile == 64 ? 32 : 0; }

/// The most rows one task of an integer-order tile may read (its quantized
/// input lives in a fixed part of the tile's shared memory).
constexpr int64_t kInt8MaxSliceRows = 3584;

/// Weight rows per step of `tile`-wide tiles in `order`.
constexpr int64_t stepRows(PackedOrder order, int64_t tile) {
  return order == PackedOrder::Int8 ? int8StepRows(tile)
         : order == PackedOrder::Mma ? packedStepRows(tile)
                                     : 0;
}

/// Shared memory of a row-slice product (templates/w4a16_gemv.cuh,
/// row_slice_smem_bytes): `rows` rows (whole 16-row steps) of an N-column
/// weight, per 128-wide tile and step its 1 KB of weights and 512 B of
/// scales and zeros.
constexpr int64_t rowSliceStageBytes(int64_t rows, int64_t n) {
  return n / 128 * (rows / 16) * (kPackedStepBytes + 512);
}

/// Floats of shared memory of one KDA head-chunk task (templates/kda.cuh,
/// kda_smem_floats), and with a folded output projection of N columns
/// (kda_o_proj_smem_floats: the task's, rounded up to 16 bytes, then the
/// staged rows).
constexpr int64_t kdaSmemFloats(int64_t threads, int64_t headDim, int64_t chunk) {
  return 3 * headDim + chunk + 2 * (threads / chunk) * chunk + 32;
}
constexpr int64_t kdaOProjSmemFloats(int64_t threads, int64_t headDim, int64_t chunk,
                                     int64_t n) {
  return (kdaSmemFloats(threads, headDim, chunk) + 3) / 4 * 4 + rowSliceStageBytes(chunk, n) / 4;
}

} // namespace mk

#endif // MK_PACKEDLAYOUT_H
