#!/usr/bin/env bash
# flashmsa quick start on a fresh Debian 12 (bookworm) machine.
#
#   scripts/quickstart.sh run    install what is missing, build (preset "default",
#                                 into build/), run `flashmsa run` (one problem,
#                                 timed and checked against the fp64 reference)
#   scripts/quickstart.sh test   install what is missing, build, run the whole
#                                 test suite (`ctest --preset default`)
#
# Packages installed with apt-get when missing (as root, or through sudo):
#   build tools : build-essential cmake ninja-build pkg-config
#   tests       : libcmocka-dev
#   OpenCL      : pocl-opencl-icd ocl-icd-opencl-dev opencl-c-headers clinfo
#                 (PoCL runs OpenCL kernels on the CPU, so the OpenCL backend
#                  builds and is tested without a GPU)
# Nothing is installed when every package is already present.
set -euo pipefail

usage() {
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
}

mode=${1:-}
case "$mode" in
  run | test) ;;
  -h | --help | help) usage; exit 0 ;;
  *) usage >&2; exit 2 ;;
esac

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"

packages=(build-essential cmake ninja-build pkg-config libcmocka-dev
          pocl-opencl-icd ocl-icd-opencl-dev opencl-c-headers clinfo)

install_missing() {
  local missing=() p
  if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "quickstart: not a Debian-like system (no dpkg-query); install these yourself:" >&2
    echo "  ${packages[*]}" >&2
    return 0
  fi
  for p in "${packages[@]}"; do
    if [[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" != "installed" ]]; then
      missing+=("$p")
    fi
  done
  if ((${#missing[@]} == 0)); then
    echo "quickstart: all required packages present"
    return 0
  fi
  echo "quickstart: installing ${missing[*]}"
  local sudo=()
  if ((EUID != 0)); then
    if ! command -v sudo >/dev/null 2>&1; then
      echo "quickstart: not root and no sudo; install as root: apt-get install ${missing[*]}" >&2
      exit 1
    fi
    sudo=(sudo)
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq "${missing[@]}"
}

install_missing

# PoCL keeps compiled kernels here instead of under $HOME.
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$here/build/pocl-cache}

echo "quickstart: configure + build (preset default, build/)"
cmake --preset default
cmake --build --preset default

case "$mode" in
  run)
    echo "quickstart: ./build/apps/flashmsa devices && ./build/apps/flashmsa run"
    ./build/apps/flashmsa devices
    ./build/apps/flashmsa run
    ;;
  test)
    echo "quickstart: ctest --preset default"
    ctest --preset default
    ;;
esac
