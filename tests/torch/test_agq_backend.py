"""The torch.distributed backend "agq" (agq_torch/backend.py) with a real
agq-switch, its PS and two real ranks over memif. Checked here: init_process_group("agq") from
the AGQ_* environment; every collective a DDP and a plain script use gives
Gloo's answer (float32 SUM through the switch within the protocol's bound,
with the switch's counters moving; int64, MAX, float64 and the rest through
Gloo, exactly; fp16/bf16 converted, not refused); DDP with no hook tracks
DDP on Gloo step by step; torchrun starts the example's ranks from the
environment; a missing or malformed variable is named; a switch that is not
there, one rank's port that is not, or a rank that never comes, fails every
rank within seconds with the endpoint or rank named; an all_reduce the
switch cannot complete raises instead of returning the tensor unreduced."""
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
BASE_ENV = {k: v for k, v in os.environ.items() if not k.startswith("AGQ_") or k == "AGQ_BUILD_DIR"}
BASE_ENV["PYTHONPATH"] = str(SRC / "workers" / "python")


@pytest.fixture(scope="module")
def switch(tmp_path_factory):
    with LocalSwitch(tmp_path_factory.mktemp("sw"), WORLD, slots=64, rows=32) as sw:
        yield sw


def agq_env(sw, **extra):
    vdev = sw.vdev(0).replace(str(sw.socks[0]), str(sw.socks[0].with_name("w{rank}.sock")))
    return {**BASE_ENV, "AGQ_SWITCH_CTL": str(sw.ctl), "AGQ_JOB": str(sw.job_id), "AGQ_VDEV": vdev, **extra}


def agq_counters(sw):
    return {k: v for k, v in sw.counters().items() if k.startswith("agq_")}


@pytest.fixture(scope="module")
def ranks(switch, tmp_path_factory):
    out = tmp_path_factory.mktemp("ranks")
    before = agq_counters(switch)
    env = agq_env(switch)
    procs = [subprocess.Popen([PY, str(Path(__file__).with_name("rank_backend.py")), str(out), str(r), str(WORLD),
                               str(out / "init")], env=env, stdout=open(out / f"r{r}.log", "wb"),
                              stderr=subprocess.STDOUT) for r in range(WORLD)]
    try:
        for p in procs:
            p.wait(50)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    logs = "\n".join((out / f"r{r}.log").read_text(errors="replace")[-3000:] for r in range(WORLD))
    assert all(p.returncode == 0 for p in procs), logs
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(WORLD)], before, agq_counters(switch)


def close(got, exact, rel=1e-3):
    """Within the switch's quantization (error budget 1e-4 of the tensor's max, x4 margin) of the exact sum."""
    got, exact = np.asarray(got, dtype=np.float64), np.asarray(exact, dtype=np.float64)
    return got.shape == exact.shape and bool(np.all(np.abs(got - exact) <= rel * np.abs(exact).max() + 1e-12))


def test_init_from_the_environment(ranks):
    recs, _, _ = ranks
    for rec in recs:
        assert rec["backend"] == "agq" and rec["pg"] == "ProcessGroupAgq", rec
        assert rec["init_s"] < 20, rec["init_s"]


def test_init_again_in_the_same_process(ranks):
    recs, _, _ = ranks
    for rec in recs:  # destroy_process_group, init_process_group("agq"): the process's one port, reused
        r = rec["reinit"]
        assert r["same_client"] and r["switch_ops"] == 1 and close(r["sum"], [3.0] * 100), r


def test_float32_sum_goes_through_the_switch(ranks):
    recs, before, after = ranks
    c0, c1 = recs[0]["collectives"], recs[1]["collectives"]
    base = np.arange(1000) * 1e-3
    assert close(c0["f32_sum"], 2 * base + 1) and c0["f32_sum"] == c1["f32_sum"]
    assert c0["f32_sum_switch"] == 1 and c1["f32_sum_switch"] == 1
    assert close(c0["f32_async"], [0.75] * 333) and c0["f32_async_future_is_tensor"]
    assert close(c0["f32_strided"], [3.0] * 128)
    assert c0["empty"] == 0
    assert "NaN/Inf" in c0["nan"] and "agq all_reduce of 3 elements" in c0["nan"], c0["nan"]
    # The switch aggregated: contributions from both ranks, results sent back.
    for k in ("agq_contributions", "agq_results"):
        assert after.get(k, 0) > before.get(k, 0), (k, before, after)
    assert after["agq_contributions"] - before["agq_contributions"] >= WORLD * (recs[0]["ops"] - 1), (before, after)


