"""One rank of test_agq_torch_memory.py: a 3-layer MLP regressing a fixed
random teacher network, trained twice side by side -- DDP over Gloo and DDP
with agq_torch's hook -- from the same initial weights on the same batches;
writes both loss curves to <out>/rank<r>.json.

usage: rank_memory.py OUT RANK WORLD VDEV CTL_SOCKET INIT_FILE ERROR_FEEDBACK(on|off) STEPS [MIN_WIDTH_SLACK]"""
import json
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

SRC = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SRC / "workers" / "python"))
import agq_torch  # noqa: E402

D_IN, HIDDEN, D_OUT, BATCH = 32, 128, 8, 64


def problem(n=8192, seed=0):
    """Inputs ~ N(0, 1); targets from a fixed random 3-layer teacher (as bench/train_memory.py's)."""
    g = torch.Generator().manual_seed(seed)
    w = [torch.randn(D_IN, 64, generator=g) / D_IN ** 0.5, torch.randn(64, 64, generator=g) / 8.0,
         torch.randn(64, D_OUT, generator=g) / 8.0]
    x = torch.randn(n, D_IN, generator=g)
    return x, torch.tanh(torch.tanh(x @ w[0]) @ w[1]) @ w[2]


def mlp():
    return nn.Sequential(nn.Linear(D_IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                         nn.Linear(HIDDEN, D_OUT))


def main():
    out, rank, world, vdev, ctl, init_file = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], \
        sys.argv[5], sys.argv[6]
    feedback, steps = sys.argv[7] == "on", int(sys.argv[8])
    slack = int(sys.argv[9]) if len(sys.argv) > 9 else 0
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    job = agq_torch.job_from_switch(ctl, 1)
    # Only what differs from the defaults: the same script then runs on a
    # libagq that predates these options (the test's "fails before" check).
    opts = {k: v for k, v in (("error_feedback", feedback), ("min_width_slack", slack))
            if v != {"error_feedback": True, "min_width_slack": 0}[k]}
    client = agq_torch.AgqClient(vdev, job, rank, file_prefix=f"agqmem{rank}x{int(time.monotonic() * 1000) % 100000}",
                                 **opts)
    x_all, y_all = problem()
    x_all, y_all = x_all[rank::world], y_all[rank::world]
    dist._DEFAULT_FIRST_BUCKET_BYTES = 20_000  # several buckets per step (DDP's own knob)
    torch.manual_seed(0)
    m_gloo = DDP(mlp(), bucket_cap_mb=0.02)
    torch.manual_seed(0)
    m_agq = DDP(mlp(), bucket_cap_mb=0.02)
    state = agq_torch.HookState(client, world)
    m_agq.register_comm_hook(state, agq_torch.allreduce_hook)
    opts = [torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in (m_gloo, m_agq)]
    g = torch.Generator().manual_seed(100 + rank)
    losses = {"gloo": [], "agq": []}
    for _ in range(steps):
        idx = torch.randint(0, x_all.shape[0], (BATCH,), generator=g)
        x, y = x_all[idx], y_all[idx]
        for name, m, opt in (("gloo", m_gloo, opts[0]), ("agq", m_agq, opts[1])):
            loss = F.mse_loss(m(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            l = loss.detach().clone()
            dist.all_reduce(l)
            losses[name].append(float(l) / world)
    stats = [s for _, s in client.history]
    rec = {"losses": losses, "ops": len(stats),
           "fallbacks": sum(s.get("fallbacks", 0) for s in stats),
           "chunks": sum(s.get("chunks", 0) for s in stats),
           "avg_granted_bits": [s.get("avg_granted_bits", 0) for s in stats][-3:]}
    client.close()
    (out / f"rank{rank}.json").write_text(json.dumps(rec))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
