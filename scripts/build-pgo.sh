#!/bin/bash
# A profile-guided (PGO) Release build of agq-switch and the benchmarks.
#
#   scripts/build-pgo.sh [DIR [TARGET...]]   (default: build-pgo; needs root, as DPDK does)
#
# TARGET...: what to build in DIR/use (default: agq-switch, agqctl and the
# benchmarks; scripts/test.sh builds only agq_pgo_diff_tests).
#
# 1. DIR/gen: an instrumented build (cmake -DAGQ_PGO=generate).
# 2. Training: bench/run.py --only pgo_train replays pcap traffic (l2,
#    classic, agq; 1 lcore, 2 lcores steered and hand-off) through that
#    switch on virtual ports, ~40 s; each run writes its profile into
#    DIR/profile as it exits (counts add up over runs). The agq traffic
#    has two shapes the benchmark does not measure, one on either side of
#    its 4 workers at 16 bits over 256 slots: 8 workers at 8 bits over 128
#    slots, then 2 at 32 over 512. So the profile learns the program's
#    paths, not the benchmark's frames.
# 3. DIR/use: the same sources compiled with the profile (-DAGQ_PGO=use).
#    The binaries to run are DIR/use/switch/agq-switch etc.
#
# bench/README.md reports the PGO build as its own row beside the default
# build (bench/run.py --baseline-build), measured in the same reps. Profiles are for this compiler and these sources;
# rerun after changing either (GCC warns about stale profiles and ignores
# them function by function).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${1:-$root/build-pgo}")
shift $(( $# > 0 ? 1 : 0 ))
use_targets=("$@")
[ ${#use_targets[@]} -gt 0 ] || use_targets=(agq-switch bench_pipeline bench_gen bench_memory bench_xcore agqctl)
py=/usr/bin/python3
[ -x "$py" ] || py=python3

rm -rf "$out/profile"
mkdir -p "$out"
echo "build-pgo: instrumented build in $out/gen"
cmake -S "$root" -B "$out/gen" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAGQ_PGO=generate \
  -DAGQ_PGO_DIR="$out/profile" >/dev/null
ninja -C "$out/gen" agq-switch bench_gen

echo "build-pgo: training (pcap replays through the instrumented switch)"
# AGQ_PGO_QUICK=1 (scripts/test.sh): 2 s replays instead of 4 -- the same
# paths, fewer counts; enough for tests of the optimised code's results,
# not for a build to benchmark.
quick=()
[ "${AGQ_PGO_QUICK:-0}" = 1 ] && quick=(--quick)
AGQ_WORKERS=8 AGQ_WIDTH=8 AGQ_SLOTS=128 "$py" "$root/bench/run.py" --only pgo_train --no-build --build-dir "$out/gen" \
  --no-boost "${quick[@]}"
AGQ_WORKERS=2 AGQ_WIDTH=32 AGQ_SLOTS=512 "$py" "$root/bench/run.py" --only pgo_train --traffic agq --no-build \
  --build-dir "$out/gen" --no-boost "${quick[@]}"
[ -d "$out/profile" ] || { echo "build-pgo: the training wrote no profile into $out/profile" >&2; exit 1; }

echo "build-pgo: optimised build in $out/use"
cmake -S "$root" -B "$out/use" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAGQ_PGO=use \
  -DAGQ_PGO_DIR="$out/profile" >/dev/null
ninja -C "$out/use" "${use_targets[@]}"
echo "build-pgo: done: ${use_targets[*]} in $out/use (agq-switch: bench/run.py --build-dir $out/use --no-build)"
