#!/bin/bash
# memif_ab.sh ROUNDS BUILD_A BUILD_B -- two agq-switch builds over memif in
# busy TSC cycles per packet (dp.busy_cycles / dp.rx), alternated A, B, A,
# B... ROUNDS times, each started afresh as the memif server of the same
# generator (bench_gen --reuse on the other CPU, the agq traffic of
# memif_cycles.sh: 4 workers x 16 bits over 256 slots at full rate). One
# line per round: placement (bench_xcore one-way ns before), both builds'
# cycles per packet and rate, B over A. A code change's effect on the
# switch's own cost, measured side by side; memif_cycles.sh gives the
# row's ratio against testpmd io.
# Env: XCORE (default ./build/bench/bench_xcore), WORK (default /tmp/agq-ab).
set -u
[ $# -eq 3 ] || { sed -n '2,11p' "$0"; exit 2; }
rounds=$1 a=$2 b=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
xcore=${XCORE:-$root/build/bench/bench_xcore}
work=${WORK:-/tmp/agq-ab}
. "$root/bench/experiments/memif_setup.sh"  # $work/agq.toml, vdev()
eal() { echo "--no-huge -m $1 --no-pci --file-prefix $2 --log-level=warning --no-telemetry"; }
one() {  # BUILD: "cycles/packet Mpps" of one fresh switch under a 3 s generator run
  local build=$1
  rm -f "$work"/m?.sock "$work/ctl.sock"
  "$build/switch/agq-switch" $(eal 1024 abs$$) -l 0 "$(vdev 0 server)" "$(vdev 1 server)" -- --config "$work/agq.toml" \
    --ctl-socket "$work/ctl.sock" --idle-sleep-us 0 --quiet > "$work/switch.log" 2>&1 &
  local sw=$!
  for _ in $(seq 120); do [ -S "$work/m0.sock" ] && [ -S "$work/m1.sock" ] && break; sleep 0.25; done
  "$build/bench/bench_gen" $(eal 512 abg$$) -l 1 "$(vdev 0 client)" "$(vdev 1 client)" -- --traffic agq --workers 4 \
    --width 16 --window 256 --seconds 3 --warmup 1 --rate-mpps 0 --reuse > "$work/gen.log" 2>/dev/null
  local c rate
  c=$("$build/switch/agqctl" --socket "$work/ctl.sock" counters)
  kill -INT $sw; wait $sw
  rate=$(grep -o '"tx_mpps":[0-9.]*' "$work/gen.log" | cut -d: -f2)
  echo "$c" | awk -v r="$rate" '$1 == "dp.busy_cycles" {b = $2} $1 == "dp.rx" {n = $2} END {if (n) printf "%.1f %s", b / n, r; else printf "- -"}'
}
printf '%-8s %8s %8s %8s %8s %8s %7s\n' time xcore_ns A_cyc A_Mpps B_cyc B_Mpps B/A
for _ in $(seq "$rounds"); do
  x=$("$xcore" --rounds 2000 --batches 3 | awk '{printf "%.0f", $3}')
  read -r ac ar <<< "$(one "$a")"
  read -r bc br <<< "$(one "$b")"
  printf '%-8s %8s %8s %8s %8s %8s %7s\n' "$(date +%T)" "$x" "$ac" "$ar" "$bc" "$br" \
    "$(awk -v a="$ac" -v b="$bc" 'BEGIN {if (a > 0 && b > 0) printf "%.3f", b / a; else print "-"}')"
done
