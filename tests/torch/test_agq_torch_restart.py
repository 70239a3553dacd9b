"""A switch that dies under two PyTorch ranks (libagq's Python module) and
comes back: the ranks' processes survive the switch's SIGKILL, reconnect
and go on, and every result before and after is within its bound of the
exact sum. The module's unmap guard (workers/python/unmap_wrap.cpp) must
have been at work: the memif PMD unmapped the rings of the lost link while
the poll thread was online, and waited for it (pitfall P7), never in vain."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SRC / "workers" / "python"))
from agq_torch.launch import LocalSwitch  # noqa: E402

PY = "/usr/bin/python3"
WORLD = 2
ENV = dict(os.environ, PYTHONPATH=str(SRC / "workers" / "python"))


def progress(out, r):
    try:
        return json.loads((out / f"rank{r}.progress").read_text())
    except (FileNotFoundError, json.JSONDecodeError):  # not written yet, or mid-write
        return {"ok": 0, "ops": 0}


def wait_ok(out, procs, at_least, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in procs:
            assert p.poll() is None, f"a rank exited ({p.returncode}) while the switch was restarted"
        if all(progress(out, r)["ok"] >= at_least for r in range(WORLD)):
            return
        time.sleep(0.05)
    raise AssertionError(f"ranks did not reach {at_least} good results in {timeout} s: "
                         f"{[progress(out, r) for r in range(WORLD)]}")


def test_ranks_survive_switch_restarts(tmp_path):
    out = tmp_path / "ranks"
    out.mkdir()
    with LocalSwitch(tmp_path / "sw", WORLD, slots=64, rows=32) as sw:
        procs = [subprocess.Popen([PY, str(Path(__file__).with_name("rank_restart.py")), str(out), str(r), str(WORLD),
                                   sw.vdev(r), str(sw.ctl)], env=ENV,
                                  stdout=open(out / f"r{r}.log", "wb"), stderr=subprocess.STDOUT)
                 for r in range(WORLD)]
        try:
            target = 3
            wait_ok(out, procs, target, 60)
            for _ in range(3):  # three restarts, each while operations are in flight
                sw.restart_switch(down_s=0.3)
                target = max(progress(out, r)["ok"] for r in range(WORLD)) + 3
                wait_ok(out, procs, target, 60)
            # Every rank runs the same number of operations (a rank that
            # stopped first would leave the other's last one unanswered).
            stop_at = max(progress(out, r)["ops"] for r in range(WORLD)) + 2
            (out / "stop.tmp").write_text(str(stop_at))
            (out / "stop.tmp").rename(out / "stop")
            for p in procs:
                p.wait(60)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
                    p.wait()
        logs = "\n".join((out / f"r{r}.log").read_text(errors="replace")[-3000:] for r in range(WORLD))
        assert all(p.returncode == 0 for p in procs), logs
    for r in range(WORLD):
        rec = json.loads((out / f"rank{r}.json").read_text())
        assert rec["bad"] == [] and rec["errors"] == [], rec
        assert rec["ok"] == rec["ops"] >= 12, rec
        g = rec["unmap_guard"]
        # The guard needs DPDK linked into the module (CMake AGQ_DPDK_STATIC,
        # on in Release builds; ctest says which one this build is).
        if os.environ.get("AGQ_UNMAP_GUARD", "1") == "0":
            assert not g["guarded"], g
            continue
        assert g["guarded"], "the module was built without the unmap guard (AGQ_DPDK_STATIC off?)"
        assert g["waited"] >= 1 and g["gave_up"] == 0, g
