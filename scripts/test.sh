#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine (run as root):
# installs packages, builds, and runs every test twice, the pipelines'
# differential tests three times —
#   1. Release build: unit tests + integration tests (real agq-switch and
#      workers on virtual DPDK ports);
#   2. Debug build with ASan+UBSan and the TNA rule checks on: the same tests
#      except the multi-process worker runs (label multiprocess), which are
#      too slow under the sanitizers on 2 cores;
#   3. the profile-guided release build (scripts/build-pgo.sh build-pgo:
#      instrumented build, training replays -- 2 s each here, AGQ_PGO_QUICK --,
#      optimised build), then the
#      differential tests of the three pipelines compiled with that profile
#      (the same objects as its agq-switch) against their models.
# Label p4 (whenever ../shared/tools/p4c exists, Skipped otherwise): the
# p4test + bf-p4c compile of both targets (Tofino 1 ~2 min, Tofino 2 ~4 min
# of one core) and their bfrt.json name checks (docs/PIPELINE.md, "Compiled
# resources"). They run in pass 2 (pass 1 with --quick), beside the
# sanitizer pass's slow unit tests: pass 1's unit tests take seconds, so
# there the compiles would leave a core idle before the serial integration
# tests. Label p4compile (--p4) is kept for slower P4 checks; empty now.
# Usage: scripts/test.sh [--quick] [--p4]   (--quick: Release build only)
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
p4compile=0
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    --p4) p4compile=1 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown option '$a' (try --help)" >&2; exit 2 ;;
  esac
done

scripts/setup.sh
jobs=$(nproc)

echo "== Release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build
# Labels each pass leaves out (see above).
skip_p4compile=p4compile
[ "$p4compile" -eq 1 ] && skip_p4compile=
if [ "$quick" -eq 1 ]; then
  release_skip=$skip_p4compile
  asan_skip=
else
  release_skip="p4${skip_p4compile:+|$skip_p4compile}"
  asan_skip="multiprocess${skip_p4compile:+|$skip_p4compile}"
fi
ctest --test-dir build --output-on-failure -j "$jobs" ${release_skip:+-LE "$release_skip"}

if [ "$quick" -eq 0 ]; then
  echo "== Debug + ASan/UBSan build (TNA rule checks on)"
  # -g1: line tables, all a sanitizer's stack trace needs; compiles ~13% faster than -g.
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DAGQ_SANITIZE=ON -DAGQ_BUILD_BENCH=OFF \
    -DCMAKE_C_FLAGS_DEBUG=-g1 -DCMAKE_CXX_FLAGS_DEBUG=-g1 >/dev/null
  ninja -C build-asan
  # DPDK's EAL keeps its memory until exit; leaks are checked by the unit
  # tests' own process, not by LSan at DPDK exit.
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" -LE "$asan_skip"
fi
if [ "$quick" -eq 0 ]; then
  echo "== PGO release build and its pipelines' differential tests"
  AGQ_PGO_QUICK=1 scripts/build-pgo.sh build-pgo agq_pgo_diff_tests
  build-pgo/use/tests/agq_pgo_diff_tests
fi
echo "== all tests passed"
