#!/usr/bin/python3
"""Allreduce on shaped links in the rack rig (tests/integration/rack.py):
K hosts in network namespaces behind one agq-switch, every host's port
(the switch's egress towards the host) shaped to the same rate with
`[[port]] rate`. Side by side, per tensor size and N:

  agq    agq-worker in N hosts, the PS in one more host, through the switch;
         time per op = the slowest worker's seconds / rounds.
  ring   torch.distributed Gloo all_reduce of a float32 tensor over TCP
         between the same N hosts, the switch as their ToR (Gloo's CPU
         allreduce: ring reduce-scatter + allgather), median of --reps.
  bound  in-network aggregation's bound: each host receives the tensor
         once, tensor bytes on the wire (frame + 24 B preamble/FCS/IFG per
         1500 B MTU frame of payload) / rate; and the same in agq's own
         frames (32 lanes, 128 B of tensor, in 190 B), its bound whatever
         the widths (they save switch memory, not wire).

With a fairness run (--fairness-mb, needs N >= 3 for four hosts): an agq
job (N = 2, hosts 0 and 1) and one TCP bulk flow (host 2 -> host 0) share
host 0's port; short TCP request/response flows (host 3 -> host 0) idle and
loaded; drops from `agqctl queues`.

Prints a table and writes results/<date>/rack/results-<rate>[-ecnK][-fairness].{md,json}.
Numbers, never asserts. Run as root with /usr/bin/python3 after building
agq-switch, agq-worker and agqctl (build/, or AGQ_BUILD_DIR)."""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from harness import agqctl, binary, wait_for  # noqa: E402
from rack import Rack  # noqa: E402

ELEM = 4  # float32
# Wire bytes per byte of tensor for a bulk transfer in 1500 B IP packets:
# 1448 B of TCP payload per 1514 B frame + 24 B preamble/SFD/FCS/IFG.
WIRE_FACTOR = (1514 + 24) / 1448
# agq's own frames (docs/PROTOCOL.md): 32 lanes of 4 B (128 B of tensor) in a
# 190 B frame + 24 B: its bound on this wire format, whatever the widths.
AGQ_WIRE_FACTOR = (190 + 24) / 128

VERIFY = "sample:64"

GLOO_RANK = r'''
import json, os, statistics, sys, time
import torch, torch.distributed as dist
rank, world, addr, n, reps = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
dist.init_process_group("gloo", init_method=f"tcp://{addr}", rank=rank, world_size=world)
t = torch.ones(n, dtype=torch.float32)
dist.all_reduce(t)  # warm-up: connections, buffers
times = []
for _ in range(reps):
    t.fill_(1.0)
    dist.barrier()
    t0 = time.perf_counter()
    dist.all_reduce(t)
    times.append(time.perf_counter() - t0)
ok = bool((t == world).all())
if rank == 0:
    print(json.dumps({"times": times, "median": statistics.median(times), "ok": ok}), flush=True)
dist.destroy_process_group()
'''

BULK_RX = r'''
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1)
print("listening", flush=True)
c, _ = s.accept(); n = 0; t0 = time.perf_counter()
while True:
    b = c.recv(1 << 20)
    if not b: break
    n += len(b)
print("RX", n, time.perf_counter() - t0, flush=True)
'''

BULK_TX = r'''
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2]))); buf = b"x" * (1 << 16)
end = time.perf_counter() + float(sys.argv[3]); n = 0
while time.perf_counter() < end:
    n += s.send(buf)
s.close(); print("TX", n, flush=True)
'''


RR_SERVER = r'''
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(64); print("listening", flush=True)
while True:
    c, _ = s.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if c.recv(100): c.sendall(b"r" * 1000)
    c.close()
'''

RR_CLIENT = r'''
import json, socket, sys, time
addr, port, count, gap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
lat = []
for _ in range(count):
    t0 = time.perf_counter()
    c = socket.create_connection((addr, port)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c.sendall(b"q" * 100); n = 0
    while n < 1000:
        b = c.recv(4096)
        if not b: break
        n += len(b)
    c.close(); lat.append(time.perf_counter() - t0); time.sleep(gap)
print(json.dumps(lat), flush=True)
'''


