"""The real agq-switch binary, packets in through a pcap port, packets out
through pcap ports, checked byte for byte against the test's own model of
the classic pipeline (tests/pkt/classic_model.py) and of ordinary
forwarding. Nothing here is copied from the switch's output.

Ports: 0 = where every test packet enters (rx pcap); 1 = PS; 2, 3 = workers.
"""
import random
import struct

import pytest

from scapy.utils import rdpcap, wrpcap
from scapy.layers.l2 import Ether

from classic_model import AGQ_LEN, AgqHeader, ClassicModel
from harness import unique_prefix, agqctl, binary, counters, eal_args, wait_for

PS, WORKERS, N_PORTS = 1, [2, 3], 4
ROUTED_IP, ROUTED_PORT = "10.9.9.9", 3
SRC_MAC = bytes.fromhex("020000000001")
DST_MAC = bytes.fromhex("020000000010")

CONFIG = f"""
[switch]
pipeline = "classic"
[classic]
ps_port = {PS}
worker_ports = {WORKERS}
[l2]
learning = true
ageing_s = 300
[[route]]
ip = "{ROUTED_IP}"
port = {ROUTED_PORT}
"""


def ip_checksum(h: bytes) -> int:
    s = sum(struct.unpack("!10H", h))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def udp_frame(payload: bytes, dst_ip=(10, 2, 2, 3), dport=50000, vlan=None) -> bytes:
    eth = DST_MAC + SRC_MAC
    eth += (struct.pack("!HHH", 0x8100, vlan, 0x0800) if vlan is not None else struct.pack("!H", 0x0800))
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 8 + len(payload), 1, 0, 64, 17, 0,
                     bytes((10, 2, 2, 1)), bytes(dst_ip))
    ip = ip[:10] + struct.pack("!H", ip_checksum(ip)) + ip[12:]
    udp = struct.pack("!HHHH", 50000, dport, 8 + len(payload), 0)
    return eth + ip + udp + payload


def agq_frame(h: AgqHeader, vlan=None) -> bytes:
    return udp_frame(h.pack(), vlan=vlan)


def random_traffic(rng: random.Random, n: int):
    """AGQ packets over few aggregators so sequences share cells, collide,
    get ACKed (isACK 1 and 2) and reuse slots: every quirk path is taken."""
    live = {}
    out = []
    for _ in range(n):
        a = rng.choice([5, 6, 4000])
        h = a * 8 + rng.randrange(8)
        r = rng.random()
        jas = live.get(h) or rng.randrange(1, 6)
        if r < 0.7:
            live[h] = jas
            big = rng.random() < 0.3  # values near 2^32 make carries spill into neighbours
            data = [rng.randrange(1 << 32) if big else rng.randrange(1 << 20) << rng.randrange(12)
                    for _ in range(16)]
            hdr = AgqHeader(jas, rng.randrange(4), rng.choice([1, 2, 3]), data, 0, h, a, h & 7)
        else:
            live.pop(h, None)
            hdr = AgqHeader(jas, 0, 2, [rng.randrange(1 << 32) for _ in range(16)],
                            rng.choice([1, 1, 1, 2]), h, a, h & 7)
        out.append(hdr)
    return out


def owner_lcore(frame: bytes, lcores: int) -> int:
    """The lcore that processes a frame entering on port 0: a classic AGQ
    frame's shard is its aggregator, hash1 & 0xFFF (docs/PROTOCOL.md
    section 10), owned by lcore shard mod L; anything else stays on the
    lcore that polls port 0 (lcore 0)."""
    off, et = 14, frame[12:14]
    if et == b"\x81\x00":
        off, et = 18, frame[16:18]
    if et != b"\x08\x00" or len(frame) < off + 28 + AGQ_LEN or frame[off + 9] != 17:
        return 0
    if int.from_bytes(frame[off + 22:off + 24], "big") not in (50000, 50001):
        return 0
    hash1 = int.from_bytes(frame[off + 28 + 71:off + 28 + 73], "big") >> 3
    return (hash1 & 0xFFF) % lcores


def expected_outputs(inputs):
    """(frames per output port, number of AGQ drops) from the model."""
    model = ClassicModel(PS, WORKERS)
    per_port = {p: [] for p in range(N_PORTS)}
    for kind, frame in inputs:
        if kind == "agq":
            off = len(frame) - AGQ_LEN
            verdict, out = model.process(AgqHeader.unpack(frame[off:]))
            new = frame[:off] + out.pack()
            if verdict == "ps":
                per_port[PS].append(new)
            elif verdict == "workers":
                for w in WORKERS:
                    per_port[w].append(new)
        elif kind == "routed":
            per_port[ROUTED_PORT].append(frame)
        elif kind == "flood":
            for p in range(1, N_PORTS):
                per_port[p].append(frame)
        # "drop": nothing leaves
    return per_port


