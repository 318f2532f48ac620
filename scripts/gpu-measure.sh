#!/usr/bin/env bash
# A measuring run for the GPU machine, lighter than gpu-tests.sh: builds only
# mk-bench, mk-gpu-tests and mk-compile (and the GEMV tile microbenchmark
# with MK_MEASURE_TILE_BENCH, below), compiles every kernel the run needs
# side by side (or finds it in the carried NVRTC cache), then for every
# kernel variant checks it against
# the oracle (OracleGpu.FullUnitOneStep: 3 seeds x contexts 2048 / 8192) and
# benches all variants in alternating rounds, then prints the phase and task
# stage profile of the first one or more (and the median step at the last
# profile context as a Chrome/Perfetto trace, trace.json). What the perf notes' same-run comparisons
# need, in one call (~3 minutes for three variants).
#
#   MK_KERNELS_DIR=$PWD/.carry/kernels scripts/gpu-measure.sh [VARIANT ...]
#
# A VARIANT is a kernel directory name under $MK_KERNELS_DIR (a schedule
# variant such as kimi_linear_w4a16_thg16), optionally with NVRTC options
# after a colon: kimi_linear_w4a16:-DMK_GEMV_SIMT. Default: the unit's kernel.
# MK_MEASURE_ROUNDS (2), MK_MEASURE_CTX (2048,8192,16384) and
# MK_PROFILE_CTX (2048,16384) set the rounds and contexts; MK_MEASURE_TEST
# the oracle test each variant must pass (default OracleGpu.FullUnitOneStep,
# which takes the variant's directory; for the dense layer's NVRTC variants,
# e.g. qwen3_8b_layer:-DMK_GQA_LANE_ROWS, OracleGpu.Qwen3LayerOneStep);
# MK_PROFILE_VARIANTS how many of the variants, in order, get the profile
# (default 1; `all`: every one, to compare profiles from the same machine;
# the first is printed, the others only written). Logs go to
# $MK_BUILD_DIR/measure, packed into $OUT/measure.tar.gz where $OUT is set
# (the device tool returns only a few files). MK_MEASURE_TILE_BENCH=SHAPE
# (e.g. "qkvg 2304x16384 sk2") also builds the GEMV tile microbenchmark
# (tests/templates/TemplateBench.cu, nvcc; a build without the template
# tests, MK_BUILD_TEMPLATE_TESTS=OFF, then fails) beside the rest and runs
# it on the shapes whose name contains SHAPE, after the profiles, with the
# GPU already warm (tile-bench.log; a SHAPE that names no shape prints only
# the copy and barrier rows). Exit status: non-zero if a build, an oracle
# test or a bench failed.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu-common.sh
: "${MK_MEASURE_ROUNDS:=2}"
: "${MK_MEASURE_CTX:=2048,8192,16384}"
: "${MK_PROFILE_CTX:=2048,16384}"
: "${MK_MEASURE_TEST:=OracleGpu.FullUnitOneStep}"
: "${MK_PROFILE_VARIANTS:=1}"
export MK_KERNELS_DIR MK_REQUIRE_KERNELS=1
DEST=$BUILD/measure
rm -rf "$DEST"
mkdir -p "$DEST"
pack_to_out_as_it_goes "$DEST" measure.tar.gz
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(kimi_linear_w4a16)
status=0
case "$MK_PROFILE_VARIANTS" in
  all) nprof=${#variants[@]} ;;
  *[!0-9]*|'') echo "MK_PROFILE_VARIANTS must be a count or 'all', got '$MK_PROFILE_VARIANTS'" >&2; exit 2 ;;
  *) nprof=$((10#$MK_PROFILE_VARIANTS)) ;;
esac

targets=(mk-bench mk-gpu-tests mk-compile)
[ -n "${MK_MEASURE_TILE_BENCH:-}" ] && targets+=(mk_template_bench)
configure_and_build "$DEST" "${targets[@]}" || exit 1
bench="$BUILD/runtime/tools/mk-bench"
tests="$BUILD/tests/gpu/mk-gpu-tests"

# NAME[:OPTIONS] -> kernel dir name, options
dir_of() { echo "${1%%:*}"; }
opts_of() { case "$1" in *:*) echo "${1#*:}" ;; *) echo "" ;; esac; }

