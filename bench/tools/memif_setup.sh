# Sourced by the memif tools (callgrind_memif.sh, command_pause.sh,
# memif_close.sh, memif_cycles.sh) with $root (the repository) and $work (a scratch
# directory) set: writes $work/agq.toml -- the agq job of
# `bench/run.py --only memif` (4 workers on port 0, the PS on port 1) -- and
# defines vdev INDEX ROLE: the memif vdev flag of port INDEX with its
# socket in $work.
mkdir -p "$work"
/usr/bin/python3 - "$root/bench" > "$work/agq.toml" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import run
print('[switch]\npipeline = "agq"\n' + run.agq_jobs([(0, 1)]) +
      '[[mac]]\nmac = "02:00:00:00:00:02"\nport = 1\n')
PY
vdev() { echo "--vdev=net_memif$1,role=$2,id=0,socket=$work/m$1.sock,socket-abstract=no"; }
