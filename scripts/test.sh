#!/usr/bin/env bash
# The whole test suite: set-up, build, then every gtest and lit test via ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-and-build.sh
ctest --test-dir "${MK_BUILD_DIR:-build}" --output-on-failure -j "${MK_JOBS:-2}"
# The Python package as a user gets it: `pip install ./python` into a fresh
# virtual environment (a wheel with the runtime library inside), then its
# CPU-side tests from outside the source tree.
root=$PWD
build="${MK_BUILD_DIR:-build}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
venv="$build/python-venv"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q "$root/python"
(cd / && MK_TEST_BUILD_DIR="$build" "$venv/bin/python" -m unittest discover -s "$root/tests/package" -v)
