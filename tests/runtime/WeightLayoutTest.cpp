//===- WeightLayoutTest.cpp - Tile-contiguous repacking of weights --------===//

#include "mk/runtime/WeightLayout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

using namespace mk::rt;

TEST(WeightLayout, TilesAreContiguousRowsOfTheirColumns) {
  // [rows 3, cols 4] u8, tiles of 2: tile 0 holds columns 0-1 of every row,
  // then tile 1 columns 2-3.
  std::vector<uint8_t> src(12);
  std::iota(src.begin(), src.end(), 0); // src[r][c] = 4r + c
  std::vector<uint8_t> dst(12, 0xff);
  tileColumns(src.data(), dst.data(), {3, 4}, 2, 1);
  EXPECT_EQ(dst, (std::vector<uint8_t>{0, 1, 4, 5, 8, 9, 2, 3, 6, 7, 10, 11}));
}

TEST(WeightLayout, ExpertsAndWideElementsStayInTheirOwnBlock) {
  // [experts 2, rows 2, cols 4] bf16-sized (2-byte) elements, tiles of 2.
  const std::vector<int64_t> shape = {2, 2, 4};
  std::vector<uint16_t> src(16), dst(16, 0xffff);
  for (int e = 0; e < 2; ++e)
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 4; ++c)
        src[size_t((e * 2 + r) * 4 + c)] = uint16_t(1000 * e + 10 * r + c);
  tileColumns(src.data(), dst.data(), shape, 2, sizeof(uint16_t));
  for (int e = 0; e < 2; ++e)
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 4; ++c) {
        const size_t at = size_t(e * 8 + (c / 2) * 4 + r * 2 + c % 2);
        EXPECT_EQ(dst[at], 1000 * e + 10 * r + c) << e << " " << r << " " << c;
      }
}

TEST(WeightLayout, OneTileIsTheIdentity) {
  std::vector<uint8_t> src(24), dst(24);
  std::iota(src.begin(), src.end(), 1);
  tileColumns(src.data(), dst.data(), {4, 6}, 6, 1);
  EXPECT_EQ(src, dst);
}

/// Packs `blocks` tiles of `rows` x `tile` bytes (tile[r][c] a function of
/// (block, r, c)) and emulates the tensor-core tile's reads: lane 4g + t of
/// step s, half h loads 16 bytes at s*1024 + h*512 + lane*16 and must see
/// rows R s + 8 (g / P) + 4h + t (R = 1024 / tile rows per step, P = tile / 16
/// column groups), columns 16 (g % P)...; every byte is read exactly once.
static void expectMmaStepOrder(int64_t tile, int64_t blocks, int64_t rows) {
  std::vector<uint8_t> tiled(size_t(blocks * rows * tile)), packed(tiled.size());
  auto at = [](int64_t b, int64_t r, int64_t c) { return uint8_t((b * 97 + r * 13 + c * 3) & 0xff); };
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < tile; ++c)
        tiled[size_t((b * rows + r) * tile + c)] = at(b, r, c);
  packMmaSteps(tiled.data(), packed.data(), blocks, rows, tile);
  // Undo the nibble order within words (checked on its own below).
  for (size_t i = 0; i < packed.size(); i += 4) {
    uint32_t w = 0;
    for (int j = 0; j < 4; ++j)
      w |= uint32_t(packed[i + j]) << (8 * j);
    for (int j = 0; j < 4; ++j)
      packed[i + j] = uint8_t(((w >> (4 * j)) & 15) | ((w >> (16 + 4 * j)) & 15) << 4);
  }
  const int64_t stepRows = kPackedStepBytes / tile, groups = tile / 16;
  std::vector<int> seen(tiled.size(), 0);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t s = 0; s < rows / stepRows; ++s)
      for (int h = 0; h < 2; ++h)
        for (int lane = 0; lane < 32; ++lane)
          for (int i = 0; i < 16; ++i) {
            const int64_t g = lane / 4, t = lane % 4;
            const int64_t r = stepRows * s + 8 * (g / groups) + 4 * h + t;
            const int64_t c = 16 * (g % groups) + i;
            ASSERT_EQ(packed[size_t(b * rows * tile + s * kPackedStepBytes + h * 512 + lane * 16 + i)],
                      at(b, r, c))
                << "tile " << tile << ": " << b << " " << s << " " << h << " " << lane << " " << i;
            ++seen[size_t((b * rows + r) * tile + c)];
          }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
}

TEST(WeightLayout, MmaStepOrderIsWhatEachLaneLoads) {
  expectMmaStepOrder(128, 2, 16); // a step: 8 rows x 128 columns
}

TEST(WeightLayout, MmaStepOrderOf64WideTiles) {
  expectMmaStepOrder(64, 3, 32); // a step: 16 rows (two k-subslices) x 64 columns
}

