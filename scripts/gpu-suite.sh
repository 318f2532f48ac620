#!/usr/bin/env bash
# The whole GPU suite in two or three device calls of a few minutes each: its parts
# run side by side, each under a time limit (scripts/gpu-tests.sh runs the
# same parts one after another and needs three or more calls).
#
#   MK_KERNELS_DIR=$PWD/.carry/kernels scripts/gpu-suite.sh main   # first call
#   MK_KERNELS_DIR=$PWD/.carry/kernels scripts/gpu-suite.sh deep   # then, warm
#   MK_KERNELS_DIR=$PWD/.carry/kernels scripts/gpu-suite.sh released
#
# main: builds the runtime, the tools and the tests (no MLIR); runs
#   `mk-bench --json` on the unit's kernel alone (bench.json beside the logs,
#   and in $OUT); then side by side: the three template test builds, the
#   runtime ctest, the OracleGpu and SessionGpu tests but the deep ones (in
#   MK_SUITE_SHARDS shards, default 6), compute-sanitizer memcheck and
#   synccheck on a full-size step, the Python drop-in's tests and the
#   examples, the one-step oracle test on each schedule variant
#   (kimi_linear_w4a16_t*/) and on the unit (or the schedule variant an
#   entry names) under each opt-in template form
#   (scripts/unit-opt-in-forms.sh), mk-diff on the debug-capture
#   kernels, and scripts/sass-unwritten-uniforms.py over the NVRTC cache's
#   CUBINs (the ptxas fault of perf notes #72 and #211).
#   The step times the examples print there are not measurements: other
#   processes share the GPU. ~4.7 minutes with the build (perf notes
#   #163), 6.2 on a fresh H200 (#192).
# deep: the deep tests side by side (the 27-layer 256-expert stack in one
#   step and layer by layer, the DeepSeek-V3- and Mixtral-width specs, the
#   36 dense layers): their kernels come from `MK_DEEP_KERNELS=1
#   scripts/make-gpu-kernels.sh`; ~4.6 minutes (#164).
# released: the released model's 27 layers and head layer by layer
#   (OracleGpu.ReleasedModelLayerByLayer; its ~26 GB of random weights
#   beside the deep tests' would crowd the host's memory); ~3.3 minutes
#   (#161).
#
# Each part's log is $MK_BUILD_DIR/gpu-suite/<part>.log, its exit status
# <part>.rc (124: cut off by its time limit, MK_SUITE_TIMEOUT, default 420
# s, 560 for `released`, or less where MK_SUITE_DEADLINE is near); where $OUT is
# set (the device tool) the logs are packed into $OUT/gpu-suite.tar.gz every
# 30 s and at the end (the tool returns at most a few files of $OUT). The
# embedded JIT's test is gpu-tests.sh's only. Exit status: non-zero if a
# part failed or was cut off (the opt-in integer variant's disagreement is
# reported, not failed, as in gpu-tests.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu-common.sh
export MK_KERNELS_DIR MK_REQUIRE_KERNELS=1
wave=${1:-main}
case "$wave" in main|deep|released) ;; *) echo "usage: $0 [main|deep|released]" >&2; exit 2 ;; esac
# The released model's one part may take most of a call.
[ "$wave" = released ] && : "${MK_SUITE_TIMEOUT:=560}"
: "${MK_SUITE_TIMEOUT:=420}"
: "${MK_SUITE_SHARDS:=6}"
B=$BUILD
LOGS=$B/gpu-suite
G=$B/tests/gpu
rm -rf "$LOGS"
mkdir -p "$LOGS"

pack_to_out_as_it_goes "$LOGS" gpu-suite.tar.gz

# part NAME CMD: runs the shell command CMD in the background under the
# time limit, its output in NAME.log, its exit status in NAME.rc. The limit
# is MK_SUITE_TIMEOUT or what is left before MK_SUITE_DEADLINE (seconds
# from the script's start, default 570: the device tool cuts a call at 600
# s, and a part cut off by it would leave no status), whichever is less; a
# part that ignores TERM is killed 10 s later.
: "${MK_SUITE_DEADLINE:=570}"
pids=()
part() {
  local name=$1 cmd=$2
  local limit=$((MK_SUITE_DEADLINE - SECONDS - 15))
  [ "$limit" -lt "$MK_SUITE_TIMEOUT" ] || limit=$MK_SUITE_TIMEOUT
  [ "$limit" -ge 30 ] || limit=30
  (timeout -k 10 "$limit" bash -c "set -o pipefail; $cmd" >"$LOGS/$name.log" 2>&1
   echo $? >"$LOGS/$name.rc") &
  pids+=($!)
}

