//===- Kernel.cpp - A generated kernel, compiled for one architecture -----===//

#include "mk/runtime/Kernel.h"

#include <cstring>
#include <dirent.h>
#include <fstream>
#include <sstream>

namespace mk {
namespace rt {

namespace {
Status readFile(const std::string &path, std::string &out) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return makeError(ErrorCode::Io, "cannot read " + path + ": " +
                                        std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  out = ss.str();
  return Status::ok();
}

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
} // namespace

Status readKernelDir(const std::string &dir, const std::string &name,
                     KernelSource &out) {
  const std::string suffix = ".manifest.json";
  std::string manifestPath;
  if (!name.empty()) {
    manifestPath = dir + "/" + name + suffix;
  } else {
    DIR *d = opendir(dir.c_str());
    if (!d)
      return makeError(ErrorCode::Io, "cannot open kernel directory " + dir +
                                          ": " + std::strerror(errno));
    std::vector<std::string> found;
    while (dirent *e = readdir(d))
      if (endsWith(e->d_name, suffix))
        found.push_back(e->d_name);
    closedir(d);
    if (found.size() != 1)
      return makeError(ErrorCode::Io,
                       "kernel directory " + dir + " holds " +
                           std::to_string(found.size()) +
                           " *.manifest.json files; expected exactly one "
                           "(or name the kernel)");
    manifestPath = dir + "/" + found[0];
  }
  KernelSource src;
  MK_RETURN_IF_ERROR(readFile(manifestPath, src.manifestText));
  Manifest m;
  Status st = parseManifest(src.manifestText, m);
  if (!st.isOk())
    return makeError(st.code(), manifestPath + ": " + st.message());
  std::string sourceFile = m.source;
  if (sourceFile.empty()) {
    std::string base = manifestPath.substr(dir.size() + 1);
    sourceFile = base.substr(0, base.size() - suffix.size()) + ".cu";
  }
  MK_RETURN_IF_ERROR(readFile(dir + "/" + sourceFile, src.source));
  src.sourceName = sourceFile;
  out = std::move(src);
  return Status::ok();
}

Status Kernel::build(const KernelSource &src, const KernelBuildOptions &opts,
                     std::shared_ptr<Kernel> &out) {
  auto k = std::make_shared<Kernel>();
  MK_RETURN_IF_ERROR(parseManifest(src.manifestText, k->manifest_));
  k->manifestText_ = src.manifestText;
  if (opts.compile.arch.empty())
    return makeError(ErrorCode::InvalidArgument,
                     "no target architecture given (sm_XY)");
  k->arch_ = opts.compile.arch;
  std::vector<EmbeddedHeader> headers = opts.headers;
  if (opts.useEmbeddedTemplates)
    for (const EmbeddedHeader &h : kernelHeaders()) {
      bool overridden = false;
      for (const EmbeddedHeader &o : opts.headers)
        overridden |= o.includeName == h.includeName;
      if (!overridden)
        headers.push_back(h);
    }
  std::vector<std::string> options = nvrtcOptions(opts.compile);
  k->cacheKey_ = KernelCache::makeKey(src.source, headers, k->arch_,
                                      nvrtcVersionNumber(), options);
  KernelCache cache(opts.cacheDir);
  if (opts.useCache) {
    std::string why;
    switch (cache.lookup(k->cacheKey_, k->cubin_, &why)) {
    case KernelCache::LookupResult::Hit:
      k->fromCache_ = true;
      out = std::move(k);
      return Status::ok();
    case KernelCache::LookupResult::Corrupt:
      k->cacheNote_ = "rebuilt a corrupt cache entry (" + why + ")";
      break;
    case KernelCache::LookupResult::Miss:
      break;
    }
  }
  MK_RETURN_IF_ERROR(compileWithNvrtc(src.source, src.sourceName, headers,
                                      options, k->cubin_, k->log_));
  if (opts.useCache) {
    // A cache that cannot be written costs time, not correctness.
    Status st = cache.store(k->cacheKey_, k->cubin_);
    if (!st.isOk())
      k->cacheNote_ += (k->cacheNote_.empty() ? "" : "; ") + st.message();
  }
  out = std::move(k);
  return Status::ok();
}

Status buildKernelFromDir(const std::string &dir, const std::string &arch,
                          KernelBuildOptions opts, std::shared_ptr<Kernel> &out) {
  KernelSource src;
  MK_RETURN_IF_ERROR(readKernelDir(dir, "", src));
  opts.compile.arch = arch;
  return Kernel::build(src, opts, out);
}

} // namespace rt
} // namespace mk
