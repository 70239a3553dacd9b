"""Two-lcore agq-worker processes and a PS against a two-lcore agq-switch
(--memif-queues 2, docs/PROTOCOL.md §10) when the switch goes away (issue
12, points 5 and 8), as separate processes over memif:

- the PS connects with one ring per switch lcore (the job from the switch
  says how many) and polls every ring: the FALLBACK_DATA of the shards of
  switch lcore 1 leave on queue 1 and reach it there;
- `kill -9` of agq-switch mid-job and the same switch started again with the
  same config: in every worker process both lcores see the link go down,
  lcore 0 restarts the memif port while lcore 1 keeps off it, both redo
  their in-flight sequences on the new switch (its new boot epoch seen on
  both lcores), the PS reconnects too, and the job completes with every
  RESULT checked bit for bit (--verify all) and byte-identical aggregates --
  or, if a RESULT reached one worker and not the other before the kill
  (sequences one worker completed cannot be redone), every worker fails
  within a bounded time saying that the switch restarted;
- `kill -9` of the switch and no restart: every worker fails within a
  bounded time saying that the link to the switch is down;
- a RESULT handed from one worker lcore to another through a full rte_ring
  is dropped and counted, never waited for, and recovered;
- `kill -9` of one worker process: the other fails within a bounded time
  naming the stalled sequences; `agqctl job reset`, and a new pair of
  processes is exact.
Multi-process: runs in the Release pass only (its file name says "workers")."""
import json
import re
import signal
import time

from harness import accepting, agqctl, binary, counters, eal_args, memif_vdev, unique_prefix, wait_for

JOB = 1
# The first chunk is a barrier that waits for the slowest worker's EAL
# start-up: on a loaded machine more than agq-worker's default 5 s (the early
# worker then failed before the job began). Later waits are bounded by the
# retries once RESULTs flow.
REPLY_TIMEOUT = 30


def endpoint(host):
    return f"10.129.{JOB}.{host}", f"02:00:02:00:{JOB:02x}:{host:02x}"


class Rig:
    """Port 0 = the job's PS, port 1 + w = worker w; the switch on two lcores
    with two memif queue pairs per port; slots 64 on 16 rows: 16-bit windows
    leave some sequences without room, which fall back to the PS."""

    def __init__(self, procs, tmp_path, memif_queues=2):
        self.procs, self.tmp, self.memif_queues = procs, tmp_path, memif_queues
        self.socks = [tmp_path / f"q{i}.sock" for i in range(3)]
        self.ctl = tmp_path / "ctl.sock"
        self.tag = unique_prefix("lr")
        self.starts = 0
        ps_ip, ps_mac = endpoint(254)
        t = (f'[switch]\npipeline = "agq"\n[agq]\ntotal_rows = 64\ntotal_slots = 256\n[[job]]\nid = {JOB}\n'
             f'workers = 2\nslots = 64\nrows = 16\ndelivery = "multicast"\n'
             f'ps_port = 0\nps_ip = "{ps_ip}"\nps_mac = "{ps_mac}"\n')
        for w in range(2):
            ip, mac = endpoint(w + 1)
            t += f'[[job.worker]]\nid = {w}\nport = {1 + w}\nip = "{ip}"\nmac = "{mac}"\n'
        self.cfg = tmp_path / "agq.toml"
        self.cfg.write_text(t)

    def start_switch(self, lcores="0,1"):
        for s in (*self.socks, self.ctl):
            s.unlink(missing_ok=True)
        self.starts += 1
        vdevs = [memif_vdev(i, s, "server") for i, s in enumerate(self.socks)]
        sw = self.procs.start(f"switch{self.starts}", [binary("agq-switch"),
                                                       *eal_args(f"{self.tag}sw{self.starts}", lcores, vdevs), "--",
                                                       "--config", self.cfg, "--ctl-socket", self.ctl,
                                                       "--idle-sleep-us", "100", "--memif-queues", self.memif_queues])
        wait_for(lambda: all(s.exists() for s in self.socks) and accepting(self.ctl) or not sw.alive(), 30,
                 what="switch sockets")
        assert sw.alive(), sw.output()
        return sw

    def ps(self):
        p = self.procs.start("ps", [binary("agq-worker"),
                                    *eal_args(f"{self.tag}ps", "1", [memif_vdev(0, self.socks[0], "client")],
                                              mem_mb=128),
                                    "--", "--protocol", "agq", "--role", "ps", "--switch-ctl", self.ctl, "--job", JOB,
                                    "--progress", "0", "--idle-sleep-us", "100", "--json"])
        wait_for(lambda: "ready" in p.output() or not p.alive(), 30, what="PS ready")
        assert p.alive(), p.output()
        return p

    def worker(self, w, extra, prefix="w"):
        name = f"{prefix}{w}"
        return self.procs.start(name, [binary("agq-worker"),
                                       *eal_args(f"{self.tag}{name}", "0,1" if w == 0 else "1,0",
                                                 [memif_vdev(0, self.socks[1 + w], "client")], mem_mb=256),
                                       "--", "--protocol", "agq", "--switch-ctl", self.ctl, "--job", JOB, "--ids", w,
                                       "--verify", "all", "--json", "--progress", "0.2", "--idle-sleep-us", "100",
                                       "--output", self.tmp / f"{name}.npy", *extra])


