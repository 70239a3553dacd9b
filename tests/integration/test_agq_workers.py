"""agq-switch (agq pipeline) + agq-worker --protocol agq as separate
processes over memif: two concurrent jobs (2 workers, and 4 workers in two
processes of two ports each), each with its PS, at 0 %, 1 % and 10 %
simulated loss on every worker and PS port in both directions (the switch's
drop simulator, `agqctl drop`). Every worker checks every RESULT bit for bit
against sum(u_i >> d) of the gradients re-encoded by the scalar reference
(--verify all, once per process) and writes its final
aggregate: the workers of a job must hold byte-identical tensors. Every wait
has a hard timeout; the `procs` fixture stops every process, also on failure."""
import json
import os
import signal
import time

from harness import agqctl, binary, counters, eal_args, memif_vdev, unique_prefix, wait_for

# (job id, worker processes as lists of worker ids, slots, rows, max_width, source)
JOBS = [
    (1, [[0], [1]], 32, 8, 32, "normal"),
    (2, [[0, 2], [1, 3]], 16, 4, 16, "laplace:0.5"),
]


def endpoint(job, host):
    """lib/agq_wire.cpp's default identities."""
    jh, jl = job >> 8, job & 0xFF
    return f"10.{128 | jh}.{jl}.{host}", f"02:00:01:{jh:02x}:{jl:02x}:{host:02x}"