/// Emulates the integer tile (templates/w4a16_gemv.cuh,
/// w4a16_gemv_tile_int8) on packInt8Steps' output for one warp: lane 4g + t
/// takes its 16-byte pieces of each step, splits every word into the A
/// fragments W & 0x0f0f0f0f (row g) and W & 0xf0f0f0f0 (row g + 8, 16 q),
/// builds B variant m % 4 (columns 2v, 2v + 1: xh, xl), and the
/// mma.m16n8k32 fragment rules (A: reg j holds row g + 8 (j % 2), k = 4t +
/// 16 (j / 2) + byte; B: reg j holds column g, k = 4t + 16 j + byte; D: c0,
/// c1 row g columns 2t, 2t + 1; c2, c3 row g + 8) give each lane the xh and
/// xl sums of its columns (tile / 32) * lane + j, which must equal the
/// direct integer dot products for every column.
static void expectInt8TileSums(int64_t tile, uint64_t seed) {
  const int64_t rows = 64, pairs = rows / 2; // two steps
  std::vector<uint8_t> tiled(size_t(pairs * tile)), packed(tiled.size());
  uint64_t st = seed;
  auto rnd = [&] { st = st * 6364136223846793005ull + 1442695040888963407ull; return uint32_t(st >> 33); };
  for (uint8_t &b : tiled)
    b = uint8_t(rnd());
  std::vector<int> xh(rows), xl(rows);
  for (int64_t k = 0; k < rows; ++k)
    xh[size_t(k)] = int(rnd() % 255) - 127, xl[size_t(k)] = int(rnd() % 255) - 127;
  packInt8Steps(tiled.data(), packed.data(), 1, pairs, tile);
  auto q = [&](int64_t k, int64_t c) {
    const uint8_t b = tiled[size_t((k / 2) * tile + c)];
    return int(k % 2 ? b >> 4 : b & 15);
  };
  auto byteOf = [](uint32_t w, int b) { return int((w >> (8 * b)) & 0xff); };
  auto sbyte = [](int v) { return uint32_t(uint8_t(int8_t(v))); };
  const int64_t cpl = tile / 32, mt = tile / 16;
  for (int64_t s = 0; s < rows / 32; ++s) {
    // Every lane's words of this step.
    uint32_t words[32][8][2];
    for (int lane = 0; lane < 32; ++lane)
      for (int64_t m = 0; m < mt; ++m)
        for (int w = 0; w < 2; ++w) {
          uint32_t v = 0;
          for (int b = 0; b < 4; ++b)
            v |= uint32_t(packed[size_t(s * 16 * tile + (m / 2) * 512 + lane * 16 + (m % 2) * 8 +
                                        w * 4 + b)])
                 << (8 * b);
          words[lane][m][w] = v;
        }
    // A[m][row][k] and B[v][k][n] as the fragments give them.
    auto A = [&](int64_t m, int row, int k) {
      const int g = row % 8, hi = row / 8, t = (k % 16) / 4, w = k / 16;
      const uint32_t W = words[4 * g + t][m][w] & (hi ? 0xf0f0f0f0u : 0x0f0f0f0fu);
      return byteOf(W, k % 4);
    };
    auto B = [&](int v, int k, int n) {
      const int g = n, t = (k % 16) / 4, j = k / 16;
      if (g / 2 != v)
        return 0;
      const int64_t r = s * 32 + 4 * t + 16 * j + k % 4;
      return int(int8_t(byteOf(sbyte(g % 2 ? xl[size_t(r)] : xh[size_t(r)]), 0)));
    };
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, t = lane % 4;
      for (int64_t h = 0; h < tile / 64; ++h) {
        // c[i]: D of set h (tiles 4h..4h+3 summed) at (row g + 8 (i / 2), column 2t + i % 2).
        for (int i = 0; i < 4; ++i) {
          const int row = g + 8 * (i / 2), n = 2 * t + i % 2;
          long d = 0;
          for (int v = 0; v < 4; ++v)
            for (int k = 0; k < 32; ++k)
              d += long(A(4 * h + v, row, k)) * B(v, k, n);
          const int64_t col = cpl * lane + 2 * h + i / 2;
          long want = 0;
          for (int k = 0; k < 32; ++k)
            want += long(q(s * 32 + k, col)) * (i % 2 ? xl : xh)[size_t(s * 32 + k)];
          ASSERT_EQ(d, want * (i / 2 ? 16 : 1))
              << "tile " << tile << " step " << s << " lane " << lane << " set " << h << " c" << i;
        }
      }
    }
  }
}

TEST(WeightLayout, Int8StepOrderGivesEachLaneItsColumnSums) {
  expectInt8TileSums(128, 1);
  expectInt8TileSums(64, 2);
}

TEST(WeightLayout, Int8StepOrderMovesEveryByteOnce) {
  for (int64_t tile : {128, 64}) {
    std::vector<int> seen(size_t(16 * tile), 0);
    for (int64_t m = 0; m < tile / 16; ++m)
      for (int64_t g = 0; g < 8; ++g)
        for (int64_t k = 0; k < 32; ++k)
          ++seen[size_t(int8StepByte(tile, m, g, k))];
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; })) << tile;
    std::vector<int> cols(size_t(tile), 0);
    for (int64_t m = 0; m < tile / 16; ++m)
      for (int64_t r = 0; r < 16; ++r)
        ++cols[size_t(int8Column(tile, m, r))];
    EXPECT_TRUE(std::all_of(cols.begin(), cols.end(), [](int n) { return n == 1; })) << tile;
  }
}

