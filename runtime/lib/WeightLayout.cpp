//===- WeightLayout.cpp - Tile-contiguous storage of W4A16 weights --------===//

#include "mk/runtime/WeightLayout.h"

#include <cstring>

namespace mk::rt {

void tileColumns(const void *src, void *dst, const std::vector<int64_t> &shape,
                 int64_t tile, size_t elemBytes) {
  const int64_t rows = shape[shape.size() - 2], cols = shape.back();
  int64_t outer = 1;
  for (size_t i = 0; i + 2 < shape.size(); ++i)
    outer *= shape[i];
  const size_t run = size_t(tile) * elemBytes; // one tile's piece of a row
  const auto *s = static_cast<const uint8_t *>(src);
  auto *d = static_cast<uint8_t *>(dst);
  for (int64_t o = 0; o < outer; ++o) {
    const uint8_t *so = s + size_t(o * rows * cols) * elemBytes;
    uint8_t *dO = d + size_t(o * rows * cols) * elemBytes;
    for (int64_t t = 0; t < cols / tile; ++t)
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(dO + size_t((t * rows + r) * tile) * elemBytes,
                    so + size_t(r * cols + t * tile) * elemBytes, run);
  }
}

void packMmaSteps(const void *tiled, void *dst, int64_t blocks, int64_t rows, int64_t tile) {
  const int64_t stepRows = kPackedStepBytes / tile, groups = tile / 16;
  const auto *s = static_cast<const uint8_t *>(tiled);
  auto *d = static_cast<uint8_t *>(dst);
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const uint8_t *sb = s + blk * rows * tile;
    uint8_t *db = d + blk * rows * tile;
    for (int64_t step = 0; step < rows / stepRows; ++step)
      for (int h = 0; h < 2; ++h)
        for (int lane = 0; lane < 32; ++lane) {
          const int64_t g = lane / 4, t = lane % 4;
          std::memcpy(db + step * kPackedStepBytes + h * 512 + lane * 16,
                      sb + (step * stepRows + 8 * (g / groups) + 4 * h + t) * tile +
                          16 * (g % groups),
                      16);
        }
    // Within each word, the low nibbles of its 4 bytes first, then the high
    // ones (nibble J and J + 4 hold byte J): column J's row pair is then
    // (w >> 4J) & 0x000f000f, one shift and one LOP3 on the device.
    for (int64_t i = 0; i < rows * tile; i += 4)
      packMmaWordNibbles(db + i);
  }
}

void packMmaWordNibbles(uint8_t *word) {
  uint32_t out = 0;
  for (int j = 0; j < 4; ++j)
    out |= uint32_t(word[j] & 15) << (4 * j) | uint32_t(word[j] >> 4) << (16 + 4 * j);
  for (int j = 0; j < 4; ++j)
    word[j] = uint8_t(out >> (8 * j));
}

int64_t int8StepByte(int64_t tile, int64_t m, int64_t g, int64_t k) {
  const int64_t w = k / 16, t = (k % 16) / 4, b = k % 4, lane = 4 * g + t;
  (void)tile;
  return (m / 2) * 512 + lane * 16 + (m % 2) * 8 + w * 4 + b;
}

void packInt8Steps(const void *tiled, void *dst, int64_t blocks, int64_t rows, int64_t tile) {
  const int64_t stepPairs = 16, stepBytes = 16 * tile;
  const auto *s = static_cast<const uint8_t *>(tiled);
  auto *d = static_cast<uint8_t *>(dst);
  auto nibble = [&](const uint8_t *sb, int64_t step, int64_t k, int64_t c) {
    const uint8_t byte = sb[(step * stepPairs + k / 2) * tile + c];
    return k % 2 ? byte >> 4 : byte & 15;
  };
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const uint8_t *sb = s + blk * rows * tile;
    uint8_t *db = d + blk * rows * tile;
    for (int64_t step = 0; step < rows / stepPairs; ++step)
      for (int64_t m = 0; m < tile / 16; ++m)
        for (int64_t g = 0; g < 8; ++g)
          for (int64_t k = 0; k < 32; ++k)
            db[step * stepBytes + int8StepByte(tile, m, g, k)] =
                uint8_t(nibble(sb, step, k, int8Column(tile, m, g)) |
                        nibble(sb, step, k, int8Column(tile, m, g + 8)) << 4);
  }
}

} // namespace mk::rt
