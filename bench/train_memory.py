#!/usr/bin/python3
"""AGQ's headline, side by side in one run: training under switch-memory
pressure. The same 2-rank DDP job (a 3-layer MLP regressing a fixed random
teacher network, SGD with momentum) trained for a fixed number of steps at
a sweep of switch memory -- 1, 2, 4 and 8 slots per row, and two jobs at
once, each with half of one row quota --, with

  agq      adaptive widths (error budget -> req_width = min_width), error
           feedback on: the project's design;
  fixed32  a fixed 32-bit allocation at the same memory (--fixed-width 32:
           one sequence per row half, the rest to the PS -- the SwitchML/ATP
           design), error feedback on;
  gloo     plain Gloo allreduce, the reference.

Per run: final loss (mean of the last tenth of the steps), the share of
elements aggregated in the switch, bytes to and from the PS, average
granted bits, median step time. Writes results.md, summary.json and
train_memory.png to --out and prints the table. Numbers only: nothing
passes or fails on time; the closing lines say whether the issue's two
targets were met in this run (agq within 1 % of Gloo at every memory size;
at 4 slots per row an in-switch share >= 2x the 32-bit design's).

    /usr/bin/python3 bench/train_memory.py                 # full sweep, 120 steps
    /usr/bin/python3 bench/train_memory.py --quick         # 2 and 4 slots per row, 60 steps
"""
import argparse
import json
import re
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SRC / "workers" / "python"))

SLOTS = 64          # slots of a job; rows = SLOTS / slots_per_row
FRAME_BYTES = 190   # a 32-lane agq frame (PROTOCOL.md section 1)


def make_problem(seed, n, dim_in=32, dim_out=8):
    """Inputs ~ N(0, 1); targets from a fixed random 3-layer teacher."""
    import torch
    g = torch.Generator().manual_seed(seed)
    w = [torch.randn(dim_in, 64, generator=g) / dim_in ** 0.5, torch.randn(64, 64, generator=g) / 8.0,
         torch.randn(64, dim_out, generator=g) / 8.0]
    x = torch.randn(n, dim_in, generator=g)
    y = torch.tanh(torch.tanh(x @ w[0]) @ w[1]) @ w[2]
    return x, y


def make_model(dim_in=32, hidden=128, dim_out=8):
    import torch.nn as nn
    return nn.Sequential(nn.Linear(dim_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, dim_out))