def summary(proc):
    lines = [l for l in proc.output().splitlines() if l.startswith("{")]
    assert lines, proc.output()[-3000:]
    return json.loads(lines[-1])


def flowing(p, rx=2000):
    """The worker's progress lines show RESULTs coming in (past its barrier)."""
    m = re.findall(r"rx (\d+)", p.output())
    return m and int(m[-1]) >= rx


def assert_exact(rig, ws, rounds):
    aggs = set()
    for w in ws:
        s = summary(w)
        assert s["status"] == "ok" and s["lcores"] == 2 and s["rounds_done"] == rounds, s
        assert s["mismatches"] == 0 and s["bad_header"] == 0, s
        assert s["verify"] == "all" and s["exact"] == s["checked"] == s["memory"]["sequences"] > 0, s
        assert s["quantization_error"]["max_over_bound"] <= 1.0 + 1e-9, s
        aggs.add((rig.tmp / f"{w.name}.npy").read_bytes())
    assert len(aggs) == 1, "the workers hold different aggregates"


def test_ps_polls_every_ring(procs, tmp_path):
    """The PS connects with two rings and receives FALLBACK_DATA on both: the
    shards of switch lcore 1 arrive on ring 1 (a PS polling ring 0 only
    never sees them, and the job stalls on their sequences)."""
    rig = Rig(procs, tmp_path)
    rig.start_switch()
    ps = rig.ps()
    rounds = 3
    ws = [rig.worker(w, ["--elements", 32 * 3000 + 5, "--rounds", rounds, "--reply-timeout", REPLY_TIMEOUT]) for w in range(2)]
    for w in ws:
        assert w.wait(150) == 0, w.output()[-3000:]
    assert_exact(rig, ws, rounds)
    assert all(summary(w)["fallbacks"] > 0 for w in ws), "no sequence fell back to the PS: the test tests nothing"
    c = counters(rig.ctl)
    assert ps.stop(signal.SIGINT, 10) == 0, ps.output()[-2000:]
    # Every client (PS and workers) connected with a ring per switch queue:
    # the switch never found a queue without a ring (with a one-ring PS it
    # does, drops what came in on it, and lcore 1's tx aliased ring 0 until then).
    assert c.get("dp.memif_missing_rings", 0) == 0 and c.get("dp.memif_missing_drops", 0) == 0, c
    p = summary(ps)
    assert p["bad"] == 0 and p["sequences"] > 0, p
    assert len(p["rx_per_queue"]) == 2, p
    assert all(n > 0 for n in p["rx_per_queue"]), f"a ring of the PS got nothing: {p}"
    assert sum(p["rx_per_queue"]) == p["counters"]["rx_pkts"], p


