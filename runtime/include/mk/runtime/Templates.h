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

/// Stand-ins for the C headers NVRTC lacks (it has no libc): "stdint.h" and
/// "cstdint", mapping the fixed-width types from CCCL's <cuda/std/cstdint>.
/// Handed to NVRTC with the templates, after them.
const std::vector<EmbeddedHeader> &nvrtcShimHeaders();

/// embeddedTemplates() followed by nvrtcShimHeaders(): what kernels compile
/// against.
std::vector<EmbeddedHeader> kernelHeaders();

} // namespace rt
} // namespace mk

#endif // MK_RUNTIME_TEMPLATES_H
