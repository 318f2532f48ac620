//===- Roofline.h - Bytes per token and the HBM floor ------------*- C++ -*-===//
//
// The bytes one decode step must move across HBM (spec, "Cost per token"):
// every weight once, except routed experts, of which only n_active of
// n_experts are read; the KDA state read and written; the MLA cache read.
//
//===----------------------------------------------------------------------===//

#ifndef MK_RUNTIME_ROOFLINE_H
#define MK_RUNTIME_ROOFLINE_H

#include "mk/BlockConfig.h"

namespace mk {
namespace rt {

struct TokenBytes {
  double weights = 0;    ///< weights read (routed experts: n_active of them)
  double kdaState = 0;   ///< S and conv windows, read + written
  double mlaCache = 0;   ///< cache rows read at this context, new row written
  double total() const { return weights + kdaState + mlaCache; }
};

TokenBytes bytesPerToken(const BlockConfig &cfg, int64_t ctxLen);

/// The H200's measured device-to-device copy bandwidth (bytes/s).
constexpr double kH200Bandwidth = 4.3e12;

} // namespace rt
} // namespace mk

#endif // MK_RUNTIME_ROOFLINE_H
