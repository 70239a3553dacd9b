"""The real agq-switch running the agq pipeline (conf/agq.toml: PS on port 0,
job 1 on ports 1-2, job 2 on ports 3-4) on net_tap ports. The test plays the
workers with raw AF_PACKET sockets on the kernel side of the taps: DATA
frames in, RESULT frames out on every worker port, checked byte for byte
against frames this test computes from docs/PROTOCOL.md (sum(u_i >> d),
best-fit windows, per-worker destination rewrite). Then jobs are removed and
added at run time (agqctl job del/add/list) and the drop simulator makes a
port's traffic vanish (agqctl drop), counted as dp.sim_drops.<port>.<dir>.
"""
import math
import random
import select
import socket
import subprocess
import time
import uuid

import pytest

from agq_proto import (AGQ_LEN, AGQ_PORT, DATA, F_RETRANSMIT, RESULT, AgqHeader, agq_frame, encode_value,
                       expected_lane, guard_bits, rewrite_frame)
from harness import SOURCE_DIR, agqctl, binary, counters, eal_args, unique_prefix, wait_for

N_PORTS = 5
SWITCH_MAC = "02:00:00:00:00:fe"  # the workers address DATA to "the switch"; any MAC would do
SWITCH_IP = "10.2.2.254"
# conf/agq.toml, repeated here on purpose: the test's expectations are its own.
JOBS = {
    1: dict(max_width=32, slots=64, rows=16,
            workers=[(1, "10.2.2.1", "02:00:00:00:01:01"), (2, "10.2.2.2", "02:00:00:00:01:02")]),
    2: dict(max_width=16, slots=32, rows=8,
            workers=[(3, "10.2.3.1", "02:00:00:00:02:01"), (4, "10.2.3.2", "02:00:00:00:02:02")]),
}
# The boot epoch (PROTOCOL §11) the test fixes in its copy of conf/agq.toml,
# so that RESULTs compare byte for byte.
EPOCH = 0xE90C
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def sh(*args, check=True):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, check=check)


class Model:
    """What PROTOCOL.md says the switch grants: rows of 8 units per version
    half, slots of a job packed 2^k per row (the fewest rows within the
    quota), best fit (smallest free run that holds R, earliest first), W
    clamped to max_width. Only first uses of a (slot, v) are modelled."""

    def __init__(self):
        self.occ = {}  # (job, row, v) -> set of live units

    @staticmethod
    def row_of(job, slot):
        j = JOBS[job]
        shift = 0
        while math.ceil(j["slots"] / (1 << shift)) > j["rows"]:
            shift += 1
        return slot >> shift

    def grant(self, job, slot, v, req_width):
        want = min(req_width, JOBS[job]["max_width"]) // 4
        live = self.occ.setdefault((job, self.row_of(job, slot), v), set())
        runs, u = [], 0
        while u < 8:
            if u in live:
                u += 1
                continue
            start = u
            while u < 8 and u not in live:
                u += 1
            runs.append((u - start, start))
        fits = [r for r in runs if r[0] >= want]
        length, pos = min(fits, key=lambda r: (r[0], r[1]))
        live.update(range(pos, pos + want))
        return want * 4, pos


class Wire:
    """Raw sockets on the kernel side of every tap: send into the switch,
    collect agq frames the switch sends out, per port."""

    def __init__(self, ifaces):
        self.socks = []
        for ifc in ifaces:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.bind((ifc, 0))
            s.setblocking(False)
            self.socks.append(s)

    def close(self):
        for s in self.socks:
            s.close()

    def send(self, port, frame):
        self.socks[port].send(frame)

    def drain(self):
        for s in self.socks:
            while select.select([s], [], [], 0)[0]:
                s.recvfrom(4096)

    def collect(self, expect_total, timeout=5.0, settle=0.3):
        """Agq frames received per port, until `expect_total` arrived (then
        `settle` more seconds, to catch extras) or `timeout`."""
        got = {p: [] for p in range(len(self.socks))}
        deadline = time.monotonic() + timeout
        done_at = None
        while True:
            now = time.monotonic()
            if now >= deadline or (done_at is not None and now >= done_at):
                return got
            ready, _, _ = select.select(self.socks, [], [], 0.05)
            for s in ready:
                frame, addr = s.recvfrom(4096)
                if addr[2] == PACKET_OUTGOING:  # our own DATA on its way in
                    continue
                if len(frame) >= 42 + AGQ_LEN and frame[12:14] == b"\x08\x00" and frame[23] == 17 and \
                        int.from_bytes(frame[36:38], "big") == AGQ_PORT:
                    got[self.socks.index(s)].append(frame)
            if done_at is None and sum(len(v) for v in got.values()) >= expect_total:
                done_at = time.monotonic() + settle


