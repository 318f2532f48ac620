//===- PhaseBands.cpp - A step's phases grouped into layer bands ----------===//

#include "mk/runtime/PhaseBands.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>

namespace mk::rt {
namespace {

/// The layer and the rest of `blocks.N.REST`; layer -1 for any other name.
std::pair<int, std::string> splitLayer(const std::string &name) {
  static const std::string kPrefix = "blocks.";
  if (name.compare(0, kPrefix.size(), kPrefix) != 0)
    return {-1, name};
  size_t i = kPrefix.size(), j = i;
  while (j < name.size() && name[j] >= '0' && name[j] <= '9')
    ++j;
  // Digits without a leading zero (blocks.007 is no layer's), then a dot
  // and the rest.
  if (j == i || j - i > 6 || (name[i] == '0' && j - i > 1) || j + 1 >= name.size() ||
      name[j] != '.')
    return {-1, name};
  return {std::atoi(name.substr(i, j - i).c_str()), name.substr(j + 1)};
}

bool isAttentionPart(const std::string &rest) { return rest.compare(0, 4, "attn") == 0; }

} // namespace

std::vector<PhaseBand> phaseBands(const std::vector<std::string> &phaseNames) {
  std::vector<PhaseBand> bands;
  bool lastAttention = false;
  for (int p = 0; p < int(phaseNames.size()); ++p) {
    auto [layer, rest] = splitLayer(phaseNames[size_t(p)]);
    const bool attention = layer >= 0 && isAttentionPart(rest);
    const bool extend = layer >= 0 && !bands.empty() && bands.back().layer == layer &&
                        lastAttention == attention;
    if (extend) {
      bands.back().kind += " > " + rest;
    } else {
      PhaseBand b;
      b.layer = layer;
      b.kind = rest;
      bands.push_back(std::move(b));
    }
    bands.back().phases.push_back(p);
    lastAttention = attention;
  }
  return bands;
}

std::vector<BandKindSummary> summarizeBands(const std::vector<PhaseBand> &bands,
                                            const std::vector<double> &spanUs,
                                            const std::vector<double> &floorUs) {
  std::vector<BandKindSummary> out;
  size_t phases = 0;
  for (const PhaseBand &b : bands)
    phases += b.phases.size();
  const bool floors = !floorUs.empty();
  if (spanUs.size() != phases || (floors && floorUs.size() != phases))
    return out;
  std::map<std::string, size_t> index;
  std::vector<double> floorSum;
  for (const PhaseBand &b : bands) {
    double us = 0, fl = 0;
    for (int p : b.phases) {
      if (p < 0 || size_t(p) >= spanUs.size())
        return {};
      us += spanUs[size_t(p)];
      if (floors)
        fl += floorUs[size_t(p)];
    }
    auto [it, fresh] = index.emplace(b.kind, out.size());
    if (fresh) {
      BandKindSummary s;
      s.kind = b.kind;
      s.minUs = s.maxUs = us;
      out.push_back(s);
      floorSum.push_back(0);
    }
    BandKindSummary &s = out[it->second];
    ++s.count;
    s.totalUs += us;
    // A NaN span makes its kind's least and most NaN too (as its mean).
    const double nan = std::numeric_limits<double>::quiet_NaN();
    s.minUs = std::isnan(us) || std::isnan(s.minUs) ? nan : std::min(s.minUs, us);
    s.maxUs = std::isnan(us) || std::isnan(s.maxUs) ? nan : std::max(s.maxUs, us);
    floorSum[it->second] += fl;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].meanUs = out[i].totalUs / out[i].count;
    out[i].meanFloorUs = floorSum[i] / out[i].count;
  }
  return out;
}

} // namespace mk::rt
