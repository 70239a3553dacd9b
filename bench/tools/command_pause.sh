#!/bin/bash
# command_pause.sh SECS BUILD... -- how long the control plane pauses a
# busy lcore. For each BUILD (a build directory with switch/agq-switch,
# switch/agqctl, bench/bench_gen), alternated ROUNDS times (default 3):
# agq-switch (1 lcore, memif server) switches the memif row's agq traffic
# (bench_gen --reuse on the other CPU, 4 workers x 16 bits at full rate)
# for SECS seconds, while the control thread does what it does unasked
# (MAC ageing once a second, digests). Prints dp.commands and
# dp.command_cycles (the TSC cycles the lcore spent running commands
# between rounds) and their mean in microseconds (TSC_GHZ, default 2.1:
# this VM class's TSC). With CMD set (e.g. CMD="mac list"), agqctl also
# sends that command CMD_COUNT times (default 20, 0.1 s apart) during the
# traffic: the operator's reads, which run on the lcore too.
# Env: WORK (default /tmp/agq-pause).
set -u
case "${1:-}" in -h|--help) sed -n '/^set /q; 2,$p' "$0"; exit 0 ;; esac
[ $# -ge 2 ] || { echo "usage: $0 SECS BUILD..." >&2; exit 2; }
secs=$1; shift
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${WORK:-/tmp/agq-pause}
mkdir -p "$work"
. "$root/bench/tools/memif_setup.sh"  # $work/agq.toml, vdev()
eal() { echo "--no-huge -m $1 --no-pci --file-prefix $2 --log-level=warning --no-telemetry"; }
printf '%-28s %9s %14s %12s %10s\n' build commands command_cycles us_per_cmd sw_Mpps
for _ in $(seq "${ROUNDS:-3}"); do
  for build in "$@"; do
    rm -f "$work"/m?.sock "$work/ctl.sock"
    "$build/switch/agq-switch" $(eal 1024 cps$$) -l 0 "$(vdev 0 server)" "$(vdev 1 server)" -- \
      --config "$work/agq.toml" --ctl-socket "$work/ctl.sock" --idle-sleep-us 0 --quiet > "$work/switch.log" 2>&1 &
    sw=$!
    for _ in $(seq 120); do [ -S "$work/m0.sock" ] && [ -S "$work/m1.sock" ] && break; sleep 0.25; done
    "$build/bench/bench_gen" $(eal 512 cpg$$) -l 1 "$(vdev 0 client)" "$(vdev 1 client)" -- --traffic agq \
      --workers 4 --width 16 --window 256 --seconds "$secs" --warmup 1 --rate-mpps 0 --reuse > "$work/gen.log" 2>/dev/null &
    g=$!
    if [ -n "${CMD:-}" ]; then
      sleep 1.5  # past the generator's warm-up
      for _ in $(seq "${CMD_COUNT:-20}"); do
        "$build/switch/agqctl" --socket "$work/ctl.sock" $CMD > /dev/null
        sleep 0.1
      done
    fi
    wait $g
    c=$("$build/switch/agqctl" --socket "$work/ctl.sock" counters)
    kill -INT $sw; wait $sw
    rate=$(grep -o '"tx_mpps":[0-9.]*' "$work/gen.log" | cut -d: -f2)
    echo "$c" | awk -v b="$build" -v ghz="${TSC_GHZ:-2.1}" -v r="$rate" '
      $1 == "dp.commands" {n = $2} $1 == "dp.command_cycles" {cy = $2}
      END {printf "%-28s %9d %14d %12.1f %10s\n", b, n, cy, n ? cy / n / (ghz * 1000) : 0, r}'
  done
done
