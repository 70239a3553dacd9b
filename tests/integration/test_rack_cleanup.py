"""The rack rig leaves nothing behind: not when the code inside the rack
fails, not when its process gets SIGTERM mid-run, and after a SIGKILL (no
chance to clean up) the next rig finds and removes the leftovers —
namespaces, veths, the bridge, the switch and whatever ran in the hosts."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness import wait_for
from rack import Rack, cleanup_stale, leftovers

HERE = Path(__file__).resolve().parent
# A process that builds a rack with a switch and a long-running process in
# a host, says where everything is, and waits to be killed.
OWNER = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from rack import Rack
rack = Rack(2, Path(sys.argv[2]), mgmt=True).up()
rack.start_switch()
p = rack.start("sleeper", ["sleep", "600"], host=rack.hosts[1])
print(rack.tag, rack.switch.pid, p.pid, flush=True)
time.sleep(600)
"""


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes (its parent has not reaped it yet).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def start_owner(tmp_path):
    p = subprocess.Popen([sys.executable if "/usr/bin" in sys.executable else "/usr/bin/python3", "-c", OWNER,
                          str(HERE), str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    assert len(line) == 3, p.stderr.read() if p.poll() is not None else "no line"
    tag, sw, sleeper = line[0], int(line[1]), int(line[2])
    assert leftovers(tag), "the rack is not up"
    assert alive(sw) and alive(sleeper)
    return p, tag, sw, sleeper


def test_failure_inside_the_rack_cleans_up(tmp_path):
    with pytest.raises(RuntimeError, match="boom"):
        with Rack(2, tmp_path, mgmt=True) as rack:
            sw = rack.start_switch()
            p = rack.start("sleeper", ["sleep", "600"], host=rack.hosts[0])
            tag = rack.tag
            assert len(leftovers(tag)) == 2 + 2 + 2 + 1  # namespaces, data veths, mgmt veths, bridge
            raise RuntimeError("boom")
    assert leftovers(tag) == []
    assert not sw.alive() and not p.alive()


def test_sigterm_mid_run_cleans_up(tmp_path):
    p, tag, sw, sleeper = start_owner(tmp_path)
    p.send_signal(signal.SIGTERM)
    assert p.wait(30) == 128 + signal.SIGTERM, p.stderr.read()
    assert leftovers(tag) == []
    wait_for(lambda: not alive(sw) and not alive(sleeper), 5, what="rack processes gone")


def test_sigkill_leftovers_are_removed_by_the_next_rig(tmp_path):
    p, tag, sw, sleeper = start_owner(tmp_path)
    p.kill()
    p.wait(10)
    assert leftovers(tag), "SIGKILL leaves the rack"
    assert tag in cleanup_stale()
    assert leftovers(tag) == []
    wait_for(lambda: not alive(sw) and not alive(sleeper), 5, what="stale processes gone")
