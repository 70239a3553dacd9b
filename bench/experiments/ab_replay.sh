#!/bin/bash
# ab_replay.sh SECS REPS BIN... -- bench/run.py's 1-lcore agq pcap replay
# (two net_pcap replay ports with infinite_rx, two net_null sinks, the same
# frames and config as `run.py --only pcap --traffic agq --pcap-modes 1`),
# every binary in turn within each rep, so a noisy machine's drift hits all
# of them alike. Prints one line per run: rep, binary, median rx Mpps of
# the per-second reports after the first two. For A/B of two builds of
# agq-switch (bench/README.md, "Session 2026-11-27").
# Env: BUILD (bench_gen's build dir, default ./build), WORK (pcaps and
# config, default /tmp/agq-ab), LCORE (default 0).
set -eu
[ $# -ge 3 ] || { echo "usage: $0 SECS REPS AGQ_SWITCH_BINARY..." >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$root/build}
work=${WORK:-/tmp/agq-ab}
secs=$1 reps=$2
shift 2
mkdir -p "$work"
if [ ! -f "$work/agq.toml" ]; then
  for s in 0 1; do
    for q in 0 1; do
      "$build/bench/bench_gen" --write-pcap "$work/agq_${s}_${q}.pcap" --traffic agq --workers 4 --width 16 \
        --window 256 --stream $s --shard-mod 2 --shard-rem $q >/dev/null
    done
  done
  /usr/bin/python3 - "$root/bench" > "$work/agq.toml" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import run
print('[switch]\npipeline = "agq"\n' + run.agq_jobs([(0, 2), (1, 3)]) +
      '[[mac]]\nmac = "02:00:00:00:00:02"\nport = 2\n[[mac]]\nmac = "02:00:00:00:01:02"\nport = 3')
PY
fi
vdevs=()
for s in 0 1; do vdevs+=("--vdev=net_pcap$s,rx_pcap=$work/agq_${s}_0.pcap,rx_pcap=$work/agq_${s}_1.pcap,infinite_rx=1"); done
vdevs+=(--vdev=net_null0,no-rx=1 --vdev=net_null1,no-rx=1)
log="$work/run$$.log"
for r in $(seq "$reps"); do
  for b in "$@"; do
    timeout -s INT $((secs + 4)) "$b" --no-huge -m 1024 --no-pci -l "${LCORE:-0}" --file-prefix ab$$ --log-level=warning \
      --no-telemetry "${vdevs[@]}" -- --config "$work/agq.toml" --ctl-socket "$work/ab$$.sock" --idle-sleep-us 0 \
      --stats-interval 1 --quiet >"$log" 2>&1 || true
    mpps=$(grep "stats: rx" "$log" | tail -n +3 | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "none"}')
    echo "rep $r $b $mpps $(grep -h '^PHASES' "$log" || true)"
  done
done
rm -f "$log"