TEST(WeightLayout, MmaWordNibblesPutColumnJAtBits4JAnd16Plus4J) {
  uint8_t w[4] = {0x21, 0x43, 0x65, 0x87}; // column j: lo = 2j + 1, hi = 2j + 2
  packMmaWordNibbles(w);
  const uint32_t v = uint32_t(w[0]) | uint32_t(w[1]) << 8 | uint32_t(w[2]) << 16 | uint32_t(w[3]) << 24;
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ((v >> (4 * j)) & 15, uint32_t(2 * j + 1)) << j;
    EXPECT_EQ((v >> (16 + 4 * j)) & 15, uint32_t(2 * j + 2)) << j;
  }
}

TEST(WeightLayout, MmaWordNibblesOfEveryByteValue) {
  // Byte j = lo | hi << 4 must leave lo at bits 4j and hi at 16 + 4j, for
  // every byte value in every position.
  for (int v = 0; v < 256; ++v)
    for (int j = 0; j < 4; ++j) {
      uint8_t w[4] = {0x5a, 0xc3, 0x96, 0x3c};
      w[j] = uint8_t(v);
      const uint8_t before[4] = {w[0], w[1], w[2], w[3]};
      packMmaWordNibbles(w);
      const uint32_t out = uint32_t(w[0]) | uint32_t(w[1]) << 8 | uint32_t(w[2]) << 16 |
                           uint32_t(w[3]) << 24;
      for (int i = 0; i < 4; ++i) {
        ASSERT_EQ((out >> (4 * i)) & 15, uint32_t(before[i] & 15)) << v << " at " << j;
        ASSERT_EQ((out >> (16 + 4 * i)) & 15, uint32_t(before[i] >> 4)) << v << " at " << j;
      }
    }
}

/// layoutTiledWeight against its definition: tileColumns, then the order's
/// packing, for any thread count.
static void expectLayoutIsTileThenPack(const std::vector<int64_t> &shape, int64_t tile,
                                       size_t elemBytes, PackedOrder order) {
  size_t bytes = elemBytes;
  for (int64_t d : shape)
    bytes *= size_t(d);
  std::vector<uint8_t> src(bytes), tiled(bytes), want(bytes);
  uint32_t st = 12345;
  for (uint8_t &b : src)
    b = uint8_t((st = st * 1664525u + 1013904223u) >> 24);
  tileColumns(src.data(), tiled.data(), shape, tile, elemBytes);
  const int64_t rows = shape[shape.size() - 2], blocks = int64_t(bytes) / (rows * tile);
  if (order == PackedOrder::Mma)
    packMmaSteps(tiled.data(), want.data(), blocks, rows, tile);
  else if (order == PackedOrder::Int8)
    packInt8Steps(tiled.data(), want.data(), blocks, rows, tile);
  else
    want = tiled;
  for (unsigned threads : {1u, 2u, 3u, 7u, 64u, 0u}) {
    std::vector<uint8_t> got(bytes, 0xee);
    layoutTiledWeight(src.data(), got.data(), shape, tile, elemBytes, order, threads);
    ASSERT_EQ(got, want) << "order " << int(order) << " tile " << tile << " threads " << threads;
  }
}

TEST(WeightLayout, OnePassLayoutIsTileThenPack) {
  // w_q of 3 experts x 64 row pairs x 512 columns, both int4 orders.
  expectLayoutIsTileThenPack({3, 64, 512}, 128, 1, PackedOrder::Mma);
  expectLayoutIsTileThenPack({3, 64, 512}, 64, 1, PackedOrder::Mma);
  expectLayoutIsTileThenPack({2, 32, 384}, 128, 1, PackedOrder::Int8);
  expectLayoutIsTileThenPack({2, 32, 384}, 64, 1, PackedOrder::Int8);
  // Scales and zeros: bf16, tiled only; a rank-2 tensor.
  expectLayoutIsTileThenPack({5, 18, 256}, 64, 2, PackedOrder::None);
  expectLayoutIsTileThenPack({18, 2304}, 128, 2, PackedOrder::None);
}

TEST(WeightLayout, OnePassLayoutSplitsLargeTensorsOverThreads) {
  // 24 MB: three or more 8 MB shares with the hardware's thread count; the
  // bytes must be the single-threaded ones.
  const std::vector<int64_t> shape = {8, 1536, 2048};
  const size_t bytes = size_t(8) * 1536 * 2048;
  std::vector<uint8_t> src(bytes), one(bytes), all(bytes);
  for (size_t i = 0; i < bytes; ++i)
    src[i] = uint8_t((i * 2654435761u) >> 11);
  layoutTiledWeight(src.data(), one.data(), shape, 128, 1, PackedOrder::Mma, 1);
  layoutTiledWeight(src.data(), all.data(), shape, 128, 1, PackedOrder::Mma, 0);
  EXPECT_EQ(one, all);
}
