# Sourced by the GPU machine's scripts (gpu-tests.sh, gpu-measure.sh,
# gpu-profile.sh) after `cd` to the repository root: the settings they share
# and the CMake arguments of a build without the compiler.
#
#   MK_BUILD_DIR (build-gpu), MK_JOBS (all cores), MK_KERNELS_DIR (kernels/)
#   MK_GTEST_SOURCE_DIR: GoogleTest's sources, else the first of
#   .carry/googletest, shared/googletest, /usr/src/googletest that exists
#
# Sets ROOT, gtest_args (empty if no GoogleTest was found) and generator
# (Ninja where installed).
export PATH="$PATH:/usr/local/cuda/bin"
ROOT=$PWD
: "${MK_BUILD_DIR:=build-gpu}"
: "${MK_JOBS:=$(nproc 2>/dev/null || echo 4)}"
: "${MK_KERNELS_DIR:=$ROOT/kernels}"
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
