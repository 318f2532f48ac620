//===- Binding.h - Which buffer goes to which kernel parameter ---*- C++ -*-===//
//
// The manifest's params, sorted into what a session must provide: weights by
// name, state tensors (each an in/out pair), the hidden in/out, scalars and
// arenas. The checks of a bind (name, dtype, shape) live here, apart from the
// device, so that they are tested on machines without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef MK_RUNTIME_BINDING_H
#define MK_RUNTIME_BINDING_H

#include "mk/runtime/Manifest.h"

#include <map>
#include <string>
#include <vector>

namespace mk {
namespace rt {

struct StateSlot {
  /// Shape as in stateTensors(cfg, -1): caches have a -1 leading dim.
  TensorDesc desc;
  int inParam = -1, outParam = -1;
  bool isCache = false;
  /// Bytes of one cache row, or of the whole tensor when !isCache.
  int64_t rowBytes = 0;
  int64_t bytesFor(int64_t rows) const {
    return isCache ? rowBytes * rows : rowBytes;
  }
};

class BindingLayout {
public:
  static Status build(const Manifest &m, BindingLayout &out);

  /// Checks a weight bind. Errors (ErrorCode::Binding) name the tensor and
  /// say what was expected: "weight 'blocks.0.attn_norm': shape [2304]
  /// expected, got [2305]".
  Status checkWeight(const std::string &name, DType dtype,
                     const std::vector<int64_t> &shape, int &param) const;
  /// Checks a state tensor; a cache's leading dim must equal `rows`.
  Status checkState(const std::string &name, DType dtype,
                    const std::vector<int64_t> &shape, int64_t rows,
                    int &slot) const;

  std::vector<int> weightParams; ///< manifest order
  std::map<std::string, int> weightByName;
  std::map<std::string, TensorDesc> weightDescs;
  std::vector<StateSlot> state; ///< stateTensors(cfg) order
  std::map<std::string, int> stateByName;
  int input = -1, output = -1, workspace = -1, sync = -1, debug = -1;
  int ctxLen = -1, capacity = -1;
  /// The whole model's token id (a scalar), or -1.
  int token = -1;
};

/// Checks dtype and shape against `expected` (a -1 dim must equal `rows`).
/// `what` starts the message: "weight 'x'".
Status checkTensor(const std::string &what, DType expectedDtype,
                   const std::vector<int64_t> &expectedShape, int64_t rows,
                   DType dtype, const std::vector<int64_t> &shape);

} // namespace rt
} // namespace mk

#endif // MK_RUNTIME_BINDING_H
