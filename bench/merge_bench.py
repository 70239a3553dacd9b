#!/usr/bin/python3
"""Adaptive gradient merging (workers/python/agq_torch/merge.py) vs DDP's
default buckets, side by side: median step time and the exposed tail (how
long backward() goes on after the last gradient was computed: the last
bucket's wait), per model, transport and process count. Numbers only.

    /usr/bin/python3 bench/merge_bench.py --procs 2 4 --steps 150 --rounds 2

Per process count: one agq-switch (agq_torch.launch.LocalSwitch), N ranks
(this script with --rank), each in one process group "agq" (its float64
and other collectives: the backend's Gloo) plus a Gloo group. Per model
(`mlp`: train_ddp.py's 64-256-256-10; `deep`: 24 Linear layers of width
128, 22 of them residual blocks) the same initialisation and data go
through every configuration:

  gloo     DDP on the Gloo group                  | merge: MergeState(group=gloo)
  backend  DDP on the "agq" group (no hook)       | merge: MergeState(group=agq) (its client, DDP on agq)
  hook     DDP on Gloo + agq_torch.allreduce_hook | merge: MergeState(client=<the backend's>) (DDP on Gloo)

"default" is DDP's own buckets (25 MB, first 1 MB); "units" (--units) is
one bucket per parameter, each sent alone; "merge" is units merged per
phase. Configurations run interleaved in --rounds rounds of --steps steps
(each keeps its model, DDP and merge state across rounds); the first
--warmup steps of each configuration are left out. The tail is measured
from outside, alike for every configuration: a tensor hook on every
parameter stamps when its gradient is computed; tail = backward() returned
- the last stamp."""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SRC / "workers" / "python"))
sys.path.insert(0, str(SRC / "workers" / "examples"))
PY = "/usr/bin/python3"


def make_deep(dim=64, width=128, layers=24, classes=10):
    """`layers` Linear layers of `width`: an input layer, layers - 2 residual
    blocks h + W relu(h), a head. (A plain 24-layer ReLU stack hardly trains:
    its gradients vanish, then jump by 1000x from one step to the next.)"""
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(width, width)
            nn.init.normal_(self.lin.weight, std=0.5 / width ** 0.5)

        def forward(self, h):
            return h + self.lin(nn.functional.relu(h))

    return nn.Sequential(nn.Linear(dim, width), *[Block() for _ in range(layers - 2)], nn.ReLU(),
                         nn.Linear(width, classes))


