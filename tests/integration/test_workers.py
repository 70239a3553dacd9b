"""agq-switch + agq-worker (PS and workers) as separate processes over memif:
results exact with hundreds of slots in flight, 2 and 4 workers, a worker
SIGKILLed mid-run and replaced by a --join worker, and the diagnostics when
there is no switch or no PS. Every process is stopped by the `procs`
fixture, also on failure."""
import json
import signal
import time

import pytest

from harness import binary, counters, eal_args, memif_vdev, unique_prefix, wait_for

CONFIG = """[switch]
pipeline = "classic"
[classic]
ps_port = 0
worker_ports = [1, 2]
"""


class Setup:
    def __init__(self, procs, tmp_path):
        self.procs, self.tmp = procs, tmp_path
        self.tag = unique_prefix("wk")  # per process: concurrent sessions never share an EAL prefix
        self.socks = [tmp_path / f"m{i}.sock" for i in range(3)]
        self.ctl = tmp_path / "ctl.sock"

    def switch(self, lcores="0", memif_queues=1):
        cfg = self.tmp / "classic.toml"
        cfg.write_text(CONFIG)
        vdevs = [memif_vdev(i, s, "server") for i, s in enumerate(self.socks)]
        sw = self.procs.start("switch", [binary("agq-switch"), *eal_args(f"{self.tag}sw", lcores, vdevs), "--",
                                         "--config", cfg, "--ctl-socket", self.ctl, "--idle-sleep-us", "100",
                                         "--memif-queues", str(memif_queues)])
        wait_for(lambda: all(s.exists() for s in self.socks) and self.ctl.exists(), 15, what="switch sockets")
        return sw

    def agq_worker(self, name, port, args, lcore="1"):
        vdev = memif_vdev(0, self.socks[port], "client")
        return self.procs.start(name, [binary("agq-worker"), *eal_args(f"{self.tag}{name}", lcore, [vdev]), "--",
                                       "--progress", "0.5", *args])

    def ps(self, job, extra=()):
        p = self.agq_worker("ps", 0, ["--role", "ps", "--json", "--fresh-switch", *job, *extra])
        wait_for(lambda: "ready" in p.output() or not p.alive(), 15, what="PS ready")
        assert p.alive(), p.output()
        return p


def summary(proc):
    lines = [l for l in proc.output().splitlines() if l.startswith("{")]
    assert lines, proc.output()
    return json.loads(lines[-1])


def finish(proc, timeout=45):
    rc = proc.wait(timeout)
    assert rc == 0, f"{proc.name} exited {rc}:\n{proc.output()[-3000:]}"
    return summary(proc) if "--json" in proc.popen.args else None


def check_ps(ps_summary, chunks):
    s = ps_summary
    assert s["status"] == "ok", s
    assert s["checked"] == chunks and s["exact"] == chunks, s
    assert s["mismatches"] == 0 and s["order_dependent"] == 0, s
    assert s["quantization_error"]["max_over_bound"] <= 1.0 + 1e-9, s


@pytest.mark.parametrize("lcores,rings", [("0", 1), ("0,1", 1), ("0,1", 2)])
def test_two_workers_exact(procs, tmp_path, lcores, rings):
    """With two switch lcores the classic aggregators are split by shard
    (hash1 & 0xFFF, lcore shard mod 2). With one memif ring per link each
    frame lands on lcore 0 or 1, which hands the other lcore's aggregators
    over its ring; with two (--memif-queues 2, --switch-lcores 2) workers
    and PS send shard k on ring k mod 2, so every frame reaches its owner
    directly and nothing is handed off (docs/PROTOCOL.md section 10). The
    PS checks every aggregate exact, with no cursor resync."""
    st = Setup(procs, tmp_path)
    sw = st.switch(lcores, rings)
    job = ["--workers", "2", "--elements", "200000", "--window", "512"]
    if rings > 1:
        job += ["--switch-lcores", str(rings)]
    ps = st.ps(job)
    w = [st.agq_worker(f"w{i}", 1 + i, ["--ids", str(i), "--json", *job]) for i in range(2)]
    for p in w:
        s = finish(p)
        assert s["status"] == "ok", s
        # One lcore keeps the order of what it forwards: every ACK reaches the
        # worker before the PS's end-of-job broadcast. With two, the broadcast
        # leaves from the lcore that received it and may overtake ACKs the
        # other lcore is still sending; the worker then ends on the
        # announcement (the PS holds every aggregate, checked below).
        done = s["counters"]["chunks_done"]
        assert done == 50000 or (lcores != "0" and s["finished_by_announcement"] == 1 and done > 40000), s
    s = finish(ps)
    check_ps(s, 50000)
    assert s["cursor_resyncs"] == 0, s
    c = counters(st.ctl)
    assert c["completions"] >= 50000 and c["drops_agq_collision"] == 0, c
    if lcores != "0":
        assert "2 lcores" in sw.output(), sw.output()
        assert c["dp.handoff_drops"] == 0 and c["dp.memif_missing_rings"] == 0, c
        # One ring: about half of all frames cross lcores. Two: none does.
        assert (c["dp.handoff"] > 0) if rings == 1 else (c["dp.handoff"] == 0), c
    assert sw.alive()


