#!/usr/bin/env bash
# The one command for the GPU machine: builds the runtime without MLIR, runs
# the runtime and GPU test suites, the Python drop-in test and mk-bench.
#
#   MK_KERNELS_DIR=/path/kernels scripts/gpu-tests.sh
#
# MK_KERNELS_DIR holds one subdirectory per generated kernel
# (kimi_linear_w4a16/, tiny/: `mkc SPEC --emit=cuda -o DIR` output); default
# ./kernels. Logs go to $MK_BUILD_DIR/gpu-logs; where $OUT is set (the device
# tool) they are also packed into $OUT/gpu-logs.tar.gz as the run goes (a
# call cut off at its limit still returns them). GoogleTest:
# an installed one, else the source tree in $MK_GTEST_SOURCE_DIR, .carry/googletest,
# shared/googletest or /usr/src/googletest. Exit status: non-zero if anything failed.
#
# The whole suite with MK_SANITIZE=1 runs past the device tool's 10 minutes per
# call; MK_GPU_PART splits it in two calls on the same kernels: `tests` (the
# template tests and the runtime + GPU ctest suite, with any MK_GPU_VARIANTS)
# and `rest` (the drop-in, mk-bench, the schedule variants, the examples,
# mk-diff, the embedded JIT and compute-sanitizer). Default: both.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu-common.sh
export MK_KERNELS_DIR
export MK_REQUIRE_KERNELS=1
LOGS="$BUILD/gpu-logs"
rm -rf "$LOGS"
mkdir -p "$LOGS"
status=0
# The logs so far are packed into $OUT/gpu-logs.tar.gz at each step and
# every 30 s in between (pack_to_out, gpu-common.sh).
pack() { pack_to_out "$LOGS" gpu-logs.tar.gz; }
pack_to_out_as_it_goes "$LOGS" gpu-logs.tar.gz
step() { pack; echo "== $* ($(date +%T))"; }
part=${MK_GPU_PART:-all}
case "$part" in all|tests|rest) ;; *) echo "MK_GPU_PART must be all, tests or rest, not '$part'"; exit 2 ;; esac
run_tests=$([ "$part" != rest ] && echo 1)
run_rest=$([ "$part" != tests ] && echo 1)

step "configure and build ($BUILD)"
configure_and_build "$LOGS" mk_runtime mk_runtime_c mk-runtime-tests mk-runtime-nodriver-tests \
  mk-gpu-tests mk-bench mk-diff mk-decode mk-oracle \
  mk_template_tests mk_template_tests_variants mk_template_tests_forms mk_template_bench || exit 1

