//===- PhaseBands.h - A step's phases grouped into layer bands ---*- C++ -*-===//
//
// A phase profile of a deep kernel (the released Kimi-Linear model: 217
// phases) is read by band: the phases of one layer's attention part
// (`blocks.N.attn_norm`, `blocks.N.attn.*`) or of its feed-forward part (any
// other `blocks.N.*`: `moe_norm`, `moe.*`, `mlp_norm`, `mlp.*`), each phase
// outside the layers (`final_norm`, `argmax`, ...) a band of its own. Bands
// whose phase lists match once the layer prefix is dropped are one kind
// (the 20 KDA layers' attention parts, the 26 MoE parts, ...), which
// `summarizeBands` reports together: how many, their time (the sum of their
// phases' spans) as mean, least and most, and their floor. Plain C++, no
// device: mk-bench prints it below the phase profile.
//
//===----------------------------------------------------------------------===//

#ifndef MK_RUNTIME_PHASEBANDS_H
#define MK_RUNTIME_PHASEBANDS_H

#include <string>
#include <vector>

namespace mk::rt {

/// One band: its phases (indices into the kernel's phase list, in order)
/// and its kind, the phase names without the `blocks.N.` prefix joined by
/// " > " (a phase outside the layers: its name).
struct PhaseBand {
  int layer = -1; ///< N of `blocks.N.`; -1 outside the layers
  std::string kind;
  std::vector<int> phases;
};

/// The bands of `phaseNames`, in phase order: a band ends where the next
/// phase belongs to another layer, or to the other part of the same layer.
std::vector<PhaseBand> phaseBands(const std::vector<std::string> &phaseNames);

/// The bands of one kind, over one step.
struct BandKindSummary {
  std::string kind;
  int count = 0;
  /// The bands' times (each the sum of its phases' spans): mean, least, most.
  double meanUs = 0, minUs = 0, maxUs = 0;
  /// Their mean floor (the sum of their phases' floors); 0 when unknown.
  double meanFloorUs = 0;
  /// count * meanUs: the kind's share of the step.
  double totalUs = 0;
};

/// One summary per kind of band, in the order each kind first appears.
/// `spanUs` has one span per phase of `bands`; `floorUs` one floor per
/// phase, or is empty (no floors). Sizes that differ from the bands'
/// phase count are an empty result; a NaN span makes its kind's mean,
/// least and most NaN.
std::vector<BandKindSummary> summarizeBands(const std::vector<PhaseBand> &bands,
                                            const std::vector<double> &spanUs,
                                            const std::vector<double> &floorUs);

} // namespace mk::rt

#endif // MK_RUNTIME_PHASEBANDS_H
