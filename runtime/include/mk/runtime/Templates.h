//===- Templates.h - templates/*.cuh embedded at build time ------*- C++ -*-===//
//
// Generated kernels #include "mk/<header>.cuh". The build embeds every file of
// templates/ (runtime/cmake/EmbedTemplates.cmake) so that NVRTC gets them as
// in-memory headers and no source tree is needed where kernels run.
//
//===----------------------------------------------------------------------===//

#ifndef MK_RUNTIME_TEMPLATES_H
#define MK_RUNTIME_TEMPLATES_H

#include <string>
#include <vector>

namespace mk {
namespace rt {

struct EmbeddedHeader {
  std::string includeName; ///< "mk/w4a16_gemv.cuh"
  std::string text;
};

/// Every templates/*.cuh of the build, sorted by include name.
const std::vector<EmbeddedHeader> &embeddedTemplates();

} // namespace rt
} // namespace mk

#endif // MK_RUNTIME_TEMPLATES_H
