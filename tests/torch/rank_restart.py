"""One rank of test_agq_torch_restart.py: allreduces one tensor after the
other through the switch until it has run the number of operations the
test writes into <out>/stop, while the test kills the switch
and starts it again. Every operation's result is checked against the exact
sum within the per-element bound the client reports; what the rank saw goes
to <out>/rank<r>.progress (rewritten after every operation) and, at the end,
<out>/rank<r>.json with the module's unmap guard figures.

usage: rank_restart.py OUT RANK WORLD VDEV CTL_SOCKET"""
import json
import os
import sys
import time
from pathlib import Path

import torch

SRC = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SRC / "workers" / "python"))
import agq_torch  # noqa: E402
from agq_torch import _agq  # noqa: E402

N = 32 * 512 + 7


def main():
    out, rank, world, vdev, ctl = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    torch.set_num_threads(1)
    job = agq_torch.job_from_switch(ctl, 1)
    # Error feedback off: each op is checked against its own bound.
    c = agq_torch.AgqClient(vdev, job, rank, error_feedback=False, file_prefix=f"agqrs{rank}x{os.getpid()}",
                            reply_timeout=20.0)
    rec = {"ok": 0, "bad": [], "errors": [], "ops": 0}
    stop = out / "stop"  # the number of operations to run, the same for every rank (written by the test)
    i = 0
    while not (stop.exists() and stop.read_text().strip() and i >= int(stop.read_text())):
        # Rank r's values are (r + 1) * base: the exact sum is base * world * (world + 1) / 2.
        base = torch.linspace(-1.0, 1.0, N) * (1 + i % 5)
        x = base * (rank + 1)
        bound = torch.zeros(N)
        try:
            c.allreduce(x, bound=bound)
            err = (x - base * (world * (world + 1) / 2)).abs()
            excess = float((err - bound).max())
            if excess > 1e-6:
                rec["bad"].append({"op": i, "excess": excess})
            else:
                rec["ok"] += 1
        except Exception as e:  # noqa: BLE001 - recorded for the test to judge, with its kind
            rec["errors"].append({"op": i, "kind": type(e).__name__, "error": str(e)})
        i += 1
        rec["ops"] = i
        (out / f"rank{rank}.progress").write_text(json.dumps(rec))
    rec["unmap_guard"] = _agq.unmap_guard()
    c.close()
    (out / f"rank{rank}.json").write_text(json.dumps(rec))


if __name__ == "__main__":
    t0 = time.monotonic()
    main()
    print(f"rank done in {time.monotonic() - t0:.1f} s")