def agq_worker(rack, host, name, args, lcore):
    return rack.start(name, [binary("agq-worker"), *host.eal(name, lcore, mem_mb=256), "--", "--protocol", "agq",
                             "--json", "--progress", "0", "--idle-sleep-us", "20", *args], host=host)


def run_agq(rack, job, workers, ps, elements, rounds):
    """One agq-worker run of `rounds` ops; per worker its JSON summary."""
    ctl = f"{rack.ctl}"
    p = agq_worker(rack, rack.hosts[ps], f"ps{job}", ["--role", "ps", "--switch-ctl", ctl, "--job", job], "1")
    wait_for(lambda: "ready" in p.output() or not p.alive(), 30, what="PS ready")
    ws = [agq_worker(rack, rack.hosts[h], f"w{job}x{i}",
                     ["--switch-ctl", ctl, "--job", job, "--ids", i, "--elements", elements, "--rounds", rounds,
                      "--verify", VERIFY, "--reply-timeout", "30", "--retry-time", "30"], str(i % 2))
          for i, h in enumerate(workers)]
    out = []
    for w in ws:
        w.wait(600)
        lines = [l for l in w.output().splitlines() if l.startswith("{")]
        out.append(json.loads(lines[-1]) if lines else {"status": "no summary", "tail": w.output()[-500:]})
    p.stop()
    return out