def test_full_handoff_ring_is_a_counted_loss(procs, tmp_path):
    """A switch on one lcore serving two memif rings per port transmits
    every RESULT on ring 0, so the RESULTs of the workers' lcore-1 slots
    arrive on their lcore 0 and are handed to lcore 1 through its rte_ring.
    (On a two-lcore switch every RESULT, the PS's answers included, comes
    back on its owner's ring: nothing is handed off.) A ring of 4 entries
    overflows: the frame is dropped and counted (never a wait), the owner's
    retransmission recovers it, and the job is exact."""
    rig = Rig(procs, tmp_path)
    rig.start_switch(lcores="0")
    ps = rig.ps()
    rounds = 3
    ws = [rig.worker(w, ["--elements", 32 * 3000, "--rounds", rounds, "--reply-timeout", REPLY_TIMEOUT, "--handoff-ring", 4])
          for w in range(2)]
    for w in ws:
        assert w.wait(150) == 0, w.output()[-3000:]
    assert_exact(rig, ws, rounds)
    s = [summary(w) for w in ws]
    assert all(x["handed_off"] > 0 for x in s), s
    assert sum(x["handoff_drops"] for x in s) > 0, "the ring never overflowed: the test tests nothing"
    assert ps.stop(signal.SIGINT, 10) == 0, ps.output()[-2000:]


