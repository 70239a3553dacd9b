"""agq-worker with two lcores per process (EAL -l with two cores) against
agq-switch with two dataplane lcores and two memif queue pairs per port
(docs/PROTOCOL.md §10): each worker lcore serves the slots of the shards
s with s mod 2 == its index, sends them on its own queue (UDP source port
0xC000 | shard), and gets their RESULTs back on the same queue from the
switch lcore that owns the shard. Two worker processes (N = 2), the job
from the switch (`--switch-ctl`, which also says the switch's lcores), every
RESULT checked bit for bit (--verify all), the workers' aggregates
byte-identical, at 0 % and 1 % loss. Shard steering is exact here: neither
the switch nor the workers hand a packet to another lcore.
Multi-process: runs in the Release pass only (its file name says "workers")."""
import os

import pytest

from harness import agqctl, binary, counters, eal_args, memif_vdev, unique_prefix, wait_for
from test_agq_workers import endpoint, summary

# row_shift 1: 32 shards, 16 per lcore; two 16-bit windows per row half (no PS: no fallback). Every
# request is 16 bits (max_width 16, an error budget that asks more): a DATA's min_width is its
# request (PROTOCOL.md §5), so a 12-bit window beside a 16-bit one could leave a later 16-bit
# request only 12 bits of its row -- a fallback, which needs a PS.
JOB, SLOTS, ROWS = 1, 64, 32


def config(socks):
    out = ['[switch]\npipeline = "agq"\n[agq]\ntotal_rows = 64\ntotal_slots = 256\n',
           f'[[job]]\nid = {JOB}\nworkers = 2\nslots = {SLOTS}\nrows = {ROWS}\nmax_width = 16\n'
           'delivery = "multicast"\n']
    for w in range(2):
        ip, mac = endpoint(JOB, w + 1)
        out.append(f'[[job.worker]]\nid = {w}\nport = {w}\nip = "{ip}"\nmac = "{mac}"\n')
    return "\n".join(out)


@pytest.mark.parametrize("loss", [0.0, 0.01])
def test_two_lcores_per_worker_process(procs, tmp_path, loss):
    elements, rounds = 32 * 4000 + 7, 3
    socks = [tmp_path / f"m{i}.sock" for i in range(2)]
    ctl = tmp_path / "ctl.sock"
    cfg = tmp_path / "agq.toml"
    cfg.write_text(config(socks))
    tag = unique_prefix("al")  # per process: concurrent sessions never share an EAL prefix
    sw = procs.start("switch", [binary("agq-switch"),
                                *eal_args(f"{tag}sw", "0,1", [memif_vdev(i, s, "server") for i, s in enumerate(socks)]),
                                "--", "--config", cfg, "--ctl-socket", ctl, "--idle-sleep-us", "100",
                                "--memif-queues", "2"])
    wait_for(lambda: all(s.exists() for s in socks) and ctl.exists() or not sw.alive(), 20, what="switch sockets")
    assert sw.alive(), sw.output()
    if loss:
        for p in range(2):
            for d in ("rx", "tx"):
                r = agqctl(ctl, "drop", str(p), d, str(loss))
                assert r.returncode == 0, r.stdout + r.stderr
    ws = []
    for w in range(2):
        out = tmp_path / f"agg{w}.npy"
        p = procs.start(f"w{w}", [binary("agq-worker"),
                                  *eal_args(f"{tag}w{w}", "0,1" if w == 0 else "1,0",
                                            [memif_vdev(0, socks[w], "client")], mem_mb=256),
                                  "--", "--protocol", "agq", "--switch-ctl", ctl, "--job", JOB, "--ids", w,
                                  "--elements", elements, "--rounds", rounds, "--verify", "all", "--json",
                                  "--init-width", 16, "--error-budget", "1e-5",
                                  "--progress", os.environ.get("AGQ_PROGRESS", "0"), "--idle-sleep-us", "100",
                                  "--reply-timeout", "20", "--output", out])
        ws.append((p, out))
    chunks = -(-elements // 32)
    aggs = []
    for p, out in ws:
        rc = p.wait(150)
        assert rc == 0, f"{p.name} exited {rc}:\n{p.output()[-3000:]}\n" + "\n".join(
            f"{q.name}: {q.output()[-1500:]}" for q, _ in ws if q is not p) + f"\nswitch counters: {counters(ctl)}"
        s = summary(p)
        assert s["status"] == "ok" and s["lcores"] == 2, s
        assert s["rounds_done"] == rounds, s
        assert s["mismatches"] == 0 and s["bad_header"] == 0, s
        assert s["verify"] == "all" and s["exact"] == s["checked"] == s["memory"]["sequences"] > 0, s
        assert s["counters"]["chunks_done"] == chunks * rounds + 1, s  # + the barrier chunk
        assert s["quantization_error"]["max_over_bound"] <= 1.0 + 1e-9, s
        # Every RESULT came back on the queue of the lcore that owns its slot.
        assert s["handed_off"] == 0, s
        if loss:
            assert s["retransmissions"] > 0, s
        aggs.append(out.read_bytes())
    assert aggs[0] == aggs[1], "the two workers hold different aggregates"
    c = counters(ctl)
    assert sw.alive(), "the switch died"
    # Both switch lcores aggregated, and every DATA arrived on its owner's queue.
    assert c.get("dp.handoff", 0) == 0, c
    assert c["agq_results"] >= chunks * rounds, c
