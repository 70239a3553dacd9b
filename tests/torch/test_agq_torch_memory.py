"""Training when switch memory is scarce (issue 44): 2 ranks, DDP with
agq_torch's hook against the same run over Gloo, at 4 and at 8 slots per
row of switch memory (one job of 64 slots on 16 or 8 rows). A 3-layer MLP
regresses a fixed random teacher (SGD lr 0.05, momentum 0.9, batch 64 per
rank, rank_memory.py). At 3+ slots per row the switch used to grant windows
far below the workers' error budget and truncation biased every sum the
same way: the loss diverged. With min_width grants (the PS sums what does
not fit), the unbiased decode and error feedback it must end within
LOSS_TOL of Gloo's final loss (60 steps; measured on this rig, with the
switch accepting any grant as it did before min_width: today's code -4.1 %
at 4 and -2.7 % at 8 slots per row, the unbiased decode alone -1.6 % and
-0.9 %, with error feedback -0.07 % and -0.06 %). AGQ_MEMORY_FEEDBACK=off
and AGQ_MEMORY_SLACK=bits run the same with error feedback off or a
min_width slack."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SRC / "workers" / "python"))
from agq_torch.launch import LocalSwitch  # noqa: E402

PY = "/usr/bin/python3"
WORLD = 2
STEPS = int(os.environ.get("AGQ_MEMORY_STEPS", "60"))
LOSS_TOL = 0.01  # relative to Gloo's final loss: the goal
# 64-slot job on this many rows: 4 and 8 slots per row (AGQ_MEMORY_ROWS=64,32,16,8 for the sweep)
ROWS = [int(r) for r in os.environ.get("AGQ_MEMORY_ROWS", "16,8").split(",")]
ENV = dict(os.environ, PYTHONPATH=str(SRC / "workers" / "python"))


def train(tmp_path, rows, feedback="on", steps=STEPS, slack=0):
    with LocalSwitch(tmp_path / "sw", WORLD, slots=64, rows=rows) as sw:
        out = tmp_path / "ranks"
        out.mkdir()
        init = out / "init"
        procs = [subprocess.Popen([PY, str(Path(__file__).with_name("rank_memory.py")), str(out), str(r), str(WORLD),
                                   sw.vdev(r), str(sw.ctl), str(init), feedback, str(steps), str(slack)], env=ENV,
                                  stdout=open(out / f"r{r}.log", "wb"), stderr=subprocess.STDOUT)
                 for r in range(WORLD)]
        try:
            for p in procs:
                p.wait(240)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        logs = "\n".join((out / f"r{r}.log").read_text(errors="replace")[-3000:] for r in range(WORLD))
        assert all(p.returncode == 0 for p in procs), logs
        return [json.loads((out / f"rank{r}.json").read_text()) for r in range(WORLD)]


@pytest.mark.parametrize("rows", ROWS, ids=[f"{64 // r}_per_row" for r in ROWS])
def test_ddp_tracks_gloo_under_memory_pressure(tmp_path, rows):
    t0 = time.monotonic()
    recs = train(tmp_path, rows, os.environ.get("AGQ_MEMORY_FEEDBACK", "on"),
                 slack=int(os.environ.get("AGQ_MEMORY_SLACK", "0")))
    lg, la = recs[0]["losses"]["gloo"], recs[0]["losses"]["agq"]
    print(f"{64 // rows} slots per row: gloo {lg[-1]:.5g} agq {la[-1]:.5g} ({(la[-1] / lg[-1] - 1) * 100:+.2f} %), "
          f"fallbacks {recs[0]['fallbacks']} of {recs[0]['chunks']} chunks, {time.monotonic() - t0:.0f} s")
    assert lg[-1] < 0.5 * lg[0], lg  # Gloo learns
    assert abs(la[-1] - lg[-1]) <= LOSS_TOL * lg[-1], (la[-5:], lg[-5:])
