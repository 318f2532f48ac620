#!/usr/bin/env bash
# The README's first command. On a fresh Debian machine: installs what is
# missing and builds (scripts/setup-and-build.sh), then compiles the spec's
# Kimi-Linear unit and prints its graph IR. Once the pipeline has a "cuda"
# stage it also emits the kernel, and where a GPU is present runs and times
# it (mk-bench). Environment: MK_BUILD_DIR (default build), MK_SPEC (default
# examples/kimi_linear_w4a16.json), MK_BENCH_ARGS (extra mk-bench flags).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${MK_BUILD_DIR:=build}"
: "${MK_SPEC:=examples/kimi_linear_w4a16.json}"
export MK_BUILD_DIR

scripts/setup-and-build.sh

mkc="$MK_BUILD_DIR/bin/mkc"
out="$MK_BUILD_DIR/example"
mkdir -p "$out"

# 1. Graph IR of the whole unit (also dumped per stage under $out/ir).
echo "== mkc $MK_SPEC --emit=graph" >&2
"$mkc" "$MK_SPEC" --emit=graph --dump-dir "$out/ir"

# 2. Hook: CUDA. Runs as soon as a component registers the "cuda" stage.
if ! "$mkc" --list-stages | cut -f1 | grep -qx cuda; then
  echo "== no 'cuda' stage in this build yet (stages: $("$mkc" --list-stages | cut -f1 | paste -sd' ')); done" >&2
  exit 0
fi
echo "== mkc $MK_SPEC --emit=cuda -o $out/kernel" >&2
"$mkc" "$MK_SPEC" --emit=cuda -o "$out/kernel" --dump-dir "$out/ir"
ls -l "$out/kernel" >&2

# 3. Hook: run and time it where a GPU and the runtime's bench tool exist.
bench="$MK_BUILD_DIR/runtime/tools/mk-bench"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
   [ -x "$bench" ]; then
  echo "== $bench --kernel-dir $out/kernel ${MK_BENCH_ARGS:-}" >&2
  # shellcheck disable=SC2086
  "$bench" --kernel-dir "$out/kernel" ${MK_BENCH_ARGS:-}
else
  echo "== no GPU (or no mk-bench): not running the kernel" >&2
fi
