"""One rank of the torch integration test (test_agq_torch.py): runs every
check that needs a real job of 2 processes on one agq-switch and writes what
it saw to <out>/rank<r>.json (+ .npy results) for the test to judge.

usage: rank_checks.py OUT RANK WORLD VDEV CTL_SOCKET INIT_FILE"""
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

SRC = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SRC / "workers" / "python"))
sys.path.insert(0, str(SRC / "workers" / "examples"))
import agq_torch  # noqa: E402
from agq_torch.launch import binary  # noqa: E402
from train_ddp import make_data, make_model  # noqa: E402

SIZES = [0, 1, 31, 33, 1000, 4097]   # none a multiple of the 32 lanes but 0
LOSS_SIZE = 32 * 400 + 5


def inputs(rank, n, seed):
    g = torch.Generator().manual_seed(seed * 100 + rank)
    return torch.randn(n, generator=g) * (0.01 + 0.5 * rank)


def expect_error(fn, exc, *words):
    try:
        fn()
    except exc as e:
        msg = str(e)
        return {"raised": type(e).__name__, "message": msg, "ok": all(w in msg for w in words)}
    except Exception as e:  # noqa: BLE001 - the wrong kind is recorded, not hidden
        return {"raised": type(e).__name__, "message": str(e), "ok": False}
    return {"raised": None, "message": "", "ok": False}


def main():
    out, rank, world, vdev, ctl, init_file = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], \
        sys.argv[5], sys.argv[6]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    rec = {}
    try:
        job = agq_torch.job_from_switch(ctl, 1)
        rec["job_source"] = "switch"
    except agq_torch.JobError as e:  # a switch without `job get` yet: the job as configured
        job = agq_torch.explicit_job(1, world, 64, 32)
        rec["job_source"] = f"explicit ({e})"
    t0 = time.monotonic()
    # Error feedback off: every check here compares against the protocol's
    # bound for the values as given (with it on, a tag's later ops carry the
    # earlier ones' residuals; test_agq_torch_memory.py trains with it).
    client = agq_torch.AgqClient(vdev, job, rank, error_feedback=False,
                                 file_prefix=f"agqtt{rank}x{int(t0 * 1000) % 100000}")
    rec["open_s"] = time.monotonic() - t0

    # 1. Bad input: clear errors, nothing sent.
    rec["bad_input"] = {
        "float64": expect_error(lambda: client.allreduce(torch.ones(40, dtype=torch.float64)), TypeError, "float32"),
        "int64": expect_error(lambda: client.allreduce(torch.ones(40, dtype=torch.int64)), TypeError, "float32"),
        "not_tensor": expect_error(lambda: client.allreduce([1.0, 2.0]), TypeError, "torch.Tensor"),
        "nan": expect_error(lambda: client.allreduce(torch.tensor([1.0, float("nan"), 2.0])), ValueError, "NaN",
                            "element 1"),
        "inf": expect_error(lambda: client.allreduce(torch.tensor([float("inf")] * 3)), ValueError, "3 NaN/Inf"),
        "strided": expect_error(lambda: client.allreduce(torch.ones(8, 8).t()), ValueError, "contiguous"),
    }

    # 2. Any size: the sum with its per-element bound, saved for the test.
    for n in SIZES:
        t = inputs(rank, n, 1)
        np.save(out / f"in_r{rank}_n{n}.npy", t.numpy())
        b = torch.empty_like(t)
        st = client.allreduce(t, tag=1000 + n, bound=b)
        np.save(out / f"out_r{rank}_n{n}.npy", t.numpy())
        np.save(out / f"bound_r{rank}_n{n}.npy", b.numpy())
        rec.setdefault("sizes", {})[str(n)] = st

    # 3. Lost packets: the same input once without and once with loss on
    # every worker port (tags differ so both start from the same widths).
    x = inputs(rank, LOSS_SIZE, 2)
    a = x.clone()
    client.allreduce(a, tag=1)
    dist.barrier()
    if rank == 0:
        for p in range(world):
            for d in ("rx", "tx"):
                subprocess.run([str(binary("agqctl")), "--socket", ctl, "drop", str(p), d, "0.05"], check=True)
    dist.barrier()
    b = x.clone()
    rec["lossy"] = client.allreduce(b, tag=2)
    dist.barrier()
    if rank == 0:
        subprocess.run([str(binary("agqctl")), "--socket", ctl, "drop", "clear"], check=True)
    rec["lossy_identical"] = bool(torch.equal(a, b))
    np.save(out / f"lossy_r{rank}.npy", b.numpy())
    dist.barrier()

    # 4. The DDP hook on real gradients vs Gloo, element by element (every
    # bucket of every step checked), and a few training steps side by side.
    x, y, xt, yt = make_data(0, n_train=2048, n_test=512)
    x, y = x[rank::world], y[rank::world]
    dist._DEFAULT_FIRST_BUCKET_BYTES = 50_000  # several buckets even for this small model (DDP's own knob)
    torch.manual_seed(0)
    m_gloo = DDP(make_model(), bucket_cap_mb=0.05)
    torch.manual_seed(0)
    m_agq = DDP(make_model(), bucket_cap_mb=0.05)
    state = agq_torch.HookState(client, world, check_every=1)
    m_agq.register_comm_hook(state, agq_torch.allreduce_hook)
    opts = [torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in (m_gloo, m_agq)]
    g = torch.Generator().manual_seed(7 + rank)
    losses = {"gloo": [], "agq": []}
    for step in range(15):
        idx = torch.randint(0, x.shape[0], (64,), generator=g)
        for name, m, opt in (("gloo", m_gloo, opts[0]), ("agq", m_agq, opts[1])):
            loss = F.cross_entropy(m(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            l = loss.detach().clone()
            dist.all_reduce(l)
            losses[name].append(float(l) / world)
    rec["losses"] = losses
    rec["checks"] = state.checks
    rec["buckets"] = sorted({i for _, i, _ in state.launches})
    rec["launches"] = len(state.launches)
    with torch.no_grad():
        rec["params_max_diff"] = max(float((p - q).abs().max()) for p, q in zip(m_gloo.parameters(),
                                                                                 m_agq.parameters()))
    rec["in_flight_at_return"] = state.in_flight_at_return
    # 5. NaN in the gradients (both ranks: nobody waits for a peer that
    # refused): backward raises with the hook's message.
    idx = torch.arange(64)
    loss = F.cross_entropy(m_agq(x[idx]), y[idx]) * float("nan")
    opts[1].zero_grad()
    try:
        loss.backward()
        rec["nan_backward"] = "no error"
    except Exception as e:  # noqa: BLE001 - the message is what the test checks
        rec["nan_backward"] = f"{type(e).__name__}: {e}"
    client.close()
    rec["history_ops"] = len(client.history)
    (out / f"rank{rank}.json").write_text(json.dumps(rec))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