class Topology:
    """Port numbering: per job its PS port, then one port per worker id."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.ports = []      # (job, "ps" | worker id)
        for job, procs, *_ in JOBS:
            self.ports.append((job, "ps"))
            for ids in procs:
                self.ports += [(job, w) for w in ids]
        self.socks = [tmp_path / f"m{i}.sock" for i in range(len(self.ports))]
        self.ctl = tmp_path / "ctl.sock"

    def port(self, job, who):
        return self.ports.index((job, who))

    def config(self):
        out = ['[switch]\npipeline = "agq"\n[agq]\ntotal_rows = 64\ntotal_slots = 256\n']
        for job, procs, slots, rows, max_width, _ in JOBS:
            n = sum(len(p) for p in procs)
            ps_ip, ps_mac = endpoint(job, 254)
            out.append(f'[[job]]\nid = {job}\nworkers = {n}\nslots = {slots}\nrows = {rows}\ndelivery = "multicast"\n'
                       f'ps_port = {self.port(job, "ps")}\nps_ip = "{ps_ip}"\nps_mac = "{ps_mac}"\n'
                       f'max_width = {max_width}\n')
            for w in range(n):
                ip, mac = endpoint(job, w + 1)
                out.append(f'[[job.worker]]\nid = {w}\nport = {self.port(job, w)}\nip = "{ip}"\nmac = "{mac}"\n')
        return "\n".join(out)


def summary(proc):
    lines = [l for l in proc.output().splitlines() if l.startswith("{")]
    assert lines, proc.output()[-3000:]
    return json.loads(lines[-1])


def run_two_jobs(procs, tmp_path, loss, elements, rounds, deadline_s, lcores="0", during=None):
    """`lcores`: the switch's EAL -l; `during(topo, worker_procs)`: runs
    while the workers work (test_switch_lcores.py changes jobs then)."""
    topo = Topology(tmp_path)
    cfg = tmp_path / "agq.toml"
    cfg.write_text(topo.config())
    tag = unique_prefix("aw")  # per process: two users running this test at once must not share EAL prefixes
    vdevs = [memif_vdev(i, s, "server") for i, s in enumerate(topo.socks)]
    sw = procs.start("switch", [binary("agq-switch"), *eal_args(f"{tag}sw", lcores, vdevs), "--",
                                "--config", cfg, "--ctl-socket", topo.ctl, "--idle-sleep-us", "100"])
    wait_for(lambda: all(s.exists() for s in topo.socks) and topo.ctl.exists() or not sw.alive(), 20,
             what="switch sockets")
    assert sw.alive(), sw.output()
    if loss:
        for i in range(len(topo.ports)):
            for d in ("rx", "tx"):
                r = agqctl(topo.ctl, "drop", str(i), d, str(loss))
                assert r.returncode == 0, r.stdout + r.stderr

    def agq_worker(name, ports, args, lcore):
        v = [memif_vdev(i, topo.socks[p], "client") for i, p in enumerate(ports)]
        return procs.start(name, [binary("agq-worker"), *eal_args(f"{tag}{name}", lcore, v, mem_mb=128), "--",
                                  "--protocol", "agq", "--progress", os.environ.get("AGQ_PROGRESS", "0"), "--json", "--idle-sleep-us", "100",
                                  *args])

    pss, workers = [], []
    for job, wprocs, slots, rows, _, source in JOBS:
        n = sum(len(p) for p in wprocs)
        common = ["--job-id", job, "--workers", n, "--slots", slots, "--elements", elements]
        ps = agq_worker(f"ps{job}", [topo.port(job, "ps")], ["--role", "ps", *common], "1")
        pss.append(ps)
        wait_for(lambda: "ready" in ps.output() or not ps.alive(), 20, what=f"PS of job {job} ready")
        assert ps.alive(), ps.output()
        for k, ids in enumerate(wprocs):
            out = tmp_path / f"agg{job}_{k}.npy"
            w = agq_worker(f"w{job}_{k}", [topo.port(job, i) for i in ids],
                           ["--ids", ",".join(map(str, ids)), *common, "--rows", rows, "--rounds", rounds,
                            "--source", source, "--rto-ms", "30", "--reply-timeout", "20", "--output", out],
                           "1" if k % 2 == 0 else "0")
            workers.append((job, ids, w, out))

    t0 = time.monotonic()
    if during:
        during(topo, [w for _, _, w, _ in workers])
    results = {}
    for job, ids, w, out in workers:
        rc = w.wait(max(1.0, deadline_s - (time.monotonic() - t0)))  # hard timeout: TimeoutExpired fails the test
        assert rc == 0, f"{w.name} exited {rc}:\n{w.output()[-3000:]}"
        results.setdefault(job, []).append((ids, summary(w), out.read_bytes()))
    for ps in pss:
        assert ps.stop(signal.SIGINT, 10) == 0, ps.output()[-2000:]
    c = counters(topo.ctl)
    assert sw.alive(), "the switch died"
    return topo, results, [summary(p) for p in pss], c


def check_exact(results, elements, rounds):
    chunks = -(-elements // 32)
    for job, per_proc in results.items():
        first_agg = per_proc[0][2]
        for ids, s, agg in per_proc:
            assert s["status"] == "ok", s
            assert s["rounds_done"] == rounds, s
            assert s["mismatches"] == 0 and s["bad_header"] == 0, s
            # --verify all: every result of the process's first logical worker
            # (its other workers got the same RESULT frames' sums) is checked.
            assert s["verify"] == "all" and s["exact"] == s["checked"] == s["memory"]["sequences"] > 0, s
            assert s["counters"]["chunks_done"] == (chunks * rounds + 1) * len(ids), s  # + the barrier chunk
            assert s["quantization_error"]["max_over_bound"] <= 1.0 + 1e-9, s
            assert agg == first_agg, f"job {job}: workers {ids} hold a different aggregate"


def test_two_jobs_no_loss(procs, tmp_path):
    elements, rounds = 32 * 3000, 3
    _, results, pss, c = run_two_jobs(procs, tmp_path, 0, elements, rounds, 90)
    check_exact(results, elements, rounds)
    s1, s2 = results[1][0][1], results[2][0][1]
    # Adaptive widths: round 0 asks for --init-width 16 everywhere, later
    # rounds follow the error budget; job 2's switch grants at most 16 bits.
    assert s1["avg_granted_bits_per_round"][0] == 16, s1
    assert s2["memory"]["avg_granted_bits"] <= 16, s2
    assert s1["memory"]["saving_x"] >= 2.0, s1
    assert s2["memory"]["seqs_per_row_half_max"] >= 2, s2
    assert c["agq_results"] > 0 and c.get("drops_agq_bad_worker", 0) == 0, c
    assert c.get("drops_agq_unknown_job", 0) == 0, c


def test_two_jobs_one_percent_loss(procs, tmp_path):
    elements, rounds = 32 * 2000, 2
    _, results, pss, c = run_two_jobs(procs, tmp_path, 0.01, elements, rounds, 90)
    check_exact(results, elements, rounds)
    assert sum(s["retransmissions"] for r in results.values() for _, s, _ in r) > 0
    assert sum(v for k, v in c.items() if k.startswith("dp.sim_drops.")) > 0, c


def test_two_jobs_ten_percent_loss(procs, tmp_path):
    elements, rounds = 32 * 600, 2
    _, results, pss, c = run_two_jobs(procs, tmp_path, 0.10, elements, rounds, 120)
    check_exact(results, elements, rounds)
    assert sum(s["retransmissions"] for r in results.values() for _, s, _ in r) > 0
    assert c.get("agq_result_resent", 0) + c.get("agq_duplicate", 0) > 0, c