def test_half_precision_is_converted(ranks):
    recs, _, _ = ranks
    exact = np.linspace(-1, 1, 257) * 3
    for dt, step in (("float16", 2 ** -9), ("bfloat16", 2 ** -6)):
        for rec in recs:
            c = rec["collectives"]
            assert c[dt + "_dtype"] == f"torch.{dt}" and c[dt + "_switch"] == 1, c
            # rounding of the inputs and of the sum to the half type, on top of the switch's
            assert np.all(np.abs(np.asarray(c[dt]) - exact) <= 3 * step * 3 + 1e-3 * 3), dt
        assert recs[0]["collectives"][dt] == recs[1]["collectives"][dt]

    for rec in recs:  # DDP of a bfloat16 model: its buckets through the switch, converted
        bf = rec["bf16_ddp"]
        assert bf["grad_dtype"] == "torch.bfloat16" and bf["switch_ops"] >= 4, bf
        assert bf["ranks_identical"] and all(np.isfinite(bf["losses"])), bf


def test_other_collectives_go_to_gloo_exactly(ranks):
    recs, _, _ = ranks
    for rank, rec in enumerate(recs):
        c = rec["collectives"]
        assert c["gloo_ops"] == 3, c["gloo_ops"]                      # int64, MAX, float64: not the switch
        assert c["i64_sum"] == [3 * i for i in range(10)]
        assert c["f32_max"] == [float(i) for i in range(10)]
        assert c["f64_sum"] == [3.0] * 5
        assert c["broadcast"] == [100.0 + i for i in range(7)]
        import torch
        want = (torch.arange(5, dtype=torch.float32) / 3 + 100).to(torch.bfloat16).float().tolist()
        assert c["broadcast_bf16"] == ["torch.bfloat16", want], c["broadcast_bf16"]
        assert c["all_gather"] == [[0.0] * 3, [1.0] * 3]
        assert c["all_gather_object"] == [{"rank": 0}, {"rank": 1}]
        assert c["barrier"]
        if rank == 0:
            assert c["gather"] == [[1.0, 1.0], [2.0, 2.0]] and c["reduce"] == [3.0] * 4


def test_ddp_without_hook_tracks_gloo(ranks):
    recs, _, _ = ranks
    from rank_backend import STEPS
    r0 = recs[0]
    assert r0["init_equal"], "DDP's broadcast through the agq group did not give rank 0's parameters"
    # first step one bucket, then DDP's rebuilt buckets (>= 2 with 0.05 MB caps)
    assert r0["ddp_switch_ops"] >= 1 + 2 * (STEPS - 1), r0["ddp_switch_ops"]
    lg, la = r0["losses"]["gloo"], r0["losses"]["agq"]
    assert lg[-1] < lg[0] and la[-1] < la[0], (lg, la)
    for s, (g, a) in enumerate(zip(lg, la)):
        assert abs(a - g) <= 0.02 * g, (s, g, a)
    assert r0["params_max_diff"] < 0.05, r0["params_max_diff"]
    assert all(rec["ranks_identical"] for rec in recs)
    # DDP's buckets each have their own key (widths adapt per bucket), the same in both ranks
    assert recs[0]["tags"] == recs[1]["tags"] and len(r0["tags"]) >= 6, r0["tags"]
    assert recs[0]["key_names"] == recs[1]["key_names"]
    bwd = [k for k in r0["key_names"] if k[0] == "backward"]   # DDP's buckets, counted within backward
    assert len(bwd) >= 3 and all(k[2] == 0 for k in bwd[:3]), r0["key_names"]


def test_torchrun_example(switch, ranks, tmp_path):
    """workers/examples/train_agq_backend.py under torchrun: ranks, port and job from the environment."""
    out = tmp_path / "rec.json"
    t0 = time.monotonic()
    r = subprocess.run([PY, "-m", "agq_torch.torchrun", "--standalone", "--nproc_per_node", str(WORLD),
                        str(SRC / "workers" / "examples" / "train_agq_backend.py"), "--steps", "60",
                        "--print-every", "0", "--out", str(out)], env=agq_env(switch), capture_output=True,
                       text=True, timeout=55)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rec = json.loads(out.read_text())
    assert rec["backend"] == "agq" and rec["world"] == WORLD, rec
    assert rec["switch_allreduces"] >= 60 * 2, rec           # buckets and the loss, every step
    assert rec["final_loss"] < 0.8 * rec["first_loss"], rec
    assert time.monotonic() - t0 < 55


def _init_script(init_file, rank, world):
    return (f"import sys, time; sys.path.insert(0, {str(SRC / 'workers' / 'python')!r})\n"
            f"import torch.distributed as dist, agq_torch\n"
            f"t0 = time.monotonic()\n"
            f"try:\n"
            f"    dist.init_process_group('agq', init_method='file://{init_file}', rank={rank}, world_size={world})\n"
            f"    print('NO ERROR')\n"
            f"except Exception as e:\n"
            f"    print('ERROR', type(e).__name__, e)\n"
            f"print('SECONDS %.2f' % (time.monotonic() - t0))\n")


