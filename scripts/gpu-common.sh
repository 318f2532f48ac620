# Sourced by the GPU machine's scripts (gpu-tests.sh, gpu-suite.sh,
# gpu-measure.sh, gpu-profile.sh) after `cd` to the repository root: the
# settings they share, the CMake arguments of a build without the compiler
# and the packing of logs into the device tool's $OUT.
#
#   MK_BUILD_DIR (build-gpu), MK_JOBS (all cores), MK_KERNELS_DIR (kernels/),
#   MK_CMAKE_ARGS (more CMake arguments for configure_and_build)
#   MK_GTEST_SOURCE_DIR: GoogleTest's sources, else the first of
#   .carry/googletest, shared/googletest, /usr/src/googletest that exists
#
#   MK_CACHE_DIR: the runtime's NVRTC cache; default .carry/nvrtc-cache where
#   it exists (CUBINs that scripts/make-gpu-kernels.sh compiled ahead of
#   time with mk-compile: a fresh machine skips those compiles)
#
# Sets ROOT, BUILD ($MK_BUILD_DIR made absolute), gtest_args (empty if no
# GoogleTest was found) and generator (Ninja where installed); defines
# configure_and_build, nvrtc_cache_note, pack_to_out and
# pack_to_out_as_it_goes.
export PATH="$PATH:/usr/local/cuda/bin"
ROOT=$PWD
: "${MK_BUILD_DIR:=build-gpu}"
case "$MK_BUILD_DIR" in /*) BUILD=$MK_BUILD_DIR ;; *) BUILD=$ROOT/$MK_BUILD_DIR ;; esac
: "${MK_JOBS:=$(nproc 2>/dev/null || echo 4)}"
: "${MK_KERNELS_DIR:=$ROOT/kernels}"
if [ -z "${MK_CACHE_DIR:-}" ] && [ -d "$ROOT/.carry/nvrtc-cache" ]; then
  export MK_CACHE_DIR=$ROOT/.carry/nvrtc-cache
fi
_mk_cubins() { find "${MK_CACHE_DIR:-/nonexistent}" -maxdepth 1 -name '*.cubin' 2>/dev/null | wc -l; }
_mk_cubins_carried=$(_mk_cubins)
# nvrtc_cache_note: how many kernels this machine had to compile (cache
# misses) beside the ones that came compiled.
nvrtc_cache_note() {
  [ -n "${MK_CACHE_DIR:-}" ] || return 0
  echo "nvrtc cache $MK_CACHE_DIR: $_mk_cubins_carried CUBINs at the start," \
    "$(($(_mk_cubins) - _mk_cubins_carried)) compiled on this machine"
}
gtest_args=()
if [ -z "${MK_GTEST_SOURCE_DIR:-}" ]; then
  for d in .carry/googletest shared/googletest /usr/src/googletest; do
    if [ -f "$d/CMakeLists.txt" ]; then
      case "$d" in /*) MK_GTEST_SOURCE_DIR=$d ;; *) MK_GTEST_SOURCE_DIR=$ROOT/$d ;; esac
      break
    fi
  done
fi
[ -n "${MK_GTEST_SOURCE_DIR:-}" ] && gtest_args=(-DMK_GTEST_SOURCE_DIR="$MK_GTEST_SOURCE_DIR")
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

# configure_and_build LOGDIR TARGET...: configures $BUILD the one way every
# GPU script does (the runtime, tools and tests without the compiler,
# Release, GoogleTest as found above, then MK_CMAKE_ARGS), then builds
# TARGETs; logs in LOGDIR/configure.log and LOGDIR/build.log. On a failure
# prints the log's tail and returns 1.
configure_and_build() {
  local logs=$1
  shift
  # shellcheck disable=SC2086 # MK_CMAKE_ARGS is a list of arguments
  cmake -S "$ROOT" -B "$BUILD" "${generator[@]}" -DMK_BUILD_COMPILER=OFF -DMK_BUILD_TESTS=ON \
    -DCMAKE_BUILD_TYPE=Release "${gtest_args[@]}" ${MK_CMAKE_ARGS:-} \
    >"$logs/configure.log" 2>&1 || { tail -30 "$logs/configure.log"; return 1; }
  cmake --build "$BUILD" -j "$MK_JOBS" --target "$@" >"$logs/build.log" 2>&1 ||
    { tail -40 "$logs/build.log"; return 1; }
}

# pack_to_out DIR NAME: packs DIR into $OUT/NAME (a .tar.gz) where $OUT is
# set (the device tool returns $OUT even when a call is cut off at its time
# limit, but only a few files of it: one archive, refreshed as the run
# goes). Written aside, then renamed, so that a cut never leaves half an
# archive; each call writes its own temporary (a background pack and a
# step's may overlap); tar's status 1 (a log grew while it was read) still
# gives a whole archive of what was there.
pack_to_out() {
  [ -n "${OUT:-}" ] || return 0
  local tmp="$OUT/.$2.$BASHPID.tmp"
  tar -C "$(dirname "$1")" -czf "$tmp" "$(basename "$1")" 2>/dev/null
  if [ $? -le 1 ]; then mv -f "$tmp" "$OUT/$2"; else rm -f "$tmp"; fi
  return 0
}
# pack_to_out_as_it_goes DIR NAME: pack_to_out every 30 s in the background
# and once more when the script exits. The packer's sleep is waited for,
# not run in the foreground, so that TERM ends it at once; its output goes
# nowhere, so nothing it leaves holds the script's.
pack_to_out_as_it_goes() {
  [ -n "${OUT:-}" ] || return 0
  (trap 'exit 0' TERM; while :; do sleep 30 & wait $!; pack_to_out "$1" "$2"; done) \
    >/dev/null 2>&1 &
  _mk_packer=$!
  # shellcheck disable=SC2064 # the packer's pid and the paths are fixed now
  trap "kill $_mk_packer 2>/dev/null; wait $_mk_packer 2>/dev/null; pack_to_out '$1' '$2'" EXIT
}
