#!/usr/bin/python3
"""Train a small MLP with PyTorch DDP on N processes of this machine, once
with plain Gloo allreduce and once through one agq-switch (agq_torch's
communication hook), and compare: loss curves, final accuracy, time per
step, and what AGQ did on the real gradients (widths granted per bucket
over training, switch memory per element vs 32 bits, quantization error
measured against Gloo, overflows, fallbacks to the PS, retransmissions).

Data: a generated 10-class problem (inputs ~ N(0, 1), labels from a fixed
random teacher network); nothing is downloaded. Both runs use the same
seeds, data and model initialisation, so the curves differ only by the
aggregation.

    /usr/bin/python3 workers/examples/train_ddp.py --procs 2 --out /tmp/agq-train
writes summary.json and train.png there and prints a table.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

# Agreement the example checks (and states in README.md): final accuracy
# within ACC_TOL (absolute), mean loss of the last tenth of the steps within
# LOSS_TOL (relative).
ACC_TOL = 0.02
LOSS_TOL = 0.05


def make_data(seed=0, n_train=16384, n_test=4096, dim=64, classes=10):
    import torch
    g = torch.Generator().manual_seed(seed)
    teacher = [torch.randn(dim, 128, generator=g) / dim ** 0.5, torch.randn(128, classes, generator=g) / 128 ** 0.5]
    x = torch.randn(n_train + n_test, dim, generator=g)
    y = (torch.tanh(x @ teacher[0]) @ teacher[1]).argmax(1)
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def make_model(dim=64, hidden=256, classes=10):
    import torch.nn as nn
    return nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, classes))


def rank_main(rank, world, backend, cfg, out_path, init_file, vdev=None, job=None):
    """One training process. backend: 'gloo' (DDP's default allreduce) or 'agq' (the hook)."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    torch.manual_seed(cfg["seed"])
    model = make_model()
    # DDP makes its first bucket 1 MB whatever bucket_cap_mb says: small
    # buckets throughout, so several travel while backward still computes.
    dist._DEFAULT_FIRST_BUCKET_BYTES = int(cfg["bucket_mb"] * 1e6)
    ddp = DDP(model, bucket_cap_mb=cfg["bucket_mb"])  # rank 0's parameters are broadcast by Gloo
    client = state = None
    if backend == "agq":
        import agq_torch
        client = agq_torch.AgqClient(vdev, job, rank, file_prefix=f"agqtrain{os.getpid()}",
                                     error_budget=cfg["error_budget"],
                                     error_feedback=cfg.get("error_feedback", True))
        state = agq_torch.HookState(client, world, check_every=cfg["check_every"])
        ddp.register_comm_hook(state, agq_torch.allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=cfg["lr"], momentum=0.9)
    x, y, xt, yt = make_data(cfg["seed"])
    shard = torch.arange(rank, x.shape[0], world)
    x, y = x[shard], y[shard]
    g = torch.Generator().manual_seed(cfg["seed"] + 1 + rank)
    losses, times, checked = [], [], []
    try:
        for step in range(cfg["steps"]):
            idx = torch.randint(0, x.shape[0], (cfg["batch"],), generator=g)
            check = state is not None and state.checking()
            t0 = time.perf_counter()
            loss = F.cross_entropy(ddp(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()  # the hook's futures are waited for at the end of backward
            opt.step()
            dt = time.perf_counter() - t0
            (checked if check else times).append(dt)
            l = loss.detach().clone()
            dist.all_reduce(l)  # the job's mean loss (outside the timed region)
            losses.append(float(l) / world)
        with torch.no_grad():
            acc = float((model(xt).argmax(1) == yt).float().mean())
        out = dict(backend=backend, rank=rank, world=world, losses=losses, step_times=times,
                   checked_step_times=checked, accuracy=acc, params=sum(p.numel() for p in model.parameters()))
        if client is not None:
            out["ops"] = [dict(tag=t, **s) for t, s in client.history]
            out["launches"] = state.launches
            out["checks"] = state.checks
            out["in_flight_at_return"] = state.in_flight_at_return
        Path(out_path).write_text(json.dumps(out))
    finally:
        if client is not None:
            client.close()
        dist.destroy_process_group()


def _spawn_main(rank, world, backend, cfg, outdir, init_file, vdevs, job):
    rank_main(rank, world, backend, cfg, Path(outdir) / f"{backend}{world}_r{rank}.json", init_file,
              vdevs[rank] if vdevs else None, job)


def run(world, backend, cfg, outdir, slots=64, rows=32):
    """Trains on `world` processes; returns rank 0's record (plus every rank's accuracy)."""
    import torch.multiprocessing as mp
    outdir = Path(outdir)
    init_file = Path(tempfile.mkdtemp(prefix="agqinit", dir=outdir)) / "init"
    sw = None
    try:
        vdevs = job = None
        if backend == "agq":
            import agq_torch
            from agq_torch.launch import LocalSwitch
            sw = LocalSwitch(outdir / f"switch{world}", world, slots=slots, rows=rows)
            job = agq_torch.explicit_job(sw.job_id, world, slots, rows)
            if cfg["job_from_switch"]:
                try:
                    job = agq_torch.job_from_switch(sw.ctl, sw.job_id)
                except agq_torch.JobError as e:  # a switch without `job get` (PROTOCOL.md section 12)
                    print(f"note: {e}; using the job as configured", file=sys.stderr)
            vdevs = [sw.vdev(r) for r in range(world)]
        mp.start_processes(_spawn_main, args=(world, backend, cfg, str(outdir), str(init_file), vdevs, job),
                           nprocs=world, join=True, start_method="spawn")
        recs = [json.loads((outdir / f"{backend}{world}_r{r}.json").read_text()) for r in range(world)]
        rec = recs[0]
        rec["accuracy_all_ranks"] = [r["accuracy"] for r in recs]
        if sw is not None:
            rec["switch_counters"] = {k: v for k, v in sw.counters().items() if k.startswith(("agq", "dp.sim"))}
        return rec
    finally:
        if sw is not None:
            sw.close()


def agq_report(rec):
    """What AGQ did, from rank 0's per-operation statistics and checks."""
    ops = rec["ops"]
    chunks = sum(o["chunks"] for o in ops)
    fallbacks = sum(o["fallbacks"] for o in ops)
    agg = chunks - fallbacks
    granted = sum(o["avg_granted_bits"] * (o["chunks"] - o["fallbacks"]) for o in ops)
    widths = {}
    for o in ops:
        for w, n in o["granted_widths"].items():
            widths[str(w)] = widths.get(str(w), 0) + n
    per_bucket = {}
    for o in ops:
        per_bucket.setdefault(str(o["tag"]), []).append(round(o["avg_granted_bits"], 2))
    checks = rec["checks"]
    avg_bits = granted / agg if agg else 0.0
    return dict(operations=len(ops), buckets_in_flight_when_the_hook_returned=rec["in_flight_at_return"],
                chunks=chunks, elements=sum(o["elements"] for o in ops),
                avg_granted_bits=avg_bits, switch_bits_per_element=avg_bits, baseline_bits=32,
                memory_saving_x=32 / avg_bits if avg_bits else 0.0, granted_width_histogram=widths,
                granted_bits_per_bucket_over_steps=per_bucket, fallbacks=fallbacks,
                overflow_redos=sum(o["redos"] for o in ops),
                overflow_accepted=sum(o["overflow_accepted"] for o in ops),
                retransmissions=sum(o["retransmissions"] for o in ops),
                quantization_error=dict(
                    checked_buckets=len(checks), elements=sum(c["elements"] for c in checks),
                    max_abs=max((c["max_abs"] for c in checks), default=0.0),
                    rms=max((c["rms"] for c in checks), default=0.0),
                    max_bound=max((c["max_bound"] for c in checks), default=0.0),
                    max_over_bound=max((c["max_over_bound"] for c in checks), default=0.0),
                    violations=sum(c["violations"] for c in checks)))


def compare(gloo, agq, steps):
    tail = max(1, steps // 10)
    lg, la = statistics.mean(gloo["losses"][-tail:]), statistics.mean(agq["losses"][-tail:])
    tg, ta = statistics.median(gloo["step_times"]), statistics.median(agq["step_times"])
    return dict(final_loss_gloo=lg, final_loss_agq=la, loss_rel_diff=abs(la - lg) / lg,
                accuracy_gloo=gloo["accuracy"], accuracy_agq=agq["accuracy"],
                accuracy_diff=abs(agq["accuracy"] - gloo["accuracy"]),
                step_ms_gloo=tg * 1e3, step_ms_agq=ta * 1e3, step_time_ratio_agq_over_gloo=ta / tg,
                within_tolerance=abs(agq["accuracy"] - gloo["accuracy"]) <= ACC_TOL and abs(la - lg) / lg <= LOSS_TOL,
                tolerance=dict(accuracy_abs=ACC_TOL, final_loss_rel=LOSS_TOL))


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for world, r in sorted(results.items()):
        ax1.plot(r["gloo"]["losses"], label=f"Gloo, {world} procs", lw=1)
        ax1.plot(r["agq"]["losses"], label=f"agq-switch, {world} procs", lw=1, ls="--")
        per_step = {}
        for o in r["agq"]["ops"]:
            per_step.setdefault(o["tag"], []).append(o["avg_granted_bits"])
        for tag, bits in sorted(per_step.items()):
            ax2.plot(bits, label=f"{world} procs, bucket {tag}", lw=1)
    ax1.set(xlabel="step", ylabel="training loss (mean over ranks)", yscale="log", title="Loss: Gloo vs agq-switch")
    ax1.legend(fontsize=8)
    ax2.axhline(32, color="gray", ls=":", lw=1)
    ax2.set(xlabel="step", ylabel="granted bits per element (avg over chunks)",
            title="Widths the switch granted, per DDP bucket", ylim=(0, 34))
    ax2.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--procs", type=int, nargs="+", default=[2, 4], help="process counts to train with")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=64, help="per process")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--bucket-mb", type=float, default=0.1, help="DDP bucket cap (small: several buckets in flight)")
    ap.add_argument("--error-budget", type=float, default=1e-4, help="agq quantization step / bucket max")
    ap.add_argument("--error-feedback", choices=["on", "off"], default="on",
                    help="agq: carry each rank's quantization residual into the bucket's next step (PROTOCOL.md 5)")
    ap.add_argument("--check-every", type=int, default=10, help="compare with Gloo every k steps (0 = never)")
    ap.add_argument("--explicit-job", action="store_true", help="do not ask the switch for the job (agqctl job get)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="/tmp/agq-train")
    args = ap.parse_args()
    for n in args.procs:
        if not 1 <= n <= 32:
            ap.error(f"--procs {n}: 1..32 processes")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = dict(steps=args.steps, batch=args.batch, lr=args.lr, bucket_mb=args.bucket_mb, seed=args.seed,
               error_budget=args.error_budget, error_feedback=args.error_feedback == "on",
               check_every=args.check_every, job_from_switch=not args.explicit_job)
    results, summary = {}, {"config": cfg, "runs": {}}
    for n in args.procs:
        results[n] = {"gloo": run(n, "gloo", cfg, out), "agq": run(n, "agq", cfg, out)}
        s = compare(results[n]["gloo"], results[n]["agq"], args.steps)
        s["agq"] = agq_report(results[n]["agq"])
        s["params"] = results[n]["gloo"]["params"]
        summary["runs"][str(n)] = s
        q = s["agq"]
        print(f"{n} procs: loss gloo {s['final_loss_gloo']:.4f} agq {s['final_loss_agq']:.4f} "
              f"(rel diff {s['loss_rel_diff']:.3%}); accuracy gloo {s['accuracy_gloo']:.3f} agq "
              f"{s['accuracy_agq']:.3f}; step gloo {s['step_ms_gloo']:.2f} ms agq {s['step_ms_agq']:.2f} ms "
              f"(x{s['step_time_ratio_agq_over_gloo']:.2f}); within tolerance: {s['within_tolerance']}")
        print(f"{n} procs: agq granted {q['avg_granted_bits']:.2f} bits/element vs 32 ({q['memory_saving_x']:.2f}x "
              f"less switch memory), widths {q['granted_width_histogram']}, fallbacks {q['fallbacks']}, "
              f"overflow redos {q['overflow_redos']}, retransmissions {q['retransmissions']}; vs Gloo: max error "
              f"{q['quantization_error']['max_abs']:.3g} ({q['quantization_error']['max_over_bound']:.2f} of the "
              f"bound), {q['quantization_error']['violations']} elements over the bound", flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "curves.json").write_text(json.dumps({n: {b: {"losses": r[b]["losses"]} for b in r}
                                                  for n, r in results.items()}))
    plot(results, out / "train.png")
    print(f"wrote {out / 'summary.json'} and {out / 'train.png'}")
    return 0 if all(s["within_tolerance"] for s in summary["runs"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
