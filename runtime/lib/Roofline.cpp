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
    b.weights += bytes;
  }
  for (const TensorDesc &t : stateTensors(cfg, ctxLen)) {
    bool cache = t.name.find("c_kv") != std::string::npos ||
                 t.name.find("k_rope") != std::string::npos;
    if (cache)
      b.mlaCache += double(t.bytes()) + double(t.bytes()) / double(ctxLen ? ctxLen : 1);
    else
      b.kdaState += 2.0 * double(t.bytes());
  }
  return b;
}

} // namespace rt
} // namespace mk
