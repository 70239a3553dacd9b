#!/bin/bash
# callgrind_memif.sh BINARY SECS [OUT] -- instructions per packet of
# agq-switch over memif: the switch (1 lcore, memif server on ports 0 and 1,
# the agq job of `bench/run.py --only memif`) runs under callgrind while
# bench_gen --reuse (the memif client, on the other CPU) sends agq DATA of
# 4 workers x 16 bits at full rate. Prints the switch's rx/tx counters, the
# generator's report and, per received packet, the top functions' self
# instructions (callgrind_annotate --inclusive=no; start-up included, < 1%
# for 20 s). Build BINARY with -g (RelWithDebInfo flags) for function names.
# Env: BUILD (bench_gen and agqctl, default ./build), WORK (default
# /tmp/agq-cgm), SWITCH_ARGS (more agq-switch options, e.g.
# --copy-replicas). Needs valgrind (scripts/setup.sh installs it).
set -eu
case "${1:-}" in -h|--help) sed -n '/^set /q; 2,$p' "$0"; exit 0 ;; esac
[ $# -ge 2 ] || { echo "usage: $0 AGQ_SWITCH_BINARY SECS [CALLGRIND_OUT]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$root/build}
work=${WORK:-/tmp/agq-cgm}
bin=$1 secs=$2 out=${3:-$work/callgrind.out}
mkdir -p "$work"
rm -f "$work"/m0.sock "$work"/m1.sock "$work"/ctl.sock
. "$root/bench/tools/memif_setup.sh"  # $work/agq.toml, vdev()
valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" --no-huge -m 1024 --no-pci -l 0 \
  --file-prefix cgm$$ --log-level=warning --no-telemetry "$(vdev 0 server)" "$(vdev 1 server)" -- \
  --config "$work/agq.toml" --ctl-socket "$work/ctl.sock" --idle-sleep-us 0 --quiet ${SWITCH_ARGS:-} > "$work/switch.log" 2>&1 &
sw=$!
trap 'kill -INT $sw 2>/dev/null || true' EXIT
for _ in $(seq 120); do [ -S "$work/m0.sock" ] && [ -S "$work/m1.sock" ] && break; sleep 0.5; done
"$build/bench/bench_gen" --no-huge -m 512 --no-pci -l 1 --file-prefix cgmg$$ --log-level=warning --no-telemetry \
  "$(vdev 0 client)" "$(vdev 1 client)" -- --traffic agq --workers 4 --width 16 --window 256 \
  --seconds "$secs" --warmup 1 --rate-mpps 0 --reuse | tail -1
counters=$("$build/switch/agqctl" --socket "$work/ctl.sock" counters)
kill -INT $sw
wait $sw || true
trap - EXIT
echo "$counters" | grep -E "^dp\.(rx|tx) "
rx=$(echo "$counters" | awk '$1 == "dp.rx" {print $2}')
callgrind_annotate --inclusive=no "$out" 2>/dev/null |
  awk -v rx="$rx" '/PROGRAM TOTALS/ {gsub(",", "", $1); printf "%.0f instructions per received packet\n", $1 / rx}
                   /^ *[0-9,]+ +\(/ && !/PROGRAM TOTALS/ && n < 14 {
                     c = $1; gsub(",", "", c); line = $0; sub(/^ *[0-9,]+ +\( *[0-9.]+%\) +/, "", line)
                     printf "%6.1f  %s\n", c / rx, substr(line, 1, 150); n++}'
