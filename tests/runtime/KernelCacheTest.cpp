//===- KernelCacheTest.cpp - Keys, atomic writes, corrupt entries ---------===//

#include "mk/runtime/KernelCache.h"
#include "mk/runtime/Sha256.h"

#include "ScopedTempDir.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace mk::rt;

namespace {

std::string readFile(const std::string &p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void writeFile(const std::string &p, const std::string &s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << s;
}

std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> out;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
        out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

} // namespace

TEST(Sha256, KnownVectors) {
  Sha256 a;
  EXPECT_EQ(a.hexDigest(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256 b;
  b.update("abc");
  EXPECT_EQ(b.hexDigest(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 c;
  c.update("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq");
  EXPECT_EQ(c.hexDigest(),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 d; // one million 'a', fed in odd-sized pieces
  std::string chunk(997, 'a');
  size_t left = 1000000;
  while (left) {
    size_t n = std::min(left, chunk.size());
    d.update(chunk.data(), n);
    left -= n;
  }
  EXPECT_EQ(d.hexDigest(),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(KernelCache, KeyDependsOnEveryInput) {
  std::vector<EmbeddedHeader> h = {{"mk/a.cuh", "int a;"}};
  std::vector<std::string> o = {"-arch=sm_90", "-std=c++17"};
  std::string base = KernelCache::makeKey("src", h, "sm_90", 12080, o);
  EXPECT_EQ(base.size(), 64u);
  EXPECT_EQ(base, KernelCache::makeKey("src", h, "sm_90", 12080, o));
  EXPECT_NE(base, KernelCache::makeKey("src2", h, "sm_90", 12080, o));
  EXPECT_NE(base, KernelCache::makeKey("src", h, "sm_120", 12080, o));
  EXPECT_NE(base, KernelCache::makeKey("src", h, "sm_90", 13000, o));
  auto o2 = o;
  o2.push_back("-lineinfo");
  EXPECT_NE(base, KernelCache::makeKey("src", h, "sm_90", 12080, o2));
  auto h2 = h;
  h2[0].text = "int b;";
  EXPECT_NE(base, KernelCache::makeKey("src", h2, "sm_90", 12080, o));
  auto h3 = h;
  h3[0].includeName = "mk/b.cuh";
  EXPECT_NE(base, KernelCache::makeKey("src", h3, "sm_90", 12080, o));
  // Field boundaries matter: ("ab", "c") is not ("a", "bc").
  std::vector<std::string> oa = {"ab", "c"}, ob = {"a", "bc"};
  EXPECT_NE(KernelCache::makeKey("s", h, "x", 1, oa),
            KernelCache::makeKey("s", h, "x", 1, ob));
}

TEST(KernelCache, DefaultDirHonoursEnvironment) {
  setenv("MK_CACHE_DIR", "/tmp/mk-cache-env-test", 1);
  EXPECT_EQ(KernelCache::defaultDir(), "/tmp/mk-cache-env-test");
  unsetenv("MK_CACHE_DIR");
  std::string d = KernelCache::defaultDir();
  EXPECT_NE(d.find("megakernel"), std::string::npos);
}

TEST(KernelCache, StoreLookupAndReplace) {
  mk::testing::ScopedTempDir tmp("mk-cache-test-");
  std::string dir = tmp.path() + "/nested/dir";
  KernelCache cache(dir);
  std::string key(64, 'a'), payload;
  EXPECT_EQ(cache.lookup(key, payload), KernelCache::LookupResult::Miss);
  std::string bin("\x7f" "ELF\0binary\n\nwith newlines", 27);
  ASSERT_TRUE(cache.store(key, bin).isOk());
  ASSERT_EQ(cache.lookup(key, payload), KernelCache::LookupResult::Hit);
  EXPECT_EQ(payload, bin);
  ASSERT_TRUE(cache.store(key, "second").isOk());
  ASSERT_EQ(cache.lookup(key, payload), KernelCache::LookupResult::Hit);
  EXPECT_EQ(payload, "second");
  // Only the entry remains: no temporary files left behind.
  std::vector<std::string> files = listDir(dir);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0], key + ".cubin");
}

TEST(KernelCache, CorruptEntriesAreDetected) {
  mk::testing::ScopedTempDir tmp("mk-cache-test-");
  KernelCache cache(tmp.path());
  std::string key(64, 'b'), payload, why;
  std::string bin(5000, 'x');
  for (size_t i = 0; i < bin.size(); ++i)
    bin[i] = char(i * 7);
  ASSERT_TRUE(cache.store(key, bin).isOk());
  std::string path = cache.pathFor(key);
  std::string good = readFile(path);

  // Truncated (a writer died mid-way without the rename protocol).
  writeFile(path, good.substr(0, good.size() - 100));
  EXPECT_EQ(cache.lookup(key, payload, &why), KernelCache::LookupResult::Corrupt);
  EXPECT_NE(why.find("length"), std::string::npos) << why;

  // One flipped payload byte.
  std::string flipped = good;
  flipped[flipped.size() - 10] ^= 1;
  writeFile(path, flipped);
  EXPECT_EQ(cache.lookup(key, payload, &why), KernelCache::LookupResult::Corrupt);
  EXPECT_NE(why.find("checksum"), std::string::npos) << why;

  // Garbage header, empty file, an entry of another key.
  writeFile(path, "garbage");
  EXPECT_EQ(cache.lookup(key, payload), KernelCache::LookupResult::Corrupt);
  writeFile(path, "");
  EXPECT_EQ(cache.lookup(key, payload), KernelCache::LookupResult::Corrupt);
  std::string other = good;
  other.replace(9, 64, std::string(64, 'c'));
  writeFile(path, other);
  EXPECT_EQ(cache.lookup(key, payload, &why), KernelCache::LookupResult::Corrupt);
  EXPECT_NE(why.find("another key"), std::string::npos) << why;

  // A store replaces the corrupt entry.
  ASSERT_TRUE(cache.store(key, bin).isOk());
  ASSERT_EQ(cache.lookup(key, payload), KernelCache::LookupResult::Hit);
  EXPECT_EQ(payload, bin);
}

TEST(KernelCache, UnwritableDirectoryIsAnError) {
  if (geteuid() == 0)
    GTEST_SKIP() << "root can write anywhere";
  KernelCache cache("/proc/mk-cannot-exist");
  Status st = cache.store(std::string(64, 'd'), "x");
  EXPECT_EQ(st.code(), ErrorCode::Io);
}
