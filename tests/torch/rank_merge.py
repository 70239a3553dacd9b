"""One rank of the merging test (test_agq_merge.py): the same model, data
and initialisation trained under DDP five ways -- on Gloo with DDP's
buckets, on Gloo with adaptive merging, through the switch ("agq" backend)
with DDP's buckets, and with merging over the backend's group and over its
client (libagq tags) -- and what each saw written to <out>/rank<r>.json.

usage: rank_merge.py OUT RANK WORLD INIT_FILE STEPS PHASE"""
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

SRC = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SRC / "workers" / "python"))
sys.path.insert(0, str(SRC / "workers" / "examples"))
import agq_torch  # noqa: E402,F401 - registers "agq"
from agq_torch import merge  # noqa: E402
from train_ddp import make_data, make_model  # noqa: E402


def main():
    out, rank, world, init_file = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    steps, phase = int(sys.argv[5]), int(sys.argv[6])
    torch.set_num_threads(1)
    dist.init_process_group("agq", init_method=f"file://{init_file}", rank=rank, world_size=world)
    agq = dist.distributed_c10d._get_default_group()
    gloo = dist.new_group(backend="gloo")
    xs, ys, _, _ = make_data(0, n_train=4096, n_test=16)
    xs, ys = xs[rank::world], ys[rank::world]

    def build(name):
        torch.manual_seed(0)
        m = make_model()
        st = None
        if name == "gloo":
            d = DDP(m, process_group=gloo)
        elif name == "agq":
            d = DDP(m, process_group=agq)
        else:
            kw = {"gloo_merge": dict(group=gloo), "agq_merge": dict(group=agq, stats_group=gloo),
                  "client_merge": dict(client=agq.client, group=gloo)}[name]
            st = merge.MergeState(world, phase_steps=phase, **kw)
            d = merge.ddp(m, st)
        return d, st, torch.optim.SGD(d.parameters(), lr=0.05, momentum=0.9)

    names = ["gloo", "gloo_merge", "agq", "agq_merge", "client_merge"]
    runs = {n: build(n) for n in names}
    losses = {n: [] for n in names}
    gen = torch.Generator().manual_seed(7 + rank)
    for _ in range(steps):
        idx = torch.randint(0, xs.shape[0], (64,), generator=gen)
        for n in names:  # interleaved: each step's batch is the same for all five
            d, _, opt = runs[n]
            loss = F.cross_entropy(d(xs[idx]), ys[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            lt = loss.detach().clone()
            dist.all_reduce(lt, group=gloo)
            losses[n].append(float(lt) / world)
    rec = {"losses": losses, "states": {}}
    for n, (d, st, _) in runs.items():
        if st is None:
            continue
        recs = st.step_records()
        rec["states"][n] = dict(decisions=[[s, [list(g) for g in gr]] for s, gr in st.decisions],
                                layout=list(st.layout), a=st.a, b=st.b,
                                planned_steps=sum(r["planned"] for r in recs),
                                groups_per_step=[r["groups"] for r in recs])
    for n, (d, _, _) in runs.items():
        rec.setdefault("params", {})[n] = torch.cat([p.detach().flatten() for p in d.parameters()]).tolist()
    (out / f"rank{rank}.json").write_text(json.dumps(rec))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
