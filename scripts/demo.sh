#!/usr/bin/env bash
# The first thing to run: installs packages (scripts/setup.sh), builds, then
# runs agq-switch (classic pipeline, 3 memif server ports), a parameter
# server and 4 workers in 2 processes (memif clients) on one job, prints the
# PS's verification summary, the workers' summaries and the switch's
# counters, and stops every process it started (also on Ctrl-C or error).
# Then runs scripts/demo_agq.sh: the agq pipeline with two jobs.
#
# Usage: scripts/demo.sh [ELEMENTS [WINDOW]]    (defaults 1000000 and 512)
# Env:   AGQ_BUILD_DIR (default build), AGQ_DEMO_SOURCE (default normal), AGQ_DEMO_AGQ=0 (classic only)
set -euo pipefail
cd "$(dirname "$0")/.."

elements=${1:-1000000}
window=${2:-512}
source=${AGQ_DEMO_SOURCE:-normal}
build=${AGQ_BUILD_DIR:-build}

scripts/setup.sh
if [ ! -f "$build/build.ninja" ]; then cmake -S . -B "$build" -G Ninja >/dev/null; fi
ninja -C "$build" agq-switch agqctl agq-worker

tmp=$(mktemp -d /tmp/agq-demo.XXXXXX)
pids=()
cleanup() {
  # Newest first: workers and PS leave before the switch (memif peer exit, P7).
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -INT "${pids[i]}" 2>/dev/null || true
  done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  rm -rf "$tmp" "/var/run/dpdk/agqdemo$$"* 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The switch keeps DPDK telemetry (dpdk-telemetry.py -f <its prefix>: /agq/...);
# the workers do not need it.
tel() { [ "$1" = sw ] || echo --no-telemetry; }
eal() {  # eal PREFIX LCORE VDEV... : EAL flags for a NIC-less, hugepage-less machine
  local prefix=$1 lcore=$2
  shift 2
  echo --no-huge -m 256 --no-pci -l "$lcore" --file-prefix "agqdemo$$$prefix" --log-level=warning $(tel "$prefix") "$@"
}
memif() { echo "--vdev=net_memif$1,role=$2,id=0,socket=$tmp/m$3.sock,socket-abstract=no"; }

cat >"$tmp/classic.toml" <<TOML
[switch]
pipeline = "classic"
[classic]
ps_port = 0
worker_ports = [1, 2]
TOML

echo "== agq-switch: port 0 = PS, ports 1 and 2 = workers (memif servers)"
# shellcheck disable=SC2046
"$build/switch/agq-switch" $(eal sw 0 "$(memif 0 server 0)" "$(memif 1 server 1)" "$(memif 2 server 2)") \
  -- --config "$tmp/classic.toml" --ctl-socket "$tmp/ctl.sock" --quiet >"$tmp/switch.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -S "$tmp/ctl.sock" ] && break; sleep 0.1; done
[ -S "$tmp/ctl.sock" ] || { echo "demo: agq-switch did not start:"; cat "$tmp/switch.log"; exit 1; }

job=(--workers 4 --elements "$elements" --window "$window" --source "$source" --seed 42)
echo "== PS (port 0) and 4 workers in 2 processes: ${job[*]}"
# shellcheck disable=SC2046
"$build/workers/agq-worker" $(eal ps 1 "$(memif 0 client 0)") -- --role ps --fresh-switch "${job[@]}" \
  >"$tmp/ps.out" 2>"$tmp/ps.err" &
ps_pid=$!
pids+=($ps_pid)
for _ in $(seq 100); do grep -q ready "$tmp/ps.err" 2>/dev/null && break; sleep 0.1; done
# shellcheck disable=SC2046
"$build/workers/agq-worker" $(eal wa 1 "$(memif 0 client 1)") -- --ids 0,2 "${job[@]}" >"$tmp/wa.out" 2>"$tmp/wa.err" &
wa=$!
pids+=($wa)
# shellcheck disable=SC2046
"$build/workers/agq-worker" $(eal wb 0 "$(memif 0 client 2)") -- --ids 1,3 "${job[@]}" >"$tmp/wb.out" 2>&1 &
wb=$!
pids+=($wb)
tail -f "$tmp/wa.err" &   # live progress of one worker process
tail_pid=$!
pids+=($tail_pid)

rc=0
wait $wa || rc=$?
wait $wb || rc=$?
wait $ps_pid || rc=$?
kill "$tail_pid" 2>/dev/null || true
echo
echo "== workers"
cat "$tmp/wa.out"; grep -v '^\[' "$tmp/wb.out" || true
echo "== parameter server"
grep -v '^\[' "$tmp/ps.err" || true
cat "$tmp/ps.out"
echo "== switch counters (agqctl counters)"
"$build/switch/agqctl" --socket "$tmp/ctl.sock" counters | grep -E '^(agq_packets|contributions|allocations|completions|absorbed|acks|acks_released|collisions|drops_agq|dp\.(rx|tx|tx_dropped|clones)) ' || true
if [ "$rc" -eq 0 ]; then echo "== demo: every aggregate verified exact"; else echo "== demo: FAILED (exit $rc)"; fi
# Second part: the project's agq pipeline (two jobs, adaptive widths, memory
# saving, PS fallback). AGQ_DEMO_AGQ=0 skips it.
if [ "$rc" -eq 0 ] && [ "${AGQ_DEMO_AGQ:-1}" = 1 ]; then
  cleanup  # the classic switch and its workers leave first
  pids=()
  echo
  echo "== the agq pipeline: scripts/demo_agq.sh"
  AGQ_BUILD_DIR="$build" scripts/demo_agq.sh || rc=$?
fi
exit "$rc"