step "kernels in $MK_KERNELS_DIR"
ls -d "$MK_KERNELS_DIR"/*/ 2>&1 | tee "$LOGS/kernels.txt"
nvidia-smi -L 2>&1 | tee -a "$LOGS/kernels.txt"

if [ -n "$run_tests" ]; then
  step "template unit tests (default and opt-in variants)"
  for t in mk_template_tests mk_template_tests_variants mk_template_tests_forms; do
    "$BUILD/tests/templates/$t" 2>&1 | tee "$LOGS/$t.log" | tail -3
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  done
fi

# MK_BENCH_ONLY=1: only the template tests, mk-bench and the schedule
# variants (for a quick measuring run on a kernel already validated).
bench_only=${MK_BENCH_ONLY:-}
IFS=';' read -r -a variants <<< "${MK_GPU_VARIANTS:-}"
if [ -z "$bench_only" ] && [ -n "$run_tests" ]; then
step "ctest: runtime + gpu"
ctest --test-dir "$BUILD" -L 'runtime|gpu' --output-on-failure \
  --timeout 3600 2>&1 | tee "$LOGS/ctest.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1

# Template variants selected at NVRTC time (MK_NVRTC_OPTIONS), e.g.
# MK_GPU_VARIANTS="-DMK_GEMV_SIMT" (;-separated): the oracle tests again on each.
for v in "${variants[@]}"; do
  [ -n "$v" ] || continue
  step "oracle tests with MK_NVRTC_OPTIONS='$v'"
  MK_NVRTC_OPTIONS="$v" "$BUILD/tests/gpu/mk-gpu-tests" --gtest_filter='OracleGpu.*' \
    2>&1 | tee "$LOGS/variant-tests${v//[^A-Za-z0-9_]/_}.log" | grep -E "OK|FAILED|near tie|cosine 0.9[0-8]"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
done

fi
# The EXIT trap (pack_to_out_as_it_goes) packs the logs a last time.
finish() {
  nvrtc_cache_note
  echo "== done (status $status); logs in $LOGS"
  exit $status
}
[ -n "$run_rest" ] || finish

if [ -z "$bench_only" ]; then
step "python drop-in"
export MK_RUNTIME_LIB="$BUILD/runtime/libmk_runtime_c.so"
export MK_ORACLE_BIN="$BUILD/oracle/mk-oracle"
python3 -m pytest -q python/tests 2>&1 | tee "$LOGS/pytest.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
fi

# MK_TEMPLATE_BENCH=1: the GEMV tile alone, per block shape, tile width and
# weight layout (tests/templates/TemplateBench.cu).
if [ -n "${MK_TEMPLATE_BENCH:-}" ]; then
  step "GEMV tile bench"
  "$BUILD/tests/templates/mk_template_bench" 2>&1 | tee "$LOGS/template-bench.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi

step "mk-bench"
if [ -d "$MK_KERNELS_DIR/kimi_linear_w4a16" ]; then
  "$BUILD/runtime/tools/mk-bench" --kernel-dir "$MK_KERNELS_DIR/kimi_linear_w4a16" \
    --ctx 2048,8192,16384 --measure-bandwidth 2>&1 | tee "$LOGS/bench.log"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  for v in "${variants[@]}"; do
    [ -n "$v" ] || continue
    step "mk-bench with MK_NVRTC_OPTIONS='$v'"
    MK_NVRTC_OPTIONS="$v" "$BUILD/runtime/tools/mk-bench" \
      --kernel-dir "$MK_KERNELS_DIR/kimi_linear_w4a16" --ctx 2048,8192,16384 \
      --measure-bandwidth 2>&1 | tee -a "$LOGS/bench.log" | tail -4
  done
  # MK_PHASE_PROFILE=1: per-phase times (block 0's view) of the default
  # build, or of MK_PHASE_PROFILE_OPTIONS.
  if [ -n "${MK_PHASE_PROFILE:-}" ]; then
    step "phase profile (MK_NVRTC_OPTIONS='${MK_PHASE_PROFILE_OPTIONS:-}')"
    MK_NVRTC_OPTIONS="${MK_PHASE_PROFILE_OPTIONS:-}" "$BUILD/runtime/tools/mk-bench" \
      --kernel-dir "$MK_KERNELS_DIR/kimi_linear_w4a16" --ctx 2048 --iters 20 \
      --phase-timing 2>&1 | tee "$LOGS/phases.log"
  fi
else
  echo "no $MK_KERNELS_DIR/kimi_linear_w4a16: mk-bench not run" | tee "$LOGS/bench.log"
  status=1
fi

# Schedule variants of the full unit (kimi_linear_w4a16_t*/, from
# make-gpu-kernels.sh): the one-step oracle test, then the bench.
for d in "$MK_KERNELS_DIR"/kimi_linear_w4a16_t*/; do
  [ -d "$d" ] || continue
  v=$(basename "$d")
  step "schedule variant $v: oracle test and bench"
  MK_FULL_KERNEL="$v" "$BUILD/tests/gpu/mk-gpu-tests" \
    --gtest_filter='OracleGpu.FullUnitOneStep' 2>&1 | tee "$LOGS/variant-$v.log" | grep -E "OK|FAILED|cosine"
  # The opt-in integer arithmetic does not round weights to bf16 as the
  # spec does, so the MoE top-k can differ from the oracle's beyond near
  # ties (docs/pipeline.md): its agreement is reported, not required.
  if [ "${PIPESTATUS[0]}" != 0 ]; then
    case "$v" in *_tint8) echo "($v: opt-in integer arithmetic; disagreement reported, not failed)" ;; *) status=1 ;; esac
  fi
  "$BUILD/runtime/tools/mk-bench" --kernel-dir "$d" --ctx 2048,8192,16384 \
    2>&1 | tee -a "$LOGS/bench.log" | tail -4
