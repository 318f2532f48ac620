//===- ManifestWriter.cpp - The kernel's manifest (docs/kernel-abi.md) ----===//

#include "Emitter/EmitterImpl.h"

using namespace mk::emitter::detail;

std::string Emitter::manifest(int64_t dynSmem, int64_t syncBytes) {
  std::string text;
  llvm::raw_string_ostream s(text);
  llvm::json::OStream j(s, 2);
  auto shape = [&](ArrayRef<int64_t> v) {
    j.array([&] {
      for (int64_t d : v)
        j.value(d);
    });
  };
  auto param = [&](StringRef name, StringRef role, StringRef dtype,
                   ArrayRef<int64_t> sh, int64_t tile = 0,
                   mk::PackedOrder order = mk::PackedOrder::None) {
    j.object([&] {
      j.attribute("name", name);
      j.attribute("role", role);
      j.attribute("dtype", dtype);
      j.attributeBegin("shape");
      shape(sh);
      j.attributeEnd();
      if (tile)
        j.attribute("tile", tile);
      if (order != mk::PackedOrder::None)
        j.attribute("order", order == mk::PackedOrder::Int8 ? "int8" : "mma");
    });
  };
  // A tile-contiguous W4A16 weight: its w_q, scales and zeros.
  auto tileOfTensor = [&](StringRef name) -> int64_t {
    auto [prefix, part] = name.rsplit('.');
    if (part != "w_q" && part != "scales" && part != "zeros")
      return 0;
    return tileOf(prefix);
  };
  j.object([&] {
    j.attribute("format", "mk-manifest-1");
    j.attribute("kernel", kernel.getSymName());
    j.attribute("source", (kernel.getSymName() + ".cu").str());
    j.attribute("threads_per_block", T);
    j.attribute("dynamic_shared_bytes", dynSmem);
    j.attribute("workspace_bytes", (int64_t)kernel.getWorkspaceBytes());
    j.attribute("sync_bytes", syncBytes);
    j.attribute("max_blocks", kMaxGrid);
    j.attribute("phases", kernel.getNumPhases());
    j.attributeArray("phase_names", [&] {
      for (PhaseOp ph : kernel.getBodyBlock().getOps<PhaseOp>())
        j.value(ph.getName());
    });
    // A debug_capture kernel has one more: before its capture copies.
    j.attribute("grid_barriers", kernel.getNumBarriers() + (debug ? 1 : 0));
    j.attribute("counters", numCounters);
    j.attribute("debug_capture", debug);
    // The config as the full spec (an accepted form, kernel-abi.md).
    std::string err;
    auto parsed = llvm::json::parse(blockConfigToJson(cfg));
    if (parsed)
      j.attribute("config", std::move(*parsed));
    else
      llvm::consumeError(parsed.takeError());
    j.attributeBegin("params");
    j.array([&] {
      param("hidden_in", "input", "bf16", {cfg.hidden});
      param("hidden_out", "output", "bf16", {cfg.hidden});
      for (const TensorDesc &t : parameterTensors(cfg))
        param(t.name, "weight", dtypeName(t.dtype), t.shape, tileOfTensor(t.name),
              StringRef(t.name).ends_with(".w_q") ? orderOf(StringRef(t.name).drop_back(4))
                                                  : mk::PackedOrder::None);
      for (const TensorDesc &t : stateTensors(cfg, -1)) {
        param(t.name, "state_in", dtypeName(t.dtype), t.shape);
        param(t.name, "state_out", dtypeName(t.dtype), t.shape);
      }
      param("ctx_len", "scalar", "i32", {});
      param("cache_capacity", "scalar", "i32", {});
      param("workspace", "workspace", "u8", {(int64_t)kernel.getWorkspaceBytes()});
      param("sync", "sync", "u8", {syncBytes});
      if (debug)
        param("debug", "debug", "u8", {debugBytes});
    });
    j.attributeEnd();
    if (debug) {
      j.attributeBegin("captures");
      j.array([&] {
        for (const Capture &c : captures)
          j.object([&] {
            j.attribute("name", c.name);
            j.attribute("dtype", c.dtype);
            j.attributeBegin("shape");
            shape(c.shape);
            j.attributeEnd();
            j.attribute("offset", c.offset);
          });
      });
      j.attributeEnd();
    }
  });
  s << "\n";
  return text;
}