def run_ranks(tmp_path, envs, timeout=45):
    init = tmp_path / f"init{time.monotonic_ns()}"
    procs = [subprocess.Popen([PY, "-c", _init_script(init, r, len(envs))], env=e, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r, e in enumerate(envs)]
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=timeout)[0])
        except subprocess.TimeoutExpired:
            p.kill()
            outs.append(p.communicate()[0] + "\nTIMED OUT")
    return outs


def seconds(out):
    return float(out.split("SECONDS")[1].split()[0])


def test_bad_environment_is_named(switch):
    from agq_torch.backend import ConfigError, config_from_env
    good = agq_env(switch)
    cases = [("AGQ_SWITCH_CTL", None, "AGQ_SWITCH_CTL is not set"), ("AGQ_JOB", None, "AGQ_JOB is not set"),
             ("AGQ_VDEV", None, "AGQ_VDEV is not set"), ("AGQ_JOB", "one", "AGQ_JOB='one' is not an int"),
             ("AGQ_JOB", "0", "AGQ_JOB=0 is not a job id"),
             ("AGQ_VDEV", "net_memif0,socket=/x/w{port}.sock", "AGQ_VDEV="),
             ("AGQ_VDEV", "eth0", "AGQ_VDEV='eth0' is not a DPDK virtual device"),
             ("AGQ_ERROR_BUDGET", "small", "AGQ_ERROR_BUDGET='small' is not a float"),
             ("AGQ_CONNECT_TIMEOUT", "5s", "AGQ_CONNECT_TIMEOUT='5s'")]
    for var, val, words in cases:
        env = dict(good)
        env.pop(var) if val is None else env.update({var: val})
        with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace("{", r"\{")):
            config_from_env(0, env)
    # {rank} and {local_rank} (torchrun's LOCAL_RANK) in AGQ_VDEV
    env = dict(good, AGQ_VDEV="net_memif0,socket=/r/w{rank}l{local_rank}.sock", LOCAL_RANK="1")
    assert config_from_env(3, env)[2] == "net_memif0,socket=/r/w3l1.sock"
    assert config_from_env(3, dict(env, AGQ_FILE_PREFIX="p{rank}x"))[4]["file_prefix"] == "p3x"
    _, _, _, own, kw = config_from_env(0, dict(good, AGQ_ERROR_BUDGET="2e-4", AGQ_RESET_JOB="0"))
    assert kw["error_budget"] == 2e-4 and own["AGQ_RESET_JOB"] == 0


def test_init_names_the_variable_and_the_job(switch, tmp_path):
    env = agq_env(switch)
    env.pop("AGQ_JOB")
    out, = run_ranks(tmp_path, [env])
    assert "ERROR" in out and "AGQ_JOB is not set" in out, out
    assert seconds(out) < 10, out
    # one rank's environment is wrong: both fail at once, the other naming it (not after Gloo's 30 min)
    bad = agq_env(switch)
    bad.pop("AGQ_VDEV")
    outs = run_ranks(tmp_path, [agq_env(switch), bad])
    assert "AGQ_VDEV is not set" in outs[1], outs[1]
    assert "rank 1 could not read its AGQ_* settings" in outs[0] and "AGQ_VDEV is not set" in outs[0], outs[0]
    assert all(seconds(o) < 10 for o in outs), outs
    # a process group whose size is not the job's worker count
    out, = run_ranks(tmp_path, [agq_env(switch)])
    assert "job 1 on the switch at" in out and "has 2 workers, the process group 1 ranks" in out, out


def test_no_switch_fails_fast_naming_it(tmp_path):
    ctl = tmp_path / "nobody" / "ctl.sock"
    env = dict(BASE_ENV, AGQ_SWITCH_CTL=str(ctl), AGQ_JOB="1",
               AGQ_VDEV=f"net_memif0,role=client,id=0,socket={tmp_path}/w{{rank}}.sock,socket-abstract=no")
    t0 = time.monotonic()
    outs = run_ranks(tmp_path, [env, env])
    assert time.monotonic() - t0 < 30
    for out in outs:
        assert "ERROR RuntimeError" in out and f"AGQ_SWITCH_CTL={ctl}" in out, out
        assert seconds(out) < 15, out


