"""conf/rack.toml, the example of docs/DEPLOY.md, starts the real agq-switch
on as many virtual ports as it names (net_null, no NIC): the banner says what
the guide tells an operator to check (pipeline, lcores, every port's queues
and steering, the shaped host links, the uplink without a [[port]], which
lcore polls what), the job endpoint answers `job get 1` over TCP with the
file's job, and a port missing is refused with the line that names it."""
import json
import re

from harness import SOURCE_DIR, accepting, agqctl, binary, eal_args, run, unique_prefix, wait_for

CONF = SOURCE_DIR / "conf/rack.toml"
N_PORTS = 6  # PS 0, workers 1..4, uplink 5


def vdevs(n):
    return [f"net_null{i}" for i in range(n)]


def test_rack_example_starts_and_its_banner_says_what_docs_deploy_checks(tmp_path, procs):
    ctl = tmp_path / "ctl.sock"
    sw = procs.start("switch", [binary("agq-switch"), *eal_args(unique_prefix("rack"), "0,1", vdevs(N_PORTS), 512),
                                "--", "--config", CONF, "--ctl-socket", ctl, "--job-listen", "127.0.0.1:0",
                                "--idle-sleep-us", "200"])
    wait_for(lambda: accepting(ctl) or not sw.alive(), 30, what="switch up")
    wait_for(lambda: "lcore 1 polls" in sw.output() or not sw.alive(), 10, what="banner")
    assert sw.alive(), sw.output()
    out = sw.output()
    assert re.search(r"pipeline agq, config \S*conf/rack.toml, control socket \S+, 2 lcores, boot epoch \d+", out), out
    for p in range(5):
        assert re.search(rf"  port {p}: net_null{p} \(net_null\), 2 rx / 2 tx queues, steering (rss|rte_flow), "
                         rf"egress 10000 Mbit/s, queue 1000 packets, ECN above 65 packets, tx by lcore index \d", out), out
    assert re.search(r"  port 5: net_null5 \(net_null\), 2 rx / 2 tx queues, steering (rss|rte_flow)\n", out), out
    # Every rx queue has one poller: lcore index q polls queue q of every port.
    for q in (0, 1):
        assert re.search(r"  lcore \d+ polls: " + " ".join(f"port {p}/q{q}" for p in range(N_PORTS)) + "\n", out), out
    # 4 workers in 256 rows: no warning that slots share rows.
    assert "warning" not in out, out

    m = re.search(r"job endpoint \(read-only: job get ID --json\) on tcp:(127\.0\.0\.1:\d+)", out)
    assert m, out
    r = agqctl(f"tcp:{m.group(1)}", "job", "get", "1", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    job = json.loads(r.stdout)
    text = json.dumps(job)
    assert "10.3.0.100" in text and all(f"10.3.0.{i}" in text for i in range(1, 5)), text
    assert sw.stop() == 0, sw.output()


def test_rack_example_with_a_port_missing_names_the_line(tmp_path):
    r = run([binary("agq-switch"), *eal_args(unique_prefix("rack"), "0", vdevs(N_PORTS - 1), 512),
             "--", "--config", CONF, "--ctl-socket", tmp_path / "ctl.sock"], timeout=30)
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(r"conf/rack.toml:\d+: \S+: port 5 does not exist \(5 ports: 0..4\)", r.stderr), r.stderr
