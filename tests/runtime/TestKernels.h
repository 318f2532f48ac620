//===- TestKernels.h - Manifests and stub kernels for runtime tests -*- C++ -*-===//
//
// Runtime tests must not depend on the compiler (it needs MLIR): this builds
// a manifest that follows docs/kernel-abi.md for any BlockConfig, and the
// CUDA source of a small "stub" kernel with exactly that signature, whose
// behaviour is easy to check: hidden_out = hidden_in, a foreign state_in is
// copied to state_out (caches: rows [0, ctx_len)), and row ctx_len of every
// cache is filled with the byte (ctx_len & 0xff).
//
//===----------------------------------------------------------------------===//

#ifndef MK_TESTS_RUNTIME_TESTKERNELS_H
#define MK_TESTS_RUNTIME_TESTKERNELS_H

#include "mk/BlockConfig.h"
#include "mk/BlockSpec.h"
#include "mk/Json.h"

#include <string>
#include <vector>

namespace mk {
namespace testing {

/// The tiny spec of examples/specs/tiny.json.
inline BlockConfig tinyConfig() {
  BlockConfig c;
  c.name = "tiny";
  c.hidden = 256;
  c.kdaHeads = 2;
  c.kdaHeadDim = 32;
  c.shortConv = 4;
  c.mlaHeads = 2;
  c.kvLora = 128;
  c.qkNope = 32;
  c.qkRope = 16;
  c.vHead = 32;
  c.nExperts = 8;
  c.nActive = 2;
  c.nShared = 1;
  c.moeInter = 128;
  c.group = 32;
  return c;
}

struct TestManifestOptions {
  std::string kernel = "mk_test_stub";
  int threads = 128;
  int64_t workspaceBytes = 4096;
  int64_t syncBytes = 256;
  int64_t dynamicShared = 0;
  bool debugCapture = false;
  int64_t debugBytes = 0;
};

inline json::Value tensorParam(const std::string &name, const char *role,
                               DType dt, const std::vector<int64_t> &shape) {
  json::Value p = json::Value::makeObject();
  p.set("name", json::Value::fromString(name));
  p.set("role", json::Value::fromString(role));
  p.set("dtype", json::Value::fromString(dtypeName(dt)));
  json::Value s = json::Value::makeArray();
  for (int64_t d : shape)
    s.push(json::Value::fromInt(d));
  p.set("shape", std::move(s));
  return p;
}

/// A manifest object for `cfg`: params in the ABI order (hidden in/out,
/// weights, state pairs, scalars, arenas).
inline json::Value makeManifestValue(const BlockConfig &cfg,
                                     const TestManifestOptions &o = {}) {
  json::Value m = json::Value::makeObject();
  m.set("format", json::Value::fromString("mk-manifest-1"));
  m.set("kernel", json::Value::fromString(o.kernel));
  m.set("source", json::Value::fromString(o.kernel + ".cu"));
  m.set("threads_per_block", json::Value::fromInt(o.threads));
  m.set("dynamic_shared_bytes", json::Value::fromInt(o.dynamicShared));
  m.set("workspace_bytes", json::Value::fromInt(o.workspaceBytes));
  m.set("sync_bytes", json::Value::fromInt(o.syncBytes));
  m.set("phases", json::Value::fromInt(1));
  m.set("grid_barriers", json::Value::fromInt(0));
  m.set("counters", json::Value::fromInt(0));
  m.set("debug_capture", json::Value::fromBool(o.debugCapture));
  // "config": the flat spec keys plus "pattern" (docs/kernel-abi.md).
  json::Value spec = blockConfigToJsonValue(cfg);
  json::Value conf = *spec.find("config");
  conf.set("pattern", *spec.find("pattern"));
  m.set("config", std::move(conf));
  json::Value params = json::Value::makeArray();
  params.push(tensorParam("hidden_in", "input", DType::BF16, {cfg.hidden}));
  params.push(tensorParam("hidden_out", "output", DType::BF16, {cfg.hidden}));
  for (const TensorDesc &t : parameterTensors(cfg))
    params.push(tensorParam(t.name, "weight", t.dtype, t.shape));
  for (const TensorDesc &t : stateTensors(cfg, -1)) {
    params.push(tensorParam(t.name, "state_in", t.dtype, t.shape));
    params.push(tensorParam(t.name, "state_out", t.dtype, t.shape));
  }
  params.push(tensorParam("ctx_len", "scalar", DType::I32, {}));
  params.push(tensorParam("cache_capacity", "scalar", DType::I32, {}));
  params.push(tensorParam("workspace", "workspace", DType::U8, {o.workspaceBytes}));
  params.push(tensorParam("sync", "sync", DType::U8, {o.syncBytes}));
  if (o.debugCapture)
    params.push(tensorParam("debug", "debug", DType::U8, {o.debugBytes}));
  m.set("params", std::move(params));
  m.set("captures", json::Value::makeArray());
  return m;
}

/// The member `key` of a JSON object (nullptr if absent), and its removal:
/// for tests that edit a valid manifest into a malformed one.
inline json::Value *member(json::Value &v, const std::string &key) {
  for (auto &kv : v.object)
    if (kv.first == key)
      return &kv.second;
  return nullptr;
}
inline void eraseMember(json::Value &v, const std::string &key) {
  for (auto it = v.object.begin(); it != v.object.end(); ++it)
    if (it->first == key) {
      v.object.erase(it);
      return;
    }
}

inline std::string makeManifest(const BlockConfig &cfg,
                                const TestManifestOptions &o = {}) {
  return json::write(makeManifestValue(cfg, o), 2);
}

/// CUDA source of the stub kernel matching makeManifest(cfg, o).
inline std::string makeStubKernelSource(const BlockConfig &cfg,
                                        const TestManifestOptions &o = {}) {
  std::string sig, body;
  int idx = 0;
  auto arg = [&](const std::string &decl) {
    sig += std::string(idx ? ",\n    " : "    ") + decl;
    ++idx;
  };
  arg("const unsigned short *__restrict__ hidden_in");
  arg("unsigned short *__restrict__ hidden_out");
  for (size_t i = 0; i < parameterTensors(cfg).size(); ++i)
    arg("const unsigned char *w" + std::to_string(i));
  int s = 0;
  for (const TensorDesc &t : stateTensors(cfg, -1)) {
    bool cache = t.shape[0] < 0;
    int64_t row = dtypeBytes(t.dtype);
    for (size_t d = cache ? 1 : 0; d < t.shape.size(); ++d)
      row *= t.shape[d];
    std::string in = "si" + std::to_string(s), out = "so" + std::to_string(s);
    arg("const unsigned char *" + in);
    arg("unsigned char *" + out);
    std::string rows = cache ? "(long long)ctx_len" : "1LL";
    body += "  if (" + in + " != " + out + ")\n    for (long long i = tid; i < " +
            rows + " * " + std::to_string(row) + "LL; i += nthreads) " + out +
            "[i] = " + in + "[i];\n";
    if (cache)
      body += "  for (long long i = tid; i < " + std::to_string(row) +
              "LL; i += nthreads) " + out + "[(long long)ctx_len * " +
              std::to_string(row) + "LL + i] = (unsigned char)(ctx_len & 0xff);\n";
    ++s;
  }
  arg("int ctx_len");
  arg("int cache_capacity");
  arg("unsigned char *workspace");
  arg("unsigned int *sync");
  if (o.debugCapture)
    arg("unsigned char *debug");
  std::string src = "// Stub kernel for runtime tests (tests/runtime/TestKernels.h)\n";
  src += "extern \"C\" __global__ void " + o.kernel + "(\n" + sig + ") {\n";
  src += "  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n";
  src += "  const long long nthreads = (long long)gridDim.x * blockDim.x;\n";
  src += "  if (ctx_len >= cache_capacity) return;\n";
  src += "  for (long long i = tid; i < " + std::to_string(cfg.hidden) +
         "; i += nthreads) hidden_out[i] = hidden_in[i];\n";
  src += body;
  src += "}\n";
  return src;
}

} // namespace testing
} // namespace mk

#endif // MK_TESTS_RUNTIME_TESTKERNELS_H
