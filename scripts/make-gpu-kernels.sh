#!/usr/bin/env bash
# Generates the kernels the GPU tests and benchmarks use, on a machine with
# the compiler (the GPU machine has no MLIR): one directory per spec under
# ${1:-.carry/kernels}: kimi_linear_w4a16/ (examples/kimi_linear_w4a16.json)
# and tiny/ (examples/specs/tiny.json). Carry that directory to the GPU
# machine and point MK_KERNELS_DIR at it (scripts/gpu-tests.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-.carry/kernels}"
mkc="${MK_BUILD_DIR:-build}/bin/mkc"
[ -x "$mkc" ] || { echo "no $mkc: run scripts/setup-and-build.sh first" >&2; exit 1; }
for pair in kimi_linear_w4a16:examples/kimi_linear_w4a16.json tiny:examples/specs/tiny.json; do
  name=${pair%%:*}
  spec=${pair#*:}
  rm -rf "${out:?}/$name"
  "$mkc" "$spec" --emit=cuda -o "$out/$name"
  echo "$out/$name: $(ls "$out/$name" | paste -sd' ')"
done
