"""Ordinary switching with real kernel hosts: two network namespaces, each
behind a net_tap port of agq-switch, ping each other through the switch.
ARP is flooded (broadcast), the replies are learned, ICMP is L2-switched;
then with an ARP proxy entry the switch answers ARP itself."""
import subprocess
import uuid

import pytest

from harness import agqctl, binary, counters, eal_args, unique_prefix, wait_for

CONFIG = """
[switch]
pipeline = "classic"
[classic]
ps_port = 0
worker_ports = [1]
[l2]
learning = true
ageing_s = 300
"""


def sh(*args, check=True):
    return subprocess.run(list(args), capture_output=True, text=True, check=check)


@pytest.fixture
def namespaces():
    tag = uuid.uuid4().hex[:6]
    names = [f"agq{tag}a", f"agq{tag}b"]
    for n in names:
        sh("ip", "netns", "add", n)
    try:
        yield names
    finally:
        for n in names:
            sh("ip", "netns", "del", n, check=False)


def test_kernel_hosts_ping_through_the_switch(tmp_path, procs, namespaces):
    tag = namespaces[0][3:9]
    ifaces = [f"agt{tag}0", f"agt{tag}1"]
    (tmp_path / "c.toml").write_text(CONFIG)
    sock = tmp_path / "ctl.sock"
    vdevs = [f"net_tap{i},iface={ifaces[i]}" for i in range(2)]
    sw = procs.start("switch", [binary("agq-switch"), *eal_args(unique_prefix("tap"), "0", vdevs),
                                "--", "--config", tmp_path / "c.toml", "--ctl-socket", sock])
    wait_for(lambda: sock.exists() or not sw.alive(), 20, what="control socket")
    assert sw.alive(), sw.output()

    macs = []
    for i, (ns, ifc) in enumerate(zip(namespaces, ifaces)):
        sh("ip", "link", "set", ifc, "netns", ns)
        sh("ip", "-n", ns, "addr", "add", f"10.77.0.{i + 1}/24", "dev", ifc)
        sh("ip", "-n", ns, "link", "set", ifc, "up")
        macs.append(sh("ip", "netns", "exec", ns, "cat", f"/sys/class/net/{ifc}/address").stdout.strip())

    r = sh("ip", "netns", "exec", namespaces[0], "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.77.0.2",
           check=False)
    assert r.returncode == 0, r.stdout + r.stderr + sw.output()
    c = counters(sock)
    assert c["fwd_flooded"] >= 1       # the ARP request
    assert c["fwd_l2_unicast"] >= 5    # ARP reply + ICMP both ways
    learned = agqctl(sock, "mac", "list").stdout
    for mac in macs:
        assert mac.lower() in learned.lower(), learned

    # The switch answers ARP for a proxied address (no host owns 10.77.0.9).
    assert agqctl(sock, "arp", "add", "10.77.0.9", "02:aa:bb:cc:dd:09").returncode == 0
    # The kernel resolves it on the first ping (which itself gets no echo reply).
    sh("ip", "netns", "exec", namespaces[0], "ping", "-c", "1", "-W", "1", "10.77.0.9", check=False)
    neigh = sh("ip", "-n", namespaces[0], "neigh", "show", "10.77.0.9").stdout
    assert "02:aa:bb:cc:dd:09" in neigh, neigh
    assert counters(sock)["fwd_arp_answered"] >= 1
    assert sw.stop() == 0, sw.output()
