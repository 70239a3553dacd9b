"""An agq job in the rack rig (rack.py): the PS and two agq-worker
processes, each in its own host (network namespace) on a net_af_packet port
of its host's link, agq-switch on kernel-facing ports of the other ends.
The workers and the PS take their job from the switch's read-only job
endpoint over the rack's management network (--switch-ctl tcp:HOST:PORT),
as hosts on other machines would; every RESULT is checked bit for bit
(--verify all) and both workers hold the same aggregate."""
import json
import os
import signal

from harness import binary, counters, wait_for
from rack import Rack, job_endpoint, leftovers

ELEMENTS, ROUNDS = 32 * 1000, 2


def summary(proc):
    lines = [l for l in proc.output().splitlines() if l.startswith("{")]
    assert lines, proc.output()[-3000:]
    return json.loads(lines[-1])


def agq_worker(rack, host, name, args, lcore="1"):
    return rack.start(name, [binary("agq-worker"), *host.eal(name, lcore), "--", "--protocol", "agq", "--json",
                             "--progress", os.environ.get("AGQ_PROGRESS", "0"), "--idle-sleep-us", "100", *args],
                      host=host)


def run_job(rack, tmp_path, ctl_arg):
    """PS on host 2, workers 0 and 1 on hosts 0 and 1, job 1 from `ctl_arg`."""
    ps = agq_worker(rack, rack.hosts[2], "ps", ["--role", "ps", "--switch-ctl", ctl_arg, "--job", "1"])
    wait_for(lambda: "ready" in ps.output() or not ps.alive(), 20, what="PS ready")
    assert ps.alive(), ps.output()
    ws = []
    for i in (0, 1):
        out = tmp_path / f"agg{i}.npy"
        ws.append((agq_worker(rack, rack.hosts[i], f"w{i}",
                              ["--switch-ctl", ctl_arg, "--job", "1", "--ids", str(i), "--elements", ELEMENTS,
                               "--rounds", ROUNDS, "--verify", "all", "--rto-ms", "30", "--reply-timeout", "20",
                               "--output", out], lcore=str(i)), out))
    aggs = []
    for w, out in ws:
        rc = w.wait(90)
        assert rc == 0, f"{w.name} exited {rc}:\n{w.output()[-3000:]}"
        s = summary(w)
        assert s["status"] == "ok" and s["rounds_done"] == ROUNDS, s
        assert s["mismatches"] == 0 and s["verify"] == "all", s
        assert s["exact"] == s["checked"] == s["memory"]["sequences"] > 0, s
        assert s["quantization_error"]["max_over_bound"] <= 1.0 + 1e-9, s
        aggs.append(out.read_bytes())
    assert aggs[0] == aggs[1]
    assert ps.stop(signal.SIGINT, 10) == 0, ps.output()[-2000:]
    c = counters(rack.ctl)
    assert c["agq_results"] > 0 and c.get("drops_agq_bad_worker", 0) == 0, c
    return c


def test_agq_job_two_workers_and_ps_in_their_own_hosts(tmp_path):
    with Rack(3, tmp_path, mgmt=True) as rack:
        sw = rack.start_switch(jobs=rack.job_toml(1, workers=[0, 1], ps=2),
                               args=["--job-listen", f"{rack.mgmt_root_ip}:0"])
        ip, port = job_endpoint(sw)
        run_job(rack, tmp_path, f"tcp:{ip}:{port}")
        tag = rack.tag
    assert leftovers(tag) == []
