"""The rack rig (rack.py) with ordinary kernel traffic: two hosts, each a
network namespace behind a kernel-facing DPDK port of agq-switch, ping and
move 4 MB over TCP through the switch; the bytes are checked on the far
side. ARP is answered by the switch's ARP proxy (the rig's host table)."""
import hashlib

import pytest

from harness import counters, wait_for
from rack import Rack, leftovers

PY = "/usr/bin/python3"
SERVER = r"""
import hashlib, socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5201)); s.listen(1); s.settimeout(20)
print("listening", flush=True)
c, _ = s.accept(); c.settimeout(20); h = hashlib.sha256(); n = 0
while True:
    b = c.recv(1 << 16)
    if not b: break
    h.update(b); n += len(b)
print(n, h.hexdigest(), flush=True)
"""
CLIENT = r"""
import socket, sys
data = bytes(range(256)) * (int(sys.argv[2]) // 256)
s = socket.create_connection((sys.argv[1], 5201), timeout=20); s.sendall(data); s.close()
"""
SIZE = 4 << 20


@pytest.mark.parametrize("driver", ["auto", "af_packet"])
def test_ping_and_tcp_between_two_hosts(tmp_path, driver):
    with Rack(2, tmp_path, driver=driver) as rack:
        a, b = rack.hosts
        sw = rack.start_switch()
        # auto: net_af_xdp on the switch's ends (agq-switch links it), af_packet when asked.
        assert rack.driver == ("af_xdp" if driver == "auto" else "af_packet"), sw.output()
        assert f"(net_{rack.driver})" in sw.output(), sw.output()
        r = a.run(["ping", "-c", "3", "-i", "0.2", "-W", "2", b.ip])
        assert r.returncode == 0, r.stdout + r.stderr + sw.output()
        # The switch answered the ARP request itself (ARP proxy), no flooding needed.
        neigh = a.run(["ip", "neigh", "show", b.ip]).stdout
        assert b.mac in neigh.lower(), neigh
        c = counters(rack.ctl)
        assert c["fwd_arp_answered"] >= 1, c

        srv = rack.start("tcp-server", [PY, "-c", SERVER, b.ip], host=b)
        wait_for(lambda: "listening" in srv.output() or not srv.alive(), 10, what="TCP server")
        r = a.run([PY, "-c", CLIENT, b.ip, SIZE], timeout=40)
        assert r.returncode == 0, r.stdout + r.stderr
        assert srv.wait(30) == 0, srv.output()
        want = hashlib.sha256(bytes(range(256)) * (SIZE // 256)).hexdigest()
        assert srv.output().split()[-2:] == [str(SIZE), want], srv.output()
        c = counters(rack.ctl)
        # Every segment crossed the switch: >= SIZE / 1500 frames forwarded.
        assert c["fwd_l2_unicast"] + c.get("fwd_routed", 0) >= SIZE // 1500, c
        assert sw.alive(), sw.output()
        tag = rack.tag
    assert leftovers(tag) == []
