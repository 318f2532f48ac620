#!/usr/bin/env bash
# Prepares what the GPU machine (which has no MLIR and no GoogleTest) needs,
# on a machine with the compiler: the kernels the GPU tests and benchmarks use,
# one directory per spec under ${1:-.carry/kernels}: kimi_linear_w4a16/
# (examples/kimi_linear_w4a16.json) and tiny/ (examples/specs/tiny.json); and
# a copy of Debian's GoogleTest sources in .carry/googletest and of CLI11's
# headers in .carry/cli11. Carry .carry to
# the GPU machine and point MK_KERNELS_DIR at the kernels (scripts/gpu-tests.sh).
# Then every kernel's CUBIN (and the phase-timing builds mk-bench
# --phase-timing uses for the unit and the released model) compiled here by
# mk-compile into the NVRTC cache .carry/nvrtc-cache, for
# ${MK_NVRTC_CACHE_ARCH:-sm_90}: the GPU scripts point the runtime at it
# (gpu-common.sh), so a fresh GPU machine skips those compiles where its
# NVRTC version and CUDA root's include paths give the same cache keys (else
# it compiles them as before; the scripts print how many it compiled).
# MK_NVRTC_CACHE=0 skips this step, as does a build without mk-compile;
# MK_NVRTC_UNIT_VARIANTS names the unit's NVRTC-option variants compiled
# too (default: the opt-in forms of scripts/unit-opt-in-forms.sh, whose
# oracle tests gpu-suite.sh main runs; an OPTION@VARIANT entry compiles a
# schedule variant's kernel with it instead; e.g. "-DMK_SPIN_NS=64
# -DMK_POLL_RELAXED", perf notes #167).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-.carry/kernels}"
mkc="${MK_BUILD_DIR:-build}/bin/mkc"
[ -x "$mkc" ] || { echo "no $mkc: run scripts/setup-and-build.sh first" >&2; exit 1; }
if [ ! -f .carry/googletest/CMakeLists.txt ] && [ -f /usr/src/googletest/CMakeLists.txt ]; then
  mkdir -p .carry && cp -r /usr/src/googletest .carry/googletest
fi
# CLI11's headers (the runtime tools' command lines), which the top-level
# CMakeLists finds in .carry/cli11 where the machine has none.
if [ ! -f .carry/cli11/CLI/CLI.hpp ] && [ -f /usr/include/CLI/CLI.hpp ]; then
  mkdir -p .carry/cli11 && cp -r /usr/include/CLI .carry/cli11/CLI
