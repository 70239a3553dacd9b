"""agq-switch with two dataplane lcores (-l 0,1: two program instances,
shared-nothing, docs/ARCHITECTURE.md) against the same switch with one.

1. pcap replay, agq DATA of two jobs over many shards: once steered (every
   port has one rx queue per lcore, a queue holding only the shards its lcore
   owns, as rte_flow on the UDP source port would steer them) and once
   through the software hand-off (one rx queue per port: half of every job's
   packets reach the owner lcore through its hand-off ring), and once
   mis-steered (a queue per lcore, but half of the shards on the other
   lcore's queue: the program finds the row is not its lcore's and hands
   the packet back, Decision::handoff, to the dataplane's ring). Every output
   port must carry exactly the frames the one-lcore switch sends, byte for
   byte (the order between shards of different lcores is free), and every
   sequence must complete.
2. The register cells, read through agqctl (`dump`, which asks the lcore
   that owns each row's shard: lcore 1's instance holds only the rows of the
   odd shards, docs/ARCHITECTURE.md "Memory"), equal the one-lcore switch's
   cell for cell, and say every slot completed both versions.
The same with real agq-workers and job changes while they run:
test_switch_lcores_workers.py (a multi-process test, Release pass only).

The DATA frames are built here (tests/pkt/agq_proto.py), not by the switch.
"""
import json
import random

import pytest
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap, wrpcap

from agq_proto import DATA, RESULT, AgqHeader, agq_frame, encode_value
from harness import agqctl, binary, counters, eal_args, unique_prefix, wait_for

N_WORKERS, SLOTS, ROWS, WIDTH = 4, 32, 16, 16  # 2 slots of 16 bits per row: no fallback
JOB_IDS = (1, 2)            # job k + 1 enters on port k, its PS is port 2 + k
EPOCH = 4660                # fixed: both runs write the same RESULT bytes


