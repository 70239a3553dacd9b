#!/bin/bash
# memif_modes.sh [STARTS] -- is agq-switch's slow mode over memif set at
# start? Starts the switch STARTS times (default 10; 1 lcore, memif server
# on ports 0 and 1, the agq job of `bench/run.py --only memif`) and runs
# bench_gen --reuse (the memif client, on the other CPU) three times for
# 2 s against each start, a bench_xcore probe before each run (it runs
# beside the busy switch, so it reads high). Prints one line per start:
# the generator's Mpps @ probe ns of its three runs. bench/README.md,
# "Session 2026-11-28 (XI)".
# Env: BUILD (default ./build-pgo/use: agq-switch and bench_gen), PROBE
# (bench_xcore, default ./build/bench/bench_xcore), WORK (default
# /tmp/agq-modes).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$root/build-pgo/use}
probe=${PROBE:-$root/build/bench/bench_xcore}
work=${WORK:-/tmp/agq-modes}
mkdir -p "$work"
. "$root/bench/experiments/memif_setup.sh"  # $work/agq.toml, vdev()
for s in $(seq "${1:-10}"); do
  rm -f "$work"/m0.sock "$work"/m1.sock "$work"/ctl.sock
  "$build/switch/agq-switch" --no-huge -m 1024 --no-pci -l 0 --file-prefix md$$s --log-level=warning --no-telemetry \
    "$(vdev 0 server)" "$(vdev 1 server)" -- --config "$work/agq.toml" --ctl-socket "$work/ctl.sock" \
    --idle-sleep-us 0 --quiet > "$work/switch$s.log" 2>&1 &
  sw=$!
  for _ in $(seq 120); do [ -S "$work/m0.sock" ] && [ -S "$work/m1.sock" ] && break; sleep 0.25; done
  line="start $s:"
  for k in 1 2 3; do
    x=$("$probe" --rounds 2000 --batches 3 | awk '{printf "%.0f", $3}')
    r=$("$build/bench/bench_gen" --no-huge -m 512 --no-pci -l 1 --file-prefix mdg$$s$k --log-level=warning \
      --no-telemetry "$(vdev 0 client)" "$(vdev 1 client)" -- --traffic agq --workers 4 --width 16 --window 256 \
      --seconds 2 --warmup 1 --rate-mpps 0 --reuse | tail -1 | grep -o '"tx_mpps":[0-9.]*' | cut -d: -f2)
    line="$line  ${r}@${x}ns"
  done
  kill -INT $sw
  wait $sw
  echo "$line"
done
