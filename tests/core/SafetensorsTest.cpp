//===- SafetensorsTest.cpp - Round trips and every bad-file case ----------===//

#include "mk/Safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>

using namespace mk;

namespace {

HostTensor make(const std::string &name, DType dt, std::vector<int64_t> shape) {
  HostTensor t(TensorDesc{name, dt, std::move(shape)});
  for (size_t i = 0; i < t.data.size(); ++i)
    t.data[i] = uint8_t(i * 7 + name.size());
  return t;
}

TensorMap sample() {
  TensorMap m;
  for (HostTensor t : {make("a.w_q", DType::U8, {4, 3}),
                       make("a.scales", DType::BF16, {2, 3}),
                       make("s", DType::F32, {2, 2, 2}),
                       make("idx", DType::I32, {5}),
                       make("empty", DType::BF16, {0, 4})})
    m.emplace(t.desc.name, t);
  return m;
}

std::vector<TensorDesc> descs(const TensorMap &m) {
  std::vector<TensorDesc> d;
  for (const auto &kv : m)
    d.push_back(kv.second.desc);
  return d;
}

std::string tmp(const std::string &name) {
  return std::string(MK_TEST_TMPDIR) + "/" + name;
}

void writeBytes(const std::string &path, const std::vector<uint8_t> &b) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char *>(b.data()), std::streamsize(b.size()));
}

/// A file with a hand-written header and `dataBytes` zero bytes of data.
std::vector<uint8_t> rawFile(const std::string &header, size_t dataBytes) {
  std::vector<uint8_t> b(8 + header.size() + dataBytes, 0);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    b[i] = uint8_t(n >> (8 * i));
  if (!header.empty())
    std::memcpy(b.data() + 8, header.data(), header.size());
  return b;
}

std::vector<std::string> decodeProblems(const std::vector<uint8_t> &bytes) {
  TensorMap out;
  out.emplace("keep", make("keep", DType::U8, {1}));
  std::vector<std::string> problems;
  EXPECT_FALSE(decodeSafetensors(bytes, out, problems));
  EXPECT_EQ(out.size(), 1u); // untouched
  EXPECT_TRUE(out.count("keep"));
  return problems;
}

bool contains(const std::vector<std::string> &v, const std::string &s) {
  for (const std::string &x : v)
    if (x.find(s) != std::string::npos)
      return true;
  return false;
}

TEST(Safetensors, MemoryRoundTrip) {
  TensorMap m = sample();
  std::vector<const HostTensor *> list;
  for (const auto &kv : m)
    list.push_back(&kv.second);
  std::vector<uint8_t> bytes = encodeSafetensors(list, {{"k", "v\"x"}});
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  TensorMap back;
  std::vector<std::string> problems;
  std::map<std::string, std::string> meta;
  ASSERT_TRUE(decodeSafetensors(bytes, back, problems, &meta));
  EXPECT_EQ(meta.at("k"), "v\"x");
  ASSERT_EQ(back.size(), m.size());
  for (const auto &kv : m) {
    const HostTensor &b = back.at(kv.first);
    EXPECT_EQ(b.desc.dtype, kv.second.desc.dtype) << kv.first;
    EXPECT_EQ(b.desc.shape, kv.second.desc.shape) << kv.first;
    EXPECT_EQ(b.data, kv.second.data) << kv.first;
  }
  std::string header(bytes.begin() + 8, bytes.begin() + 8 + long(n));
  EXPECT_NE(header.find("\"dtype\":\"BF16\""), std::string::npos) << header;
}

TEST(Safetensors, FileRoundTripAndCheckedLoad) {
  TensorMap m = sample();
  std::string path = tmp("roundtrip.safetensors"), err;
  ASSERT_TRUE(writeSafetensors(path, m, err)) << err;
  TensorMap back;
  std::vector<std::string> problems;
  ASSERT_TRUE(loadCheckedSafetensors(path, descs(m), back, problems))
      << problems[0];
  EXPECT_EQ(back.at("s").data, m.at("s").data);
  EXPECT_EQ(back.at("s").f32()[1], m.at("s").f32()[1]);
}

