//===- WeightLayout.cpp - Tile-contiguous storage of W4A16 weights --------===//

#include "mk/runtime/WeightLayout.h"

#include <algorithm>
#include <cstring>
#include <system_error>
#include <thread>

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
  const uint32_t w = uint32_t(word[0]) | uint32_t(word[1]) << 8 |
                     uint32_t(word[2]) << 16 | uint32_t(word[3]) << 24;
  // Byte j's low (high) nibble sits at bit 8j (8j + 4): gather the four low
  // nibbles into bits 0-15, nibble j at 4j, and the high ones likewise.
  auto gather = [](uint32_t n) { // n = nibble j at bits 8j..8j+3
    n = (n | n >> 4) & 0x00ff00ffu;
    return (n | n >> 8) & 0x0000ffffu;
  };
  const uint32_t out = gather(w & 0x0f0f0f0fu) | gather((w >> 4) & 0x0f0f0f0fu) << 16;
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

void layoutTiledWeight(const void *src, void *dst, const std::vector<int64_t> &shape,
                       int64_t tile, size_t elemBytes, PackedOrder order,
                       unsigned threads) {
  const int64_t rows = shape[shape.size() - 2], cols = shape.back();
  int64_t outer = 1;
  for (size_t i = 0; i + 2 < shape.size(); ++i)
    outer *= shape[i];
  const int64_t tilesPerRow = cols / tile, blocks = outer * tilesPerRow;
  const size_t run = size_t(tile) * elemBytes, blockBytes = size_t(rows) * run;
  const auto *s = static_cast<const uint8_t *>(src);
  auto *d = static_cast<uint8_t *>(dst);
  // Blocks [b, e): each gathered from its rows (tileColumns' order), then
  // packed from a block-sized buffer that stays in cache. Nothing in it
  // throws: its buffer is allocated before any thread starts.
  auto layOut = [&](int64_t b, int64_t e, uint8_t *gathered) {
    for (int64_t blk = b; blk < e; ++blk) {
      const int64_t o = blk / tilesPerRow, t = blk % tilesPerRow;
      uint8_t *out = d + size_t(blk) * blockBytes;
      uint8_t *to = order == PackedOrder::None ? out : gathered;
      const uint8_t *from = s + (size_t(o * rows * cols) + size_t(t * tile)) * elemBytes;
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(to + size_t(r) * run, from + size_t(r * cols) * elemBytes, run);
      if (order == PackedOrder::Mma)
        packMmaSteps(to, out, 1, rows, tile);
      else if (order == PackedOrder::Int8)
        packInt8Steps(to, out, 1, rows, tile);
    }
  };
  // A thread per ~8 MB at most: below that, starting threads costs more
  // than the copy.
  constexpr size_t kBytesPerThread = size_t(8) << 20;
  unsigned hw = threads ? threads : std::thread::hardware_concurrency();
  const int64_t byBytes = int64_t(size_t(blocks) * blockBytes / kBytesPerThread);
  const int64_t workers = std::max<int64_t>(
      1, std::min<int64_t>({int64_t(hw ? hw : 1), blocks, threads ? blocks : byBytes}));
  const int64_t per = (blocks + workers - 1) / workers;
  // Every allocation before the first thread (a bad_alloc then leaves no
  // thread to join): the workers' gather buffers and the pool.
  const size_t bufBytes = order == PackedOrder::None ? 0 : blockBytes;
  std::vector<uint8_t> buffers(size_t(workers) * bufBytes);
  std::vector<std::thread> pool;
  pool.reserve(size_t(workers));
  for (int64_t w = 1; w * per < blocks; ++w) {
    const int64_t b = w * per, e = std::min(blocks, b + per);
    uint8_t *buf = buffers.data() + size_t(w) * bufBytes;
    try {
      pool.emplace_back(layOut, b, e, buf);
    } catch (const std::system_error &) {
      layOut(b, e, buf); // no thread to be had: this one does the range
    }
  }
  layOut(0, std::min(blocks, per), buffers.data());
  for (std::thread &t : pool)
    t.join();
}

} // namespace mk::rt