@pytest.fixture
def switch(request, tmp_path, procs):
    # request.param "copy": --copy-replicas (a buffer per replica); by
    # default net_tap, which copies frames out at tx, gets replicas
    # rewritten from the original member after member.
    copy = getattr(request, "param", "reuse") == "copy"
    tag = uuid.uuid4().hex[:6]
    ifaces = [f"aqg{tag}{p}" for p in range(N_PORTS)]
    sock = tmp_path / "ctl.sock"
    cfg = tmp_path / "agq.toml"
    text = (SOURCE_DIR / "conf/agq.toml").read_text()
    assert "\n[switch]\n" in text
    cfg.write_text(text.replace("\n[switch]\n", f"\n[switch]\nepoch = {EPOCH}\n", 1))
    vdevs = [f"net_tap{p},iface={ifaces[p]}" for p in range(N_PORTS)]
    sw = procs.start("switch", [binary("agq-switch"), *eal_args(unique_prefix("agqt"), "0", vdevs), "--",
                                "--config", cfg, "--ctl-socket", sock,
                                "--idle-sleep-us", "50", *(["--copy-replicas"] if copy else [])])
    wait_for(lambda: sock.exists() or not sw.alive(), 30, what="control socket")
    assert sw.alive(), sw.output()
    for ifc in ifaces:  # no IPv6 chatter from the kernel into the switch
        sh("sysctl", "-qw", f"net.ipv6.conf.{ifc}.disable_ipv6=1", check=False)
        sh("ip", "link", "set", ifc, "up")
    wire = Wire(ifaces)
    time.sleep(0.3)
    wire.drain()
    try:
        yield sw, sock, wire
    finally:
        wire.close()
        rc = sw.stop()
        assert rc == 0, sw.output()


class Seq:
    """One sequence: every worker's DATA frame and every worker's expected RESULT."""

    def __init__(self, model, rng, job, slot, req_width, v=0, seq=None, exponent=-7):
        j = JOBS[job]
        n = len(j["workers"])
        g = guard_bits(n)
        b = req_width - g
        self.job, self.width_pos = job, model.grant(job, slot, v, req_width)
        width, pos = self.width_pos
        qs = [[rng.randrange(-(1 << (b - 1)), 1 << (b - 1)) for _ in range(32)] for _ in range(n)]
        us = [[encode_value(q, req_width, n) for q in qw] for qw in qs]
        seq = rng.randrange(1 << 32) if seq is None else seq
        self.data = []
        for i, (port, ip, mac) in enumerate(j["workers"]):
            # min_width (PROTOCOL §1): the width the model grants (R clamped
            # to max_width), so the switch may grant nothing narrower
            h = AgqHeader(type=DATA, flags=v, job_id=job, worker_id=i, num_workers=n, slot=slot, seq=seq,
                          req_width=req_width, width=width, exponent=exponent, lanes=us[i])
            self.data.append((port, agq_frame(h, mac, SWITCH_MAC, ip, SWITCH_IP, ip_id=i), h))
        self.lanes = [expected_lane([us[i][k] for i in range(n)], req_width, width) for k in range(32)]
        self.v, self.g = v, g
        self.completed_by(n - 1)

    def completed_by(self, last):
        """The RESULT is the completing DATA frame (worker `last`'s),
        rewritten per worker (PROTOCOL §4.7)."""
        width, pos = self.width_pos
        _, frame, h = self.data[last]
        self.results = {}
        for i, (port, ip, mac) in enumerate(JOBS[self.job]["workers"]):
            r = h.copy(type=RESULT, flags=self.v, worker_id=i, width=width, pos=pos, guard=self.g, lanes=self.lanes,
                       epoch=EPOCH)
            self.results[port] = rewrite_frame(frame, r, dst_mac=mac, dst_ip=ip)
        return self

    def send(self, wire, workers=None, retransmit=False):
        for i, (port, frame, h) in enumerate(self.data):
            if workers is not None and i not in workers:
                continue
            if retransmit:
                frame = frame[:-AGQ_LEN] + h.copy(flags=h.flags | F_RETRANSMIT).pack()
            wire.send(port, frame)


def check_results(got, seqs, ports=None):
    for port in (ports if ports is not None else range(1, N_PORTS)):
        exp = [s.results[port] for s in seqs if port in s.results]
        assert len(got[port]) == len(exp), f"port {port}: {len(got[port])} frames, expected {len(exp)}"
        for i, (g, e) in enumerate(zip(got[port], exp)):
            assert g == e, f"port {port} frame {i}:\n got {g.hex()}\n exp {e.hex()}"


@pytest.mark.parametrize("switch", ["reuse", "copy"], indirect=True)
def test_results_on_every_worker_port_byte_for_byte(switch, request):
    sw, sock, wire = switch
    rng, model = random.Random(4), Model()
    # Job 1: slots 0 and 1 share row 0 (units 0-3 then best fit 4-5), slot 4
    # is row 1, full width. Job 2 caps at 16 bits: R = 32 is granted 16
    # (d = 16), and two sequences pack one cell.
    seqs = [Seq(model, rng, 1, 0, 16), Seq(model, rng, 1, 1, 8), Seq(model, rng, 1, 4, 32),
            Seq(model, rng, 2, 0, 32), Seq(model, rng, 2, 1, 16)]
    assert [s.width_pos for s in seqs] == [(16, 0), (8, 4), (32, 0), (16, 0), (16, 4)]
    before = counters(sock)
    for s in seqs:
        s.send(wire)
        time.sleep(0.01)  # keep every switch port's order the send order
    got = wire.collect(2 * len(seqs))
    check_results(got, seqs)
    assert got[0] == [], "nothing goes to the PS"
    c = counters(sock)
    assert c["agq_results"] - before["agq_results"] == len(seqs), c
    assert c["agq_absorbed"] - before["agq_absorbed"] == len(seqs), c
    # Two workers per job: one replica beyond the original per result, a
    # copy of its own or the original rewritten again once the port sent it.
    reused, copies = c["dp.reused"] - before["dp.reused"], c["dp.copies"] - before["dp.copies"]
    if request.node.callspec.params["switch"] == "copy":
        assert (copies, reused) == (len(seqs), 0), c
    else:
        assert (copies, reused) == (0, len(seqs)), c
    assert c["dp.reuse_held"] == 0, c