# The deep wave's tests, which the main wave leaves out (with the released
# wave's).
deep_tests=(DeepSpecOneStep DeepSpecLayerByLayer WideDeepSeekOneStep WideMixtralOneStep
            Qwen3ThirtySixLayersOneStep Qwen3ThirtySixLayersLayerByLayer)

echo "== configure and build ($(date +%T))"
targets=(mk_runtime mk_runtime_c mk-runtime-tests mk-runtime-nodriver-tests mk-gpu-tests mk-compile
         mk-bench mk-diff mk-decode mk-oracle)
[ "$wave" = main ] &&
  targets+=(mk_template_tests mk_template_tests_variants mk_template_tests_forms)
configure_and_build "$LOGS" "${targets[@]}" || exit 1
nvidia-smi -L 2>&1 | tee "$LOGS/device.txt"

if [ "$wave" = main ]; then
  echo "== mk-bench alone ($(date +%T))"
  "$B/runtime/tools/mk-bench" --kernel-dir "$MK_KERNELS_DIR/kimi_linear_w4a16" \
    --ctx 2048,8192,16384 --measure-bandwidth --json "$LOGS/bench.json" 2>&1 |
    tee "$LOGS/bench.log"
  echo "${PIPESTATUS[0]}" >"$LOGS/bench.rc"
  [ -n "${OUT:-}" ] && [ -f "$LOGS/bench.json" ] && cp "$LOGS/bench.json" "$OUT/bench.json"
  echo "== the rest side by side ($(date +%T))"
  for t in mk_template_tests mk_template_tests_variants mk_template_tests_forms; do
    part "$t" "'$B/tests/templates/$t'"
  done
  part ctest-runtime "ctest --test-dir '$B' -L runtime --output-on-failure"
  filter="OracleGpu.*:SessionGpu.*-$(printf 'OracleGpu.%s:' "${deep_tests[@]}" \
    ReleasedModelLayerByLayer | sed 's/:$//')"
  for ((i = 0; i < MK_SUITE_SHARDS; ++i)); do
    part "gpu-shard$i" "cd '$G' && GTEST_TOTAL_SHARDS=$MK_SUITE_SHARDS GTEST_SHARD_INDEX=$i \
      ./mk-gpu-tests --gtest_filter='$filter'"
  done
  if command -v compute-sanitizer >/dev/null; then
    for tool in memcheck synccheck; do
      part "sanitize-$tool" "cd '$G' && compute-sanitizer --tool $tool --error-exitcode 3 \
        ./mk-gpu-tests --gtest_filter=OracleGpu.FullUnitRecomputeOnLiveData"
    done
  else
    echo "no compute-sanitizer on this machine" | tee "$LOGS/sanitize.log"
    echo 1 >"$LOGS/sanitize.rc"
  fi
  part dropin-and-examples "
    export MK_RUNTIME_LIB='$B/runtime/libmk_runtime_c.so' MK_ORACLE_BIN='$B/oracle/mk-oracle'
    s=0
    python3 -m pytest -q python/tests || s=1
    '$B/examples/mk-decode' '$MK_KERNELS_DIR/kimi_linear_w4a16' --tokens 32 | tail -3 || s=1
    MK_KERNEL_DIR='$MK_KERNELS_DIR/kimi_linear_w4a16' python3 examples/decode.py --tokens 16 |
      tail -3 || s=1
    if [ -d '$MK_KERNELS_DIR/qwen3_8b_layer' ]; then
      MK_KERNEL_DIR='$MK_KERNELS_DIR/qwen3_8b_layer' python3 examples/decode.py \
        --spec examples/specs/qwen3_8b_layer.json --tokens 16 | tail -3 || s=1
    fi
    exit \$s"
  # The schedule variants' one-step oracle tests, in two parts.
  vs=()
  for d in "$MK_KERNELS_DIR"/kimi_linear_w4a16_t*/; do [ -d "$d" ] && vs+=("$(basename "$d")"); done
  half=$(((${#vs[@]} + 1) / 2))
  for k in 0 1; do
    set_=("${vs[@]:$((k * half)):$half}")
    [ ${#set_[@]} -gt 0 ] || continue
    part "variants$k" "
      s=0
      for v in ${set_[*]}; do
        echo \"== \$v\"
        (cd '$G' && MK_FULL_KERNEL=\$v ./mk-gpu-tests --gtest_filter=OracleGpu.FullUnitOneStep) \
          >'$LOGS'/variant-\$v.log 2>&1
        rc=\$?
        grep -E 'OK|FAILED|cosine' '$LOGS'/variant-\$v.log
        case \"\$v\" in
          *_tint8) [ \$rc = 0 ] || echo \"(\$v: opt-in integer arithmetic; disagreement reported, not failed)\" ;;
          *) [ \$rc = 0 ] || s=1 ;;
        esac
      done
      exit \$s"
  done
  # The unit under the opt-in template forms (NVRTC options; their CUBINs
  # carried where make-gpu-kernels.sh compiled them):
  # the one-step oracle test.
  . scripts/unit-opt-in-forms.sh
  part template-forms "
    cd '$G' && s=0
    . '$PWD/scripts/unit-opt-in-forms.sh'
    for f in $MK_UNIT_OPT_IN_FORMS; do
      unit_opt_in_form \$f
      echo \"== \$opt_in_option on \$opt_in_kernel\"
      MK_FULL_KERNEL=\$opt_in_kernel MK_NVRTC_OPTIONS=\$opt_in_option \
        ./mk-gpu-tests --gtest_filter=OracleGpu.FullUnitOneStep || s=1
    done
    exit \$s"
  part mk-diff "
    s=0
    for k in tiny_debug kimi_linear_w4a16_debug tiny_dense_first_debug tiny_released_forms_debug; do
      echo \"== \$k\"
      if [ -d '$MK_KERNELS_DIR'/\$k ]; then
        '$B/runtime/tools/mk-diff' --kernel-dir '$MK_KERNELS_DIR'/\$k --ctx 2048 | tail -3 || s=1
      else
        echo \"no \$k (scripts/make-gpu-kernels.sh makes it)\"; s=1
      fi
    done
    exit \$s"
  # The ptxas fault of perf notes #72 and #211 (a policy register read but
  # never written: an illegal instruction) in every CUBIN of the NVRTC
  # cache, i.e. every kernel this run loads (the script finds nvdisasm, or
  # says it cannot and fails the part).
  part sass-uniforms "
    if [ -z \"\${MK_CACHE_DIR:-}\" ] || ! ls \"\$MK_CACHE_DIR\"/*.cubin >/dev/null 2>&1; then
      echo 'no NVRTC cache CUBINs to read'; exit 0
    fi
    python3 scripts/sass-unwritten-uniforms.py \"\$MK_CACHE_DIR\"/*.cubin | grep -v ': 0 instructions' ; exit \${PIPESTATUS[0]}"
elif [ "$wave" = released ]; then
  echo "== the released model layer by layer ($(date +%T))"
  part ReleasedModelLayerByLayer "cd '$G' && ./mk-gpu-tests --gtest_filter=OracleGpu.ReleasedModelLayerByLayer"
else
  echo "== the deep tests side by side ($(date +%T))"
  for t in "${deep_tests[@]}"; do
    part "$t" "cd '$G' && ./mk-gpu-tests --gtest_filter=OracleGpu.$t"
  done
fi
wait "${pids[@]}"

nvrtc_cache_note
echo "== done ($(date +%T))"
status=0
for rc in "$LOGS"/*.rc; do
  name=$(basename "$rc" .rc)
  code=$(cat "$rc")
  [ "$code" = 0 ] || status=1
  summary=$(grep -hE '^\[  (PASSED|FAILED) |tests passed|ERROR SUMMARY|passed|failed' \
    "$LOGS/$name.log" 2>/dev/null | tail -3 | tr '\n' ' ')
  echo "$name: $([ "$code" = 0 ] && echo pass || { [ "$code" = 124 ] && echo "CUT OFF" || echo "FAIL ($code)"; }) $summary"
done
grep -h "^\[  FAILED  \]" "$LOGS"/*.log 2>/dev/null | sort -u | head -30
echo "status $status; logs in $LOGS"
exit $status
