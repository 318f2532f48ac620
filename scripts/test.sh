#!/usr/bin/env bash
# The whole test suite: set-up, build, then every gtest and lit test via ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-and-build.sh
ctest --test-dir "${MK_BUILD_DIR:-build}" --output-on-failure -j "${MK_JOBS:-2}"