# Every kernel this run builds (each variant, and the phase-timing build of
# the profiled ones), compiled side by side before anything runs, or found
# in the carried NVRTC cache (gpu-common.sh); the steps below then find
# them all in the cache instead of compiling one after another.
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
if [ -n "$arch" ]; then
  echo "== NVRTC: the variants' kernels for sm_$arch"
  : >"$DEST/nvrtc.log"
  # In a subshell, whose jobs are the compiles alone (the log packer runs
  # in the background of this one).
  (
    # compile_bg OPTIONS DIR [MK-COMPILE ARGS]: in the background, at most
    # MK_JOBS at once.
    compile_bg() {
      while [ "$(jobs -rp | wc -l)" -ge "$MK_JOBS" ]; do wait -n; done
      MK_NVRTC_OPTIONS="$1" "$BUILD/runtime/tools/mk-compile" --arch "sm_$arch" "${@:3}" "$2" \
        >>"$DEST/nvrtc.log" 2>&1 &
    }
    for ((pi = 0; pi < ${#variants[@]}; ++pi)); do
      v=${variants[$pi]}
      d="$MK_KERNELS_DIR/$(dir_of "$v")"
      [ -d "$d" ] || continue
      compile_bg "$(opts_of "$v")" "$d"
      [ $pi -lt "$nprof" ] && compile_bg "$(opts_of "$v")" "$d" --option=-DMK_PHASE_TIMING
    done
    wait
  )
  echo "compiled here: $(grep -c 'compiled into' "$DEST/nvrtc.log")"
fi

echo "== oracle: $MK_MEASURE_TEST on each variant"
for v in "${variants[@]}"; do
  d=$(dir_of "$v")
  [ -d "$MK_KERNELS_DIR/$d" ] || { echo "no $MK_KERNELS_DIR/$d"; status=1; continue; }
  log="$DEST/oracle-$(echo "$v" | tr -c 'A-Za-z0-9_\n' _).log"
  (cd "$(dirname "$tests")" && MK_FULL_KERNEL="$d" MK_NVRTC_OPTIONS="$(opts_of "$v")" "$tests" \
    --gtest_filter="$MK_MEASURE_TEST") >"$log" 2>&1
  rc=$?
  verdict=$([ $rc = 0 ] && echo pass || echo FAIL)
  grep -q "SKIPPED" "$log" && verdict="skipped (no GPU?)" && status=1
  echo "$v: $verdict, lowest $(grep -o 'output cosine [0-9.]*' "$log" | sort | head -1)"
  [ $rc = 0 ] || status=1
done

echo "== bench: ${MK_MEASURE_ROUNDS} alternating rounds, ms/token median (ctx $MK_MEASURE_CTX)"
for r in $(seq 1 "$MK_MEASURE_ROUNDS"); do
  for v in "${variants[@]}"; do
    d=$(dir_of "$v")
    [ -d "$MK_KERNELS_DIR/$d" ] || continue
    row=$(MK_NVRTC_OPTIONS="$(opts_of "$v")" "$bench" --kernel-dir "$MK_KERNELS_DIR/$d" \
      --ctx "$MK_MEASURE_CTX" 2>&1 | tee -a "$DEST/bench.log" | awk '$1 ~ /^[0-9]+$/ {printf " %s", $2}')
    [ -n "$row" ] || status=1
    echo "round $r  $v:$row"
  done
done

# The first nprof variants' profiles: the first in phases.log / trace.json,
# the others in phases-<variant>.log / trace-<variant>.json.
for ((pi = 0; pi < nprof && pi < ${#variants[@]}; ++pi)); do
  v=${variants[$pi]}
  [ -d "$MK_KERNELS_DIR/$(dir_of "$v")" ] || continue
  suffix=$([ $pi = 0 ] && echo "" || echo "-$(echo "$v" | tr -c 'A-Za-z0-9_\n' _)")
  echo "== phase and task stage profile of $v (ctx $MK_PROFILE_CTX)"
  MK_NVRTC_OPTIONS="$(opts_of "$v")" "$bench" --kernel-dir "$MK_KERNELS_DIR/$(dir_of "$v")" \
    --ctx "$MK_PROFILE_CTX" --iters 20 --phase-timing --trace "$DEST/trace$suffix.json" \
    >"$DEST/phases$suffix.log" 2>&1 || status=1
  if [ $pi = 0 ]; then cat "$DEST/phases$suffix.log"; else echo "   in phases$suffix.log"; fi
done
if [ -n "${MK_MEASURE_TILE_BENCH:-}" ]; then
  echo "== GEMV tile microbenchmark, shapes matching '$MK_MEASURE_TILE_BENCH'"
  "$BUILD/tests/templates/mk_template_bench" "$MK_MEASURE_TILE_BENCH" 2>&1 |
    tee "$DEST/tile-bench.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
nvrtc_cache_note
echo "== done (status $status); logs in $DEST"
exit $status
