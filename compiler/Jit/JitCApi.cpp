//===- JitCApi.cpp - C API of the embedded JIT's compiler -----------------===//
//
// mk_jit.h over mk::jit::compileSpecToSource: the spec text is read by the
// spec reader (parseBlockSpec), the pipeline runs in process, and the kernel
// directory is written as mkc writes it (a source without its manifest is
// removed: a kernel without its manifest is not a product).
//
//===----------------------------------------------------------------------===//

#include "Jit/Jit.h"
#include "Jit/mk_jit.h"

#include "mk/BlockSpec.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace {
thread_local std::string lastError;

int fail(mk::rt::ErrorCode code, std::string message) {
  lastError = std::move(message);
  return static_cast<int>(code);
}

bool writeFile(const std::filesystem::path &path, const std::string &text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  return f.good();
}
} // namespace

extern "C" {

int mk_jit_compile_spec(const char *spec_json, const char *out_dir, const char *kernel_name,
                        long long target_sms) {
  return mk_jit_compile_spec_with(spec_json, out_dir, kernel_name, target_sms, nullptr);
}

int mk_jit_compile_spec_with(const char *spec_json, const char *out_dir, const char *kernel_name,
                             long long target_sms, const char *arithmetic) {
  using mk::rt::ErrorCode;
  lastError.clear();
  if (!spec_json)
    return fail(ErrorCode::InvalidArgument, "mk_jit_compile_spec: spec_json is NULL");
  if (!out_dir || !*out_dir)
    return fail(ErrorCode::InvalidArgument, "mk_jit_compile_spec: out_dir is NULL or empty");
  if (target_sms < 0)
    return fail(ErrorCode::InvalidArgument,
                "mk_jit_compile_spec: target_sms must be >= 0, got " +
                    std::to_string(target_sms));
  mk::BlockConfig cfg;
  std::string error;
  if (!mk::parseBlockSpec(spec_json, cfg, error))
    return fail(ErrorCode::InvalidArgument, "spec: " + error);
  mk::jit::JitOptions opts;
  if (kernel_name)
    opts.kernelName = kernel_name;
  opts.targetSms = target_sms;
  if (arithmetic)
    opts.arithmetic = arithmetic;
  mk::rt::KernelSource src;
  mk::rt::Status st = mk::jit::compileSpecToSource(cfg, opts, src);
  if (!st.isOk())
    return fail(st.code(), st.message());

  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec)
    return fail(ErrorCode::Io,
                std::string("cannot create directory ") + out_dir + ": " + ec.message());
  const std::string stem = src.sourceName.substr(0, src.sourceName.size() - 3); // ".cu"
  const fs::path cu = fs::path(out_dir) / src.sourceName;
  const fs::path mf = fs::path(out_dir) / (stem + ".manifest.json");
  if (!writeFile(cu, src.source))
    return fail(ErrorCode::Io, "cannot write " + cu.string() + ": " + std::strerror(errno));
  if (!writeFile(mf, src.manifestText)) {
    const int saved = errno;
    fs::remove(cu, ec);
    return fail(ErrorCode::Io, "cannot write " + mf.string() + ": " + std::strerror(saved));
  }
  return 0;
}

const char *mk_jit_last_error(void) { return lastError.c_str(); }

const char *mk_jit_version(void) { return MK_VERSION; }

} // extern "C"
