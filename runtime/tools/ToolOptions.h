//===- ToolOptions.h - Command-line options the runtime tools share ------===//
//
// CLI11 options that mk-bench, mk-diff, mk-decode and mk-jit-decode spell the
// same way, with the same checks, and the parse that turns any malformed
// command line into CLI11's one-line message and exit status 2.
//
//===----------------------------------------------------------------------===//

#ifndef MK_TOOLS_TOOLOPTIONS_H
#define MK_TOOLS_TOOLOPTIONS_H

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace mk::tools {

/// A context length: 0 .. 2^24 rows.
inline CLI::Option *addCtxOption(CLI::App &app, int64_t &ctx, const std::string &what) {
  return app.add_option("--ctx", ctx, what)
      ->check(CLI::Range(int64_t(0), int64_t(1) << 24))
      ->capture_default_str();
}

inline CLI::Option *addSeedOption(CLI::App &app, uint64_t &seed, const std::string &what) {
  return app.add_option("--seed", seed, what)->capture_default_str();
}

inline CLI::Option *addWeightsOption(CLI::App &app, std::string &path) {
  return app.add_option("--weights", path, "bind these weights instead of random ones")
      ->check(CLI::ExistingFile);
}

inline CLI::Option *addTokensOption(CLI::App &app, int &tokens) {
  return app.add_option("--tokens", tokens, "tokens to decode")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
}

/// Parses; on a malformed command line (or --help) prints CLI11's message
/// and returns the exit status (2, or 0 for --help); else -1.
inline int parseOrExitCode(CLI::App &app, int argc, char **argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return -1;
}

} // namespace mk::tools

#endif // MK_TOOLS_TOOLOPTIONS_H
