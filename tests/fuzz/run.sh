#!/usr/bin/env bash
# Builds the libFuzzer harness (tests/fuzz/fuzz_api.c) with clang,
# -fsanitize=fuzzer,address,undefined, into build-fuzz/, and runs it on the
# CPU backend for a bounded time, starting from the seed corpus in
# tests/fuzz/corpus/.
#
#   tests/fuzz/run.sh [SECONDS]     default 150; CI runs this (.ci/run)
#
# The time is split between two processes, because FLASHMSA_CPU_KERNEL is
# read once per process: the kernel path this CPU picks (2/3 of the time) and
# generic-bf16, the portable twin of the bf16-product paths (1/3).  Each
# process is single-threaded, so with two or more cores they run at the same
# time (the same fuzzing as one after the other, in 2/3 of the wall time).
# New inputs go to build-fuzz/corpus/ (never into the repository); a crash,
# leak or timeout leaves its input in build-fuzz/ and fails with its path.
# Prints libFuzzer's final stats (executions, coverage, corpus) per process.
#
# Environment: FUZZ_CC (default: clang-14, else clang-15, else clang),
# FUZZ_JOBS (default 1) parallel workers, FUZZ_AT_ONCE (default 1 on two or
# more cores) 0 runs the two processes one after the other (CI does when
# another stage still holds a core).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$top"
seconds=${1:-150}
jobs=${FUZZ_JOBS:-1}

cc=${FUZZ_CC:-}
if [[ -z "$cc" ]]; then
  for c in clang-14 clang-15 clang; do
    if command -v "$c" > /dev/null; then cc=$c; break; fi
  done
fi
[[ -n "$cc" ]] || { echo "fuzz: no clang found (set FUZZ_CC)" >&2; exit 1; }

echo "fuzz: building the harness with $cc (-fsanitize=fuzzer,address,undefined) into build-fuzz/"
# The harness drives the CPU backend only (fuzz_api.c): the GPU backends stay
# out, so the build runs no nvcc (about two CPU-minutes of kernels it never loads).
cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFLASHMSA_FUZZ=ON -DFLASHMSA_OPENMP=OFF -DFLASHMSA_OPENCL=OFF -DFLASHMSA_CUDA=OFF \
  -DBUILD_TESTING=OFF > /dev/null
cmake --build build-fuzz --target fuzz_api

mkdir -p build-fuzz/corpus build-fuzz/artifacts
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

run() { # run NAME SECONDS [ENV=VALUE...]
  local name=$1 secs=$2 log="build-fuzz/$1.log" rc=0
  shift 2
  local par=()
  # -jobs runs children that log to ./fuzz-N.log: only when asked for
  if ((jobs > 1)); then par=(-jobs="$jobs" -workers="$jobs"); fi
  env "$@" build-fuzz/tests/fuzz/fuzz_api -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 \
    -max_len=512 -print_final_stats=1 "${par[@]}" \
    -artifact_prefix=build-fuzz/artifacts/ build-fuzz/corpus tests/fuzz/corpus > "$log" 2>&1 || rc=$?
  # the last coverage line and the final stats, whatever the outcome
  echo "fuzz: $name, $secs s:"
  grep -E '^#[0-9]+.*(DONE|pulse|REDUCE|NEW)' "$log" | tail -n 1 || true
  grep -E '^stat::' "$log" || true
  if [[ $rc -ne 0 ]]; then
    echo "fuzz: $name FAILED (exit $rc); the report:" >&2
    grep -E -A 30 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|fuzz_api: ' \
      "$log" | head -n 60 >&2 || tail -n 40 "$log" >&2
    ls build-fuzz/artifacts >&2
    return "$rc"
  fi
}

first=$((seconds * 2 / 3))
at_once=${FUZZ_AT_ONCE:-$(($(nproc 2> /dev/null || echo 1) >= 2))}
if ((at_once && jobs == 1)); then
  echo "fuzz: native for $first s and generic-bf16 for $((seconds - first)) s at once" \
       "(logs: build-fuzz/native.log, build-fuzz/generic-bf16.log)"
  # each prints its summary when it ends; the shorter one first
  run generic-bf16 "$((seconds - first))" FLASHMSA_CPU_KERNEL=generic-bf16 &
  bf16=$!
  rc=0
  run native "$first" || rc=$?
  wait "$bf16" || rc=$?
  ((rc == 0)) || exit "$rc"
else
  echo "fuzz: native for $first s, then generic-bf16 for $((seconds - first)) s" \
       "(logs: build-fuzz/native.log, build-fuzz/generic-bf16.log)"
  run native "$first"
  run generic-bf16 "$((seconds - first))" FLASHMSA_CPU_KERNEL=generic-bf16
fi
echo "fuzz: no crash, leak or timeout in $seconds s of fuzzing"
