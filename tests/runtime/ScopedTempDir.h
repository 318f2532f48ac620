//===- ScopedTempDir.h - A temporary directory removed at scope exit -*- C++ -*-===//
//
// Runtime tests that write files (kernel caches, kernel directories) make
// them in a fresh directory under the system's temporary directory, removed
// with everything in it when the test's ScopedTempDir goes out of scope.
//
//===----------------------------------------------------------------------===//

#ifndef MK_TESTS_RUNTIME_SCOPEDTEMPDIR_H
#define MK_TESTS_RUNTIME_SCOPEDTEMPDIR_H

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace mk {
namespace testing {

class ScopedTempDir {
public:
  /// A new directory `<tmp>/<prefix>XXXXXX` (mkdtemp); a test failure if
  /// it cannot be made (path() is then empty).
  explicit ScopedTempDir(const std::string &prefix = "mk-test-") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
    if (char *d = mkdtemp(tmpl.data()))
      path_ = d;
    else
      ADD_FAILURE() << "cannot make a temporary directory from " << tmpl;
  }
  ~ScopedTempDir() {
    std::error_code ec;
    if (!path_.empty())
      std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir &) = delete;
  ScopedTempDir &operator=(const ScopedTempDir &) = delete;

  const std::string &path() const { return path_; }

private:
  std::string path_;
};

} // namespace testing
} // namespace mk

#endif // MK_TESTS_RUNTIME_SCOPEDTEMPDIR_H
