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
# ~22 minutes on 2 cores from scratch (build ~19, tests ~3.5); CI runs it
# after scripts/test.sh (.ci/run). MK_DETECT_LEAKS=0 turns LeakSanitizer
# off; without it the script turns it off by itself, saying so, where a
# probe shows that LeakSanitizer cannot run here (under ptrace, as in some
# sandboxes), rather than fail every test for the machine's sake.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${MK_SANITIZE_BUILD_DIR:=build-sanitize}"
: "${MK_JOBS:=2}"
cmake -S . -B "$MK_SANITIZE_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DMK_SANITIZE=address,undefined
cmake --build "$MK_SANITIZE_BUILD_DIR" -j "$MK_JOBS"
if [ -z "${MK_DETECT_LEAKS:-}" ]; then
  probe_dir=$(mktemp -d)
  trap 'rm -rf "$probe_dir"' EXIT
  printf 'int main() { return 0; }\n' > "$probe_dir/probe.cc"
  MK_DETECT_LEAKS=1
  if c++ -fsanitize=address "$probe_dir/probe.cc" -o "$probe_dir/probe" &&
     ! ASAN_OPTIONS=detect_leaks=1 "$probe_dir/probe" > "$probe_dir/out" 2>&1; then
    echo "sanitize-tests: LeakSanitizer cannot run on this machine; leak detection off:" >&2
    cat "$probe_dir/out" >&2
    MK_DETECT_LEAKS=0
  fi
fi
export ASAN_OPTIONS="detect_leaks=${MK_DETECT_LEAKS:-1}:abort_on_error=1"
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:abort_on_error=1
ctest --test-dir "$MK_SANITIZE_BUILD_DIR" --output-on-failure -j "$MK_JOBS" -LE slow \
  -E '^EmitterNvrtc\.'