def run_gloo(rack, hosts, elements, reps, port, workdir):
    script = workdir / "gloo_rank.py"
    script.write_text(GLOO_RANK)
    addr = f"{rack.hosts[hosts[0]].ip}:{port}"
    ps = []
    for r, h in enumerate(hosts):
        host = rack.hosts[h]
        env_argv = ["env", f"GLOO_SOCKET_IFNAME={host.ifname}", "OMP_NUM_THREADS=1",
                    "/usr/bin/python3", script, r, len(hosts), addr, elements, reps]
        ps.append(rack.start(f"gloo{port}r{r}", env_argv, host=host))
    for p in ps:
        p.wait(900)
    lines = [l for l in ps[0].output().splitlines() if l.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": ps[0].output()[-800:]}


def tcp_bulk(rack, src, dst, seconds, port, workdir):
    """Mbit/s of one TCP flow src -> dst for `seconds` (receiver's count)."""
    (workdir / "bulk_rx.py").write_text(BULK_RX)
    (workdir / "bulk_tx.py").write_text(BULK_TX)
    d = rack.hosts[dst]
    rx = rack.start(f"bulkrx{port}", ["/usr/bin/python3", workdir / "bulk_rx.py", d.ip, port], host=d)
    wait_for(lambda: "listening" in rx.output() or not rx.alive(), 30, what="bulk receiver")
    tx = rack.start(f"bulktx{port}", ["/usr/bin/python3", workdir / "bulk_tx.py", d.ip, port, seconds],
                    host=rack.hosts[src])
    return rx, tx


def bulk_result(rx, tx):
    tx.wait(300)
    rx.wait(60)
    for l in rx.output().splitlines():
        if l.startswith("RX "):
            _, n, secs = l.split()
            return int(n) * 8 / float(secs) / 1e6
    return float("nan")


def queue_stats(rack, port):
    r = agqctl(rack.ctl, "queues")
    lines = [l.split() for l in r.stdout.splitlines() if l.strip()]
    head = lines[0]
    for l in lines[1:]:
        if l[0] == str(port):
            return {k: (int(v) if v.isdigit() else v) for k, v in zip(head, l)}
    return {}


def short_flows(rack, src, dst, count, port, wd, gap=0.02):
    (wd / "rr_client.py").write_text(RR_CLIENT)
    return rack.start(f"rrc{port}x{time.monotonic_ns()}", ["/usr/bin/python3", wd / "rr_client.py",
                                                          rack.hosts[dst].ip, port, count, gap], host=rack.hosts[src])


def pct(lat, q):
    s = sorted(lat)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def fairness(rack, a, ps_host, wd, rate_bps, mb):
    """An agq job (N=2: hosts 0, 1) and one TCP bulk flow host 2 -> host 0
    share host 0's shaped port; short request/response flows host 3 -> host 0
    (a new connection, 100 B up, 1000 B down each) idle and under load."""
    elements = int(mb * (1 << 20)) // ELEM
    (wd / "rr_server.py").write_text(RR_SERVER)
    srv = rack.start("rrsrv", ["/usr/bin/python3", wd / "rr_server.py", rack.hosts[0].ip, 7000], host=rack.hosts[0])
    wait_for(lambda: "listening" in srv.output() or not srv.alive(), 30, what="rr server")
    res = {}
    c = short_flows(rack, 3, 0, a.short_flows, 7000, wd)
    c.wait(300)
    idle = json.loads(c.output().strip().splitlines()[-1])
    res["short_idle_ms"] = {"p50": pct(idle, 0.5) * 1e3, "p99": pct(idle, 0.99) * 1e3}
    rx, tx = tcp_bulk(rack, 2, 0, a.bulk_s, 5101, wd)
    res["tcp_alone_mbit"] = bulk_result(rx, tx)
    # agq alone: its op time and its rate on host 0's port.
    s = run_agq(rack, 2, [0, 1], ps_host, elements, a.rounds)
    res["agq_alone_s"] = max(w.get("seconds", float("nan")) for w in s) / a.rounds
    # Together: agq runs longer than the bulk flow, which starts once agq is under way.
    rounds = max(a.rounds, int((a.bulk_s + 3) / max(res["agq_alone_s"], 1e-3)) + 1)
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("agq", run_agq(rack, 2, [0, 1], ps_host, elements, rounds)))
    t.start()
    time.sleep(1.5)
    q0, t0 = queue_stats(rack, 0), time.monotonic()
    rx, tx = tcp_bulk(rack, 2, 0, a.bulk_s, 5102, wd)
    c = short_flows(rack, 3, 0, a.short_flows, 7000, wd, gap=a.bulk_s / a.short_flows)
    tcp = bulk_result(rx, tx)
    q1, t1 = queue_stats(rack, 0), time.monotonic()
    c.wait(300)
    t.join()
    loaded = json.loads(c.output().strip().splitlines()[-1])
    port_mbit = (q1["dequeued_bytes"] - q0["dequeued_bytes"]) * 8 / (t1 - t0) / 1e6
    agq_s = max(w.get("seconds", float("nan")) for w in out["agq"]) / rounds
    res.update({"tcp_with_agq_mbit": tcp, "port_mbit": port_mbit, "agq_with_tcp_s": agq_s,
                "tcp_share": tcp * WIRE_FACTOR / (rate_bps / 1e6), "agq_share_of_port": 1 - tcp / max(port_mbit, 1e-9),
                "drops": q1["dropped_packets"] - q0["dropped_packets"],
                "agq_retx": sum(w.get("retransmissions", 0) for w in out["agq"]),
                "short_loaded_ms": {"p50": pct(loaded, 0.5) * 1e3, "p99": pct(loaded, 0.99) * 1e3}})
    srv.stop()
    return res


