"""One rank of the backend test (test_agq_backend.py): init_process_group
("agq") from the AGQ_* environment, every collective a DDP and a plain
script use, and a DDP model without a hook trained beside a Gloo one on the
same data. Writes what it saw to <out>/rank<r>.json for the test to judge.

usage: rank_backend.py OUT RANK WORLD INIT_FILE"""
import json
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

SRC = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SRC / "workers" / "python"))
sys.path.insert(0, str(SRC / "workers" / "examples"))
import agq_torch  # noqa: E402,F401 - registers "agq"
from train_ddp import make_data, make_model  # noqa: E402

STEPS = 12


def main():
    out, rank, world, init_file = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    torch.set_num_threads(1)
    t0 = time.monotonic()
    dist.init_process_group("agq", init_method=f"file://{init_file}", rank=rank, world_size=world)
    rec = {"init_s": time.monotonic() - t0, "backend": dist.get_backend()}
    pg = dist.distributed_c10d._get_default_group()
    gloo = dist.new_group(backend="gloo")  # the reference, beside the agq group
    rec["pg"] = type(pg).__name__

    # Collectives of a plain script. Each rank's input differs.
    col = {}
    x = torch.arange(1000, dtype=torch.float32) * 1e-3 + rank
    s0 = pg.switch_ops
    dist.all_reduce(x)                                            # float32 SUM: the switch
    col["f32_sum"] = x.tolist()
    col["f32_sum_switch"] = pg.switch_ops - s0
    y = torch.full((333,), 0.25 * (rank + 1))
    w = dist.all_reduce(y, async_op=True)                         # async: Work and its future
    fv = w.get_future().wait()
    w.wait()
    col["f32_async"] = y.tolist()
    col["f32_async_future_is_tensor"] = bool(fv[0].data_ptr() == y.data_ptr())
    nc = torch.ones(16, 8).t() * (rank + 1)                        # not contiguous: through a copy
    dist.all_reduce(nc)
    col["f32_strided"] = nc.flatten().tolist()
    for dt in ("float16", "bfloat16"):
        h = (torch.linspace(-1, 1, 257) * (rank + 1)).to(getattr(torch, dt))
        s0 = pg.switch_ops
        dist.all_reduce(h)
        col[dt] = h.float().tolist()
        col[dt + "_switch"] = pg.switch_ops - s0
        col[dt + "_dtype"] = str(h.dtype)
    g0 = pg.gloo_ops
    i = torch.arange(10, dtype=torch.int64) * (rank + 1)
    dist.all_reduce(i)                                            # int64: Gloo
    col["i64_sum"] = i.tolist()
    m = torch.arange(10, dtype=torch.float32) * (1 - 2 * rank)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)                       # MAX: Gloo
    col["f32_max"] = m.tolist()
    d = torch.ones(5, dtype=torch.float64) * (rank + 1)
    dist.all_reduce(d)                                            # float64: Gloo
    col["f64_sum"] = d.tolist()
    col["gloo_ops"] = pg.gloo_ops - g0
    b = torch.arange(7, dtype=torch.float32) + 100 * rank
    dist.broadcast(b, src=1)
    col["broadcast"] = b.tolist()
    bb = (torch.arange(5, dtype=torch.float32) / 3 + 100 * rank).to(torch.bfloat16)
    dist.broadcast(bb, src=1)                                     # bfloat16: Gloo (1.13) has none, bit views
    col["broadcast_bf16"] = [str(bb.dtype), bb.float().tolist()]
    parts = [torch.zeros(3) for _ in range(world)]
    dist.all_gather(parts, torch.full((3,), float(rank)))
    col["all_gather"] = [p.tolist() for p in parts]
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank})
    col["all_gather_object"] = objs
    gat = [torch.zeros(2) for _ in range(world)] if rank == 0 else None
    dist.gather(torch.full((2,), rank + 1.0), gat, dst=0)
    col["gather"] = [g.tolist() for g in gat] if gat else None
    red = torch.full((4,), rank + 1.0)
    dist.reduce(red, dst=0)
    col["reduce"] = red.tolist()
    dist.barrier()
    col["barrier"] = True
    z = torch.zeros(0)
    dist.all_reduce(z)
    col["empty"] = z.numel()
    try:
        bad = torch.tensor([1.0, float("nan"), 2.0])
        dist.all_reduce(bad)
        col["nan"] = "no error"
    except Exception as e:  # noqa: BLE001 - the message is what the test checks
        col["nan"] = f"{type(e).__name__}: {e}"
    rec["collectives"] = col

    # DDP without a hook on the agq group vs DDP on the Gloo group.
    xs, ys, _, _ = make_data(0, n_train=2048, n_test=16)
    xs, ys = xs[rank::world], ys[rank::world]
    dist._DEFAULT_FIRST_BUCKET_BYTES = 50_000  # several buckets for this small model
    torch.manual_seed(rank)                    # different inits: DDP's broadcast makes them rank 0's
    m_agq = DDP(make_model(), bucket_cap_mb=0.05)
    torch.manual_seed(rank)
    m_gloo = DDP(make_model(), bucket_cap_mb=0.05, process_group=gloo)
    rec["init_equal"] = all(bool(torch.equal(p, q)) for p, q in zip(m_agq.parameters(), m_gloo.parameters()))
    opts = [torch.optim.SGD(mm.parameters(), lr=0.05, momentum=0.9) for mm in (m_gloo, m_agq)]
    gen = torch.Generator().manual_seed(7 + rank)
    losses = {"gloo": [], "agq": []}
    s0 = pg.switch_ops
    for _ in range(STEPS):
        idx = torch.randint(0, xs.shape[0], (64,), generator=gen)
        for name, mm, opt in (("gloo", m_gloo, opts[0]), ("agq", m_agq, opts[1])):
            loss = F.cross_entropy(mm(xs[idx]), ys[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            lt = loss.detach().clone()
            dist.all_reduce(lt, group=gloo)
            losses[name].append(float(lt) / world)
    rec["ddp_switch_ops"] = pg.switch_ops - s0
    rec["losses"] = losses
    with torch.no_grad():
        rec["params_max_diff"] = max(float((p - q).abs().max()) for p, q in zip(m_gloo.parameters(),
                                                                                 m_agq.parameters()))
        flat = torch.cat([p.detach().flatten() for p in m_agq.parameters()])
    allp = [torch.zeros_like(flat) for _ in range(world)]
    dist.all_gather(allp, flat)
    rec["ranks_identical"] = all(bool(torch.equal(allp[0], a)) for a in allp)
    # A bfloat16 model: its buckets are bfloat16, summed by the switch as float32.
    torch.manual_seed(rank)
    m_bf = DDP(make_model().to(torch.bfloat16), bucket_cap_mb=0.05)
    opt = torch.optim.SGD(m_bf.parameters(), lr=0.05)
    s0 = pg.switch_ops
    bf_losses = []
    for _ in range(4):
        idx = torch.randint(0, xs.shape[0], (64,), generator=gen)
        loss = F.cross_entropy(m_bf(xs[idx].to(torch.bfloat16)).float(), ys[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        bf_losses.append(float(loss))
    rec["bf16_ddp"] = {"switch_ops": pg.switch_ops - s0, "losses": bf_losses,
                       "grad_dtype": str(next(m_bf.parameters()).grad.dtype)}
    with torch.no_grad():
        flat = torch.cat([p.detach().float().flatten() for p in m_bf.parameters()])
    allp = [torch.zeros_like(flat) for _ in range(world)]
    dist.all_gather(allp, flat)
    rec["bf16_ddp"]["ranks_identical"] = all(bool(torch.equal(allp[0], a)) for a in allp)
    hist = pg.client.history
    rec["tags"] = sorted({t for t, _ in hist})
    rec["key_names"] = [list(k) for k in pg._keys._ids]
    rec["ops"] = len(hist)
    dist.barrier()
    dist.destroy_process_group()
    # A second default group in the same process: the same switch port again.
    dist.init_process_group("agq", init_method=f"file://{init_file}.2", rank=rank, world_size=world)
    pg2 = dist.distributed_c10d._get_default_group()
    again = torch.full((100,), rank + 1.0)
    dist.all_reduce(again)
    rec["reinit"] = {"same_client": pg2.client is pg.client, "sum": again.tolist(), "switch_ops": pg2.switch_ops}
    (out / f"rank{rank}.json").write_text(json.dumps(rec))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
