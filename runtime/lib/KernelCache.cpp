//===- KernelCache.cpp - On-disk cache of compiled kernels ----------------===//

#include "mk/runtime/KernelCache.h"

#include "mk/runtime/Sha256.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace mk {
namespace rt {

namespace {
const char kMagic[] = "MKCACHE1";

Status makeDirs(const std::string &path) {
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    cur = path.substr(0, pos);
    if (cur.empty())
      continue;
    if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
      return makeError(ErrorCode::Io, "cannot create cache directory " + cur +
                                          ": " + std::strerror(errno));
  }
  return Status::ok();
}

bool readWholeFile(const std::string &path, std::string &out) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return false;
  out.clear();
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
    out.append(buf, n);
  bool ok = !std::ferror(f);
  std::fclose(f);
  return ok;
}

std::string sha256Hex(const std::string &s) {
  Sha256 h;
  h.update(s);
  return h.hexDigest();
}
} // namespace

KernelCache::KernelCache(std::string dir)
    : dir_(dir.empty() ? defaultDir() : std::move(dir)) {}

std::string KernelCache::defaultDir() {
  if (const char *d = std::getenv("MK_CACHE_DIR"); d && *d)
    return d;
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/megakernel";
  const char *home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/megakernel";
}

std::string KernelCache::makeKey(const std::string &source,
                                 const std::vector<EmbeddedHeader> &headers,
                                 const std::string &arch, int nvrtcVersion,
                                 const std::vector<std::string> &options) {
  Sha256 h;
  h.updateField("mk-kernel-cache-1");
  h.updateField(source);
  h.updateField(std::to_string(headers.size()));
  for (const EmbeddedHeader &hdr : headers) {
    h.updateField(hdr.includeName);
    h.updateField(hdr.text);
  }
  h.updateField(arch);
  h.updateField(std::to_string(nvrtcVersion));
  h.updateField(std::to_string(options.size()));
  for (const std::string &o : options)
    h.updateField(o);
  return h.hexDigest();
}

std::string KernelCache::pathFor(const std::string &key) const {
  return dir_ + "/" + key + ".cubin";
}

KernelCache::LookupResult KernelCache::lookup(const std::string &key,
                                              std::string &payload,
                                              std::string *why) const {
  std::string data;
  if (!readWholeFile(pathFor(key), data))
    return LookupResult::Miss;
  auto corrupt = [&](const std::string &reason) {
    if (why)
      *why = reason;
    return LookupResult::Corrupt;
  };
  size_t nl = data.find('\n');
  if (nl == std::string::npos || nl > 256)
    return corrupt("no header line");
  // "<magic> <key> <length> <sha256>", parsed by hand: no iostreams on this
  // path (a locale facet resolved inside a dlopen'ed library with hidden
  // visibility has crashed Python hosts).
  std::vector<std::string> fields;
  {
    const std::string line = data.substr(0, nl);
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && line[i] == ' ')
        ++i;
      size_t j = i;
      while (j < line.size() && line[j] != ' ')
        ++j;
      if (j > i)
        fields.push_back(line.substr(i, j - i));
      i = j;
    }
  }
  if (fields.size() != 4 || fields[0] != kMagic)
    return corrupt("malformed header");
  const std::string &fileKey = fields[1], &sum = fields[3];
  long long len = -1;
  {
    char *end = nullptr;
    len = std::strtoll(fields[2].c_str(), &end, 10);
    if (!end || *end != '\0' || fields[2].empty())
      return corrupt("malformed header");
  }
  if (fileKey != key)
    return corrupt("entry holds another key");
  size_t bodyLen = data.size() - nl - 1;
  if (len < 0 || size_t(len) != bodyLen)
    return corrupt("length " + std::to_string(bodyLen) + ", header says " +
                   std::to_string(len));
  std::string body = data.substr(nl + 1);
  if (sha256Hex(body) != sum)
    return corrupt("checksum mismatch");
  payload = std::move(body);
  return LookupResult::Hit;
}

Status KernelCache::store(const std::string &key,
                          const std::string &payload) const {
  MK_RETURN_IF_ERROR(makeDirs(dir_));
  static std::atomic<unsigned> counter{0};
  std::string tmp = dir_ + "/." + key + ".tmp." + std::to_string(getpid()) +
                    "." + std::to_string(counter++);
  std::string header = std::string(kMagic) + " " + key + " " +
                       std::to_string(payload.size()) + " " +
                       sha256Hex(payload) + "\n";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return makeError(ErrorCode::Io, "cannot write cache entry " + tmp + ": " +
                                        std::strerror(errno));
  auto writeAll = [&](const std::string &s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t w = write(fd, s.data() + off, s.size() - off);
      if (w < 0) {
        if (errno == EINTR)
          continue;
        return false;
      }
      off += size_t(w);
    }
    return true;
  };
  bool ok = writeAll(header) && writeAll(payload) && fsync(fd) == 0;
  int err = errno;
  ok = (close(fd) == 0) && ok;
  if (!ok || rename(tmp.c_str(), pathFor(key).c_str()) != 0) {
    if (ok)
      err = errno;
    unlink(tmp.c_str());
    return makeError(ErrorCode::Io, "cannot write cache entry " + pathFor(key) +
                                        ": " + std::strerror(err));
  }
  return Status::ok();
}

} // namespace rt
} // namespace mk
