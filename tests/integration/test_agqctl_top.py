"""`agqctl top` (issue 11) in a real terminal: tmux runs it against a switch
that aggregates job 1's traffic (two workers played on tap ports); the pane
must show the job's results/s and elements/s and the ports' rates, redrawn
in place (one screen, not a scrolling log), and Ctrl-C must end it with
exit status 0, the terminal restored and the switch's job meter off.
"""
import json
import shutil
import subprocess
import threading
import time
import uuid

import pytest

from harness import agqctl, binary, wait_for
from tap_switch import data_frames, start_tap_switch

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed (scripts/setup.sh)")


def tmux(*args):
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=10)


def pane(session):
    return tmux("capture-pane", "-p", "-t", session).stdout


def job_row(screen, job):
    """The cells of the JOB table row of `job`, or None."""
    in_jobs = False
    for line in screen.splitlines():
        cells = line.split()
        if cells[:1] == ["JOB"]:
            in_jobs = True
        elif in_jobs and cells[:1] == [str(job)]:
            return cells
        elif in_jobs and not cells:
            in_jobs = False
    return None


def number(s):
    mult = {"k": 1e3, "M": 1e6, "G": 1e9}
    return float(s[:-1]) * mult[s[-1]] if s[-1] in mult else float(s)


def test_top_under_tmux(tmp_path, procs):
    sw, sock, socks = start_tap_switch(tmp_path, procs, "aqt")
    session = f"agqtop{uuid.uuid4().hex[:6]}"
    stop = threading.Event()
    sent = [0]

    def traffic():  # job 1's two workers, every slot in turn, both versions alternating
        k = 0
        while not stop.is_set():
            for port, frame in data_frames(slot=k % 64, seq=k, v=(k // 64) % 2):
                socks[port].send(frame)
            k += 1
            if k % 10 == 0:
                time.sleep(0.005)
        sent[0] = k

    t = threading.Thread(target=traffic)
    try:
        t.start()
        r = tmux("new-session", "-d", "-s", session, "-x", "150", "-y", "45",
                 f"{binary('agqctl')} --socket {sock} top --interval 0.5; echo TOP_EXIT=$?; sleep 60")
        assert r.returncode == 0, r.stderr

        def busy_screen():
            s = pane(session)
            row = job_row(s, 1)
            return s if row and number(row[3]) > 0 else None
        screen = wait_for(busy_screen, 20, interval=0.2, what="top to show job 1's results")
        cells = job_row(screen, 1)
        # JOB N LANES RESULTS/s ELEMENTS/s ...: elements = results x 32 lanes (display rounding aside)
        assert cells[1:3] == ["2", "32"], screen
        results, elements = number(cells[3]), number(cells[4])
        assert abs(elements - 32 * results) <= 0.02 * elements + 32, screen
        assert job_row(screen, 2) is not None  # the idle job is listed too
        port1 = next(l.split() for l in screen.splitlines() if l.split()[:2] == ["1", "net_tap1"])
        assert number(port1[3]) > 0 and number(port1[5]) > 0, screen  # rx and tx pkt/s on worker 0's port
        # Refreshed in place: one screen with one header, also after more refreshes.
        time.sleep(1.2)
        again = pane(session)
        assert again.count("agq-switch top") == 1 and screen.count("agq-switch top") == 1, again
        assert json.loads(agqctl(sock, "meter", "--json").stdout)["on"] is True

        tmux("send-keys", "-t", session, "C-c")
        done = wait_for(lambda: "TOP_EXIT=" in pane(session) and pane(session), 10, what="top to exit")
        assert "TOP_EXIT=0" in done, done
        assert "agq-switch top" not in done  # the alternate screen is gone: the terminal is restored
        assert json.loads(agqctl(sock, "meter", "--json").stdout)["on"] is False
    finally:
        stop.set()
        t.join()
        tmux("kill-session", "-t", session)
        for s in socks:
            s.close()
    assert sent[0] > 0
    assert sw.stop() == 0, sw.output()


def test_top_refuses_a_missing_switch(tmp_path):
    r = subprocess.run([str(binary("agqctl")), "--socket", str(tmp_path / "none.sock"), "top", "--iterations", "1"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "cannot connect" in r.stderr, r.stderr
    r = subprocess.run([str(binary("agqctl")), "top", "--interval", "0"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--interval" in r.stderr, r.stderr