TEST(Safetensors, CheckedLoadReportsEveryProblemByName) {
  TensorMap m = sample();
  std::string path = tmp("mismatch.safetensors"), err;
  ASSERT_TRUE(writeSafetensors(path, m, err)) << err;
  std::vector<TensorDesc> want = descs(m);
  for (TensorDesc &d : want) {
    if (d.name == "s")
      d.shape = {2, 4};
    if (d.name == "idx")
      d.dtype = DType::F32;
  }
  want.erase(std::remove_if(want.begin(), want.end(),
                            [](const TensorDesc &d) { return d.name == "empty"; }),
             want.end());
  want.push_back({"b.missing", DType::BF16, {3}});
  TensorMap out;
  std::vector<std::string> problems;
  EXPECT_FALSE(loadCheckedSafetensors(path, want, out, problems));
  EXPECT_TRUE(out.empty());
  ASSERT_EQ(problems.size(), 4u);
  EXPECT_TRUE(contains(problems, "tensor 's': shape [2, 2, 2], expected [2, 4]"));
  EXPECT_TRUE(contains(problems, "tensor 'idx': dtype I32, expected F32"));
  EXPECT_TRUE(contains(problems, "tensor 'b.missing': missing (expected BF16 [3])"));
  EXPECT_TRUE(contains(problems, "tensor 'empty': unexpected"));
  EXPECT_EQ(problems[0].rfind(path + ": ", 0), 0u) << problems[0];
}

TEST(Safetensors, UnreadableFile) {
  TensorMap out;
  std::vector<std::string> problems;
  EXPECT_FALSE(readSafetensors("/nonexistent/x.safetensors", out, problems));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0],
            "/nonexistent/x.safetensors: cannot open: No such file or directory");
}

TEST(Safetensors, TruncatedFile) {
  TensorMap m = sample();
  std::string path = tmp("trunc.safetensors"), err;
  ASSERT_TRUE(writeSafetensors(path, m, err));
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  bytes.resize(bytes.size() - 5);
  writeBytes(path, bytes);
  TensorMap out;
  std::vector<std::string> problems;
  EXPECT_FALSE(loadCheckedSafetensors(path, descs(m), out, problems));
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(contains(problems, "out of range")) << problems[0];
  EXPECT_TRUE(contains(problems, "truncated file?"));
}

TEST(Safetensors, ShortAndOversizedHeaders) {
  EXPECT_TRUE(contains(decodeProblems({1, 2, 3}),
                       "file is too short for the 8-byte header length (3 bytes)"));
  std::vector<uint8_t> b = rawFile("{}", 0);
  b[0] = 200; // header length 200 > file
  EXPECT_TRUE(contains(decodeProblems(b), "header length 200 exceeds the file size"));
}

TEST(Safetensors, MalformedHeaders) {
  EXPECT_TRUE(contains(decodeProblems(rawFile("{\"a\": ", 0)),
                       "malformed header: line 1, column 7"));
  EXPECT_TRUE(contains(decodeProblems(rawFile("[1]", 0)),
                       "malformed header: expected a JSON object"));
  auto p = decodeProblems(rawFile(
      R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
      R"("b":{"dtype":"U8","shape":[2.5],"data_offsets":[0,2]},)"
      R"("c":{"dtype":"U8","shape":[2],"data_offsets":[4,2]},)"
      R"("d":{"dtype":"U8","shape":[4],"data_offsets":[0,2]},)"
      R"("e":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"extra":1},)"
      R"("f":7,"__metadata__":{"x":1}})",
      8));
  EXPECT_EQ(p.size(), 7u);
  EXPECT_TRUE(contains(p, "tensor 'a': unsupported dtype 'F16'"));
  EXPECT_TRUE(contains(p, "tensor 'b': 'shape' must be an array"));
  EXPECT_TRUE(contains(p, "tensor 'c': 'data_offsets' must be [begin, end]"));
  EXPECT_TRUE(contains(p, "tensor 'd': data_offsets [0, 2] hold 2 bytes but U8 [4] needs 4"));
  EXPECT_TRUE(contains(p, "tensor 'e': unknown header field 'extra'"));
  EXPECT_TRUE(contains(p, "tensor 'f': header entry must be an object"));
  EXPECT_TRUE(contains(p, "__metadata__ value 'x' must be a string"));
}

TEST(Safetensors, CheckTensorsInMemory) {
  TensorMap m = sample();
  std::vector<std::string> problems;
  EXPECT_TRUE(checkTensors(m, descs(m), problems));
  m.at("s").data.pop_back();
  EXPECT_FALSE(checkTensors(m, descs(m), problems));
  EXPECT_TRUE(contains(problems, "tensor 's': holds 31 bytes"));
}

} // namespace