def rank_main(args):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    import agq_torch
    from agq_torch import merge
    from train_ddp import make_data, make_model

    torch.set_num_threads(1)
    rank, world = args.rank, args.world
    dist.init_process_group("agq" if args.agq else "gloo", init_method=f"file://{args.init}", rank=rank,
                            world_size=world)
    agq_pg = dist.distributed_c10d._get_default_group() if args.agq else None
    gloo = dist.new_group(backend="gloo") if args.agq else None
    x, y, _, _ = make_data(0)
    x, y = x[rank::world], y[rank::world]
    models = {"mlp": make_model, "deep": make_deep}

    def build(model_name, transport, mode):
        torch.manual_seed(0)
        m = models[model_name]()
        group = gloo if transport in ("gloo", "hook") else agq_pg
        st = None
        if mode == "default":
            d = DDP(m, process_group=group)
            if transport == "hook":
                d.register_comm_hook(agq_torch.HookState(agq_pg.client, world), agq_torch.allreduce_hook)
        else:
            kw = dict(client=agq_pg.client, group=gloo) if transport == "hook" else dict(group=group)
            st = merge.MergeState(world, stats_group=gloo, phase_steps=args.phase, adaptive=mode == "merge", **kw)
            d = merge.ddp(m, st)
        stamps = []
        for p in m.parameters():
            p.register_hook(lambda g, s=stamps: s.append(time.perf_counter()))
        return dict(ddp=d, opt=torch.optim.SGD(d.parameters(), lr=args.lr, momentum=0.9), state=st, stamps=stamps,
                    gen=torch.Generator().manual_seed(1 + rank), step=[], tail=[], loss=[], n=0, switch={})

    transports = [t for t in args.transports if args.agq or t == "gloo"]
    modes = ["default"] + (["units"] if args.units else []) + ["merge"]
    cfgs = {(mn, t, md): None for mn in args.models for t in transports for md in modes}
    for k in cfgs:
        cfgs[k] = build(*k)
    for rnd in range(args.rounds):
        for k, c in cfgs.items():
            d, opt = c["ddp"], c["opt"]
            h0 = len(agq_pg.client.history) if agq_pg is not None else 0
            for _ in range(args.steps if "error" not in c else 0):
                idx = torch.randint(0, x.shape[0], (args.batch,), generator=c["gen"])
                c["stamps"].clear()
                t0 = time.perf_counter()
                try:
                    loss = F.cross_entropy(d(x[idx]), y[idx])
                    opt.zero_grad()
                    loss.backward()
                except (RuntimeError, ValueError) as e:
                    # Raised alike in every rank (the same all_reduce results):
                    # this configuration stops, the others go on.
                    c["error"] = f"step {c['n']}: {str(e).splitlines()[0][:300]}"
                    print(f"rank {rank} {k}: {c['error']}", file=sys.stderr, flush=True)
                    break
                t1 = time.perf_counter()
                opt.step()
                t2 = time.perf_counter()
                if c["n"] >= args.warmup:
                    c["step"].append(t2 - t0)
                    c["tail"].append(t1 - max(c["stamps"]))
                c["loss"].append(float(loss))
                c["n"] += 1
            if agq_pg is not None and k[1] != "gloo":  # what the switch did for this configuration
                for _, o in agq_pg.client.history[h0:]:
                    for f in ("chunks", "fallbacks", "retransmissions", "redos"):
                        c["switch"][f] = c["switch"].get(f, 0) + o[f]
                    c["switch"]["ops"] = c["switch"].get("ops", 0) + 1
    out = []
    for (mn, t, md), c in cfgs.items():
        st = c["state"]
        rec = dict(model=mn, transport=t, mode=md, world=world, params=sum(p.numel() for p in c["ddp"].parameters()),
                   step_ms=statistics.median(c["step"]) * 1e3 if c["step"] else math.nan,
                   tail_ms=statistics.median(c["tail"]) * 1e3 if c["tail"] else math.nan,
                   tail_mean_ms=statistics.fmean(c["tail"]) * 1e3 if c["tail"] else math.nan,
                   final_loss=statistics.fmean(c["loss"][-20:]) if c["loss"] else math.nan,
                   error=c.get("error"), switch=c["switch"],
                   bucket_sizes=str(c["ddp"]._get_ddp_logging_data().get("bucket_sizes", "")))
        if st is not None:
            rec.update(units=len(st.layout or ()), groups=len(st.plan.groups) if st.plan else len(st.layout or ()),
                       decisions=[(s, [list(g) for g in gr]) for s, gr in st.decisions],
                       cost_a_us=st.a * 1e6, cost_b_ns=st.b * 1e9)
        out.append(rec)
    Path(args.out).write_text(json.dumps(out))
    dist.destroy_process_group()


