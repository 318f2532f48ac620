//===- TextFile.h - Reading a whole file as text ------------------*- C++ -*-===//

#ifndef MK_TEXTFILE_H
#define MK_TEXTFILE_H

#include <string>

namespace mk {

/// Reads the file at `path` into `text`. On failure returns false and sets
/// `error` to "<path>: cannot open: <reason>" or "<path>: read error:
/// <reason>" (the system's reason).
bool readTextFile(const std::string &path, std::string &text, std::string &error);

} // namespace mk

#endif // MK_TEXTFILE_H
