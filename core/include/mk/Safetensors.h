//===- Safetensors.h - Host tensors and the safetensors format ---*- C++ -*-===//
//
// HostTensor (a TensorDesc plus its bytes) is the host-side currency of the
// oracle, the test-data generator and the runtime's weight loading. The
// safetensors functions read and write the real format (8-byte little-endian
// header length, a JSON header of {"name": {"dtype", "shape",
// "data_offsets"}} plus optional "__metadata__", then the raw data), with the
// dtypes "U8", "BF16", "F32" and "I32".
//
// The checking loader compares a file against the tensors a BlockConfig
// expects and reports every problem by name; it is all-or-nothing.
//
//===----------------------------------------------------------------------===//

#ifndef MK_SAFETENSORS_H
#define MK_SAFETENSORS_H

#include "mk/BFloat16.h"
#include "mk/BlockConfig.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mk {

/// A dense row-major tensor in host memory.
struct HostTensor {
  TensorDesc desc;
  std::vector<uint8_t> data; // desc.bytes() bytes

  HostTensor() = default;
  /// A zero-filled tensor of `d`'s shape.
  explicit HostTensor(TensorDesc d);

  int64_t numel() const { return desc.numel(); }
  const std::vector<int64_t> &shape() const { return desc.shape; }

  /// Typed views; abort with a message naming the tensor on a dtype mismatch.
  uint8_t *u8();
  const uint8_t *u8() const;
  BFloat16 *bf16();
  const BFloat16 *bf16() const;
  float *f32();
  const float *f32() const;
  int32_t *i32();
  const int32_t *i32() const;

  /// Every element converted to float (u8 and i32 by value).
  std::vector<float> toFloat() const;
};

/// Tensors keyed by the spec's names (parameterTensors / stateTensors).
using TensorMap = std::map<std::string, HostTensor>;

/// "U8", "BF16", "F32", "I32" and back.
const char *safetensorsDTypeName(DType t);
bool parseSafetensorsDType(const std::string &s, DType &out);

/// Serializes `tensors` (in the order given; names must be unique) with
/// optional string metadata. Data are stored 8-byte aligned, as the format's
/// reference writer does.
std::vector<uint8_t>
encodeSafetensors(const std::vector<const HostTensor *> &tensors,
                  const std::map<std::string, std::string> &metadata = {});

/// Writes `tensors` (map order) to `path`. On failure returns false with a
/// one-line error naming the path and the reason.
bool writeSafetensors(const std::string &path, const TensorMap &tensors,
                      std::string &error,
                      const std::map<std::string, std::string> &metadata = {});

/// Parses a whole file's bytes. On any problem returns false, leaves `out`
/// untouched and lists every problem found in `problems` (one line each).
bool decodeSafetensors(const std::vector<uint8_t> &bytes, TensorMap &out,
                       std::vector<std::string> &problems,
                       std::map<std::string, std::string> *metadata = nullptr);

/// Reads a safetensors file (no expectations about its contents).
bool readSafetensors(const std::string &path, TensorMap &out,
                     std::vector<std::string> &problems,
                     std::map<std::string, std::string> *metadata = nullptr);

/// Reads `path` and checks it holds exactly `expected` (names, dtypes,
/// shapes). Every problem is reported by tensor name: missing, unexpected,
/// wrong dtype, wrong shape, plus file-level problems (unreadable, truncated,
/// malformed header, offsets out of range). All or nothing: on any problem
/// `out` is left untouched.
bool loadCheckedSafetensors(const std::string &path,
                            const std::vector<TensorDesc> &expected,
                            TensorMap &out, std::vector<std::string> &problems);

/// Checks already loaded tensors against `expected`; same messages as above.
bool checkTensors(const TensorMap &tensors,
                  const std::vector<TensorDesc> &expected,
                  std::vector<std::string> &problems);

/// "[2304, 4096]".
std::string shapeString(const std::vector<int64_t> &shape);

} // namespace mk

#endif // MK_SAFETENSORS_H
