//===- Status.h - Error codes and messages of the runtime -------*- C++ -*-===//
//
// The runtime reports failures as a Status (a code plus one readable line)
// rather than by exceptions: every failure has to cross the C API and ctypes
// unchanged, and the codes are the C API's codes.
//
//===----------------------------------------------------------------------===//

#ifndef MK_RUNTIME_STATUS_H
#define MK_RUNTIME_STATUS_H

#include <string>
#include <utility>

namespace mk {
namespace rt {

/// Values equal the C API's `mk_status` codes (mk.h).
enum class ErrorCode {
  Ok = 0,
  InvalidArgument = 1, ///< a null handle, an unknown name, a bad option
  Manifest = 2,        ///< the manifest is malformed or inconsistent
  Compile = 3,         ///< NVRTC rejected the kernel
  NoDriver = 4,        ///< libcuda.so.1 could not be loaded, or no GPU
  Cuda = 5,            ///< a CUDA driver call failed
  Binding = 6,         ///< a tensor's name, shape or dtype disagrees
  CacheFull = 7,       ///< ctx_len would reach the cache capacity
  NotBound = 8,        ///< a weight or state tensor was never bound
  Io = 9,              ///< a file could not be read or written
};

const char *errorCodeName(ErrorCode c);

class Status {
public:
  Status() = default;
  Status(ErrorCode code, std::string message)
      : code_(code), message_(std::move(message)) {}
  static Status ok() { return Status(); }

  bool isOk() const { return code_ == ErrorCode::Ok; }
  explicit operator bool() const { return isOk(); }
  ErrorCode code() const { return code_; }
  const std::string &message() const { return message_; }
  /// "<code name>: <message>", or "ok".
  std::string toString() const;

private:
  ErrorCode code_ = ErrorCode::Ok;
  std::string message_;
};

inline Status makeError(ErrorCode c, std::string msg) {
  return Status(c, std::move(msg));
}

} // namespace rt
} // namespace mk

/// Returns from the enclosing function if `expr` yields a failed Status.
#define MK_RETURN_IF_ERROR(expr)                                               \
  do {                                                                         \
    ::mk::rt::Status mkStatus_ = (expr);                                       \
    if (!mkStatus_.isOk())                                                     \
      return mkStatus_;                                                        \
  } while (0)

#endif // MK_RUNTIME_STATUS_H
