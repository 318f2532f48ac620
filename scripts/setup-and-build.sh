#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks (idempotent), configures and
# builds into ${MK_BUILD_DIR:-build}. Set MK_BUILD_COMPILER=OFF to skip MLIR.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${MK_BUILD_DIR:=build}"
: "${MK_BUILD_COMPILER:=ON}"
: "${MK_JOBS:=2}"
need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
pkgs=(cmake ninja-build g++ libgtest-dev libcli11-dev python3 python3-numpy python3-venv)
if [ "$MK_BUILD_COMPILER" = ON ]; then
  pkgs+=(libmlir-19-dev mlir-19-tools llvm-19-dev llvm-19-tools)
fi
for p in "${pkgs[@]}"; do have_pkg "$p" || need+=("$p"); done
if [ ${#need[@]} -gt 0 ] && command -v apt-get >/dev/null; then
  echo "== installing: ${need[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${need[@]}"
fi
cmake -S . -B "$MK_BUILD_DIR" -G Ninja -DMK_BUILD_COMPILER="$MK_BUILD_COMPILER" ${MK_CMAKE_ARGS:-}
cmake --build "$MK_BUILD_DIR" -j "$MK_JOBS"
