"""Adaptive gradient merging (agq_torch/merge.py). The planner on its own
(no processes): the grouping it picks for known times, and that it is a
function of its inputs only. Then two real ranks over a real agq-switch:
with merging on over Gloo, over the "agq" backend's group and over its
client, both ranks take the same merge decisions, follow them (steps sent
in fewer groups than units), and train as without merging: on Gloo to
float rounding, through the switch within the quantization's tolerance of
Gloo, step by step."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SRC / "workers" / "python"))
from agq_torch.launch import LocalSwitch  # noqa: E402
from agq_torch.merge import best_groups, fit_cost, mixes, predict  # noqa: E402

PY = "/usr/bin/python3"
WORLD = 2
STEPS = 30
PHASE = 4


def test_planner_merges_what_a_per_operation_cost_makes_worth_it():
    sizes = [100] * 6
    ready = [0.0, 0.001, 0.002, 0.003, 0.004, 0.005]
    # No per-operation cost: every unit alone starts each as early as possible.
    assert best_groups(ready, sizes, 0.0, 1e-6) == tuple((i, i + 1) for i in range(6))
    # A per-operation cost far above the gaps between units: one group.
    assert best_groups(ready, sizes, 1.0, 1e-9) == ((0, 6),)
    # Two bursts far apart, the first of large units: one group per burst,
    # the first travelling under the second's compute.
    burst, big = [0.0, 0.0001, 0.0002, 0.05, 0.0501, 0.0502], [10 ** 6] * 3 + [100] * 3
    g = best_groups(burst, big, 0.002, 1e-8)
    assert g == ((0, 3), (3, 6)), g
    assert predict(g, burst, big, 0.002, 1e-8) < predict(((0, 6),), burst, big, 0.002, 1e-8) - 0.02
    # Small first burst: splitting gains nothing (the last group costs a after
    # the last unit either way), so the fewer operations win the tie.
    assert best_groups(burst, sizes, 0.002, 1e-9) == ((0, 6),)
    # Same inputs, same answer (what every rank relies on).
    assert all(best_groups(burst, big, 0.002, 1e-8) == g for _ in range(3))


def test_planner_keeps_unlike_magnitudes_apart():
    sizes, ready = [100] * 4, [0.0, 0.0001, 0.0002, 0.0003]
    mags = [1.0, 0.5, 1e-3, 2e-3]   # the switch budgets a group's step on its largest value
    assert best_groups(ready, sizes, 1.0, 1e-9) == ((0, 4),)
    g = best_groups(ready, sizes, 1.0, 1e-9, mags, 16.0)
    assert g == ((0, 2), (2, 4)), g
    assert mixes(g, mags, 16.0) == 0 and mixes(((0, 4),), mags, 16.0) == 1
    assert best_groups(ready, sizes, 1.0, 1e-9, [1.0, 0.0, 0.5, 0.0], 16.0) == ((0, 4),)  # zeros join any


def test_cost_fit():
    a, b = fit_cost({100: 1e-3 + 100e-8, 10000: 1e-3 + 10000e-8, 1000: 1e-3 + 1000e-8})
    assert a == pytest.approx(1e-3, rel=1e-6) and b == pytest.approx(1e-8, rel=1e-6)
    assert fit_cost({}) == (0.0, 0.0)
    assert fit_cost({100: 2e-3}) == (0.0, 2e-5)
    a, b = fit_cost({100: 3e-3, 1000: 1e-3})     # decreasing: a constant
    assert b == 0.0 and a == pytest.approx(2e-3)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("ranks")
    with LocalSwitch(tmp_path_factory.mktemp("sw"), WORLD, slots=64, rows=32) as sw:
        vdev = sw.vdev(0).replace(str(sw.socks[0]), str(sw.socks[0].with_name("w{rank}.sock")))
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGQ_") or k == "AGQ_BUILD_DIR"}
        env.update(PYTHONPATH=str(SRC / "workers" / "python"), AGQ_SWITCH_CTL=str(sw.ctl), AGQ_JOB=str(sw.job_id),
                   AGQ_VDEV=vdev)
        procs = [subprocess.Popen([PY, str(Path(__file__).with_name("rank_merge.py")), str(out), str(r), str(WORLD),
                                   str(out / "init"), str(STEPS), str(PHASE)], env=env,
                                  stdout=open(out / f"r{r}.log", "wb"), stderr=subprocess.STDOUT)
                 for r in range(WORLD)]
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
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(WORLD)]


MERGED = ("gloo_merge", "agq_merge", "client_merge")


def test_ranks_take_the_same_decisions_and_follow_them(ranks):
    r0, r1 = ranks
    for n in MERGED:
        s0, s1 = r0["states"][n], r1["states"][n]
        assert s0["layout"] == s1["layout"] and len(s0["layout"]) == 6, (n, s0["layout"])  # one unit per parameter
        assert s0["decisions"], (n, "no plan was ever taken")
        assert s0["decisions"] == s1["decisions"], (n, s0["decisions"], s1["decisions"])
        assert (s0["a"], s0["b"]) == (s1["a"], s1["b"]), n   # the shared model, bit for bit
        # After the first plan, steps go in that plan's groups: fewer operations than units.
        first = s0["decisions"][0][0]
        assert s0["planned_steps"] >= STEPS - first - 1, (n, s0["planned_steps"], first)
        assert min(s0["groups_per_step"]) < 6, (n, s0["groups_per_step"])
        assert s0["groups_per_step"] == s1["groups_per_step"], n


def test_merging_trains_as_without_it(ranks):
    r0, r1 = ranks
    lg = r0["losses"]["gloo"]
    assert lg[-1] < lg[0]
    # Gloo: merging changes only which buffer carries a gradient: the same sums.
    for s, (a, b) in enumerate(zip(lg, r0["losses"]["gloo_merge"])):
        assert abs(a - b) <= 1e-5 * abs(a), (s, a, b)
    pa, pb = r0["params"]["gloo"], r0["params"]["gloo_merge"]
    assert max(abs(x - y) for x, y in zip(pa, pb)) <= 1e-5
    # Through the switch: within its quantization of Gloo, as DDP's own buckets are.
    for n in ("agq", "agq_merge", "client_merge"):
        for s, (g, a) in enumerate(zip(lg, r0["losses"][n])):
            assert abs(a - g) <= 0.02 * g, (n, s, g, a)
    # Every rank holds the same model after training (one result per all_reduce, alike everywhere).
    for n in ("gloo_merge", "agq_merge", "client_merge"):
        assert r0["params"][n] == r1["params"][n], n
