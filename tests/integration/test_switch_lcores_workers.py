"""agq-switch with two dataplane lcores (-l 0,1) and real agq-workers over
memif, which check every RESULT bit for bit (test_agq_workers.py's two
jobs): while they run, a third job is added and removed through agqctl again
and again, and other control commands (job list, counters, dump) are asked.
Every answer must come while the traffic runs (the lcores apply changes
between bursts, docs/ARCHITECTURE.md), and both jobs' results stay exact.
Multi-process: runs in the Release pass only (its file name says "workers").
"""
from harness import agqctl
import test_agq_workers as workers


def test_job_churn_while_two_jobs_run_on_two_lcores(procs, tmp_path):
    """agq-workers (exact check of every RESULT) on a 2-lcore switch; job 3
    comes and goes through agqctl, and other commands are asked, while the
    traffic runs."""
    elements, rounds = 32 * 3000, 3
    answered = []

    def churn(topo, worker_procs):
        spec = ["job", "add", "3", "workers=1", "slots=8", "rows=2",
                f"worker=0,{topo.port(1, 'ps')},10.9.9.1,02:00:00:00:09:01"]
        while any(w.alive() for w in worker_procs) and len(answered) < 400:
            for words in (spec, ["job", "list"], ["counters"], ["dump", "0"], ["job", "del", "3"]):
                r = agqctl(topo.ctl, *words)
                assert r.returncode == 0, (words, r.stdout + r.stderr)
                answered.append(words[:2])

    _, results, _, c = workers.run_two_jobs(procs, tmp_path, 0, elements, rounds, 150, lcores="0,1", during=churn)
    workers.check_exact(results, elements, rounds)
    adds = sum(1 for w in answered if w == ["job", "add"])
    assert adds >= 3, f"only {adds} job add/del cycles while the workers ran"
    assert c["dp.commands"] > 0, c
    assert c["dp.handoff_drops"] == 0, c