def test_jobs_at_run_time(switch):
    sw, sock, wire = switch
    rng, model = random.Random(5), Model()
    r = agqctl(sock, "job", "list")
    assert r.returncode == 0, r.stderr
    assert [l.split()[0] for l in r.stdout.splitlines()] == ["1", "2"]
    job2 = next(l for l in r.stdout.splitlines() if l.startswith("2 "))

    r = agqctl(sock, "job", "del", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert [l.split()[0] for l in agqctl(sock, "job", "list").stdout.splitlines()] == ["1"]
    before = counters(sock)
    Seq(model, rng, 2, 0, 16).send(wire)
    got = wire.collect(1, timeout=1.0)
    assert got[3] == [] and got[4] == [], "a removed job's DATA is dropped"
    c = counters(sock)
    assert c["dp.program_drops"] - before["dp.program_drops"] == 2, c

    # Back, from the line 'job list' printed: registers start clean.
    r = agqctl(sock, "job", "add", *job2.split())
    assert r.returncode == 0, r.stdout + r.stderr
    model = Model()
    s = Seq(model, rng, 2, 0, 16)
    s.send(wire)
    check_results(wire.collect(2), [s])

    # A job the file never had, on ports of both others.
    r = agqctl(sock, "job", "add", "9", "workers=2", "slots=4", "rows=1",
               "worker=0,1,10.2.2.1,02:00:00:00:01:01", "worker=1,3,10.2.3.1,02:00:00:00:02:01")
    assert r.returncode == 0, r.stdout + r.stderr
    # 4 slots in one row: at 32 bits one window fills a row half (PROTOCOL.md §6)
    assert r.stdout.startswith("job 9: warning: 4 slots per row") and "at most 1 of a row's 4 slots" in r.stdout, \
        r.stdout
    JOBS[9] = dict(max_width=32, slots=4, rows=1,
                   workers=[(1, "10.2.2.1", "02:00:00:00:01:01"), (3, "10.2.3.1", "02:00:00:00:02:01")])
    try:
        s = Seq(model, rng, 9, 2, 24)
        s.send(wire)
        check_results(wire.collect(2), [s])
    finally:
        del JOBS[9]
    r = agqctl(sock, "job", "add", "9", "workers=1", "slots=4", "rows=1", "worker=0,1,10.2.2.1,02:00:00:00:01:01")
    assert r.returncode == 1 and "job 9" in r.stderr, r.stdout + r.stderr


def test_drop_simulator_makes_traffic_vanish(switch):
    sw, sock, wire = switch
    rng, model = random.Random(6), Model()
    # tx on port 2: worker 1 of job 1 never sees the RESULT; worker 0 does.
    assert agqctl(sock, "drop", "2", "tx", "1").returncode == 0
    before = counters(sock)
    s = Seq(model, rng, 1, 0, 16)
    s.send(wire)
    got = wire.collect(1, timeout=2.0)
    check_results(got, [s], ports=[1])
    assert got[2] == []
    c = counters(sock)
    assert c["dp.sim_drops.2.tx"] - before["dp.sim_drops.2.tx"] == 1, c

    # rx on port 1: worker 0's DATA vanishes, so the sequence cannot complete...
    assert agqctl(sock, "drop", "clear").returncode == 0
    assert agqctl(sock, "drop", "1", "rx", "1").returncode == 0
    r = agqctl(sock, "drop", "list")
    assert r.returncode == 0
    rows = {l.split()[0]: l.split() for l in r.stdout.splitlines()[1:]}
    assert rows["1"][1] == "1" and rows["2"][2] == "0", r.stdout
    before = counters(sock)
    s = Seq(model, rng, 1, 4, 32)
    s.send(wire)
    got = wire.collect(1, timeout=1.0)
    assert all(v == [] for v in got.values()), got
    c = counters(sock)
    assert c["dp.sim_drops.1.rx"] - before["dp.sim_drops.1.rx"] == 1, c
    assert c["agq_absorbed"] - before["agq_absorbed"] == 1, c
    # ... until the loss ends and worker 0 retransmits: then both get it.
    assert agqctl(sock, "drop", "clear").returncode == 0
    s.send(wire, workers=[0], retransmit=True)
    check_results(wire.collect(2), [s.completed_by(0)])
