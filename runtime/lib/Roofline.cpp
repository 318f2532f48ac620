//===- Roofline.cpp - Bytes per token and the HBM floor -------------------===//

#include "mk/runtime/Roofline.h"

namespace mk {
namespace rt {

TokenBytes bytesPerToken(const BlockConfig &cfg, int64_t ctxLen) {
  TokenBytes b;
  for (const TensorDesc &t : parameterTensors(cfg)) {
    double bytes = double(t.bytes());
    bool routed = t.name.find(".moe.gate.") != std::string::npos ||
                  t.name.find(".moe.up.") != std::string::npos ||
                  t.name.find(".moe.down.") != std::string::npos;
    if (routed && cfg.nExperts > 0)
      bytes = bytes * double(cfg.nActive) / double(cfg.nExperts);
    // The whole model reads one row of its embedding per token.
    if (t.name == "embed.weight")
      bytes = double(cfg.hidden) * 2;
    b.weights += bytes;
  }
  // A cache is a state whose row count is the context (-1 in the catalogue).
  const std::vector<TensorDesc> shapes = stateTensors(cfg, -1);
  const std::vector<TensorDesc> sized = stateTensors(cfg, ctxLen);
  for (size_t i = 0; i < sized.size(); ++i) {
    const TensorDesc &t = sized[i];
    if (!shapes[i].shape.empty() && shapes[i].shape[0] < 0)
      b.caches += double(t.bytes()) + double(t.bytes()) / double(ctxLen ? ctxLen : 1);
    else
      b.fixedState += 2.0 * double(t.bytes());
  }
  return b;
}

} // namespace rt
} // namespace mk