done

step "examples"
if [ -z "$bench_only" ] && [ -d "$MK_KERNELS_DIR/kimi_linear_w4a16" ]; then
  "$BUILD/examples/mk-decode" "$MK_KERNELS_DIR/kimi_linear_w4a16" --tokens 32 \
    2>&1 | tee "$LOGS/decode.log" | tail -3
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  MK_KERNEL_DIR="$MK_KERNELS_DIR/kimi_linear_w4a16" python3 examples/decode.py --tokens 16 \
    2>&1 | tee "$LOGS/decode-py.log" | tail -3
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  # The dense GQA family through the same example (a Qwen3-8B-sized layer).
  if [ -d "$MK_KERNELS_DIR/qwen3_8b_layer" ]; then
    MK_KERNEL_DIR="$MK_KERNELS_DIR/qwen3_8b_layer" python3 examples/decode.py \
      --spec examples/specs/qwen3_8b_layer.json --tokens 16 2>&1 | tee "$LOGS/decode-py-dense.log" | tail -3
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  fi
fi

step "mk-diff (debug-capture kernels against the oracle's trace)"
for k in tiny_debug kimi_linear_w4a16_debug tiny_dense_first_debug tiny_released_forms_debug; do
  if [ -n "$bench_only" ]; then
    :
  elif [ -d "$MK_KERNELS_DIR/$k" ]; then
    "$BUILD/runtime/tools/mk-diff" --kernel-dir "$MK_KERNELS_DIR/$k" --ctx 2048 \
      2>&1 | tee "$LOGS/diff-$k.log" | tail -40
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  else
    echo "no $MK_KERNELS_DIR/$k (scripts/make-gpu-kernels.sh makes it)"
  fi
done

# The embedded JIT, where scripts/make-jit-bundle.sh packed it (this machine
# has no MLIR to build it): its GPU test and the JIT decode example.
jit="${MK_JIT_BUNDLE:-$ROOT/.carry/jit}"
if [ -z "$bench_only" ] && [ -f "$jit/lib.tar.xz" ]; then
  step "embedded JIT (bundle in $jit)"
  if [ "$(cat "$jit/source-dir")" != "$ROOT" ]; then
    echo "the bundle was built for a checkout at $(cat "$jit/source-dir"), not $ROOT: skipped"
  else
    libs=$(mktemp -d)
    tar -C "$libs" -xJf "$jit/lib.tar.xz" && mkdir -p "$(cat "$jit/tmp-dir")"
    LD_LIBRARY_PATH="$libs/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" \
      "$jit/mk-jit-tests" 2>&1 | tee "$LOGS/jit-tests.log" | grep -E "OK|FAILED|PASSED|cosine"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
    LD_LIBRARY_PATH="$libs/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" \
      "$jit/mk-jit-decode" examples/kimi_linear_w4a16.json --tokens 32 \
      2>&1 | tee "$LOGS/jit-decode.log" | tail -4
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
    rm -rf "$libs"
  fi
fi

# MK_SANITIZE=1: compute-sanitizer memcheck and synccheck on full-size steps.
if [ -n "${MK_SANITIZE:-}" ] && command -v compute-sanitizer >/dev/null; then
  for tool in memcheck synccheck; do
    step "compute-sanitizer --tool $tool (full-size unit)"
    (cd "$BUILD/tests/gpu" && timeout "${MK_SANITIZE_TIMEOUT:-300}" \
      compute-sanitizer --tool $tool --error-exitcode 3 \
      ./mk-gpu-tests --gtest_filter=OracleGpu.FullUnitRecomputeOnLiveData) \
      2>&1 | tee "$LOGS/sanitize-$tool.log" | tail -3
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  done
fi

finish