def test_rings_follow_the_switch(procs, tmp_path):
    """A two-lcore switch with one memif queue per port (--memif-queues 1):
    the job from the switch says `rings` 1, so the PS connects with one ring
    (two would be refused by the server: the link would never come up), and
    a two-lcore worker process is told at once that it cannot connect its two
    rings (exit 2, naming the flag), instead of waiting for a link that never
    comes; one-lcore workers are exact."""
    rig = Rig(procs, tmp_path, memif_queues=1)
    rig.start_switch()
    r = agqctl(rig.ctl, "job", "get", str(JOB), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["rings"] == 1 and json.loads(r.stdout)["lcores"] == 2, r.stdout
    ps = rig.ps()
    bad = rig.worker(0, ["--elements", 320, "--rounds", 1], prefix="two")
    assert bad.wait(60) == 2, bad.output()[-2000:]
    assert "--memif-queues 2" in bad.output() and "at most 1 lcore " in bad.output(), bad.output()[-2000:]
    ws = []
    for w in range(2):
        name = f"one{w}"
        ws.append(procs.start(name, [binary("agq-worker"),
                                     *eal_args(f"{rig.tag}{name}", str(w), [memif_vdev(0, rig.socks[1 + w], "client")]),
                                     "--", "--protocol", "agq", "--switch-ctl", rig.ctl, "--job", JOB, "--ids", w,
                                     "--verify", "all", "--json", "--progress", "0", "--idle-sleep-us", "100",
                                     "--elements", 32 * 2000, "--rounds", 2, "--reply-timeout", REPLY_TIMEOUT]))
    for w in ws:
        assert w.wait(150) == 0, w.output()[-3000:]
        s = summary(w)
        assert s["status"] == "ok" and s["exact"] == s["checked"] > 0 and s["fallbacks"] > 0, s
    assert ps.stop(signal.SIGINT, 10) == 0, ps.output()[-2000:]
    assert summary(ps)["rx_per_queue"] == [summary(ps)["counters"]["rx_pkts"]], summary(ps)


def run_until_flowing(rig, job):
    ws = [rig.worker(w, job) for w in range(2)]
    wait_for(lambda: all(flowing(w) for w in ws) or not all(w.alive() for w in ws), REPLY_TIMEOUT + 60,
             what="results flowing")
    for w in ws:
        assert w.alive(), (f"{w.name} ended (exit {w.popen.returncode}) before the kill: "
                           + ("the job is too short" if w.popen.returncode == 0 else "it failed")
                           + "\n" + w.output()[-3000:])
    return ws


def test_switch_killed_and_restarted(procs, tmp_path):
    rig = Rig(procs, tmp_path)
    sw = rig.start_switch()
    ps = rig.ps()
    rounds = 250
    ws = run_until_flowing(rig, ["--elements", 32 * 4000, "--rounds", rounds, "--rto-max-ms", 320,
                                 "--max-retries", 30, "--reply-timeout", REPLY_TIMEOUT])
    sw.popen.send_signal(signal.SIGKILL)  # kill -9 of the switch mid-job
    sw.popen.wait()
    time.sleep(0.5)
    t0 = time.monotonic()
    rig.start_switch()  # the same switch, same config, same sockets
    rcs = [w.wait(180) for w in ws]
    took = time.monotonic() - t0
    for w, rc in zip(ws, rcs):
        out = w.output()
        # Either the job completed exactly, or the worker said what happened.
        assert rc in (0, 4), f"{w.name} exited {rc}:\n{out[-3000:]}"
        assert "link DOWN" in out and "link up" in out, out[-3000:]
        s = summary(w)
        # Both lcores saw the link go down; lcore 0 restarted the port.
        assert min(s["link"]["downs_per_lcore"]) >= 1, s["link"]
        assert s["link"]["port_restarts"] >= 1, s["link"]
        if rc == 4:
            assert "switch restarted" in out, out[-3000:]
    if all(rc == 0 for rc in rcs):
        assert_exact(rig, ws, rounds)
        for w in ws:
            # Every lcore's engine saw the new boot epoch and redid its sequences.
            assert min(summary(w)["link"]["switch_restarts_per_lcore"]) >= 1, summary(w)
    print("outcome:", "exact" if all(rc == 0 for rc in rcs) else "failed, explained", f"after {took:.1f} s")
    assert took < 170
    assert "link up" in ps.output(), "the PS did not reconnect:\n" + ps.output()[-2000:]


def test_switch_killed_for_good(procs, tmp_path):
    rig = Rig(procs, tmp_path)
    sw = rig.start_switch()
    ps = rig.ps()
    ws = run_until_flowing(rig, ["--elements", 32 * 4000, "--rounds", 500, "--rto-max-ms", 500,
                                 "--max-retries", 20, "--reply-timeout", REPLY_TIMEOUT])
    t0 = time.monotonic()
    sw.popen.send_signal(signal.SIGKILL)  # kill -9, and nobody starts it again
    sw.popen.wait()
    rcs = [w.wait(120) for w in ws]
    took = time.monotonic() - t0
    for w, rc in zip(ws, rcs):
        out = w.output()
        assert rc == 4, f"{w.name} exited {rc}:\n{out[-3000:]}"
        assert "no RESULT after" in out and "link to the switch is down" in out, out[-3000:]
        s = summary(w)
        assert s["status"] == "failed" and min(s["link"]["downs_per_lcore"]) >= 1, s
        assert s["link"]["port_restarts"] == 0 and s["link"]["failed_restarts"] >= 1, s["link"]
    # Bounded: 20 retries backing off to 0.5 s each, plus the wait for the link.
    print(f"outcome: both failed, explained, {took:.1f} s after the kill")
    assert took < 60, f"the workers took {took:.1f} s to give up"
    assert ps.alive(), "the PS serves until it is stopped, switch or not"
    assert ps.stop(signal.SIGINT, 10) == 0, ps.output()[-2000:]


def test_dead_worker_process_then_job_reset(procs, tmp_path):
    """kill -9 of one two-lcore worker process mid-job: the other process
    (both its lcores waiting on the dead peer) names the stalled sequences
    and exits 4 within a bounded time; after `agqctl job reset` a new pair
    of processes is exact, switch and PS untouched."""
    rig = Rig(procs, tmp_path)
    rig.start_switch()
    ps = rig.ps()
    ws = run_until_flowing(rig, ["--elements", 32 * 4000, "--rounds", 500, "--rto-max-ms", 500,
                                 "--max-retries", 20, "--reply-timeout", REPLY_TIMEOUT])
    t0 = time.monotonic()
    ws[1].popen.send_signal(signal.SIGKILL)
    rc = ws[0].wait(120)
    took = time.monotonic() - t0
    out = ws[0].output()
    assert rc == 4, out[-3000:]
    assert "stalled" in out and "slot" in out and "reset the job" in out, out[-3000:]
    print(f"outcome: the survivor failed, explained, {took:.1f} s after the kill")
    assert took < 60, f"the survivor took {took:.1f} s to give up"
    r = agqctl(rig.ctl, "job", "reset", str(JOB))
    assert r.returncode == 0, r.stdout + r.stderr
    rounds = 3
    ws = [rig.worker(w, ["--elements", 32 * 3000, "--rounds", rounds, "--reply-timeout", REPLY_TIMEOUT], prefix="again")
          for w in range(2)]
    for w in ws:
        assert w.wait(150) == 0, w.output()[-3000:]
    assert_exact(rig, ws, rounds)
    assert ps.alive()
