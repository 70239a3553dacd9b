"""Seeing inside a running agq-switch (issue 11): the job description workers
read (`agqctl job get ID --json`, docs/PROTOCOL.md section 12), `job reset`,
the rte_telemetry commands (read with dpdk-telemetry.py) ... on the real
switch with two dataplane lcores and memif ports that no
client connects to (no traffic unless a test sends some).
"""
import json
import subprocess
from pathlib import Path

import pytest

from harness import SOURCE_DIR, agqctl, binary, eal_args, memif_vdev, unique_prefix, wait_for

N_PORTS = 5


@pytest.fixture
def switch(tmp_path, procs):
    sock = tmp_path / "ctl.sock"
    vdevs = [memif_vdev(p, tmp_path / f"m{p}.sock", "server") for p in range(N_PORTS)]
    prefix = unique_prefix("obs")
    eal = [a for a in eal_args(prefix, "0,1", vdevs) if a != "--no-telemetry"]
    sw = procs.start("switch", [binary("agq-switch"), *eal, "--",
                                "--config", SOURCE_DIR / "conf/agq.toml", "--ctl-socket", sock,
                                "--idle-sleep-us", "200"])
    wait_for(lambda: sock.exists() or not sw.alive(), 30, what="control socket")
    assert sw.alive(), sw.output()
    sw.prefix = prefix
    yield sw, sock
    assert sw.stop() == 0, sw.output()


def ctl_ok(sock, *words):
    r = agqctl(sock, *words)
    assert r.returncode == 0, f"agqctl {' '.join(words)}: {r.stdout}{r.stderr}"
    return r.stdout


def test_job_get_json_is_the_job_of_the_config(switch):
    _, sock = switch
    j = json.loads(ctl_ok(sock, "job", "get", "1", "--json"))
    # conf/agq.toml job 1: 2 workers, 64 slots in at most 16 rows -> 4 slots per row.
    assert j == {
        "id": 1, "workers": 2, "slots": 64, "rows": 16, "row_shift": 2, "guard": 1, "max_width": 32,
        "lanes": j["lanes"], "delivery": "multicast",
        "ps": {"port": 0, "ip": "10.2.2.100", "mac": "02:00:00:00:00:64"},
        "worker_table": [{"id": 0, "port": 1, "ip": "10.2.2.1", "mac": "02:00:00:00:01:01"},
                         {"id": 1, "port": 2, "ip": "10.2.2.2", "mac": "02:00:00:00:01:02"}],
        "epoch": j["epoch"], "lcores": 2, "rings": 1}  # rings: --memif-queues (default 1)
    assert j["lanes"] in (16, 32)
    assert 0 <= j["epoch"] <= 0xFFFF
    assert list(j)[:3] == ["id", "workers", "slots"]  # the documented order
    # agqctl --json before the command is the same request.
    assert json.loads(ctl_ok(sock, "--json", "job", "get", "2"))["max_width"] == 16
    # job list --json: every job, each as 'job get' prints it.
    assert [x["id"] for x in json.loads(ctl_ok(sock, "job", "list", "--json"))] == [1, 2]
    # The text form carries the same values.
    text = ctl_ok(sock, "job", "get", "1")
    assert "row_shift  2\n" in text and "lcores     2\n" in text and "rings      1\n" in text


def test_job_reset_and_errors(switch):
    _, sock = switch
    before = ctl_ok(sock, "job", "get", "2", "--json")
    ctl_ok(sock, "job", "reset", "2")
    assert ctl_ok(sock, "job", "get", "2", "--json") == before
    r = agqctl(sock, "job", "reset", "9")
    assert r.returncode == 1 and "error: no job 9" in r.stderr
    r = agqctl(sock, "job", "get", "9", "--json")
    assert r.returncode == 1 and "error: no job 9" in r.stderr


def telemetry(prefix, *cmds):
    """dpdk-telemetry.py (Debian's dpdk package) run as a user would: one
    command per line on stdin, one JSON object per answer on stdout."""
    r = subprocess.run(["dpdk-telemetry.py", "-f", prefix], input="".join(c + "\n" for c in cmds),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    answers = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(answers) == len(cmds), r.stdout
    return [next(iter(a.values())) for a in answers]


def test_telemetry_commands(switch):
    sw, sock = switch
    prefix = sw.prefix
    assert (Path("/var/run/dpdk") / prefix / "dpdk_telemetry.v2").exists()
    ctl_ok(sock, "route", "add", "10.2.2.7", "3")
    counters, ports, job, jobs, dump, routes, bad_param, no_job, listing = telemetry(
        prefix, "/agq/counters", "/agq/ports", "/agq/job,1", "/agq/jobs", "/agq/dump,4,2", "/agq/routes",
        "/agq/job,1;x", "/agq/job,9", "/")
    # The same values agqctl prints, names in DPDK's alphabet ("dp.rx" -> "dp_rx").
    text = {l.split()[0]: int(l.split()[1]) for l in ctl_ok(sock, "counters").splitlines()}
    assert set(counters) == {k.replace(".", "_") for k in text}
    assert counters["agq_packets"] == text["agq_packets"] and "dp_rx" in counters
    assert ports["port"] == [0, 1, 2, 3, 4] and ports["name"][0] == "net_memif0" and len(ports["rx_packets"]) == 5
    assert job["id"] == 1 and job["row_shift"] == 2 and job["lcores"] == 2
    assert job["ps_ip"] == "10.2.2.100" and job["worker_table_port"] == [1, 2]
    assert jobs["id"] == [1, 2] and jobs["max_width"] == [32, 16]
    assert dump["aggregator"] == [4, 5] and dump["cells_lane00_v0"] == [0, 0]
    assert {"ip": ["10.2.2.7", "10.2.2.100"], "port": [3, 0]} == routes
    assert bad_param is None  # parameters are numbers only
    assert no_job == "error: no job 9"
    assert {"/agq/counters", "/agq/ports", "/agq/jobs", "/agq/job", "/agq/dump", "/agq/captures"} <= set(listing)
