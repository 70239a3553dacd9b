#!/usr/bin/env bash
# libFuzzer over the parser and both pipelines (tests/fuzz/): builds
# fuzz_libfuzzer with clang + ASan/UBSan in build-fuzz, seeds a corpus with
# one real frame of every kind (fuzz_frames --write-corpus), and fuzzes for a
# bounded time. Every input is checked against the invariants of
# tests/fuzz/fuzz_checks.hpp; a failure leaves a crash-* reproducer in
# build-fuzz/ (replay: build-fuzz/tests/fuzz/fuzz_libfuzzer <file>).
# Usage: scripts/fuzz.sh [--seconds S]   (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=20
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a value}"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
done

CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DAGQ_SANITIZE=ON \
  -DAGQ_LIBFUZZER=ON -DAGQ_BUILD_BENCH=OFF >/dev/null
ninja -C build-fuzz fuzz_libfuzzer fuzz_frames
corpus=build-fuzz/fuzz-corpus
build-fuzz/tests/fuzz/fuzz_frames --write-corpus "$corpus"
cd build-fuzz
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  tests/fuzz/fuzz_libfuzzer -max_total_time="$seconds" -max_len=512 -print_final_stats=1 fuzz-corpus
