//===- BlockSpec.h - Block spec files (JSON) <-> BlockConfig ------*- C++ -*-===//
//
// A block spec is the JSON file that names a decode unit's configuration:
//
//   { "name": "kimi_linear_w4a16",
//     "config": { "hidden": 2304, ..., "eps": 1e-6 },
//     "pattern": ["K", "K", "K", "M"] }
//
// The reader is strict (every config key except eps is required, unknown keys
// and wrong types are errors) because a typo in a spec would otherwise compile
// a silently different kernel. docs/spec-format.md is the reference.
//
//===----------------------------------------------------------------------===//

#ifndef MK_BLOCKSPEC_H
#define MK_BLOCKSPEC_H

#include "mk/BlockConfig.h"
#include "mk/Json.h"

#include <string>

namespace mk {

/// Parses spec text into `cfg` and validates it. On failure returns false,
/// leaves `cfg` untouched and sets `error` to one line naming the problem
/// (with "line L, column C" where it points into the text).
bool parseBlockSpec(const std::string &text, BlockConfig &cfg,
                    std::string &error);

/// Same, from an already parsed JSON value (for specs embedded in other files,
/// such as a compiler manifest).
bool blockConfigFromJson(const json::Value &v, BlockConfig &cfg,
                         std::string &error);

/// Reads and parses a spec file. Errors are prefixed with the path; an
/// unreadable file reports the path and the system's reason.
bool loadBlockSpecFile(const std::string &path, BlockConfig &cfg,
                       std::string &error);

/// The spec of `cfg` as a JSON value / as pretty-printed text (the same format
/// parseBlockSpec reads; doubles round-trip exactly).
json::Value blockConfigToJsonValue(const BlockConfig &cfg);
std::string blockConfigToJson(const BlockConfig &cfg);

} // namespace mk

#endif // MK_BLOCKSPEC_H
