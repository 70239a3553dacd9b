"""libagq + agq_torch end to end: a real agq-switch (agq pipeline, with its
PS) and two real training processes over memif (rank_checks.py). Checked
here: any tensor size sums within the protocol's per-element error bound and
identically in both ranks; bad input is refused with a clear error; packets
lost by the switch's drop simulator change nothing in the result; the DDP
hook's gradients equal Gloo's allreduce within the bound for the width
granted, element by element, on every bucket of every step; a few training
steps track Gloo's; a switch that is not there and a job it does not know
give clear errors within seconds."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

SRC = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SRC / "workers" / "python"))
from agq_torch.launch import LocalSwitch  # noqa: E402

PY = "/usr/bin/python3"
WORLD = 2
ENV = dict(os.environ, PYTHONPATH=str(SRC / "workers" / "python"))


@pytest.fixture(scope="module")
def switch(tmp_path_factory):
    with LocalSwitch(tmp_path_factory.mktemp("sw"), WORLD, slots=64, rows=32) as sw:
        yield sw


@pytest.fixture(scope="module")
def ranks(switch, tmp_path_factory):
    out = tmp_path_factory.mktemp("ranks")
    init = out / "init"
    procs = [subprocess.Popen([PY, str(Path(__file__).with_name("rank_checks.py")), str(out), str(r), str(WORLD),
                               switch.vdev(r), str(switch.ctl), str(init)], env=ENV,
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
    recs = [json.loads((out / f"rank{r}.json").read_text()) for r in range(WORLD)]
    return out, recs, switch.counters()


def test_bad_input_is_refused_clearly(ranks):
    _, recs, _ = ranks
    for rec in recs:
        for case, r in rec["bad_input"].items():
            assert r["ok"], (case, r)


def test_any_size_within_bound_and_identical(ranks):
    out, recs, _ = ranks
    from rank_checks import SIZES
    for n in SIZES:
        exact = sum(np.load(out / f"in_r{r}_n{n}.npy").astype(np.float64) for r in range(WORLD))
        got = [np.load(out / f"out_r{r}_n{n}.npy") for r in range(WORLD)]
        bound = np.load(out / f"bound_r0_n{n}.npy").astype(np.float64)
        assert got[0].shape == (n,)
        assert np.array_equal(got[0], got[1]), f"n={n}: the ranks hold different sums"
        # float32 output rounding on top of the protocol's bound
        err = np.abs(got[0].astype(np.float64) - exact)
        slack = np.abs(exact) * 2.0 ** -23
        assert np.all(np.isfinite(bound)), n
        assert np.all(err <= bound + slack), (n, float(err.max()), float(bound.max()))
        st = recs[0]["sizes"][str(n)]
        assert st["elements"] == n and st["chunks"] == -(-n // 32), st


def test_lost_packets_give_the_same_result(ranks):
    out, recs, c = ranks
    for rec in recs:
        assert rec["lossy_identical"], "the sum with 5% loss differs from the sum without"
    assert np.array_equal(np.load(out / "lossy_r0.npy"), np.load(out / "lossy_r1.npy"))
    assert sum(rec["lossy"]["retransmissions"] for rec in recs) > 0, [r["lossy"] for r in recs]
    assert sum(v for k, v in c.items() if k.startswith("dp.sim_drops.")) > 0, c


def test_hook_equals_gloo_within_bound(ranks):
    _, recs, _ = ranks
    for rec in recs:
        checks = rec["checks"]
        assert len(rec["buckets"]) >= 2, rec["buckets"]       # several buckets in flight per step
        # every bucket of every step (DDP's first step has one bucket, later ones rebuilt)
        assert len(checks) == rec["launches"] >= 15 * len(rec["buckets"]) - 1, (len(checks), rec["launches"])
        assert sum(c["elements"] for c in checks) > 0
        bad = [c for c in checks if c["violations"]]
        assert not bad, bad[:3]
        assert all(c["max_over_bound"] <= 1.0 + 1e-6 or c["max_abs"] < 1e-6 for c in checks), checks[:3]
        # The hook returned while buckets were still travelling: backward was not blocked by them.
        assert rec["in_flight_at_return"] > 0, rec["in_flight_at_return"]


def test_nan_gradients_are_reported(ranks):
    _, recs, _ = ranks
    for rec in recs:
        assert "NaN/Inf" in rec["nan_backward"] and "DDP bucket" in rec["nan_backward"], rec["nan_backward"]


def test_training_tracks_gloo(ranks):
    _, recs, _ = ranks
    lg, la = recs[0]["losses"]["gloo"], recs[0]["losses"]["agq"]
    assert lg[-1] < lg[0] and la[0] - la[-1] >= 0.8 * (lg[0] - lg[-1]), (lg, la)  # it learns as Gloo's does
    for s, (g, a) in enumerate(zip(lg, la)):
        assert abs(a - g) <= 0.02 * g, (s, g, a)                # and like Gloo, step by step
    assert recs[0]["params_max_diff"] < 1e-2, recs[0]["params_max_diff"]


def test_cpp_client_many_in_flight(switch, ranks, tmp_path):
    """libagq's C++ API on its own (workers/examples/allreduce_client.cpp):
    4 tensors in flight per rank, every element within its bound of the
    exact sum, both ranks with the same result."""
    import agq_torch
    from agq_torch.launch import binary
    agq_torch.reset_job(switch.ctl, 1)  # the ranks' run left the job's slots used: a new run starts clean
    # rank 0 takes the job from the switch (C++ job get), rank 1 is given it by hand
    job_args = [["--switch-ctl", str(switch.ctl)], ["--workers", str(WORLD), "--slots", "64", "--rows", "32"]]
    procs = [subprocess.Popen([str(binary("agq-allreduce-example")), "--vdev", switch.vdev(r), "--job", "1",
                               "--rank", str(r), *job_args[r],
                               "--elements", "20001", "--ops", "4", "--file-prefix", f"agqcpp{r}x{os.getpid()}"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(WORLD)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    recs = [[json.loads(l) for l in o.splitlines() if l.startswith("{")] for o in outs]
    assert [len(r) for r in recs] == [4, 4], outs
    for a, b in zip(*recs):
        assert a["ok"] and b["ok"] and a["checksum"] == b["checksum"], (a, b)
        assert a["max_error_over_bound"] <= 1.0 and a["chunks"] == -(-20001 // 32), a


def _client_script(vdev, job, timeout_kw):
    return (f"import sys, time; sys.path.insert(0, {str(SRC / 'workers' / 'python')!r}); import torch, agq_torch\n"
            f"t0 = time.monotonic()\n"
            f"try:\n"
            f"    c = agq_torch.AgqClient({vdev!r}, {job!r}, 0, file_prefix='agqneg%d' % int(t0*1000 % 1e6), "
            f"{timeout_kw})\n"
            f"    c.allreduce(torch.ones(100))\n"
            f"    print('NO ERROR')\n"
            f"except Exception as e:\n"
            f"    print('ERROR', type(e).__name__, e)\n"
            f"print('SECONDS %.2f' % (time.monotonic() - t0))\n")


def test_no_switch_is_a_clear_error_within_seconds(tmp_path):
    vdev = f"net_memif0,role=client,id=0,socket={tmp_path / 'nobody.sock'},socket-abstract=no"
    job = {"id": 1, "workers": 2, "slots": 64, "rows": 32, "max_width": 32, "lanes": 32}
    t0 = time.monotonic()
    r = subprocess.run([PY, "-c", _client_script(vdev, job, "connect_timeout=2.0")], capture_output=True, text=True,
                       timeout=60, env=ENV)
    assert time.monotonic() - t0 < 30
    assert "ERROR ClientError" in r.stdout and "agq-switch running" in r.stdout, r.stdout + r.stderr
    secs = float(r.stdout.split("SECONDS")[1])
    assert secs < 10, r.stdout


def test_unknown_job_is_named(switch, ranks, tmp_path):
    import agq_torch
    with pytest.raises(agq_torch.JobError, match="job 99"):
        agq_torch.job_from_switch(switch.ctl, 99)
    # A client of a job the switch does not have: the switch drops its DATA
    # (agq_unknown_job) and the client says which job got no answer.
    job = {"id": 99, "workers": 2, "slots": 64, "rows": 32, "max_width": 32, "lanes": 32}
    before = switch.counters().get("drops_agq_unknown_job", 0)
    r = subprocess.run([PY, "-c", _client_script(switch.vdev(0), job, "reply_timeout=2.0")], capture_output=True,
                       text=True, timeout=60, env=ENV)
    assert "ERROR ClientError" in r.stdout and "job 99" in r.stdout, r.stdout + r.stderr
    assert float(r.stdout.split("SECONDS")[1]) < 10, r.stdout
    assert switch.counters().get("drops_agq_unknown_job", 0) > before