def rank_main(rank, world, mode, cfg, out_path, init_file, vdev, job, tag):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    torch.manual_seed(cfg["seed"])
    model = make_model()
    dist._DEFAULT_FIRST_BUCKET_BYTES = int(cfg["bucket_mb"] * 1e6)
    ddp = DDP(model, bucket_cap_mb=cfg["bucket_mb"])
    client = None
    if mode != "gloo":
        import agq_torch
        kw = dict(file_prefix=f"agqmem{os.getpid()}", error_budget=cfg["error_budget"],
                  error_feedback=cfg["error_feedback"])
        if mode == "fixed32":
            kw["fixed_width"] = 32
        client = agq_torch.AgqClient(vdev, job, rank, **kw)
        state = agq_torch.HookState(client, world, check_every=0)
        ddp.register_comm_hook(state, agq_torch.allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=cfg["lr"], momentum=cfg["momentum"])
    x, y = make_problem(cfg["seed"], 8192)
    shard = torch.arange(rank, x.shape[0], world)
    x, y = x[shard], y[shard]
    g = torch.Generator().manual_seed(cfg["seed"] + 1 + rank)
    losses, times = [], []
    try:
        for _ in range(cfg["steps"]):
            idx = torch.randint(0, x.shape[0], (cfg["batch"],), generator=g)
            t0 = time.perf_counter()
            loss = F.mse_loss(ddp(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - t0)
            l = loss.detach().clone()
            dist.all_reduce(l)
            losses.append(float(l) / world)
        out = dict(mode=mode, rank=rank, losses=losses, step_times=times)
        if client is not None:
            out["ops"] = [s for _t, s in client.history]
        Path(out_path).write_text(json.dumps(out))
    finally:
        if client is not None:
            client.close()
        dist.destroy_process_group()


def _spawn(rank, world, mode, cfg, outdir, init_file, vdevs, job, tag):
    rank_main(rank, world, mode, cfg, Path(outdir) / f"{tag}_r{rank}.json", init_file,
              vdevs[rank] if vdevs else None, job, tag)


def train_job(world, mode, cfg, outdir, tag, vdevs=None, job=None):
    """Starts `world` ranks of one job and returns a process handle list."""
    import torch.multiprocessing as mp
    init_file = Path(tempfile.mkdtemp(prefix="agqinit", dir=outdir)) / "init"
    return mp.start_processes(_spawn, args=(world, mode, cfg, str(outdir), str(init_file), vdevs, job, tag),
                              nprocs=world, join=False, start_method="spawn")


def summarize(outdir, tag, world, counters=None):
    recs = [json.loads((Path(outdir) / f"{tag}_r{r}.json").read_text()) for r in range(world)]
    r0 = recs[0]
    tail = max(1, len(r0["losses"]) // 10)
    s = dict(final_loss=statistics.mean(r0["losses"][-tail:]), losses=r0["losses"],
             step_ms=statistics.median(r0["step_times"]) * 1e3)
    if "ops" in r0:
        ops = r0["ops"]
        chunks = sum(o["chunks"] for o in ops)
        fb = sum(o["fallbacks"] for o in ops)
        agg = chunks - fb
        s.update(in_switch_share=agg / chunks if chunks else 0.0,
                 avg_granted_bits=(sum(o["avg_granted_bits"] * (o["chunks"] - o["fallbacks"]) for o in ops) / agg
                                   if agg else 0.0),
                 fallback_chunks=fb, chunks=chunks)
    if counters is not None:
        s["ps_bytes_to"] = counters.get("agq_fallback_data", 0) * FRAME_BYTES
        s["ps_bytes_from"] = counters.get("agq_ps_results", 0) * FRAME_BYTES
    return s


class Switch:
    """One agq-switch with one or more 2-rank jobs, each with its own PS
    (agq_torch.launch.LocalSwitch for one job; this is the same rig for
    several jobs on one switch)."""

    def __init__(self, workdir, jobs, world, idle_sleep_us=100):
        from agq_torch import launch
        self.launch = launch
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.procs = []
        tag = f"m{os.getpid()}x{int(time.monotonic() * 1000) % 100000}"
        self.ctl = self.dir / "ctl.sock"
        ports, cfg = [], ['[switch]\npipeline = "agq"\n[agq]\ntotal_rows = 256\ntotal_slots = 512\n']
        self.jobs = {}
        for j, rows in jobs:
            base = len(ports)
            wsocks = [self.dir / f"j{j}w{r}.sock" for r in range(world)]
            ps_sock = self.dir / f"j{j}ps.sock"
            ports += wsocks + [ps_sock]
            ps_ip, ps_mac = launch.endpoint(j, 254)
            cfg.append(f'[[job]]\nid = {j}\nworkers = {world}\nslots = {SLOTS}\nrows = {rows}\n'
                       f'delivery = "multicast"\nps_port = {base + world}\nps_ip = "{ps_ip}"\n'
                       f'ps_mac = "{ps_mac}"\nmax_width = 32\n')
            for w in range(world):
                ip, mac = launch.endpoint(j, w + 1)
                cfg.append(f'[[job.worker]]\nid = {w}\nport = {base + w}\nip = "{ip}"\nmac = "{mac}"\n')
            self.jobs[j] = dict(wsocks=wsocks, ps_sock=ps_sock)
        (self.dir / "agq.toml").write_text("\n".join(cfg))
        eal = lambda p, l, m: ["--no-huge", "-m", m, "--no-pci", "-l", l, "--file-prefix", p,
                               "--log-level=warning", "--no-telemetry"]
        try:
            vd = [f"--vdev={launch.memif(i, s, 'server')}" for i, s in enumerate(ports)]
            self._start("switch", [launch.binary("agq-switch"), *eal(f"{tag}sw", "0", "256"), *vd, "--",
                                   "--config", self.dir / "agq.toml", "--ctl-socket", self.ctl,
                                   "--idle-sleep-us", idle_sleep_us])
            self._wait(lambda: all(p.exists() for p in ports) and self.ctl.exists(), "switch")
            for j in self.jobs:
                self._start(f"ps{j}", [launch.binary("agq-worker"), *eal(f"{tag}ps{j}", "1", "64"),
                                       f"--vdev={launch.memif(0, self.jobs[j]['ps_sock'], 'client')}", "--",
                                       "--protocol", "agq", "--role", "ps", "--job-id", j, "--workers", world,
                                       "--slots", SLOTS, "--elements", 32, "--progress", 0,
                                       "--idle-sleep-us", idle_sleep_us])
                self._wait(lambda: "ready" in self.log(f"ps{j}"), f"ps{j}")
        except BaseException:
            self.close()
            raise

    def _start(self, name, argv):
        import subprocess
        f = open(self.dir / f"{name}.log", "wb")
        p = subprocess.Popen([str(a) for a in argv], stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        f.close()
        self.procs.append((name, p))

    def log(self, name):
        p = self.dir / f"{name}.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def _wait(self, pred, name, timeout=20.0):
        proc = dict(self.procs)[name]
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if pred():
                return
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited {proc.returncode}:\n{self.log(name)[-2000:]}")
            time.sleep(0.05)
        raise TimeoutError(f"{name}: not ready after {timeout} s")

    def job(self, j, world):
        import agq_torch
        return agq_torch.job_from_switch(self.ctl, j)

    def vdevs(self, j):
        return [self.launch.memif(0, s, "client") for s in self.jobs[j]["wsocks"]]

    def counters(self, job=None):
        """Switch counters; with job, that job's agq counters (agqctl job stats)."""
        import subprocess
        out = subprocess.run([str(self.launch.binary("agqctl")), "--socket", str(self.ctl), "counters"],
                             capture_output=True, text=True, timeout=10).stdout
        c = {}
        for line in out.splitlines():
            p = line.split()
            if len(p) == 2 and p[1].lstrip("-").isdigit():
                c[p[0]] = int(p[1])
        return c

    def close(self):
        import signal
        import subprocess
        for _n, p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = []


def run_point(point, mode, cfg, out, world=2):
    """One memory point (dict(label, jobs=[rows, ...])) in one mode; returns per-job summaries."""
    tag = re.sub(r"[^A-Za-z0-9_-]", "", f"{point['label']}_{mode}".replace(" ", "_"))
    wd = out / tag
    wd.mkdir(parents=True, exist_ok=True)
    if mode == "gloo":
        h = train_job(world, "gloo", cfg, wd, f"{tag}_j1")
        h.join()
        return [summarize(wd, f"{tag}_j1", world)]
    jobs = [(j + 1, rows) for j, rows in enumerate(point["jobs"])]
    sw = Switch(wd / "sw", jobs, world)
    try:
        c0 = sw.counters()
        handles = [train_job(world, mode, cfg, wd, f"{tag}_j{j}", sw.vdevs(j), sw.job(j, world)) for j, _ in jobs]
        for h in handles:
            while not h.join():
                pass
        c1 = sw.counters()
        diff = {k: c1.get(k, 0) - c0.get(k, 0) for k in c1}
        res = [summarize(wd, f"{tag}_j{j}", world) for j, _ in jobs]
        # The PS traffic is the switch's: split evenly over concurrent jobs in the report.
        for r in res:
            r["ps_bytes_to"] = diff.get("agq_fallback_data", 0) * FRAME_BYTES / len(res)
            r["ps_bytes_from"] = diff.get("agq_ps_results", 0) * FRAME_BYTES / len(res)
        return res
    finally:
        sw.close()


def plot(summary, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [p["label"] for p in summary["points"]]
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(15, 4.3))
    x = range(len(labels))
    for mode, mk in (("agq", "o-"), ("fixed32", "s--")):
        a1.plot(x, [100 * (p[mode]["final_loss"] - p["gloo"]["final_loss"]) / p["gloo"]["final_loss"]
                    for p in summary["points"]], mk, label=mode)
        a2.plot(x, [100 * p[mode].get("in_switch_share", 0) for p in summary["points"]], mk, label=mode)
        a3.plot(x, [p[mode].get("avg_granted_bits", 0) for p in summary["points"]], mk, label=mode)
    a1.axhspan(-1, 1, color="gray", alpha=0.15, label="Gloo +- 1 %")
    a1.set(title="final loss vs Gloo's", ylabel="% (MSE, last tenth of the steps)", ylim=(-5, 5))
    a2.set(title="elements aggregated in the switch", ylabel="%", ylim=(0, 105))
    a3.set(title="average granted bits (switch-aggregated)", ylabel="bits", ylim=(0, 34))
    for a in (a1, a2, a3):
        a.set_xticks(list(x))
        a.set_xticklabels(labels, fontsize=8)
        a.set_xlabel("switch memory (slots per row)")
        a.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def markdown(summary):
    rows = ["| memory | mode | final loss | vs Gloo | in-switch share | avg granted bits | PS bytes to / from "
            "| step ms |", "|---|---|---|---|---|---|---|---|"]
    for p in summary["points"]:
        g = p["gloo"]["final_loss"]
        for mode in ("agq", "fixed32", "gloo"):
            s = p[mode]
            share = f"{100 * s['in_switch_share']:.1f} %" if "in_switch_share" in s else "-"
            bits = f"{s['avg_granted_bits']:.1f}" if "in_switch_share" in s else "-"
            ps = (f"{s['ps_bytes_to'] / 1e6:.2f} / {s['ps_bytes_from'] / 1e6:.2f} MB" if "ps_bytes_to" in s else "-")
            rows.append(f"| {p['label']} | {mode} | {s['final_loss']:.5g} | {100 * (s['final_loss'] - g) / g:+.2f} % "
                        f"| {share} | {bits} | {ps} | {s['step_ms']:.2f} |")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--batch", type=int, default=64, help="per rank")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--bucket-mb", type=float, default=0.02, help="DDP bucket cap: several buckets per step")
    ap.add_argument("--error-budget", type=float, default=1e-4)
    ap.add_argument("--error-feedback", choices=("on", "off"), default="on")
    ap.add_argument("--quick", action="store_true", help="2 and 4 slots per row, 60 steps")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="default results/<date>/train_memory")
    args = ap.parse_args()
    out = Path(args.out or SRC / "results" / time.strftime("%Y-%m-%d") / "train_memory")
    out.mkdir(parents=True, exist_ok=True)
    steps = 60 if args.quick else args.steps
    cfg = dict(steps=steps, batch=args.batch, lr=args.lr, momentum=args.momentum, bucket_mb=args.bucket_mb,
               error_budget=args.error_budget, error_feedback=args.error_feedback == "on", seed=args.seed)
    spr = (2, 4) if args.quick else (1, 2, 4, 8)
    points = [dict(label=f"{k}", jobs=[SLOTS // k]) for k in spr]
    if not args.quick:
        # Two jobs at once sharing one job's row quota at 4 slots per row:
        # each has half of it (8 slots per row), on one switch lcore.
        points.append(dict(label="2 jobs, 8", jobs=[SLOTS // 8, SLOTS // 8]))
    summary = dict(config=cfg, slots=SLOTS, host=os.uname().nodename, date=time.strftime("%Y-%m-%d %H:%M"),
                   loadavg_start=os.getloadavg()[0], points=[])
    for p in points:
        rec = dict(label=p["label"], rows=p["jobs"])
        for mode in ("gloo", "agq", "fixed32"):
            res = run_point(p, mode, cfg, out)
            rec[mode] = res[0]
            if len(res) > 1:
                rec[mode + "_jobs"] = res
            s = res[0]
            print(f"memory {p['label']:>10} {mode:8} loss {s['final_loss']:.5g} share "
                  f"{100 * s.get('in_switch_share', 0):5.1f} % bits {s.get('avg_granted_bits', 0):4.1f} "
                  f"step {s['step_ms']:.2f} ms", flush=True)
        summary["points"].append(rec)
    summary["loadavg_end"] = os.getloadavg()[0]
    md = markdown(summary)
    worst = max(abs(p["agq"]["final_loss"] - p["gloo"]["final_loss"]) / p["gloo"]["final_loss"]
                for p in summary["points"])
    four = next((p for p in summary["points"] if p["label"] == "4"), None)
    verdict = [f"agq final loss vs Gloo, worst over memory sizes: {100 * worst:.2f} % (target <= 1 %)"]
    if four:
        ratio = four["agq"]["in_switch_share"] / max(four["fixed32"]["in_switch_share"], 1e-9)
        verdict.append(f"in-switch share at 4 slots per row, agq / fixed32: {ratio:.2f}x (target >= 2x)")
    text = md + "\n\n" + "\n".join(verdict) + "\n"
    print(text)
    (out / "results.md").write_text(text)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    plot(summary, out / "train_memory.png")
    print(f"wrote {out}/results.md, summary.json, train_memory.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
