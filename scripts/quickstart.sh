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
# With their dependencies that is about 23 packages and 290 MB on a fresh
# Debian 12, most of it clang/LLVM 15 (PoCL's kernel compiler); the script
# says how many before installing.  Nothing is installed when every package
# is already present.  apt's output goes to build/quickstart-apt.log.
set -euo pipefail

usage() {
  sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
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
    echo "quickstart: [1/3] all required packages present, nothing to install"
    return 0
  fi
  local sudo=()
  if ((EUID != 0)); then
    if ! command -v sudo >/dev/null 2>&1; then
      echo "quickstart: not root and no sudo; install as root: apt-get install ${missing[*]}" >&2
      exit 1
    fi
    sudo=(sudo)
  fi
  mkdir -p build
  local log=build/quickstart-apt.log n
  echo "quickstart: [1/3] missing: ${missing[*]}"
  echo "quickstart:       refreshing apt's package lists (apt-get update; output in $log)"
  if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq > "$log" 2>&1; then
    cat "$log" >&2
    exit 1
  fi
  # what apt would install, dependencies included (a dry run)
  n=$("${sudo[@]}" apt-get install -s -qq "${missing[@]}" 2>/dev/null | grep -c '^Inst ' || true)
  echo "quickstart:       installing ${n:-?} packages with their dependencies (on a fresh"
  echo "quickstart:       Debian 12 about 290 MB, mostly PoCL's clang/LLVM; a few minutes)"
  if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq "${missing[@]}" >> "$log" 2>&1; then
    cat "$log" >&2
    exit 1
  fi
  echo "quickstart:       done"
}

install_missing

# PoCL keeps compiled kernels here instead of under $HOME.
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$here/build/pocl-cache}

echo "quickstart: [2/3] configure + build: cmake --preset default (Release, into build/)"
mkdir -p build # also where nothing had to be installed (the apt step makes it otherwise)
cmake --preset default > build/quickstart-configure.log 2>&1 || {
  cat build/quickstart-configure.log >&2
  exit 1
}
grep -E '^-- (flashmsa|OpenMP|Found OpenMP)' build/quickstart-configure.log || true
cmake --build --preset default

case "$mode" in
  run)
    echo "quickstart: [3/3] the devices found (flashmsa devices), then one problem timed and"
    echo "quickstart:       checked against the fp64 reference (flashmsa run)"
    ./build/apps/flashmsa devices
    ./build/apps/flashmsa run
    ;;
  test)
    echo "quickstart: [3/3] the whole test suite: ctest --preset default (CPU suites about a"
    echo "quickstart:       minute on two cores; OpenCL compiles its kernels with PoCL once)"
    ctest --preset default
    # PoCL's zero-byte leftovers of its cache writes (README, Quick start)
    find "$POCL_CACHE_DIR" -maxdepth 1 -name 'tempfile_*' -size 0 -delete 2> /dev/null || true
    ;;
esac
