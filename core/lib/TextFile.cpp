//===- TextFile.cpp - Reading a whole file as text ------------------------===//

#include "mk/TextFile.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace mk {

bool readTextFile(const std::string &path, std::string &text, std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    error = path + ": read error: " + std::strerror(errno);
    return false;
  }
  text = ss.str();
  return true;
}

} // namespace mk
