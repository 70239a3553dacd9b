#!/usr/bin/env bash
# The agq pipeline end to end: agq-switch (pipeline "agq", 8 memif server
# ports) with two concurrent jobs, each with its PS (fallback), and their
# workers as separate processes: job 1 = 2 workers with room (2 slots per
# row): the error budget alone picks its widths; job 2 = 4 workers in 2
# processes of 2 ports each, under memory pressure (4 slots per row, at most
# 16 bits): the switch grants less than asked, or nothing (PS fallback). Several rounds make
# the adaptive widths visible (round r's widths come from round r-1's
# aggregate). Prints each worker's summary (widths per round, switch memory
# vs 32 bits per gradient, retransmissions, fallbacks, exact verification),
# the PSs' and the switch's counters; stops every process it started.
#
# Usage: scripts/demo_agq.sh [ELEMENTS [ROUNDS [LOSS]]]   (defaults 200000, 4, 0)
#        LOSS: drop probability on every port and direction (agqctl drop), e.g. 0.01
# Env:   AGQ_BUILD_DIR (default build)
set -euo pipefail
cd "$(dirname "$0")/.."

elements=${1:-200000}
rounds=${2:-4}
loss=${3:-0}
build=${AGQ_BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then cmake -S . -B "$build" -G Ninja >/dev/null; fi
ninja -C "$build" agq-switch agqctl agq-worker >/dev/null

tmp=$(mktemp -d /tmp/agq-demo-agq.XXXXXX)
pids=()
cleanup() {
  # Newest first: workers and PSs leave before the switch (memif peer exit, P7).
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -INT "${pids[i]}" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  rm -rf "$tmp" "/var/run/dpdk/agqdq$$"* 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The switch keeps DPDK telemetry (dpdk-telemetry.py -f <its prefix>: /agq/...);
# the workers do not need it.
tel() { [ "$1" = sw ] || echo --no-telemetry; }
eal() {  # eal PREFIX LCORE VDEV...
  local prefix=$1 lcore=$2
  shift 2
  echo --no-huge -m 128 --no-pci -l "$lcore" --file-prefix "agqdq$$$prefix" --log-level=warning $(tel "$prefix") "$@"
}
memif() { echo "--vdev=net_memif$1,role=$2,id=0,socket=$tmp/m$3.sock,socket-abstract=no"; }
# lib/agq_wire.cpp's default identities: 10.(128|jh).jl.host, 02:00:01:jh:jl:host
ip() { echo "10.128.$1.$2"; }
mac() { printf '02:00:01:00:%02x:%02x' "$1" "$2"; }

# Ports: 0 PS1, 1-2 job 1 workers 0-1, 3 PS2, 4-7 job 2 workers 0-3.
{
  printf '[switch]\npipeline = "agq"\n[agq]\ntotal_rows = 64\ntotal_slots = 256\n\n'
  printf '[[job]]\nid = 1\nworkers = 2\nslots = 64\nrows = 32\ndelivery = "multicast"\nps_port = 0\n'
  printf 'ps_ip = "%s"\nps_mac = "%s"\nmax_width = 32\n' "$(ip 1 254)" "$(mac 1 254)"
  for w in 0 1; do
    printf '[[job.worker]]\nid = %d\nport = %d\nip = "%s"\nmac = "%s"\n' $w $((1 + w)) "$(ip 1 $((w + 1)))" "$(mac 1 $((w + 1)))"
  done
  printf '\n[[job]]\nid = 2\nworkers = 4\nslots = 32\nrows = 8\ndelivery = "multicast"\nps_port = 3\n'
  printf 'ps_ip = "%s"\nps_mac = "%s"\nmax_width = 16\n' "$(ip 2 254)" "$(mac 2 254)"
  for w in 0 1 2 3; do
    printf '[[job.worker]]\nid = %d\nport = %d\nip = "%s"\nmac = "%s"\n' $w $((4 + w)) "$(ip 2 $((w + 1)))" "$(mac 2 $((w + 1)))"
  done
} >"$tmp/agq.toml"

echo "== agq-switch, pipeline agq: 8 memif ports, job 1 (2 workers, 64 slots / 32 rows), job 2 (4 workers, 32 slots / 8 rows, max 16 bits)"
sw_vdevs=()
for i in $(seq 0 7); do sw_vdevs+=("$(memif "$i" server "$i")"); done
# shellcheck disable=SC2046
"$build/switch/agq-switch" $(eal sw 0 "${sw_vdevs[@]}") -- --config "$tmp/agq.toml" --ctl-socket "$tmp/ctl.sock" \
  --quiet --idle-sleep-us 100 >"$tmp/switch.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -S "$tmp/ctl.sock" ] && break; sleep 0.1; done
[ -S "$tmp/ctl.sock" ] || { echo "demo: agq-switch did not start:"; cat "$tmp/switch.log"; exit 1; }
if [ "$loss" != 0 ]; then
  echo "== simulated loss $loss on every port, rx and tx (agqctl drop)"
  for i in $(seq 0 7); do for d in rx tx; do "$build/switch/agqctl" --socket "$tmp/ctl.sock" drop "$i" "$d" "$loss" >/dev/null; done; done
fi

aw() {  # aw NAME LCORE "PORTS" ARGS...: an agq-worker process on memif clients of those switch ports
  local name=$1 lcore=$2 ports=$3
  shift 3
  local v=() i=0
  for p in $ports; do v+=("$(memif $i client "$p")"); i=$((i + 1)); done
  # shellcheck disable=SC2046
  "$build/workers/agq-worker" $(eal "$name" "$lcore" "${v[@]}") -- --protocol agq --progress 0 --idle-sleep-us 100 "$@" \
    >"$tmp/$name.out" 2>"$tmp/$name.err" &
  pids+=($!)
}
job1=(--job-id 1 --workers 2 --slots 64 --rows 32 --elements "$elements" --rounds "$rounds" --error-budget 1e-2 --seed 7)
job2=(--job-id 2 --workers 4 --slots 32 --rows 8 --elements "$elements" --rounds "$rounds" --source laplace:0.5 --margin 4 --seed 9)
aw ps1 1 0 --role ps "${job1[@]}"
ps1=$!
aw ps2 1 3 --role ps "${job2[@]}"
ps2=$!
for f in ps1 ps2; do for _ in $(seq 100); do grep -q ready "$tmp/$f.err" 2>/dev/null && break; sleep 0.1; done; done
echo "== job 1: ${job1[*]}"
echo "== job 2: ${job2[*]}"
aw w1a 1 1 --ids 0 "${job1[@]}"
w1a=$!
aw w1b 0 2 --ids 1 "${job1[@]}"
w1b=$!
aw w2a 1 "4 6" --ids 0,2 "${job2[@]}"
w2a=$!
aw w2b 0 "5 7" --ids 1,3 "${job2[@]}"
w2b=$!

rc=0
for p in $w1a $w1b $w2a $w2b; do wait "$p" || rc=$?; done
kill -INT "$ps1" "$ps2" 2>/dev/null || true
wait "$ps1" || rc=$?
wait "$ps2" || rc=$?
for f in w1a w1b w2a w2b; do
  echo "== $f"
  cat "$tmp/$f.out"
  grep -E 'agq-worker:|MISMATCH' "$tmp/$f.err" || true
done
echo "== parameter servers (fallback)"
cat "$tmp/ps1.out" "$tmp/ps2.out"
echo "== switch counters (agqctl counters)"
"$build/switch/agqctl" --socket "$tmp/ctl.sock" counters | grep -E '^(agq_|drops_agq|dp\.sim_drops)' | awk '$2 != 0' || true
echo "== the jobs through DPDK telemetry (echo /agq/jobs | dpdk-telemetry.py -f agqdq$$sw)"
echo /agq/jobs | dpdk-telemetry.py -f "agqdq$$sw" 2>/dev/null || echo "(dpdk-telemetry.py not available)"
if [ "$rc" -eq 0 ]; then
  echo "== demo: two jobs, every RESULT verified bit for bit against sum(u_i >> d); widths adapted per round"
else
  echo "== demo: FAILED (exit $rc)"
fi
exit "$rc"
