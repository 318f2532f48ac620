//===- Roofline.h - Bytes per token and the HBM floor ------------*- C++ -*-===//
//
// The bytes one decode step must move across HBM (spec, "Cost per token"):
// every weight once, except routed experts, of which only n_active of
// n_experts are read; the KDA state read and written; the caches (MLA
// latent, GQA keys and values) read.
//
//===----------------------------------------------------------------------===//

#ifndef MK_RUNTIME_ROOFLINE_H
#define MK_RUNTIME_ROOFLINE_H

#include "mk/BlockConfig.h"

namespace mk {
namespace rt {

struct TokenBytes {
  double weights = 0;    ///< weights read (routed experts: n_active of them)
  double fixedState = 0; ///< state of fixed size (KDA S, conv windows), read + written
  double caches = 0;     ///< cache rows (MLA latent, GQA keys and values) read at this
                         ///< context, new row written
  double total() const { return weights + fixedState + caches; }
};

TokenBytes bytesPerToken(const BlockConfig &cfg, int64_t ctxLen);

/// The H200's measured device-to-device copy bandwidth (bytes/s).
constexpr double kH200Bandwidth = 4.3e12;

} // namespace rt
} // namespace mk

#endif // MK_RUNTIME_ROOFLINE_H
