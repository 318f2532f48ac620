//===- ManifestWriter.cpp - The kernel's manifest (docs/kernel-abi.md) ----===//

#include "Emitter/EmitterImpl.h"

using namespace mk::emitter::detail;

/// An attribute of the kernel's `config` as JSON: dictionaries as objects,
/// arrays, i64 as integers, floats as numbers, strings, booleans; anything
/// else (unit) as null.
static llvm::json::Value attributeToJson(Attribute a) {
  if (auto d = dyn_cast<DictionaryAttr>(a)) {
    llvm::json::Object o;
    for (NamedAttribute e : d)
      o[e.getName().getValue()] = attributeToJson(e.getValue());
    return o;
  }
  if (auto arr = dyn_cast<ArrayAttr>(a)) {
    llvm::json::Array out;
    for (Attribute e : arr)
      out.push_back(attributeToJson(e));
    return out;
  }
  if (auto b = dyn_cast<BoolAttr>(a))
    return b.getValue();
  if (auto i = dyn_cast<IntegerAttr>(a))
    return i.getInt();
  if (auto f = dyn_cast<FloatAttr>(a))
    return f.getValueAsDouble();
  if (auto s = dyn_cast<StringAttr>(a))
    return s.getValue();
  return nullptr;
}

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
    // Each phase's static bytes: its tasks' weights and activations as the
    // schedule counts them (the summary's MB), not the attention's cache
    // rows, which grow with the context. mk-bench's per-phase floor.
    j.attributeArray("phase_bytes", [&] {
      for (PhaseOp ph : kernel.getBodyBlock().getOps<PhaseOp>())
        j.value(ph.getTaskBytes());
    });
    // A debug_capture kernel has one more before its capture copies, and
    // one more ends the step where a wait follows the schedule's last one.
    j.attribute("grid_barriers",
                kernel.getNumBarriers() + (debug ? 1 : 0) + (resetBarrier ? 1 : 0));
    j.attribute("counters", numCounters);
    j.attribute("debug_capture", debug);
    // The packed tiles' arithmetic (schedule-tile-weights): what a test
    // measuring router near ties needs to know the kernel declares.
    j.attribute("packed_arithmetic", kernel.getPackedArithmetic());
    // The config as the full spec (an accepted form, kernel-abi.md): the
    // kernel's `config` attribute, as the frontend read it.
    if (std::optional<DictionaryAttr> config = kernel.getConfig())
      j.attribute("config", attributeToJson(*config));
    j.attributeBegin("params");
    j.array([&] {
      if (kernel.getEmbedding()) {
        // The whole model: a token id in (by value), the next token out.
        param("token", "scalar", "i32", {});
        param("next_token", "output", "i32", {1});
      } else {
        param("hidden_in", "input", "bf16", {hidden});
        param("hidden_out", "output", "bf16", {hidden});
      }
      for (WeightOp w : weights) {
        StringRef n = w.getSymName();
        // Each tensor's storage, as its schedule.weight says.
        param(n, "weight", w.getDtype(), w.getShape(), w.getTile(),
              n.ends_with(".w_q") ? orderOf(n.drop_back(4)) : mk::PackedOrder::None);
      }
      for (BufferOp st : stateBuffers) {
        param(st.getSymName(), "state_in", st.getDtype(), st.getShape());
        param(st.getSymName(), "state_out", st.getDtype(), st.getShape());
      }
      param("ctx_len", "scalar", "i32", {});
      param("cache_capacity", "scalar", "i32", {});
      param("workspace", "workspace", "u8", {(int64_t)kernel.getWorkspaceBytes()});
      param("sync", "sync", "u8", {syncBytes});
      if (debug)
        param("debug", "debug", "u8", {debugBytes});
    });
    j.attributeEnd();
    // The whole model's logits: bf16 [vocab] at this offset of the workspace.
    if (std::optional<StringRef> l = kernel.getLogits()) {
      BufferOp lb = buffers.lookup(*l);
      j.attributeObject("logits", [&] {
        j.attribute("offset", (int64_t)lb.getOffset());
        j.attribute("count", lb.getShape()[0]);
      });
    }
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
