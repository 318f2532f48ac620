//===- KernelCache.h - On-disk cache of compiled kernels ---------*- C++ -*-===//
//
// NVRTC takes seconds on a megakernel; the cache makes the second start
// instant. An entry is keyed by a SHA-256 over everything that determines the
// CUBIN (source, every header, architecture, NVRTC version, options) and
// stored as `<dir>/<key>.cubin`:
//
//   "MKCACHE1 <key> <payload length> <sha256 of payload>\n" <payload>
//
// Writes go to a unique temporary file that is renamed over the entry, so a
// reader sees the old entry or the new one, never half of one. A reader that
// finds a header that does not parse, another key, a wrong length or a wrong
// checksum treats the entry as absent (the caller recompiles and the store
// replaces it): an entry is never trusted because it exists.
//
//===----------------------------------------------------------------------===//

#ifndef MK_RUNTIME_KERNELCACHE_H
#define MK_RUNTIME_KERNELCACHE_H

#include "mk/runtime/Status.h"
#include "mk/runtime/Templates.h"

#include <string>
#include <vector>

namespace mk {
namespace rt {

class KernelCache {
public:
  /// `dir` empty: defaultDir().
  explicit KernelCache(std::string dir = "");

  /// $MK_CACHE_DIR, else $XDG_CACHE_HOME/megakernel, else
  /// ~/.cache/megakernel.
  static std::string defaultDir();

  static std::string makeKey(const std::string &source,
                             const std::vector<EmbeddedHeader> &headers,
                             const std::string &arch, int nvrtcVersion,
                             const std::vector<std::string> &options);

  enum class LookupResult { Hit, Miss, Corrupt };
  /// On Hit, `payload` holds the entry. Corrupt: the file exists but failed a
  /// check; `why` says which.
  LookupResult lookup(const std::string &key, std::string &payload,
                      std::string *why = nullptr) const;
  /// Atomically writes (or replaces) the entry.
  Status store(const std::string &key, const std::string &payload) const;

  std::string pathFor(const std::string &key) const;
  const std::string &dir() const { return dir_; }

private:
  std::string dir_;
};

} // namespace rt
} // namespace mk

#endif // MK_RUNTIME_KERNELCACHE_H