def run_world(args, world, work):
    init = work / f"init{world}"
    init.unlink(missing_ok=True)
    outs = [work / f"w{world}r{r}.json" for r in range(world)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGQ_") or k == "AGQ_BUILD_DIR"}
    env["PYTHONPATH"] = str(SRC / "workers" / "python")
    sw = None
    if not args.no_agq:
        from agq_torch.launch import LocalSwitch
        sw = LocalSwitch(work / f"sw{world}", world, slots=64, rows=32)
        env.update(AGQ_SWITCH_CTL=str(sw.ctl), AGQ_JOB=str(sw.job_id),
                   AGQ_VDEV=sw.vdev(0).replace(str(sw.socks[0]), str(sw.socks[0].with_name("w{rank}.sock"))))
    try:
        procs = []
        for r in range(world):
            cmd = [PY, __file__, "--rank", str(r), "--world", str(world), "--init", str(init), "--out", str(outs[r]),
                   "--steps", str(args.steps), "--rounds", str(args.rounds), "--warmup", str(args.warmup),
                   "--phase", str(args.phase), "--batch", str(args.batch), "--lr", str(args.lr), "--models", *args.models,
                   "--transports", *args.transports]
            cmd += ["--units"] if args.units else []
            cmd += ["--agq"] if sw is not None else []
            procs.append(subprocess.Popen(cmd, env=env, stdout=open(work / f"w{world}r{r}.log", "wb"),
                                          stderr=subprocess.STDOUT))
        try:
            for p in procs:
                p.wait(args.timeout)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        if any(p.returncode for p in procs):
            logs = "\n".join((work / f"w{world}r{r}.log").read_text(errors="replace")[-3000:] for r in range(world))
            raise RuntimeError(f"a rank failed ({[p.returncode for p in procs]}):\n{logs}")
    finally:
        if sw is not None:
            sw.close()
    recs = [json.loads(o.read_text()) for o in outs]
    # Per configuration: rank 0's numbers; the tail and step are the slowest rank's.
    merged = []
    for k, r0 in enumerate(recs[0]):
        r0 = dict(r0)
        r0["step_ms"] = max(rr[k]["step_ms"] for rr in recs)
        r0["tail_ms"] = max(rr[k]["tail_ms"] for rr in recs)
        if "decisions" in r0:
            r0["ranks_decided_alike"] = all(rr[k]["decisions"] == r0["decisions"] for rr in recs)
        merged.append(r0)
    return merged


def table(rows):
    lines = ["| procs | model (params) | transport | buckets | step ms | tail ms (mean) | groups / units, a, b "
             "| loss (last 20) |", "|---|---|---|---|---|---|---|---|"]
    base = {}
    for r in rows:
        if r["mode"] == "default":
            base[(r["world"], r["model"], r["transport"])] = r["step_ms"]
    for r in rows:
        b = base.get((r["world"], r["model"], r["transport"]))
        rel = f" (x{r['step_ms'] / b:.2f})" if b and r["mode"] != "default" else ""
        plan = (f"{r['groups']} / {r['units']}, {r['cost_a_us']:.0f} us, {r['cost_b_ns']:.1f} ns"
                + ("" if r.get("ranks_decided_alike", True) else " RANKS DIFFER")) if "units" in r else ""
        lines.append(f"| {r['world']} | {r['model']} ({r['params']:,}) | {r['transport']} | {r['mode']} "
                     f"| {r['step_ms']:.2f}{rel} | {r['tail_ms']:.2f} ({r['tail_mean_ms']:.2f}) | {plan} "
                     f"| {r['final_loss']:.4f} |" + (f" failed at {r['error']}" if r.get("error") else ""))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--procs", type=int, nargs="+", default=[2])
    ap.add_argument("--models", nargs="+", default=["mlp", "deep"], choices=["mlp", "deep"])
    ap.add_argument("--transports", nargs="+", default=["gloo", "backend", "hook"],
                    choices=["gloo", "backend", "hook"])
    ap.add_argument("--steps", type=int, default=150, help="per configuration and round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=60, help="first steps of each configuration not measured")
    ap.add_argument("--phase", type=int, default=20, help="MergeState.phase_steps")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05, help="SGD, momentum 0.9")
    ap.add_argument("--units", action="store_true", help="also one bucket per parameter, unmerged")
    ap.add_argument("--no-agq", action="store_true", help="Gloo only (no switch)")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--out", type=Path, help="also write every record here (JSON)")
    # one rank (internal)
    ap.add_argument("--rank", type=int)
    ap.add_argument("--world", type=int)
    ap.add_argument("--init")
    ap.add_argument("--agq", action="store_true")
    args = ap.parse_args()
    if args.rank is not None:
        rank_main(args)
        return
    rows = []
    t0 = time.time()
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="agq-merge-bench") as tmp:
        for w in args.procs:
            rows += run_world(args, w, Path(tmp))
            print(f"# {w} processes done after {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(t0))}, load average {load0:.1f} -> "
          f"{os.getloadavg()[0]:.1f}, {args.steps} steps x {args.rounds} rounds per configuration, first "
          f"{args.warmup} left out, phase {args.phase} steps, lr {args.lr}")
    print(table(rows))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
