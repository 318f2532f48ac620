//===- Nvrtc.cpp - Compiling kernels with NVRTC ---------------------------===//

#include "mk/runtime/Nvrtc.h"

#include <nvrtc.h>

#include <cstdlib>
#include <sys/stat.h>

#ifndef MK_DEFAULT_CUDA_ROOT
#define MK_DEFAULT_CUDA_ROOT "/usr/local/cuda"
#endif

namespace mk {
namespace rt {

namespace {
bool isDir(const std::string &p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Status nvrtcError(nvrtcResult r, const std::string &what) {
  return makeError(ErrorCode::Compile,
                   what + ": " + nvrtcGetErrorString(r));
}
} // namespace

const std::vector<EmbeddedHeader> &nvrtcShimHeaders() {
  static const char *text =
      "#pragma once\n"
      "// NVRTC has no libc: the runtime maps <stdint.h> to CCCL's types.\n"
      "#include <cuda/std/cstdint>\n"
      "using cuda::std::int8_t;\nusing cuda::std::int16_t;\n"
      "using cuda::std::int32_t;\nusing cuda::std::int64_t;\n"
      "using cuda::std::uint8_t;\nusing cuda::std::uint16_t;\n"
      "using cuda::std::uint32_t;\nusing cuda::std::uint64_t;\n"
      "using cuda::std::intptr_t;\nusing cuda::std::uintptr_t;\n";
  static const std::vector<EmbeddedHeader> shims = {{"stdint.h", text},
                                                    {"cstdint", text}};
  return shims;
}

std::vector<EmbeddedHeader> kernelHeaders() {
  std::vector<EmbeddedHeader> h = embeddedTemplates();
  for (const EmbeddedHeader &s : nvrtcShimHeaders())
    h.push_back(s);
  return h;
}

std::string defaultCudaRoot() {
  for (const char *var : {"MK_CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"}) {
    const char *v = std::getenv(var);
    if (v && *v)
      return v;
  }
  return MK_DEFAULT_CUDA_ROOT;
}

std::vector<std::string> nvrtcOptions(const CompileOptions &opts) {
  std::vector<std::string> o;
  o.push_back("-arch=" + opts.arch);
  o.push_back("-std=c++17");
  o.push_back("-default-device");
  if (opts.lineInfo)
    o.push_back("-lineinfo");
  std::string root = opts.cudaRoot.empty() ? defaultCudaRoot() : opts.cudaRoot;
  for (const std::string &dir : {root + "/include", root + "/include/cccl"})
    if (isDir(dir))
      o.push_back("-I" + dir);
  for (const std::string &e : opts.extraOptions)
    o.push_back(e);
  // $MK_NVRTC_OPTIONS (space-separated) is appended last: a knob for A/B
  // experiments on template variants (e.g. -DMK_GEMV_SIMT) without
  // regenerating kernels. It is part of the option list, hence of the cache key.
  if (const char *env = std::getenv("MK_NVRTC_OPTIONS")) {
    std::string cur;
    for (const char *c = env;; ++c) {
      if (*c == ' ' || *c == '\0') {
        if (!cur.empty())
          o.push_back(cur);
        cur.clear();
        if (!*c)
          break;
      } else {
        cur += *c;
      }
    }
  }
  return o;
}

int nvrtcVersionNumber() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
    return 0;
  return major * 1000 + minor * 10;
}

std::vector<int> nvrtcSupportedArchs() {
  int n = 0;
  if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0)
    return {};
  std::vector<int> archs(n);
  if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS)
    return {};
  return archs;
}

std::string archForComputeCapability(int major, int minor) {
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

Status compileWithNvrtc(const std::string &source, const std::string &name,
                        const std::vector<EmbeddedHeader> &headers,
                        const std::vector<std::string> &options,
                        std::string &cubin, std::string &log) {
  std::vector<const char *> hdrText, hdrName;
  for (const EmbeddedHeader &h : headers) {
    hdrText.push_back(h.text.c_str());
    hdrName.push_back(h.includeName.c_str());
  }
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, source.c_str(), name.c_str(),
                                     int(headers.size()), hdrText.data(),
                                     hdrName.data());
  if (r != NVRTC_SUCCESS)
    return nvrtcError(r, "nvrtcCreateProgram");
  std::vector<const char *> opts;
  for (const std::string &o : options)
    opts.push_back(o.c_str());
  nvrtcResult cr = nvrtcCompileProgram(prog, int(opts.size()), opts.data());
  size_t logSize = 0;
  log.clear();
  if (nvrtcGetProgramLogSize(prog, &logSize) == NVRTC_SUCCESS && logSize > 1) {
    log.resize(logSize);
    nvrtcGetProgramLog(prog, &log[0]);
    log.resize(logSize - 1);
  }
  Status st;
  if (cr != NVRTC_SUCCESS) {
    std::string opt;
    for (const std::string &o : options)
      opt += " " + o;
    st = makeError(ErrorCode::Compile, "NVRTC failed to compile " + name +
                                           " (options:" + opt + "):\n" + log);
  } else {
    size_t size = 0;
    r = nvrtcGetCUBINSize(prog, &size);
    if (r != NVRTC_SUCCESS || size == 0) {
      st = makeError(ErrorCode::Compile,
                     "NVRTC produced no CUBIN for " + name +
                         " (is -arch a real sm_XY architecture?)");
    } else {
      cubin.resize(size);
      r = nvrtcGetCUBIN(prog, &cubin[0]);
      if (r != NVRTC_SUCCESS)
        st = nvrtcError(r, "nvrtcGetCUBIN");
    }
  }
  nvrtcDestroyProgram(&prog);
  return st;
}

} // namespace rt
} // namespace mk
