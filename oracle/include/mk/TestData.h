//===- TestData.h - Deterministic test weights, state and tokens -*- C++ -*-===//
//
// Test data must be identical on every run and every machine, and fast enough
// to make the full unit's ~1.8 G weights in seconds. Each element is a pure
// function of (seed, tensor name, element index): a counter-based hash feeds a
// Box-Muller transform whose log/sin/cos are our own polynomials built from
// IEEE basic operations only (+ - * / sqrt), so no libm version can change a
// bit. Any slice of a tensor can therefore be made independently, in any
// order, on any number of threads.
//
// The makeRandom* entry points are declared in Oracle.h.
//
//===----------------------------------------------------------------------===//

#ifndef MK_TESTDATA_H
#define MK_TESTDATA_H

#include "mk/Oracle.h"

#include <cstdint>
#include <string>

namespace mk {
namespace testdata {

/// The splitmix64 finalizer.
uint64_t mix64(uint64_t x);

/// The generator stream of tensor `name` under `seed`.
uint64_t streamFor(uint64_t seed, const std::string &name);

/// Element `index` of the standard normal sequence of `stream`
/// (elements 2i and 2i+1 are the two outputs of one Box-Muller pair).
double standardNormal(uint64_t stream, uint64_t index);

/// out[i] = float(stddev * standardNormal(stream, first + i)).
void fillNormal(uint64_t stream, uint64_t first, int64_t count, double stddev,
                float *out);
/// The same values rounded to bf16.
void fillNormalBf16(uint64_t stream, uint64_t first, int64_t count,
                    double stddev, BFloat16 *out);

/// The float weight of quantized linear `prefix` (e.g. "blocks.0.attn.q_proj")
/// before quantization, logically [experts?, in, out]: its stream and stddev.
/// (Exposed so tests can rebuild the unquantized weight.)
constexpr double kQuantStddev = 0.02;
constexpr double kBf16LinearStddev = 0.02;
constexpr double kConvStddev = 0.1;
/// A sigmoid router's correction bias (`.router.bias`): wide enough to move
/// some choices against the scores alone (the released model's trained
/// biases are of this order; its spec's random stand-in is 0.01).
constexpr double kRouterBiasStddev = 0.05;
/// The released KDA's decay bias (`.dt_bias`), the spec's N(0, 0.1).
constexpr double kDtBiasStddev = 0.1;
constexpr double kStateSStddev = 0.05;
constexpr double kStateBf16Stddev = 0.1;
constexpr double kHiddenStddev = 0.25;
/// The whole model's embedding rows (`embed.weight`), the spec's N(0, 1).
constexpr double kEmbeddingStddev = 1.0;

/// Element `index` of `stream`'s log(U(1, 16)) sequence (the released KDA's
/// `A_log`, one per head): the uniform from the hash of (stream, index), its
/// log from detLog.
double logUniform1To16(uint64_t stream, uint64_t index);

/// Deterministic natural log for x in (0, 1], and sin/cos for a in [0, pi/2],
/// from basic operations only (exposed for tests).
double detLog(double x);
void detSinCos(double a, double &s, double &c);

} // namespace testdata
} // namespace mk

#endif // MK_TESTDATA_H
