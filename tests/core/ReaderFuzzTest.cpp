//===- ReaderFuzzTest.cpp - Seeded mutants of safetensors files ------------===//
//
// The safetensors reader takes files from users (checkpoints, the offline
// quantizer's output): every seeded mutant of a small valid file (its bytes,
// or its JSON header with the length prefix kept consistent, which reaches
// the checks past the header's framing) is decoded or refused with its
// problems listed, the output untouched; what decodes is well formed (it
// writes back and reads again as the same tensors and metadata). Mutator
// and knobs (MK_FUZZ_SEED, MK_FUZZ_ITERS): tests/support/FuzzMutator.h.
//
//===----------------------------------------------------------------------===//

#include "FuzzMutator.h"
#include "mk/Safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace mk;
using mk::testing::iterations;
using mk::testing::mutate;
using mk::testing::seedOr;

namespace {

HostTensor tensor(const std::string &name, DType dtype, std::vector<int64_t> shape) {
  TensorDesc d;
  d.name = name;
  d.dtype = dtype;
  d.shape = std::move(shape);
  HostTensor t(d);
  for (size_t i = 0; i < t.data.size(); ++i)
    t.data[i] = uint8_t(i * 37 + 11);
  return t;
}

/// The header (JSON text) and the data of a safetensors file.
struct Parts {
  std::string header, data;
};
Parts split(const std::vector<uint8_t> &file) {
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  const std::string all(file.begin(), file.end());
  return {all.substr(8, size_t(n)), all.substr(8 + size_t(n))};
}
std::vector<uint8_t> join(const std::string &header, const std::string &data) {
  std::vector<uint8_t> out(8);
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

} // namespace

TEST(Fuzz, SafetensorsDecoder) {
  const HostTensor a = tensor("blocks.0.w_q", DType::U8, {4, 6}),
                   b = tensor("blocks.0.scales", DType::BF16, {2, 3}),
                   c = tensor("state.0.S", DType::F32, {3}),
                   d = tensor("ids", DType::I32, {2, 2});
  const std::vector<uint8_t> f1 = encodeSafetensors({&a, &b, &c, &d}, {{"format", "pt"}});
  const std::vector<uint8_t> f2 = encodeSafetensors({&c, &a});
  const Parts p1 = split(f1), p2 = split(f2);
  std::mt19937_64 rng(seedOr(20261204));
  const int n = iterations(4000);
  int decoded = 0, refused = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<uint8_t> bytes;
    if (rng() % 2) { // the header's text, its length prefix kept consistent
      const std::string header = mutate(p1.header, p2.header, rng);
      bytes = join(header, rng() % 4 ? p1.data : p2.data);
    } else { // the file's bytes, length prefix and data included
      const std::string s = mutate(std::string(f1.begin(), f1.end()),
                                   std::string(f2.begin(), f2.end()), rng);
      bytes.assign(s.begin(), s.end());
    }
    TensorMap out;
    out.emplace("sentinel", c);
    std::vector<std::string> problems;
    std::map<std::string, std::string> metadata;
    if (decodeSafetensors(bytes, out, problems, &metadata)) {
      ++decoded;
      // What decodes is well formed: written back and read again, it is the
      // same tensors, bit for bit, and the same metadata.
      std::vector<const HostTensor *> back;
      for (const auto &[name, t] : out) {
        ASSERT_EQ(name, t.desc.name) << "mutant " << i;
        for (int64_t dim : t.desc.shape)
          ASSERT_GE(dim, 0) << "mutant " << i << ": " << name;
        back.push_back(&t);
      }
      TensorMap again;
      std::vector<std::string> againProblems;
      std::map<std::string, std::string> againMetadata;
      ASSERT_TRUE(decodeSafetensors(encodeSafetensors(back, metadata), again, againProblems,
                                    &againMetadata))
          << "mutant " << i << ": " << (againProblems.empty() ? "" : againProblems[0]);
      ASSERT_EQ(againMetadata, metadata) << "mutant " << i;
      ASSERT_EQ(again.size(), out.size()) << "mutant " << i;
      for (const auto &[name, t] : out) {
        const HostTensor &u = again.at(name);
        ASSERT_EQ(u.desc.dtype, t.desc.dtype) << "mutant " << i << ": " << name;
        ASSERT_EQ(u.desc.shape, t.desc.shape) << "mutant " << i << ": " << name;
        ASSERT_EQ(u.data, t.data) << "mutant " << i << ": " << name;
      }
      // A success replaces the output (no mutant names a tensor "sentinel").
      ASSERT_EQ(out.count("sentinel"), 0u) << "mutant " << i << ": the output was not replaced";
    } else {
      ++refused;
      ASSERT_FALSE(problems.empty()) << "mutant " << i << ": refused without a problem";
      for (const std::string &p : problems)
        ASSERT_FALSE(p.empty()) << "mutant " << i;
      ASSERT_EQ(out.size(), 1u) << "mutant " << i << ": the output changed on a failure";
      ASSERT_EQ(out.begin()->first, "sentinel") << "mutant " << i;
    }
  }
  // Both outcomes occur: the mutants reach past the framing.
  EXPECT_GT(decoded, 0);
  EXPECT_GT(refused, 0);
}
