//===- Status.cpp - Error codes and messages of the runtime ---------------===//

#include "mk/runtime/Status.h"

namespace mk {
namespace rt {

const char *errorCodeName(ErrorCode c) {
  switch (c) {
  case ErrorCode::Ok: return "ok";
  case ErrorCode::InvalidArgument: return "invalid argument";
  case ErrorCode::Manifest: return "manifest error";
  case ErrorCode::Compile: return "compile error";
  case ErrorCode::NoDriver: return "no CUDA driver";
  case ErrorCode::Cuda: return "CUDA error";
  case ErrorCode::Binding: return "binding error";
  case ErrorCode::CacheFull: return "cache full";
  case ErrorCode::NotBound: return "not bound";
  case ErrorCode::Io: return "I/O error";
  }
  return "unknown error";
}

std::string Status::toString() const {
  if (isOk())
    return "ok";
  return std::string(errorCodeName(code_)) + ": " + message_;
}

} // namespace rt
} // namespace mk
