#!/usr/bin/python3
"""DDP through agq-switch as a torch.distributed backend: no hook, no
client in the script. Started by torchrun (or any launcher that sets
RANK, WORLD_SIZE, MASTER_ADDR/MASTER_PORT, LOCAL_RANK); the switch, job and
port come from AGQ_SWITCH_CTL, AGQ_JOB and AGQ_VDEV (agq_torch/backend.py):

    /usr/bin/python3 workers/examples/local_switch.py --workers 2 --dir /tmp/agq &   # prints the AGQ_* exports
    export AGQ_SWITCH_CTL=/tmp/agq/ctl.sock AGQ_JOB=1 \\
           AGQ_VDEV='net_memif0,role=client,id=0,socket=/tmp/agq/w{rank}.sock,socket-abstract=no'
    torchrun --standalone --nproc_per_node=2 workers/examples/train_agq_backend.py --steps 200

The model and data are train_ddp.py's (a 64-256-256-10 MLP on a generated
10-class problem). --backend gloo runs the same script on Gloo. Rank 0
prints the loss every --print-every steps and, at the end, one JSON line
(final loss, accuracy, median step time, all_reduces through the switch,
rank 0's chunks, fallbacks to the PS, retransmissions and average granted
width)."""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))
sys.path.insert(0, str(HERE))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="agq", choices=["agq", "gloo"])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=64, help="per process")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--bucket-mb", type=float, default=0.1, help="DDP bucket cap (small: several buckets in flight)")
    ap.add_argument("--print-every", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="rank 0 also writes its JSON record here")
    args = ap.parse_args()
    for var in ("RANK", "WORLD_SIZE"):
        if var not in os.environ:
            ap.error(f"{var} is not set: start the script with torchrun (torchrun --nproc_per_node=N {sys.argv[0]})")

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    import agq_torch  # noqa: F401 - registers the "agq" backend
    from train_ddp import make_data, make_model

    torch.set_num_threads(1)
    dist.init_process_group(args.backend)  # env:// from torchrun; AGQ_* for the switch
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    model = make_model()
    dist._DEFAULT_FIRST_BUCKET_BYTES = int(args.bucket_mb * 1e6)  # DDP's first bucket too
    ddp = DDP(model, bucket_cap_mb=args.bucket_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    x, y, xt, yt = make_data(args.seed)
    x, y = x[rank::world], y[rank::world]
    g = torch.Generator().manual_seed(args.seed + 1 + rank)
    losses, times = [], []
    for step in range(args.steps):
        idx = torch.randint(0, x.shape[0], (args.batch,), generator=g)
        t0 = time.perf_counter()
        loss = F.cross_entropy(ddp(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        lt = loss.detach().clone()
        dist.all_reduce(lt)  # through the switch too (float32 SUM)
        losses.append(float(lt) / world)
        if rank == 0 and args.print_every and (step % args.print_every == 0 or step == args.steps - 1):
            print(f"step {step:4d}  loss {losses[-1]:.4f}", flush=True)
    with torch.no_grad():
        acc = float((model(xt).argmax(1) == yt).float().mean())
    pg = dist.distributed_c10d._get_default_group()
    ops = [st for _, st in pg.client.history] if getattr(pg, "client", None) else []
    agg = sum(o["chunks"] - o["fallbacks"] for o in ops)
    switch = dict(chunks=sum(o["chunks"] for o in ops), fallbacks=sum(o["fallbacks"] for o in ops),
                  retransmissions=sum(o["retransmissions"] for o in ops),
                  avg_granted_bits=sum(o["avg_granted_bits"] * (o["chunks"] - o["fallbacks"]) for o in ops) / agg
                  if agg else 0.0)
    rec = dict(backend=dist.get_backend(), world=world, steps=args.steps, final_loss=losses[-1],
               first_loss=losses[0], accuracy=acc, step_ms_median=statistics.median(times) * 1e3,
               switch_allreduces=getattr(pg, "switch_ops", 0), gloo_collectives=getattr(pg, "gloo_ops", None),
               switch=switch, losses=losses)
    if rank == 0:
        print(json.dumps({k: v for k, v in rec.items() if k != "losses"}), flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps(rec))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
