#!/bin/bash
# memif_cycles.sh [PAIRS] -- the memif agq row in busy TSC cycles per
# packet instead of rates: agq-switch (1 lcore) and testpmd io, each the
# memif server of the same generator (bench_gen --reuse on the other CPU,
# agq DATA of 4 workers x 16 bits at full rate), started afresh and
# alternated PAIRS times (default 6). A rate is what the slower of DUT and
# generator allows; testpmd io, which refuses almost nothing, shows the
# generator's rate, not its own. Busy cycles per packet do not depend on who
# is slower:
#   - agq-switch: dp.busy_cycles / dp.rx (agqctl counters; the rounds that
#     received something, first rx call to the round's flush);
#   - testpmd: --record-core-cycles, its "CPU cycles/packet" (its streams'
#     rx-to-tx cycles when a burst was received). testpmd prints it when it
#     stops, from port statistics that a memif peer leaving resets, so it
#     is stopped while the generator lingers after its report
#     (bench_gen --linger, as bench/run.py --memif-lean does).
# Prints per pair: placement (bench_xcore one-way ns before / after), the
# switch's rate, both costs, and testpmd's cost over the switch's (the
# capacity ratio; the row asks >= 0.8). A pair takes ~12 s: for the
# placements that last (vCPUs apart, SMT siblings); memif_close.sh for the
# brief close ones.
# Env: BUILD (agq-switch, agqctl, bench_gen; default ./build-pgo/use),
# XCORE (default ./build/bench/bench_xcore), WORK (default /tmp/agq-cyc).
set -u
case "${1:-}" in -h|--help) sed -n '/^set /q; 2,$p' "$0"; exit 0 ;; esac
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$root/build-pgo/use}
xcore=${XCORE:-$root/build/bench/bench_xcore}
work=${WORK:-/tmp/agq-cyc}
mkdir -p "$work"
. "$root/bench/tools/memif_setup.sh"  # $work/agq.toml, vdev()
eal() { echo "--no-huge -m $1 --no-pci --file-prefix $2 --log-level=warning --no-telemetry"; }
wait_socks() { for _ in $(seq 120); do [ -S "$work/m0.sock" ] && [ -S "$work/m1.sock" ] && return; sleep 0.25; done; }
gen() {  # SECS [ARGS...]: bench_gen in the background, its output in $work/gen.log
  local secs=$1; shift
  rm -f "$work/gen.log"  # reported() must not read the last run's
  "$build/bench/bench_gen" $(eal 512 cyg$$) -l 1 "$(vdev 0 client)" "$(vdev 1 client)" -- --traffic agq --workers 4 \
    --width 16 --window 256 --seconds "$secs" --warmup 1 --rate-mpps 0 --reuse "$@" > "$work/gen.log" 2>/dev/null &
}
reported() { for _ in $(seq 300); do grep -qs tx_mpps "$work/gen.log" && return; sleep 0.1; done; }
probe() { "$xcore" --rounds 2000 --batches 3 | awk '{printf "%.0f", $3}'; }

printf '%-8s %-9s %9s %12s %12s %8s\n' time xcore_ns switch_Mpps switch_cyc testpmd_cyc ratio
for k in $(seq "${1:-6}"); do
  x0=$(probe)
  # agq-switch
  rm -f "$work"/m?.sock "$work/ctl.sock"
  "$build/switch/agq-switch" $(eal 1024 cys$$) -l 0 "$(vdev 0 server)" "$(vdev 1 server)" -- --config "$work/agq.toml" \
    --ctl-socket "$work/ctl.sock" --idle-sleep-us 0 --quiet > "$work/switch.log" 2>&1 &
  sw=$!
  wait_socks
  gen 3; wait $!
  rate=$(grep -o '"tx_mpps":[0-9.]*' "$work/gen.log" | cut -d: -f2)
  c=$("$build/switch/agqctl" --socket "$work/ctl.sock" counters)
  kill -INT $sw; wait $sw
  scyc=$(echo "$c" | awk '$1 == "dp.busy_cycles" {b = $2} $1 == "dp.rx" {r = $2} END {if (r) printf "%.1f", b / r}')
  # testpmd io, stopped while the generator lingers after its report
  rm -f "$work"/m?.sock
  dpdk-testpmd $(eal 1024 cyt$$) --lcores 0@0,1@0 "$(vdev 0 server)" "$(vdev 1 server)" -- --forward-mode=io \
    --stats-period 1 --total-num-mbufs=16384 --nb-cores=1 --record-core-cycles > "$work/testpmd.log" 2>&1 &
  tp=$!
  wait_socks
  gen 3 --linger 30
  g=$!
  reported
  kill -INT $tp; wait $tp
  kill -INT $g; wait $g
  tcyc=$(grep -o 'CPU cycles/packet=[0-9.]*' "$work/testpmd.log" | cut -d= -f2)
  x1=$(probe)
  ratio=$(awk -v s="$scyc" -v t="$tcyc" 'BEGIN {if (s > 0 && t > 0) printf "%.3f", t / s; else print "-"}')
  printf '%-8s %-9s %9s %12s %12s %8s\n' "$(date +%T)" "$x0/$x1" "$rate" "$scyc" "${tcyc:--}" "$ratio"
done