fi
# <name>_debug: the same kernels with --debug-capture, for mk-diff.
for pair in kimi_linear_w4a16:examples/kimi_linear_w4a16.json tiny:examples/specs/tiny.json; do
  name=${pair%%:*}
  spec=${pair#*:}
  rm -rf "${out:?}/$name" "${out:?}/${name}_debug"
  "$mkc" "$spec" --emit=cuda -o "$out/$name"
  "$mkc" "$spec" --emit=cuda --debug-capture -o "$out/${name}_debug"
  echo "$out/$name, $out/${name}_debug: $(ls "$out/$name" | paste -sd' ')"
done
# Layer 0 with a dense SwiGLU FFN (OracleGpu.*DenseFirst*), tiny and full
# width, the tiny one with captures too (mk-diff in gpu-tests.sh); the
# tiny spec and the unit with the released model's sigmoid router
# (OracleGpu.*SigmoidRouter*), with its MLA form (no rotation, the latent
# normalized: OracleGpu.*MlaNope*), and with every released-model form the
# family expresses at once (OracleGpu.*ReleasedForms*: those, the dense
# first layer, norms rounded twice, eps 1e-5); and those as a whole model,
# token in, next token out (OracleGpu.*Model*: the tiny one with a
# 8208-token vocabulary (3 argmax slices) and with a 1000-token bf16 LM head; the unit's width
# with the released model's 163840), and the released model's 27 layers as
# mkc --from-hf imports them (kimi_linear_48b: mk-bench only, 26 GB of
# random int4 weights; kimi_linear_48b_bf16_head: the same with the bf16 LM
# head).
# The dense GQA family (OracleGpu.*DenseGqa*, OracleGpu.Qwen3*, the
# drop-in's dense tests, mk-bench): a tiny two-layer spec, a Qwen3-8B-sized
# layer and all 36 of its layers (3.7 GB of random weights); a GQA layer in
# the tiny hybrid pattern (OracleGpu.TinyGqaHybrid*).
for s in tiny_dense_first kimi_linear_dense_first tiny_sigmoid_router kimi_linear_sigmoid_router \
  tiny_mla_nope kimi_linear_mla_nope tiny_released_forms kimi_linear_released_forms \
  tiny_model tiny_model_bf16_head kimi_linear_model kimi_linear_48b kimi_linear_48b_bf16_head \
  tiny_dense_gqa qwen3_8b_layer qwen3_8b_36l tiny_gqa_hybrid; do
  rm -rf "${out:?}/$s"
  "$mkc" "examples/specs/$s.json" --emit=cuda -o "$out/$s"
  echo "$out/$s"
done
# The released forms with each KDA layer's gated output norm staged by its
# output projection (schedule-fuse-kda-gated-norm, opt-in: measured no
# faster, perf notes #168; OracleGpu.ReleasedFormsGatedNormFusedOneStep, and
# the bench against kimi_linear_released_forms).
rm -rf "${out:?}/kimi_linear_released_forms_tgnorm"
"$mkc" examples/specs/kimi_linear_released_forms.json --emit=cuda \
  -o "$out/kimi_linear_released_forms_tgnorm" --pass-option=schedule-fuse-kda-gated-norm=enabled=true
echo "$out/kimi_linear_released_forms_tgnorm"
# The router's logits counted, not polled (schedule-poll-router-logits=
# enabled=false; polling is the default since session 35): the tiny spec
# (softmax router, its 8-step test) and the released forms (sigmoid router):
# OracleGpu.*RouterCounted*; the unit's variant tcounted below (oracle test
# and bench).
rm -rf "${out:?}/tiny_tcounted" "${out:?}/kimi_linear_released_forms_tcounted"
# (The polled forms' folders of session 34, when polling was opt-in.)
rm -rf "${out:?}/tiny_tpoll" "${out:?}/kimi_linear_released_forms_tpoll"
"$mkc" examples/specs/tiny.json --emit=cuda -o "$out/tiny_tcounted" \
  --pass-option=schedule-poll-router-logits=enabled=false
echo "$out/tiny_tcounted"
"$mkc" examples/specs/kimi_linear_released_forms.json --emit=cuda \
  -o "$out/kimi_linear_released_forms_tcounted" --pass-option=schedule-poll-router-logits=enabled=false
echo "$out/kimi_linear_released_forms_tcounted"
# Whole models with the greedy argmax as its own task after the LM head
# (schedule-fuse-argmax=enabled=false; the default merges it in the head's
# tiles since perf notes #171): OracleGpu.*ArgmaxTask*, and mk-bench
# against the default.
for s in tiny_model kimi_linear_model; do
  rm -rf "${out:?}/${s}_fargmax" "${out:?}/${s}_argmax_task"
  "$mkc" "examples/specs/$s.json" --emit=cuda -o "$out/${s}_argmax_task" \
    --pass-option=schedule-fuse-argmax=enabled=false
  echo "$out/${s}_argmax_task"
done
# A Hugging Face config of the released model's layout, reduced
# (OracleGpu.TinyHfCheckpointDecodes: its random checkpoint converted).
rm -rf "${out:?}/kimi48b_tiny"
mkdir -p "$out/kimi48b_tiny"
"$mkc" --from-hf tests/python/configs/kimi48b_tiny.json --hf-group 16 \
  --hf-name kimi48b_tiny -o "$out/kimi48b_tiny/spec.json" 2>&1 | { grep -v "^mkc: note:" || true; } >&2
"$mkc" "$out/kimi48b_tiny/spec.json" --emit=cuda -o "$out/kimi48b_tiny"
echo "$out/kimi48b_tiny"
rm -rf "${out:?}/tiny_dense_first_debug" "${out:?}/qwen3_8b_36l_debug" "${out:?}/tiny_released_forms_debug" \
  "${out:?}/tiny_model_debug"
"$mkc" examples/specs/tiny_dense_first.json --emit=cuda --debug-capture -o "$out/tiny_dense_first_debug"
# The released forms with captures (mk-diff: the FFNs' bf16 steps among them).
"$mkc" examples/specs/tiny_released_forms.json --emit=cuda --debug-capture -o "$out/tiny_released_forms_debug"
# The tiny whole model with captures (OracleGpu.TinyModelLayerByLayer: each
# layer from the kernel's own input, then the head).
"$mkc" examples/specs/tiny_model.json --emit=cuda --debug-capture -o "$out/tiny_model_debug"
# The 36 dense layers with captures (OracleGpu.Qwen3ThirtySixLayersLayerByLayer).
"$mkc" examples/specs/qwen3_8b_36l.json --emit=cuda --debug-capture -o "$out/qwen3_8b_36l_debug"
# The tiny spec with tile-contiguous weights (OracleGpu.TinyTiledWeights).
rm -rf "${out:?}/tiny_tiled"
"$mkc" examples/specs/tiny.json --emit=cuda -o "$out/tiny_tiled" \
  --pass-option=schedule-tile-weights=layout=tiled
echo "$out/tiny_tiled"
# Schedule variants to compare (scripts/gpu-tests.sh runs the one-step
# oracle test and the bench on every kimi_linear_w4a16_t*/): NAME PASS=OPTIONS...
# (one --pass-option each).
variant() {
  local name=$1 opts=()
  shift
  for o in "$@"; do opts+=(--pass-option="$o"); done
  rm -rf "${out:?}/kimi_linear_w4a16_$name"
  "$mkc" examples/kimi_linear_w4a16.json --emit=cuda -o "$out/kimi_linear_w4a16_$name" "${opts[@]}"
  echo "$out/kimi_linear_w4a16_$name ($*)"
}
# MK_DEEP_KERNELS=1: the 27-layer, 256-expert spec too (OracleGpu.DeepSpecOneStep,
# OracleGpu.DeepSpecLayerByLayer, mk-bench; its random weights are ~24 GB),
# and the released model's variants for mk-bench (below).
# With captures too (OracleGpu.DeepSpecLayerByLayer: every layer against the
# oracle from the kernel's own input to it).
rm -rf "${out:?}/kimi_linear_27l" "${out:?}/kimi_linear_27l_debug" "${out:?}/kimi_linear_48b_debug" \
  "${out:?}/kimi_linear_48b_tgnorm" "${out:?}/kimi_linear_48b_tcounted" \
  "${out:?}/kimi_linear_48b_tpolled" "${out:?}/kimi_linear_48b_argmax_task" \
  "${out:?}/kimi_linear_48b_tkdal2" "${out:?}/kimi_linear_48b_trecut"
# The wide specs too (OracleGpu.Wide*: DeepSeek-V3's and Mixtral's widths in
# the unit's family, ~6 GB and ~1.6 GB of random weights).
rm -rf "${out:?}/kimi_wide_dsv3" "${out:?}/kimi_wide_mixtral"
if [ -n "${MK_DEEP_KERNELS:-}" ]; then
  "$mkc" examples/specs/kimi_linear_27l.json --emit=cuda -o "$out/kimi_linear_27l"
  "$mkc" examples/specs/kimi_linear_27l.json --emit=cuda --debug-capture -o "$out/kimi_linear_27l_debug"
  echo "$out/kimi_linear_27l, $out/kimi_linear_27l_debug"
  # The released model's 27 layers and head with captures
  # (OracleGpu.ReleasedModelLayerByLayer).
  "$mkc" examples/specs/kimi_linear_48b.json --emit=cuda --debug-capture -o "$out/kimi_linear_48b_debug"
  echo "$out/kimi_linear_48b_debug"
  # The released model with its gated norms staged by the output
  # projections (schedule-fuse-kda-gated-norm; #168 measured it no faster):
  # mk-bench against kimi_linear_48b.
  "$mkc" examples/specs/kimi_linear_48b.json --emit=cuda -o "$out/kimi_linear_48b_tgnorm" \
    --pass-option=schedule-fuse-kda-gated-norm=enabled=true
  echo "$out/kimi_linear_48b_tgnorm"
  # The released model with its 256-expert routers polled (max-experts=256;
  # the default keeps their counters: #171 measured polling 23 us slower)
  # and with the argmax as its own task (the default folds it): mk-bench
  # against kimi_linear_48b.
  "$mkc" examples/specs/kimi_linear_48b.json --emit=cuda -o "$out/kimi_linear_48b_tpolled" \
    --pass-option=schedule-poll-router-logits=max-experts=256
  echo "$out/kimi_linear_48b_tpolled"
  "$mkc" examples/specs/kimi_linear_48b.json --emit=cuda -o "$out/kimi_linear_48b_argmax_task" \
    --pass-option=schedule-fuse-argmax=enabled=false
  echo "$out/kimi_linear_48b_argmax_task"
  # The released model with each gated-delta phase asking L2 for its first
  # task's state slice and conv window at the phase's entry, before the
  # counter waits (kda-state-l2; no faster on the unit, #67 / #72, whose 6
  # MB of KDA state stays in L2 from step to step; the 48B's 20 layers hold
  # 40 MB of it beside 17 MB of MLA cache at 2048): mk-bench against
  # kimi_linear_48b (#187: no change, -0.4 us).
  "$mkc" examples/specs/kimi_linear_48b.json --emit=cuda -o "$out/kimi_linear_48b_tkdal2" \
    --pass-option=schedule-prefetch-weights=kda-state-l2=true
  echo "$out/kimi_linear_48b_tkdal2"
  # The released model with its MoE norm phases cut again where they hold
  # more instances than blocks (recut-overflowing-phases: the 256-row
  # router and the shared expert's gate/up, 256 + 64 instances on 264
  # blocks, become 128 + 128): mk-bench against kimi_linear_48b (#186: +50
  # us, opt-in).
  "$mkc" examples/specs/kimi_linear_48b.json --emit=cuda -o "$out/kimi_linear_48b_trecut" \
    --pass-option=schedule-partition-work=recut-overflowing-phases=true
  echo "$out/kimi_linear_48b_trecut"
  for s in kimi_wide_dsv3 kimi_wide_mixtral; do
    "$mkc" "examples/specs/$s.json" --emit=cuda -o "$out/$s"
    echo "$out/$s"
  done
fi
rm -rf "$out"/kimi_linear_w4a16_t*/
# The spec's exact arithmetic (every weight dequantized to bf16 as the
# spec rounds it, the default applying zero points and scales per group;
# the MLA partial sums in fp32 as the spec keeps them, the default's bf16):
# oracle-tested on every run.
variant texact schedule-tile-weights=arithmetic=exact schedule-form-phases=mla-partials=f32
# Only the scales per group (the default of sessions 22-26, opt-in since
# session 27): oracle test and bench.
variant tscaled schedule-tile-weights=arithmetic=scaled
# The opt-in integer arithmetic, always: gpu-tests.sh runs the oracle test
# (reported, not required: docs/pipeline.md says why) and the bench on it.
variant tint8 schedule-tile-weights=arithmetic=int8
# The KDA output projections folded into the gated-delta tasks (opt-in,
# measured no faster): oracle-tested on every run.
variant tfuse schedule-fuse-kda-o-proj=enabled=true
# Phase balancing with its spread-only moves (the zeroing tasks leave phase
# 0; off by default since perf notes #72): measured against the default.
variant tspread schedule-partition-work=balance-spread=true
# The MLA query absorption's wait for the projected queries in its prologue,
# after its first rows of W_kv_b are loaded (opt-in: perf notes #155
# measured it no faster beside the default's attention and GEMV prologue
# waits): oracle test and bench.
variant tawait schedule-prologue-waits=absorb=true
# The MLA attention before session 45: 8-head tasks (queries and
# probabilities in hi + lo parts sharing one mma), 64 chunks of at least 16
# rows; the default since (16-head tasks in one bf16 part, 128 chunks of at
# least 32 rows) measured 3.3 us per token faster at 16384 and on par at
# 2048 on an H100 (perf notes #215): oracle test and bench.
variant thg8 "schedule-partition-work=attention-head-group=8 attention-chunks=64 attention-query-parts=2 attention-chunk-rows=16"
# The MLA partial sums in fp32, the spec's (the default's bf16 measured 5.3
# us per token faster at 16384 in perf notes #218, 1.6 in #220): oracle
# test and bench.
variant tf32p schedule-form-phases=mla-partials=f32
# The routed experts waiting for the router's counter instead of polling its
# logits (the default until session 35; perf notes #167): oracle test and
# bench.
variant tcounted schedule-poll-router-logits=enabled=false
if [ -n "${MK_SCHEDULE_VARIANTS:-}" ]; then
  # 32-row MLA attention sub-chunks (opt-in; perf notes #98: slower).
  variant tsub32 "schedule-partition-work=attention-head-group=8 attention-sub-rows=32"
  variant trowmajor schedule-tile-weights=layout=row-major
  variant ttiled schedule-tile-weights=layout=tiled
  variant tseg128 schedule-partition-work=full-segment-bytes=128
  variant tchunks32 schedule-partition-work=attention-chunks=32
  variant tnostreams schedule-prefetch-weights=streams=false
  variant tstreams schedule-prefetch-weights=streams=true
  variant tnormstreams schedule-prefetch-weights=norm-streams=true
  variant tnophasebudget schedule-partition-work=phase-budget=false
  variant tkdal2 schedule-prefetch-weights=kda-state-l2=true
  # Each block's routed MoE down tile asked of L2 after its top-k in the
  # gate/up phase (session 52).
  variant troutedl2 schedule-prefetch-weights=routed-tasks-l2=true
  variant tnobalance schedule-partition-work=balance-phases=false
  variant tprefetch1 schedule-prefetch-weights=distance=1
  # 16-head tasks in two parts (two mma per step, a 2-slot ring): perf notes
  # #214.
  variant tparts2 "schedule-partition-work=attention-query-parts=2 attention-chunk-rows=16"
  # The attention's and the output projections' waits before their tasks
  # (the default until session 29).
  variant tnowait "schedule-prologue-waits=attention=false gemv=false"
  # The MLA combine's wait for the attention chunks' partials in its
  # prologue, after its first W_v rows are asked for (opt-in; perf notes
  # #158 measured the form that read its partials from L2 slower; the form
  # that stages them in the ring's later stages within noise, #167).
  variant tcwait schedule-prologue-waits=combine=true
fi
# The NVRTC cache for the GPU machine (see the top): entries of kernels no
# longer generated are dropped; the ones still current are kept, not rebuilt.
compile="${MK_BUILD_DIR:-build}/runtime/tools/mk-compile"
if [ "${MK_NVRTC_CACHE:-1}" = 0 ]; then
  :
elif [ ! -x "$compile" ]; then
  echo "note: no $compile (a build without the runtime tools): the GPU machine compiles every kernel itself" >&2
else
  cache=.carry/nvrtc-cache
  arch="${MK_NVRTC_CACHE_ARCH:-sm_90}"
  mkdir -p "$cache"
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
  find "$out" -name '*.manifest.json' -printf '%h\0' | sort -zu |
    xargs -0 -P "$(nproc)" -n 2 "$compile" --arch "$arch" --cache-dir "$cache" >"$log" ||
    { cat "$log"; exit 1; }
  # The phase-timing builds mk-bench --phase-timing uses (the unit's; the
  # released model's, counted and polled, where MK_DEEP_KERNELS made them).
  for k in kimi_linear_w4a16 kimi_linear_48b kimi_linear_48b_tpolled; do
    [ -d "$out/$k" ] || continue
    "$compile" --arch "$arch" --cache-dir "$cache" --option=-DMK_PHASE_TIMING "$out/$k" >>"$log" ||
      { cat "$log"; exit 1; }
  done
  # The 48B's one-level top-k (-DMK_TOPK_ONE_LEVEL, the rank count before
  # session 38) for MK_NVRTC_OPTIONS runs (#184 measured it in one process
  # instead, the macro defined on a copy's first line: +57 us).
  if [ -d "$out/kimi_linear_48b" ]; then
    "$compile" --arch "$arch" --cache-dir "$cache" --option=-DMK_TOPK_ONE_LEVEL \
      "$out/kimi_linear_48b" >>"$log" || { cat "$log"; exit 1; }
  fi
  # The unit's template variants (MK_NVRTC_UNIT_VARIANTS: space-separated
  # NVRTC options, one variant each, OPTION@VARIANT on a schedule variant's
  # kernel; default: the opt-in forms whose oracle test gpu-suite.sh main
  # runs).
  . scripts/unit-opt-in-forms.sh
  unit_variants=${MK_NVRTC_UNIT_VARIANTS-$MK_UNIT_OPT_IN_FORMS}
  for entry in $unit_variants; do
    unit_opt_in_form "$entry"
    [ -d "$out/$opt_in_kernel" ] || { echo "no kernel $opt_in_kernel for $entry" >&2; exit 1; }
    "$compile" --arch "$arch" --cache-dir "$cache" --option="$opt_in_option" \
      "$out/$opt_in_kernel" >>"$log" || { cat "$log"; exit 1; }
  done
  keep=$(grep -o '[0-9a-f]\{64\}' "$log" | sort -u || true)
  for f in "$cache"/*.cubin; do
    [ -e "$f" ] || continue
    grep -qx "$(basename "$f" .cubin)" <<<"$keep" || rm -f "$f"
  done
  echo "$cache: $(ls "$cache" | wc -l) CUBINs for $arch ($(du -sh "$cache" | cut -f1)), $(grep -c 'compiled into' "$log" || true) compiled now"
fi