def ports_toml(rack, rate, queue, ecn):
    mark = f"ecn_threshold = {ecn}\n" if ecn else ""
    return "".join(f'[[port]]\nid = {h.port}\nrate = "{rate}"\nqueue = {queue}\n{mark}' for h in rack.hosts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", default="100mbit", help="every host port's egress rate (a [[port]] rate)")
    ap.add_argument("--sizes-mb", default="4,16", help="tensor sizes in MB (float32, 1 MB = 2^20 B)")
    ap.add_argument("--ns", default="2,4", help="N (hosts in the allreduce)")
    ap.add_argument("--rounds", type=int, default=3, help="agq ops per run")
    ap.add_argument("--reps", type=int, default=3, help="Gloo ops timed (median)")
    ap.add_argument("--slots", type=int, default=32, help="each job's slots (its [[job]] slots)")
    ap.add_argument("--rows", type=int, default=32, help="each job's rows (the switch has 64 in all)")
    ap.add_argument("--queue", type=int, default=1000, help="each shaped port's queue, frames")
    ap.add_argument("--probe-s", type=float, default=4, help="seconds of the unshaped TCP probe (0: none)")
    ap.add_argument("--ecn", type=int, default=0, help="every shaped port's ecn_threshold, frames; the hosts' "
                    "TCP asks for ECN (0: no marks)")
    ap.add_argument("--fairness-mb", type=float, default=4, help="the fairness run's tensor (0: no fairness run)")
    ap.add_argument("--bulk-s", type=float, default=5, help="seconds of the fairness run's TCP bulk flow")
    ap.add_argument("--short-flows", type=int, default=100, help="short request/response flows idle and loaded")
    ap.add_argument("--keep", type=Path, default=None, help="work directory kept (every process's log)")
    ap.add_argument("--verify", default="sample:64", help="agq-worker --verify")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / datetime.date.today().isoformat() / "rack")
    a = ap.parse_args()
    global VERIFY
    VERIFY = a.verify
    sizes = [float(s) for s in a.sizes_mb.split(",") if s]
    ns = [int(n) for n in a.ns.split(",")]
    k = max(ns) + 1  # the PS has a host of its own: the last one
    ps_host = k - 1
    rate_bps = _rate_bps(a.rate)
    a.out.mkdir(parents=True, exist_ok=True)
    rows, meta = [], {"machine": f"{platform.node()} {os.cpu_count()} CPUs {platform.machine()}",
                      "date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
                      "load_before": os.getloadavg(), "rate": a.rate, "queue": a.queue, "ecn": a.ecn}
    if a.keep:
        a.keep.mkdir(parents=True, exist_ok=True)
    with (contextlib.nullcontext(str(a.keep)) if a.keep else tempfile.TemporaryDirectory(prefix="agq-rackbench-")) as td, \
            Rack(k, Path(td)) as rack:
        wd = Path(td)
        jobs = "".join(rack.job_toml(n, workers=list(range(n)), ps=ps_host, slots=a.slots, rows=a.rows) for n in ns)
        if a.probe_s > 0:
            sw = rack.start_switch(jobs=jobs)
            rx, tx = tcp_bulk(rack, 0, 1, a.probe_s, 5001, wd)
            meta["unshaped_tcp_mbit"] = bulk_result(rx, tx)
            print(f"unshaped link (switch on net_{rack.driver}): one TCP flow h0->h1 "
                  f"{meta['unshaped_tcp_mbit']:.0f} Mbit/s", flush=True)
            sw.stop()
            wait_for(lambda: not rack.ctl.exists(), 10, what="switch gone")
        rack.start_switch(jobs=jobs, extra_toml=ports_toml(rack, a.rate, a.queue, a.ecn))
        if a.ecn:
            # The hosts' TCP asks for ECN (DCTCP-style marks on the queue's depth).
            for h in rack.hosts:
                h.run(["sysctl", "-qw", "net.ipv4.tcp_ecn=1"], check=True)
        meta["driver"] = rack.driver
        port = 29500
        for mb in sizes:
            elements = int(mb * (1 << 20)) // ELEM
            for n in ns:
                port += 1
                q0 = queue_stats(rack, 0)
                s = run_agq(rack, n, list(range(n)), ps_host, elements, a.rounds)
                q1 = queue_stats(rack, 0)
                ok = all(w.get("status") == "ok" and w.get("mismatches", 1) == 0 for w in s)
                agq_t = max(w.get("seconds", float("nan")) for w in s) / a.rounds
                bits = statistics.mean(w.get("memory", {}).get("avg_granted_bits", float("nan")) for w in s)
                retx = sum(w.get("retransmissions", 0) for w in s)
                fb = sum(w.get("fallbacks", 0) for w in s)
                g = run_gloo(rack, list(range(n)), elements, a.reps, port, wd)
                q2 = queue_stats(rack, 0)
                # Bytes host 0's port carried per op (frames as DPDK sees them), per tensor byte.
                agq_wire = (q1["dequeued_bytes"] - q0["dequeued_bytes"]) / a.rounds / (mb * (1 << 20))
                ring_wire = (q2["dequeued_bytes"] - q1["dequeued_bytes"]) / (a.reps + 1) / (mb * (1 << 20))
                ring_t = g.get("median", float("nan"))
                bound = mb * (1 << 20) * WIRE_FACTOR * 8 / rate_bps
                bound_agq = mb * (1 << 20) * AGQ_WIRE_FACTOR * 8 / rate_bps
                row = {"mb": mb, "n": n, "agq_s": agq_t, "agq_ok": ok, "agq_bits": bits, "agq_retx": retx,
                       "agq_fallbacks": fb, "agq_wire": agq_wire, "ring_wire": ring_wire, "ring_s": ring_t,
                       "ring_ok": g.get("ok"), "ring_times": g.get("times"), "bound_s": bound,
                       "bound_agq_frames_s": bound_agq, "agq_over_own_bound": agq_t / bound_agq,
                       "agq_over_bound": agq_t / bound, "ring_over_agq": ring_t / agq_t, "agq_workers": s}
                rows.append(row)
                print(f"{mb:5.0f} MB N={n}: agq {agq_t:.3f} s ({'ok' if ok else 'FAILED'}, avg {bits:.1f} bits, "
                      f"{retx} retx, {fb} fallbacks)  ring {ring_t:.3f} s  bound {bound:.3f} s "
                      f"(agq frames {bound_agq:.3f})  agq/bound {agq_t / bound:.2f}  "
                      f"ring/agq {ring_t / agq_t:.2f}  port-0 bytes per tensor byte: agq {agq_wire:.2f} ring {ring_wire:.2f}",
                      flush=True)
        if a.fairness_mb > 0 and k >= 4:
            f = fairness(rack, a, ps_host, wd, rate_bps, a.fairness_mb)
            meta["fairness"] = f
            print("fairness:", json.dumps(f), flush=True)
        q = agqctl(rack.ctl, "queues")
        meta["queues_after"] = q.stdout
        print(q.stdout)
    meta["load_after"] = os.getloadavg()
    name = f"results-{a.rate}" + (f"-ecn{a.ecn}" if a.ecn else "") + ("" if rows else "-fairness")
    (a.out / f"{name}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, default=str))
    md = [f"# rack bench: {meta['date']}, {meta['machine']}, rate {a.rate} per host port, "
          f"queue {a.queue} frames" + (f", ECN above {a.ecn}" if a.ecn else "") +
          f", switch ports net_{meta.get('driver')}, load {meta['load_before'][0]:.1f}",
          "", "| MB | N | agq s/op | agq bits/elem | agq B/B | ring (Gloo) s/op | ring B/B | bound s | agq/bound "
          "| bound, agq frames | agq/that | ring/agq |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['mb']:.0f} | {r['n']} | {r['agq_s']:.3f}{'' if r['agq_ok'] else ' (failed)'} | "
                  f"{r['agq_bits']:.1f} | {r['agq_wire']:.2f} | {r['ring_s']:.3f} | {r['ring_wire']:.2f} | "
                  f"{r['bound_s']:.3f} | {r['agq_over_bound']:.2f} | "
                  f"{r['bound_agq_frames_s']:.3f} | {r['agq_over_own_bound']:.2f} | "
                  f"{r['ring_over_agq']:.2f} |")
    f = meta.get("fairness")
    if f:
        md += ["", f"fairness on host 0's port ({a.rate}): agq N=2 {a.fairness_mb:.0f} MB + one TCP bulk flow",
               "", "| | agq s/op | TCP Mbit/s | TCP share of rate | drops | short flow p50 / p99 ms |",
               "|---|---|---|---|---|---|",
               f"| idle | | | | | {f['short_idle_ms']['p50']:.2f} / {f['short_idle_ms']['p99']:.2f} |",
               f"| alone | {f['agq_alone_s']:.3f} | {f['tcp_alone_mbit']:.1f} | | | |",
               f"| together | {f['agq_with_tcp_s']:.3f} | {f['tcp_with_agq_mbit']:.1f} | {f['tcp_share']:.2f} | "
               f"{f['drops']} | {f['short_loaded_ms']['p50']:.2f} / {f['short_loaded_ms']['p99']:.2f} |"]
    (a.out / f"{name}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    print(f"wrote {a.out}")
    return 0


def _rate_bps(rate: str) -> float:
    r = rate.lower().removesuffix("/s").removesuffix("ps")
    for unit, mult in (("tbit", 1e12), ("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1)):
        if r.endswith(unit):
            return float(r[: -len(unit)]) * mult
    return float(r)


if __name__ == "__main__":
    sys.exit(main())
