//===- IrPrecheck.h - Lexical checks on IR text before MLIR parses it -*- C++ -*-===//
//
// MLIR 19's parser writes into freed memory (and may crash) when an
// operation outside every function uses a value that a later function
// defines and the parse then fails (fixed upstream after LLVM 19). The
// compiler's IR never has values outside functions, so its tools refuse
// such text before parsing it, with the location of the first such value.
//
//===----------------------------------------------------------------------===//

#ifndef MK_PIPELINE_IRPRECHECK_H
#define MK_PIPELINE_IRPRECHECK_H

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace mk {

/// Where an SSA value (`%name`) appears outside the body and signature of
/// every func.func in `text`, skipping comments and strings: 1-based line
/// and column of the first one, or nullopt if there is none.
struct TextLocation {
  unsigned line = 0, column = 0;
};
std::optional<TextLocation> findValueOutsideFunctions(llvm::StringRef text);

/// The one-line error for `path` if `text` has such a value
/// ("<path>:L:C: <message>", or "<path>:L:C: error: <message>" with
/// `severity`, as MLIR's own diagnostics read), else an empty string.
std::string checkValuesInsideFunctions(llvm::StringRef text, llvm::StringRef path,
                                       bool severity = false);

} // namespace mk

#endif // MK_PIPELINE_IRPRECHECK_H
