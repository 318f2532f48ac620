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