def test_rank_without_its_port_fails_every_rank_in_bounded_time(switch, ranks, tmp_path):
    """The switch is there, rank 1's port is not: rank 1 names its port, rank 0 names rank 1."""
    missing = tmp_path / "nowhere.sock"
    envs = [agq_env(switch, AGQ_CONNECT_TIMEOUT="2"),
            agq_env(switch, AGQ_CONNECT_TIMEOUT="2",
                    AGQ_VDEV=f"net_memif0,role=client,id=0,socket={missing},socket-abstract=no")]
    t0 = time.monotonic()
    outs = run_ranks(tmp_path, envs)
    assert time.monotonic() - t0 < 40
    assert "ERROR RuntimeError" in outs[1] and f"socket={missing}" in outs[1], outs[1]
    assert "ERROR RuntimeError" in outs[0] and "rank 1 could not open its switch port" in outs[0], outs[0]
    assert f"socket={missing}" in outs[0], outs[0]
    assert all(seconds(o) < 20 for o in outs), outs


def test_keys_count_equal_sizes_within_a_backward():
    """DDP buckets of equal size get keys of their own (counted within each
    backward pass, the count restarting when it ends); outside backward a
    size is one key. The same call sequence gives the same keys in every rank."""
    import torch
    from agq_torch.backend import _Keys

    def one_backward(keys, got):
        ws = [torch.ones(10, requires_grad=True) for _ in range(3)] + [torch.ones(4, requires_grad=True)]
        for w in ws:
            w.register_hook(lambda g: got.append(keys.key(g.numel())) or g)
        sum((w * (i + 1)).sum() for i, w in enumerate(ws)).backward()

    keys = _Keys()
    first, second = [], []
    one_backward(keys, first)
    one_backward(keys, second)
    assert len(set(first)) == 4 and sorted(first) == sorted(second), (first, second)
    plain = [keys.key(10), keys.key(10), keys.key(4)]
    assert plain[0] == plain[1] and plain[0] != plain[2] and not set(plain) & set(first), plain
    other = _Keys()  # another rank, the same calls
    again = []
    one_backward(other, again)
    assert again == first


def test_a_silent_rank_is_named(switch, tmp_path):
    """Rank 1 never starts: rank 0 gives up after AGQ_OPEN_TIMEOUT, naming it."""
    init = tmp_path / "init_silent"
    r = subprocess.run([PY, "-c", _init_script(init, 0, 2)], env=agq_env(switch, AGQ_OPEN_TIMEOUT="2"),
                       capture_output=True, text=True, timeout=45)
    assert "ERROR RuntimeError" in r.stdout and "rank(s) [1] did not read its AGQ_* settings" in r.stdout, r.stdout
    assert "AGQ_OPEN_TIMEOUT" in r.stdout and 2 <= seconds(r.stdout) < 10, r.stdout


def test_an_option_this_client_lacks_is_named(switch, tmp_path):
    from agq_torch.backend import _client_accepts
    if _client_accepts("fixed_width"):
        pytest.skip("this build's client has fixed_width")
    out, = run_ranks(tmp_path, [agq_env(switch, AGQ_FIXED_WIDTH="32")])
    assert "AGQ_FIXED_WIDTH is set, but this build's AgqClient has no fixed_width option" in out, out


def _lonely_script(init_file, rank):
    return (f"import sys, time; sys.path.insert(0, {str(SRC / 'workers' / 'python')!r})\n"
            f"import torch, torch.distributed as dist, agq_torch\n"
            f"dist.init_process_group('agq', init_method='file://{init_file}', rank={rank}, world_size=2)\n"
            f"if {rank} == 0:  # rank 1 never joins this all_reduce: the switch cannot complete it\n"
            f"    t0 = time.monotonic()\n"
            f"    for mode in ('sync', 'async'):\n"
            f"        try:\n"
            f"            t = torch.ones(100)\n"
            f"            if mode == 'sync':\n"
            f"                dist.all_reduce(t)\n"
            f"            else:\n"
            f"                dist.all_reduce(t, async_op=True).wait()\n"
            f"            print(mode, 'NO ERROR')\n"
            f"        except Exception as e:\n"
            f"            print(mode, 'ERROR', type(e).__name__, str(e)[:300].replace(chr(10), ' '))\n"
            f"    print('SECONDS %.2f' % (time.monotonic() - t0))\n"
            f"dist.barrier()\n"
            f"print('BARRIER')\n")


def test_a_failed_switch_operation_raises(switch, tmp_path):
    """An all_reduce the switch cannot complete (the peer never sends) raises
    in dist.all_reduce and in Work.wait(), within AGQ_REPLY_TIMEOUT's order,
    instead of returning the tensor unreduced."""
    init = tmp_path / "init_lonely"
    env = agq_env(switch, AGQ_REPLY_TIMEOUT="1")
    procs = [subprocess.Popen([PY, "-c", _lonely_script(init, r)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(WORLD)]
    outs = [p.communicate(timeout=50)[0] for p in procs]
    assert "sync ERROR" in outs[0] and "async ERROR" in outs[0] and "ClientError" in outs[0], outs[0]
    assert "NO ERROR" not in outs[0] and all("BARRIER" in o for o in outs), outs
    assert seconds(outs[0]) < 20, outs[0]