def row_shift(slots, rows):
    s = 0
    while -(-slots // (1 << s)) > rows:
        s += 1
    return s


def shard(job, slot):
    return (job + (slot >> row_shift(SLOTS, ROWS))) & 0xFFF


def ip(job, host):
    return f"10.200.{job}.{host}"


def mac(job, host):
    return f"02:00:c8:{job:02x}:00:{host:02x}"


def config():
    t = f'[switch]\npipeline = "agq"\nepoch = {EPOCH}\n[agq]\ntotal_rows = 64\ntotal_slots = 256\n'
    for k, job in enumerate(JOB_IDS):
        t += (f'[[job]]\nid = {job}\nworkers = {N_WORKERS}\nslots = {SLOTS}\nrows = {ROWS}\n'
              f'delivery = "multicast"\nps_port = {2 + k}\nps_ip = "{ip(job, 254)}"\nps_mac = "{mac(job, 254)}"\n')
        for w in range(N_WORKERS):
            t += f'[[job.worker]]\nid = {w}\nport = {k}\nip = "{ip(job, w + 1)}"\nmac = "{mac(job, w + 1)}"\n'
    return t


def traffic(job, rng):
    """Two uses of every slot (version 0, then 1), each sequence's DATA of
    all workers; the UDP source port carries the shard (PROTOCOL.md §10)."""
    frames = []
    for v in (0, 1):
        for slot in range(SLOTS):
            seq = rng.randrange(1 << 32)
            for w in range(N_WORKERS):
                lanes = [encode_value(rng.randrange(-500, 500), WIDTH, N_WORKERS) for _ in range(32)]
                h = AgqHeader(type=DATA, flags=v, job_id=job, worker_id=w, num_workers=N_WORKERS, slot=slot,
                              seq=seq, req_width=WIDTH, width=WIDTH, exponent=-4, lanes=lanes)  # min_width = R
                f = agq_frame(h, mac(job, w + 1), "02:00:00:00:00:fe", ip(job, w + 1), ip(job, 254),
                              sport=0xC000 | shard(job, slot), ip_id=w)
                frames.append((shard(job, slot), f))
    return frames


def run_switch(procs, tmp_path, name, lcores, rx_files):
    """rx_files[k]: the pcap(s) of port k, one per rx queue. Returns the
    frames each port sent, the switch's counters and its register cells
    (agqctl dump --json of every job row)."""
    cfg = tmp_path / "agq.toml"
    cfg.write_text(config())
    sock = tmp_path / f"{name}.sock"
    vdevs = []
    for k in range(2):
        rx = ",".join(f"rx_pcap={f}" for f in rx_files[k])
        vdevs.append(f"net_pcap{k},{rx},tx_pcap={tmp_path}/{name}_out{k}.pcap")
    vdevs += [f"net_pcap{p},tx_pcap={tmp_path}/{name}_out{p}.pcap" for p in (2, 3)]
    sw = procs.start(name, [binary("agq-switch"), *eal_args(unique_prefix("lc"), lcores, vdevs), "--",
                            "--config", cfg, "--ctl-socket", sock, "--idle-sleep-us", "50"])
    sequences = 2 * SLOTS * len(JOB_IDS)
    expect_tx = sequences * N_WORKERS  # every RESULT multicast to the job's N workers

    def done():
        if not sw.alive():
            raise AssertionError(f"{name} exited:\n" + sw.output())
        return sock.exists() and counters(sock).get("dp.tx", 0) >= expect_tx

    wait_for(done, 30, what=f"{name}: every RESULT replica sent")
    c = counters(sock)
    r = agqctl(sock, "--json", "dump", "0", str(ROWS * len(JOB_IDS)))
    assert r.returncode == 0, r.stdout + r.stderr
    cells = {d["aggregator"]: d["cells"] for d in json.loads(r.stdout)}
    assert sw.stop() == 0, sw.output()
    out = {p: sorted(bytes(x) for x in rdpcap(str(tmp_path / f"{name}_out{p}.pcap"))) for p in range(4)}
    return out, c, sw.output(), cells


def queue_of(s, mode):
    """The rx queue shard s arrives on: its owner's (s % 2), or in
    "mis-steered" the other lcore's for every shard with s % 4 >= 2 (each
    shard always on one queue, so its packets keep their order)."""
    return s % 2 if mode != "mis-steered" or s % 4 < 2 else 1 - s % 2


@pytest.mark.parametrize("mode", ["steered", "hand-off", "mis-steered"])
def test_two_lcores_equal_one_lcore_byte_for_byte(procs, tmp_path, mode):
    rng = random.Random(9)
    per_port = [traffic(job, rng) for job in JOB_IDS]
    files = {}
    for k, frames in enumerate(per_port):
        for q in (0, 1):  # queue q: the shards lcore q owns (shard % 2 == q), unless mis-steered
            files[(k, q)] = tmp_path / f"in{k}_q{q}.pcap"
            wrpcap(str(files[(k, q)]), [Ether(f) for s, f in frames if queue_of(s, mode) == q])
        files[(k, "all")] = tmp_path / f"in{k}.pcap"
        wrpcap(str(files[(k, "all")]), [Ether(f) for _, f in frames])
    # The reference: one lcore, one queue per port.
    ref, _, _, ref_cells = run_switch(procs, tmp_path, "one", "0", {k: [files[(k, "all")]] for k in range(2)})
    queues = {k: [files[(k, 0)], files[(k, 1)]] if mode != "hand-off" else [files[(k, "all")]] for k in range(2)}
    two, c, log, cells = run_switch(procs, tmp_path, "two", "0,1", queues)

    assert "2 lcores" in log, log
    for p in range(4):
        assert len(two[p]) == len(ref[p]), f"port {p}: {len(two[p])} frames, one lcore sent {len(ref[p])}"
        assert two[p] == ref[p], f"port {p}: frames differ from the one-lcore switch"
    # Every sequence completed, on the workers' ports, with the fixed epoch.
    for k, job in enumerate(JOB_IDS):
        results = [AgqHeader.unpack(f[42:]) for f in ref[k]]
        assert len(results) == 2 * SLOTS * N_WORKERS
        assert all(h.type == RESULT and h.job_id == job and h.epoch == EPOCH for h in results)
    assert ref[2] == ref[3] == []  # nothing to the PS: no fallback
    # Registers through agqctl: each row read from its owner lcore equals the
    # one-lcore switch's; rows of both lcores hold completed sequences.
    owners = set()
    for k, job in enumerate(JOB_IDS):
        for r in range(ROWS):
            row = k * ROWS + r  # conf above: job 1 rows 0..15, job 2 rows 16..31
            assert cells[row] == ref_cells[row], f"row {row} (job {job}, shard {(job + r) & 0xFFF})"
            owners.add((job + r) % 2)
            slots = [n for n in cells[row] if n.startswith("slot_count[")]
            assert len(slots) == 2 * (1 << row_shift(SLOTS, ROWS)), cells[row]  # .v0 and .v1 of each slot
            assert all(cells[row][n] == N_WORKERS for n in slots), cells[row]
            assert any(v != 0 for n, v in cells[row].items() if n.startswith("lane")), f"row {row}: lanes all zero"
    assert owners == {0, 1}
    for name in ("dp.handoff_drops", "dp.tx_dropped", "dp.multiseg_drops"):
        assert c[name] == 0, (name, c)
    if mode == "steered":
        assert c["dp.handoff"] == 0, c  # every packet arrived on its owner's queue
    else:
        # half of each job crossed to the other lcore: in "hand-off" sorted
        # by the dataplane (shard_of), in "mis-steered" handed back by the
        # program that found the row is another lcore's
        assert c["dp.handoff"] > 0, c
    if mode == "mis-steered":
        assert c["dp.handoff"] == sum(1 for fr in per_port for s, _ in fr if s % 4 >= 2), c
