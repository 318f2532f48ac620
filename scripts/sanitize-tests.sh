#!/usr/bin/env bash
# The host code's tests under AddressSanitizer and UndefinedBehaviorSanitizer,
# after scripts/test.sh (whose set-up it relies on): a second build,
# ${MK_SANITIZE_BUILD_DIR:-build-sanitize}, of the compiler, core, oracle and
# runtime with -DMK_SANITIZE=address,undefined, then their CPU tests and the
# lit tests, every sanitizer report fatal (an abort, which no test expects:
# the lit tests' `not mkc ...` lines expect an exit status of 1). Left out:
# the CUDA template tests (not host code; off in a sanitizer build), the
# NVRTC compiles of the unit's kernels (EmitterNvrtc.*: minutes of NVRTC,
# whose emitter the lit, spec-matrix and fuzz tests run too) and the
# full-size oracle tests (label `slow`: tens of minutes under ASan).
# ~22 minutes on 2 cores from scratch (build ~19, tests ~3.5); not part of
# CI yet. MK_DETECT_LEAKS=0 turns LeakSanitizer off (where ptrace-based
# sandboxes stop it from running).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${MK_SANITIZE_BUILD_DIR:=build-sanitize}"
: "${MK_JOBS:=2}"
cmake -S . -B "$MK_SANITIZE_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMK_SANITIZE=address,undefined
cmake --build "$MK_SANITIZE_BUILD_DIR" -j "$MK_JOBS"
export ASAN_OPTIONS="detect_leaks=${MK_DETECT_LEAKS:-1}:abort_on_error=1"
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:abort_on_error=1
ctest --test-dir "$MK_SANITIZE_BUILD_DIR" --output-on-failure -j "$MK_JOBS" -LE slow \
  -E '^EmitterNvrtc\.'
