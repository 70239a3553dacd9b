"""The real agq-switch on pcap ports: a port's RESULT replicas and unicast
frames leave in the order their packets arrived, even though the dataplane
replicates a burst's RESULTs together (multicast_run: the run of multicast
decisions is sent before the next unicast one).

Job 1 has worker 0 on port 0 and worker 1 on port 1, its PS on port 2.
Port 0 receives worker 0's DATA for slots 0-2 (absorbed); port 1 then
receives, in one burst, worker 1's DATA for slot 0, an ordinary frame
routed to port 0, DATA slot 1, a broadcast (flooded: a multicast decision
the run does not take, pruned at port 1), another routed frame, DATA slot
2. Port 0 must send RESULT 0, frame 1, RESULT 1, the broadcast, frame 2,
RESULT 2 in that order -- the RESULTs byte for byte as PROTOCOL §4.7 says
(rewrite_frame), the other frames unchanged -- and port 2 the broadcast.
"""
import struct

from scapy.layers.l2 import Ether
from scapy.utils import rdpcap, wrpcap

from agq_proto import DATA, RESULT, AgqHeader, agq_frame, encode_value, expected_lane, guard_bits, rewrite_frame
from harness import binary, counters, eal_args, unique_prefix, wait_for

EPOCH = 0x0BD0
SWITCH_MAC, SWITCH_IP = "02:00:00:00:00:fe", "10.2.2.254"
WORKERS = [(0, "10.2.2.1", "02:00:00:00:01:01"), (1, "10.2.2.2", "02:00:00:00:01:02")]
ROUTED_IP = "10.9.9.9"
CONFIG = f"""
[switch]
pipeline = "agq"
epoch = {EPOCH}
[agq]
total_rows = 64
total_slots = 256
[[job]]
id = 1
workers = 2
slots = 8
rows = 8
delivery = "multicast"
ps_port = 2
ps_ip = "10.2.2.100"
ps_mac = "02:00:00:00:00:64"
max_width = 32
""" + "".join(f"""
[[job.worker]]
id = {i}
port = {port}
ip = "{ip}"
mac = "{mac}"
""" for i, (port, ip, mac) in enumerate(WORKERS)) + f"""
[[route]]
ip = "{ROUTED_IP}"
port = 0
"""


def routed_frame(k: int, dst_mac: str = "0200000000fe", dst_ip=(10, 9, 9, 9)) -> bytes:
    """An ordinary UDP frame from worker 1's side to ROUTED_IP (port 0);
    to ff:ff:ff:ff:ff:ff and an address without a route, a broadcast."""
    payload = bytes([k]) * 32
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 8 + len(payload), k, 0, 64, 17, 0,
                     bytes((10, 2, 2, 2)), bytes(dst_ip))
    s = sum(struct.unpack("!10H", ip))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    ip = ip[:10] + struct.pack("!H", ~s & 0xFFFF) + ip[12:]
    udp = struct.pack("!HHHH", 40000, 40000, 8 + len(payload), 0)
    return bytes.fromhex(dst_mac) + bytes.fromhex("020000000102") + b"\x08\x00" + ip + udp + payload


def test_replicas_and_unicast_leave_in_arrival_order(tmp_path, procs):
    n, width, g = 2, 16, guard_bits(2)
    data = {w: [] for w in range(n)}
    results = {w: [] for w in range(n)}
    for slot in range(3):
        us = [[encode_value((slot * 7 + w * 3 + k) % 100 - 50, width, n) for k in range(32)] for w in range(n)]
        hs = [AgqHeader(type=DATA, job_id=1, worker_id=w, num_workers=n, slot=slot, seq=slot, req_width=width,
                        width=width, exponent=-7, lanes=us[w]) for w in range(n)]  # min_width = R
        frames = [agq_frame(hs[w], WORKERS[w][2], SWITCH_MAC, WORKERS[w][1], SWITCH_IP) for w in range(n)]
        for w in range(n):
            data[w].append(frames[w])
        # 8 slots over 8 rows: each slot has a row of its own, so every
        # grant is the 16 bits asked for, at unit 0.
        lanes = [expected_lane([us[w][k] for w in range(n)], width, width) for k in range(32)]
        for w, (port, ip, mac) in enumerate(WORKERS):
            r = hs[n - 1].copy(type=RESULT, worker_id=w, width=width, pos=0, guard=g, lanes=lanes, epoch=EPOCH)
            results[w].append(rewrite_frame(frames[n - 1], r, dst_mac=mac, dst_ip=ip))
    routed = [routed_frame(1), routed_frame(2)]
    broadcast = routed_frame(3, "ffffffffffff", (10, 2, 2, 255))
    port1_in = [data[1][0], routed[0], data[1][1], broadcast, routed[1], data[1][2]]
    wrpcap(str(tmp_path / "in0.pcap"), [Ether(f) for f in data[0]])
    wrpcap(str(tmp_path / "in1.pcap"), [Ether(f) for f in port1_in])
    (tmp_path / "agq.toml").write_text(CONFIG)
    sock = tmp_path / "ctl.sock"
    vdevs = [f"net_pcap{p},rx_pcap={tmp_path}/in{p}.pcap,tx_pcap={tmp_path}/out{p}.pcap" for p in (0, 1)]
    vdevs.append(f"net_pcap2,tx_pcap={tmp_path}/out2.pcap")
    sw = procs.start("switch", [binary("agq-switch"), *eal_args(unique_prefix("order"), "0", vdevs), "--",
                                "--config", tmp_path / "agq.toml", "--ctl-socket", sock, "--idle-sleep-us", "50"])
    wait_for(lambda: sock.exists() or not sw.alive(), 30, what="control socket")
    assert sw.alive(), sw.output()
    wait_for(lambda: counters(sock).get("agq_results", 0) == 3, 10, what="three RESULTs")
    c = counters(sock)
    assert c["agq_absorbed"] == 3 and c["fwd_routed"] == 2 and c["fwd_flooded"] == 1, c
    assert sw.stop() == 0, sw.output()

    out0 = [bytes(p) for p in rdpcap(str(tmp_path / "out0.pcap"))]
    out1 = [bytes(p) for p in rdpcap(str(tmp_path / "out1.pcap"))]
    want0 = [results[0][0], routed[0], results[0][1], broadcast, routed[1], results[0][2]]
    assert len(out0) == len(want0), [AgqHeader.unpack(f[42:]).slot if len(f) > 100 else "routed" for f in out0]
    for i, (got, exp) in enumerate(zip(out0, want0)):
        assert got == exp, f"port 0 frame {i}:\n got {got.hex()}\n exp {exp.hex()}"
    assert out1 == results[1]
    assert [bytes(p) for p in rdpcap(str(tmp_path / "out2.pcap"))] == [broadcast]
