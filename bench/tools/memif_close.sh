#!/bin/bash
# memif_close.sh [ROUNDS] -- the memif agq row's capacity ratio (testpmd
# io's busy cycles per packet over agq-switch's) for two agq-switch builds
# against one testpmd io run, in as few seconds as the three runs take,
# with the vCPU placement probed between every run.
#
# Each device is the memif server of the same generator (bench_gen --reuse
# on the other CPU, agq DATA of 4 workers x 16 bits at full rate), started
# afresh. A rate is what the slower of device and generator allows (testpmd
# io refuses almost nothing, so its rate is the generator's); busy cycles
# per packet do not depend on who is slower:
#   - agq-switch: dp.busy_cycles / dp.rx (agqctl counters: the rounds that
#     received something, first rx call to the round's flush);
#   - testpmd: --record-core-cycles, its "CPU cycles/packet", printed when
#     it stops from port statistics a memif peer leaving resets, so it is
#     stopped while the generator lingers after its report (bench_gen
#     --linger, as bench/run.py --memif-lean does).
# The row's demanding placement (the vCPUs ~80 ns apart) comes and goes on
# this host within seconds to a minute, so one round is short: probe,
# switch A, probe, testpmd io, probe, switch B, probe, each run with a 2 s
# generator report (1 s warm-up), ~15 s in all. A ratio counts as measured
# in a placement only if the probes (bench_xcore one-way ns) around its two
# runs agree with it; the script prints them all.
#
# Env: A, B (build directories with switch/agq-switch, switch/agqctl,
# bench/bench_gen; default ./build and ./build-pgo/use), XCORE (default
# ./build/bench/bench_xcore), WORK (default /tmp/agq-close), SECS (the
# generator's report length, default 2), WARMUP (its warm-up, default 1).
set -u
case "${1:-}" in -h|--help) sed -n '/^set /q; 2,$p' "$0"; exit 0 ;; esac
root=$(cd "$(dirname "$0")/../.." && pwd)
a=${A:-$root/build}
b=${B:-$root/build-pgo/use}
xcore=${XCORE:-$root/build/bench/bench_xcore}
work=${WORK:-/tmp/agq-close}
secs=${SECS:-2}
warmup=${WARMUP:-1}
mkdir -p "$work"
. "$root/bench/tools/memif_setup.sh"  # $work/agq.toml, vdev()
eal() { echo "--no-huge -m $1 --no-pci --file-prefix $2 --log-level=warning --no-telemetry"; }
wait_socks() { for _ in $(seq 120); do [ -S "$work/m0.sock" ] && [ -S "$work/m1.sock" ] && return; sleep 0.1; done; }
gen() {  # BUILD [ARGS...]: bench_gen in the background, its output in $work/gen.log
  local build=$1; shift
  rm -f "$work/gen.log"
  "$build/bench/bench_gen" $(eal 512 clg$$) -l 1 "$(vdev 0 client)" "$(vdev 1 client)" -- --traffic agq --workers 4 \
    --width 16 --window 256 --seconds "$secs" --warmup "$warmup" --rate-mpps 0 --reuse "$@" > "$work/gen.log" 2>/dev/null &
}
reported() { for _ in $(seq 300); do grep -qs tx_mpps "$work/gen.log" && return; sleep 0.05; done; }
probe() { "$xcore" --rounds 2000 --batches 3 | awk '{printf "%.0f", $3}'; }
switch_cycles() {  # BUILD: busy TSC cycles per received packet
  local build=$1
  rm -f "$work"/m?.sock "$work/ctl.sock"
  "$build/switch/agq-switch" $(eal 1024 cls$$) -l 0 "$(vdev 0 server)" "$(vdev 1 server)" -- \
    --config "$work/agq.toml" --ctl-socket "$work/ctl.sock" --idle-sleep-us 0 --quiet > "$work/switch.log" 2>&1 &
  local sw=$!
  wait_socks
  gen "$build"; wait $!
  local c
  c=$("$build/switch/agqctl" --socket "$work/ctl.sock" counters)
  kill -INT $sw; wait $sw
  echo "$c" | awk '$1 == "dp.busy_cycles" {b = $2} $1 == "dp.rx" {r = $2} END {if (r) printf "%.1f", b / r; else print "-"}'
}
testpmd_cycles() {  # testpmd io's CPU cycles/packet, stopped while the generator lingers
  rm -f "$work"/m?.sock
  dpdk-testpmd $(eal 1024 clt$$) --lcores 0@0,1@0 "$(vdev 0 server)" "$(vdev 1 server)" -- --forward-mode=io \
    --stats-period 1 --total-num-mbufs=16384 --nb-cores=1 --record-core-cycles > "$work/testpmd.log" 2>&1 &
  local tp=$!
  wait_socks
  gen "$a" --linger 30
  local g=$!
  reported
  kill -INT $tp; wait $tp
  kill -INT $g; wait $g
  grep -o 'CPU cycles/packet=[0-9.]*' "$work/testpmd.log" | cut -d= -f2
}
ratio() { awk -v s="$1" -v t="$2" 'BEGIN {if (s > 0 && t > 0) printf "%.3f", t / s; else print "-"}'; }

printf '%-8s %-15s %8s %8s %8s %7s %7s\n' time probes_ns A_cyc tp_cyc B_cyc A_ratio B_ratio
for _ in $(seq "${1:-1}"); do
  p0=$(probe); ca=$(switch_cycles "$a")
  p1=$(probe); ct=$(testpmd_cycles)
  p2=$(probe); cb=$(switch_cycles "$b")
  p3=$(probe)
  printf '%-8s %-15s %8s %8s %8s %7s %7s\n' "$(date +%T)" "$p0/$p1/$p2/$p3" "$ca" "${ct:--}" "$cb" \
    "$(ratio "$ca" "$ct")" "$(ratio "$cb" "$ct")"
done
