#!/usr/bin/env bash
# A profiling run for the GPU machine: builds mk-bench, times the full unit,
# then samples one step under Nsight Compute with line info (stall reasons
# per SASS instruction, attributed to the template source lines).
#
#   MK_KERNELS_DIR=/path/kernels scripts/gpu-profile.sh
#
# MK_PROFILE_KERNEL names the kernel directory under MK_KERNELS_DIR
# (default kimi_linear_w4a16; e.g. kimi_linear_48b: perf notes #190);
# MK_PROFILE_CTX the context (default 2048); MK_PROFILE_SECTIONS the ncu
# sections, space-separated (default: warp states, source counters,
# scheduler, occupancy, launch, speed of light; fewer sections replay the
# kernel fewer times, which matters for the 48B's 26 GB of weights).
#
# Configures the build directory the other GPU scripts share
# (configure_and_build, gpu-common.sh: with the tests, so GoogleTest must be
# found as they find it). Writes to $OUT (the device tool) or
# $MK_BUILD_DIR/profile: bench.log,
# step-details.txt (ncu's details page: warp states, scheduler, occupancy),
# step-source.csv.xz (per-instruction samples, SASS with CUDA lines) and
# step.ncu-rep (open in the Nsight Compute GUI).
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu-common.sh
: "${MK_PROFILE_CTX:=2048}"
: "${MK_PROFILE_SECTIONS:=WarpStateStats SourceCounters SchedulerStats Occupancy LaunchStats SpeedOfLight}"
DEST=${OUT:-$BUILD/profile}
mkdir -p "$DEST"
kernel="$MK_KERNELS_DIR/${MK_PROFILE_KERNEL:-kimi_linear_w4a16}"
[ -d "$kernel" ] || { echo "no kernel directory $kernel (scripts/make-gpu-kernels.sh makes it)" >&2; exit 1; }

configure_and_build "$DEST" mk-bench || exit 1
bench="$BUILD/runtime/tools/mk-bench"

echo "== mk-bench (ctx $MK_PROFILE_CTX)"
"$bench" --kernel-dir "$kernel" --ctx "$MK_PROFILE_CTX" 2>&1 | tee "$DEST/bench.log" | tail -4

if ! command -v ncu >/dev/null; then
  echo "no ncu on this machine: profile not taken"
  exit 0
fi
echo "== ncu: one step, source counters with line info"
sections=()
read -ra names <<<"$MK_PROFILE_SECTIONS"
for s in "${names[@]}"; do sections+=(--section "$s"); done
MK_NVRTC_OPTIONS="-lineinfo ${MK_NVRTC_OPTIONS:-}" ncu --target-processes all \
  -k regex:'^mk_' --launch-skip 4 --launch-count 1 \
  "${sections[@]}" \
  --import-source yes -f -o "$DEST/step" \
  "$bench" --kernel-dir "$kernel" --ctx "$MK_PROFILE_CTX" --warmup 4 --iters 2 \
  >"$DEST/ncu.log" 2>&1 || { tail -30 "$DEST/ncu.log"; exit 1; }
tail -5 "$DEST/ncu.log"
ncu -i "$DEST/step.ncu-rep" --page details >"$DEST/step-details.txt" 2>&1
grep -E "Warp Cycles|Issued|Eligible|No Eligible|Active Warps|Duration|Registers|Stall" \
  "$DEST/step-details.txt" | head -30
ncu -i "$DEST/step.ncu-rep" --page source --csv --print-source cuda,sass \
  >"$DEST/step-source.csv" 2>"$DEST/source.err" ||
  ncu -i "$DEST/step.ncu-rep" --page source --csv >"$DEST/step-source.csv" 2>>"$DEST/source.err"
head -c 600 "$DEST/source.err"
wc -c "$DEST/step-source.csv"
xz -T0 -f "$DEST/step-source.csv"
exit 0
