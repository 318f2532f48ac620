#!/usr/bin/env bash
# The embedded JIT links MLIR, which the GPU machine does not have. This packs
# what its GPU test and example need to run there, built here: mk-jit-tests,
# mk-jit-decode and the shared libraries they load that are not part of the
# C runtime (libLLVM and its dependencies), xz-compressed, into
# ${1:-.carry/jit}. scripts/gpu-tests.sh unpacks and runs them when the
# directory exists. Needs a build with the compiler (MK_BUILD_DIR, default
# build); the GPU machine needs a glibc at least as new as this one's.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-.carry/jit}"
build="${MK_BUILD_DIR:-build}"
tests="$build/tests/compiler/mk-jit-tests"
decode="$build/examples/mk-jit-decode"
for b in "$tests" "$decode"; do
  [ -x "$b" ] || { echo "no $b: build with the compiler first" >&2; exit 1; }
done
rm -rf "$out" && mkdir -p "$out/lib"
cp "$tests" "$decode" "$out/"
# Everything ldd resolves except the C runtime, the CUDA libraries (the GPU
# machine has its own) and the dynamic loader.
ldd "$tests" "$decode" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libnvrtc[^/]*|libcuda)\.so' |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done
tar -C "$out" -cJf "$out/lib.tar.xz" lib && rm -rf "$out/lib"
# Where the test looks for sources and scratch space (compiled in): the GPU
# machine must have the checkout at the same path.
echo "$PWD" > "$out/source-dir"
echo "$PWD/$build/tests/compiler" > "$out/tmp-dir"
du -sh "$out"