def build_inputs():
    rng = random.Random(2026)
    inputs = []
    # The worked example of the reference (§3.5): two contributions, p = 0, L = 32.
    d = [0x0000F0C0, 0x0146F43C, 0x0015B4C9, 0x00DCEEE3] + list(range(12))
    for w in range(2):
        inputs.append(("agq", agq_frame(AgqHeader(1, w, 2, list(d), 0, 300, 37, 4))))
    inputs.append(("agq", agq_frame(AgqHeader(1, 0, 2, list(d), 1, 300, 37, 4))))  # ACK
    # VLAN-tagged AGQ, second AGQ port number.
    inputs.append(("agq", agq_frame(AgqHeader(7, 0, 1, list(d), 0, 16, 2, 0), vlan=42)))
    inputs.append(("agq", udp_frame(AgqHeader(8, 0, 1, list(d), 0, 17, 2, 1).pack(), dport=50001)))
    # Ordinary traffic: a routed UDP packet, a broadcast, a truncated AGQ packet (parser error).
    inputs.append(("routed", udp_frame(b"hello" * 10, dst_ip=(10, 9, 9, 9), dport=9000)))
    bcast = b"\xff" * 6 + SRC_MAC + b"\x88\xb5" + bytes(50)
    inputs.append(("flood", bcast))
    inputs.append(("drop", udp_frame(bytes(20))))
    inputs += [("agq", agq_frame(h)) for h in random_traffic(rng, 400)]
    return inputs


# "0,1": one rx queue, the other lcore's shards cross through its hand-off
# ring; "0,1 steered": an rx queue per lcore holding only its shards (as
# rte_flow on the UDP source port steers them).
@pytest.mark.parametrize("lcores", ["0", "0,1", "0,1 steered"])
def test_classic_switch_matches_model_byte_for_byte(tmp_path, procs, lcores):
    inputs = build_inputs()
    steered = lcores.endswith(" steered")
    lcores = lcores.split()[0]
    if steered:
        for q in (0, 1):
            wrpcap(str(tmp_path / f"in_q{q}.pcap"), [Ether(f) for _, f in inputs if owner_lcore(f, 2) == q])
        rx = f"rx_pcap={tmp_path}/in_q0.pcap,rx_pcap={tmp_path}/in_q1.pcap"
    else:
        wrpcap(str(tmp_path / "in.pcap"), [Ether(f) for _, f in inputs])
        rx = f"rx_pcap={tmp_path}/in.pcap"
    (tmp_path / "classic.toml").write_text(CONFIG)
    sock = tmp_path / "ctl.sock"
    vdevs = [f"net_pcap0,{rx},tx_pcap={tmp_path}/out0.pcap"]
    vdevs += [f"net_pcap{p},tx_pcap={tmp_path}/out{p}.pcap" for p in range(1, N_PORTS)]
    sw = procs.start("switch", [binary("agq-switch"), *eal_args(unique_prefix("pcap"), lcores, vdevs), "--",
                                "--config", tmp_path / "classic.toml", "--ctl-socket", sock,
                                "--idle-sleep-us", "50"])

    def all_received():
        if not sw.alive():
            raise AssertionError("switch exited:\n" + sw.output())
        r = agqctl(sock, "ports") if sock.exists() else None
        if r is None or r.returncode != 0:
            return False
        row = next((l.split() for l in r.stdout.splitlines() if l.split()[:1] == ["0"]), None)
        return row is not None and str(len(inputs)) in row

    wait_for(all_received, 30, what="switch to receive every packet on port 0")
    expected = expected_outputs(inputs)
    completions = len(expected[PS]) - 1  # the PS port also got the flooded broadcast
    # rx is counted before the pipeline runs: wait for the last packet's effect.
    try:
        wait_for(lambda: counters(sock)["completions"] == completions, 10, what="completions")
    finally:
        c = counters(sock)
    assert c["completions"] == completions, c
    assert c["drops_parser_error"] == 1
    assert c["fwd_routed"] == 1 and c["fwd_flooded"] == 1
    assert sw.stop() == 0, sw.output()

    n_lcores = len(lcores.split(","))
    for p in range(N_PORTS):
        got = [bytes(pkt) for pkt in rdpcap(str(tmp_path / f"out{p}.pcap"))]
        exp = expected[p]
        assert len(got) == len(exp), f"port {p}: {len(got)} frames, model says {len(exp)}"
        # Each lcore keeps arrival order; between lcores the order is free.
        for k in range(n_lcores):
            g_k = [f for f in got if owner_lcore(f, n_lcores) == k]
            e_k = [f for f in exp if owner_lcore(f, n_lcores) == k]
            assert len(g_k) == len(e_k), f"port {p}, lcore {k}: {len(g_k)} frames, model says {len(e_k)}"
            for i, (g, e) in enumerate(zip(g_k, e_k)):
                assert g == e, f"port {p} lcore {k} frame {i}:\n got {g.hex()}\n exp {e.hex()}"
    if n_lcores > 1:
        # Both lcores aggregated (aggregators 5 and 6 are shards 1 and 0):
        # steered, every packet arrived on its owner's queue.
        assert (c["dp.handoff"] == 0) if steered else (c["dp.handoff"] > 0), c
    # The worked example: PS got exactly 2x the values in data0..3.
    first = expected[PS][0]
    agq = AgqHeader.unpack(first[-AGQ_LEN:])
    assert agq.data[:4] == [0x0001E180, 0x028DE878, 0x002B6992, 0x01B9DDC6]
