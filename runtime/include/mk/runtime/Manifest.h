//===- Manifest.h - The kernel manifest (docs/kernel-abi.md) ----*- C++ -*-===//
//
// Everything the runtime needs to bind buffers and launch a generated kernel,
// read from the `<kernel>.manifest.json` the compiler writes. The runtime never
// parses CUDA. parseManifest checks the manifest against the block
// configuration it carries: every weight of parameterTensors(cfg) and every
// state tensor of stateTensors(cfg, rows) must be a parameter with the same
// shape and dtype, so a stale or hand-edited manifest fails here, not on the
// GPU.
//
//===----------------------------------------------------------------------===//

#ifndef MK_RUNTIME_MANIFEST_H
#define MK_RUNTIME_MANIFEST_H

#include "mk/BlockConfig.h"
#include "mk/PackedLayout.h"
#include "mk/runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mk {
namespace rt {

enum class ParamRole {
  Input,
  Output,
  Weight,
  StateIn,
  StateOut,
  Scalar,
  Workspace,
  Sync,
  Debug
};
const char *paramRoleName(ParamRole r);
bool parseParamRole(const std::string &s, ParamRole &out);

struct ManifestParam {
  std::string name;
  ParamRole role = ParamRole::Weight;
  DType dtype = DType::U8;
  /// A -1 dim is the cache row count (state caches only).
  std::vector<int64_t> shape;
  /// Weights only: > 0 when the kernel reads this tensor tile-contiguous,
  /// `tile` columns at a time ([..., cols/tile, rows, tile] for the logical
  /// [..., rows, cols]); the runtime repacks it when it is bound.
  int64_t tile = 0;
  /// With tile 128 or 64 on an int4 w_q: each tile's steps are further in
  /// the exact tensor-core tile's lane order (`"order": "mma"`,
  /// packMmaSteps) or the integer tile's (`"order": "int8"`, packInt8Steps).
  mk::PackedOrder order = mk::PackedOrder::None;
  /// True for a 32-bit integer kernel parameter, false for a device pointer.
  bool isScalar() const { return role == ParamRole::Scalar; }
};

/// One intermediate written into the debug arena (debug_capture mode).
struct Capture {
  std::string name;
  DType dtype = DType::BF16;
  std::vector<int64_t> shape;
  int64_t offset = 0; ///< bytes from the start of the debug arena
  int64_t numel() const;
  int64_t bytes() const { return numel() * dtypeBytes(dtype); }
};

struct Manifest {
  std::string format;
  std::string kernel; ///< the extern "C" __global__ function
  std::string source; ///< the .cu file, relative to the manifest
  int64_t threadsPerBlock = 0;
  int64_t dynamicSharedBytes = 0;
  int64_t workspaceBytes = 0;
  int64_t syncBytes = 0;
  int64_t phases = 0;
  int64_t gridBarriers = 0;
  int64_t counters = 0;
  /// Optional extension: the most blocks the kernel can use (0 = no limit).
  /// The grid is min(co-resident blocks, maxBlocks).
  int64_t maxBlocks = 0;
  bool debugCapture = false;
  /// Optional: the math of the kernel's packed int4 tiles ("exact", the
  /// spec's per-weight rounding; "scaled" / "folded", each group's scale
  /// applied to fp32 sums of unrounded weights). Default "exact".
  std::string packedArithmetic = "exact";
  int64_t debugBytes = 0; ///< the `debug` parameter's size
  BlockConfig config;
  std::vector<ManifestParam> params;
  std::vector<Capture> captures;
  /// The whole model (config.vocab > 0): its bf16 logits [vocab] lie at
  /// this offset of the workspace after a step ("logits": {"offset",
  /// "count"}); -1 for a block.
  int64_t logitsOffset = -1;

  /// Index into params of the parameter with this name and role, or -1.
  int findParam(const std::string &name, ParamRole role) const;
};

/// Parses and validates manifest text. On failure the Status (code Manifest)
/// names the first problem, e.g. "param 'blocks.0.attn_norm': shape [2304]
/// expected, manifest has [2305]".
Status parseManifest(const std::string &text, Manifest &out);

/// "[32, 128, 128]" (-1 printed as "rows").
std::string formatShape(const std::vector<int64_t> &shape);

} // namespace rt
} // namespace mk

#endif // MK_RUNTIME_MANIFEST_H