def test_four_workers_in_two_processes(procs, tmp_path):
    st = Setup(procs, tmp_path)
    st.switch()
    job = ["--workers", "4", "--elements", "100000", "--window", "300", "--source", "laplace:0.5"]
    ps = st.ps(job)
    w = [st.agq_worker("wa", 1, ["--ids", "0,2", "--json", *job]),
         st.agq_worker("wb", 2, ["--ids", "1,3", "--json", *job])]
    for p in w:
        s = finish(p)
        assert s["status"] == "ok" and s["counters"]["chunks_done"] == 2 * 25000, s
    check_ps(finish(ps), 25000)


def test_worker_killed_mid_run_and_restarted_with_join(procs, tmp_path):
    st = Setup(procs, tmp_path)
    sw = st.switch()
    job = ["--workers", "2", "--elements", "4000000", "--window", "256"]
    ps = st.ps(job, ["--retry-ms", "500"])
    w0 = st.agq_worker("w0", 1, ["--ids", "0", "--json", *job])
    w1 = st.agq_worker("w1", 2, ["--ids", "1", *job])
    wait_for(lambda: "[worker] pkts tx" in w1.output(), 20, what="worker 1 running")
    w1.popen.send_signal(signal.SIGKILL)  # no orderly shutdown: its counted contributions stay in the switch
    w1.wait(10)
    time.sleep(0.5)
    w1b = st.agq_worker("w1b", 2, ["--ids", "1", "--join", "--json", *job])
    s1 = finish(w1b, 60)
    s0 = finish(w0, 60)
    assert s0["status"] == "ok" and s1["status"] == "ok", (s0, s1)
    s = finish(ps, 60)
    check_ps(s, 1000000)
    assert s["counters"]["retries"] >= 1, s
    assert sw.alive(), "switch died when its memif peer was killed"


def test_no_switch_is_a_diagnostic_not_a_hang(procs, tmp_path):
    st = Setup(procs, tmp_path)
    t0 = time.monotonic()
    w = st.agq_worker("w0", 1, ["--ids", "0", "--connect-timeout", "2"])
    rc = w.wait(30)
    out = w.output()
    assert rc == 3, out
    assert "Is agq-switch running" in out, out
    assert time.monotonic() - t0 < 20


def test_no_ps_is_a_diagnostic_not_a_hang(procs, tmp_path):
    st = Setup(procs, tmp_path)
    st.switch()
    w = st.agq_worker("w0", 1, ["--ids", "0", "--workers", "1", "--reply-timeout", "2", "--json"])
    rc = w.wait(30)
    assert rc == 3, w.output()
    assert "no reply from the switch on port 0 (net_memif0) after" in w.output(), w.output()
    assert summary(w)["status"] == "failed"


def test_more_rings_than_the_switch_serves_is_named(procs, tmp_path):
    """A classic worker that asks for two memif rings (--switch-lcores 2)
    from a switch serving one (--memif-queues 1) is refused by memif the
    way a missing switch is (the link never comes up): the diagnostic
    names both possibilities."""
    st = Setup(procs, tmp_path)
    st.switch()
    w = st.agq_worker("w0", 1, ["--ids", "0", "--switch-lcores", "2", "--connect-timeout", "2"])
    rc = w.wait(30)
    out = w.output()
    assert rc == 3, out
    assert "Is agq-switch running" in out, out
    assert "asks for 2 memif rings per port (--switch-lcores)" in out and "--memif-queues" in out, out
