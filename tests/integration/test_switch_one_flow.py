"""The dataplane's fused path (a leading run of an rx burst whose frames
are equal in their first 44 bytes -- but for the IPv4 identification and
checksums, which a real flow changes per packet -- is decided once by the program and sent
as one tx batch: SwitchDataplane::ingest, Program::process_run), end to end
through the real agq-switch binary: pcap rx ports whose files are read 32
frames per rx burst, so the test lays the bursts out itself -- bursts of
one flow, one flow except the last frame, an unknown destination (flood), a
MAC move mid-burst, a destination behind the ingress port, frames shorter
than the 44 compared bytes (never a run), a real sender's flow (IPv4 ID and
checksums changing: one run), the same bytes changing in a non-IPv4 frame
(no run) -- and every
output port's frames are checked byte for byte, in order, against the
test's own model of a learning switch run burst by burst in the switch's
poll order; the counters (unicast, flooded, moved, same-port drops, and
dp.run_packets: how many frames took the fused path) must match too.
A full tx ring (drops counted) on the fused path is test_switch_tx_full.py's
(bench_gen's l2 traffic is one flow).
"""
import struct

from scapy.layers.l2 import Ether
from scapy.utils import rdpcap, wrpcap

from harness import agqctl, binary, counters, eal_args, unique_prefix, wait_for

N_PORTS = 4
BURST = 32  # the switch's rx burst (--burst), = pcap frames per rx call

CONFIG = """
[switch]
pipeline = "classic"
[classic]
ps_port = 2
worker_ports = [3]
[l2]
learning = true
[[mac]]
mac = "02:00:00:00:00:02"
port = 2
[[mac]]
mac = "02:00:00:00:00:03"
port = 3
"""
STATIC = {bytes.fromhex("020000000002"): 2, bytes.fromhex("020000000003"): 3}


def mac(last: int) -> bytes:
    return bytes((2, 0, 0, 0, 0, last))


def ip_checksum(header: bytes) -> int:
    s = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(src: int, dst: int, size: int = 115, ident: int = 1, udp_csum: int = 0, fill: int = 0) -> bytes:
    """Eth + IPv4 (valid header checksum) + UDP to port 9000 (ordinary
    traffic), `size` bytes."""
    payload = bytes(2) + bytes([fill]) * (size - 44)  # `fill` past the 44-byte run key
    fields = [0x45, 0, 28 + len(payload), ident, 0, 64, 17, 0, bytes((10, 0, 0, src)), bytes((10, 0, 0, dst))]
    fields[7] = ip_checksum(struct.pack("!BBHHHBBH4s4s", *fields))
    ip = struct.pack("!BBHHHBBH4s4s", *fields)
    udp = struct.pack("!HHHH", 1234, 9000, 8 + len(payload), udp_csum)
    return mac(dst) + mac(src) + b"\x08\x00" + ip + udp + payload


def model(rounds):
    """A learning switch, burst by burst in poll order: (frames per output
    port, counters)."""
    table = dict(STATIC)
    out = {p: [] for p in range(N_PORTS)}
    c = {"fwd_l2_unicast": 0, "fwd_flooded": 0, "fwd_moved": 0, "drops_l2_same_port": 0}
    for bursts in rounds:
        for port, frames in bursts:
            for f in frames:
                dst, src = f[:6], f[6:12]
                if src in table and table[src] != port and src not in STATIC:
                    c["fwd_moved"] += 1
                if src not in STATIC:
                    table[src] = port
                if dst[0] & 1 or dst not in table:
                    c["fwd_flooded"] += 1
                    for p in range(N_PORTS):
                        if p != port:
                            out[p].append(f)
                elif table[dst] == port:
                    c["drops_l2_same_port"] += 1
                else:
                    c["fwd_l2_unicast"] += 1
                    out[table[dst]].append(f)
    return out, c


def settle(sw, sock, ready, what):
    """Waits until the switch's counters satisfy `ready` (failing at once if
    the switch exits) and returns them."""
    def done():
        if not sw.alive():
            raise AssertionError("switch exited:\n" + sw.output())
        if not sock.exists() or agqctl(sock, "ports").returncode != 0:
            return False
        return ready(counters(sock))

    try:
        wait_for(done, 30, what=what)
    finally:
        c = counters(sock) if sock.exists() else {}
    return c


def test_fused_runs_match_the_learning_switch_model(tmp_path, procs):
    S0, S1, D2, D3, DU = 0x10, 0x11, 0x02, 0x03, 0x77
    b1 = [frame(S0, D2)] * BURST                                   # one flow
    b2 = [frame(S0, D2)] * (BURST - 1) + [frame(S0, D3)]           # one flow except the last frame
    b3 = [frame(S0, DU)] * BURST                                   # unknown destination: flood
    b4 = [frame(S0, S1)] * 16 + [frame(S1, D2)] * 16               # S1 (learned on port 1) moves to port 0
    b5 = [frame(S0, S1)] * BURST                                   # S1 behind the ingress port: dropped
    b6 = [frame(S0, D3)] * 20 + [frame(S0, D2, 116)] * 12          # a run, then another length
    short = mac(D2) + mac(S0) + b"\x88\xb5" + bytes(26)             # 40 bytes: shorter than the run key
    b7 = [short] * BURST                                           # no run: frame by frame
    # A real sender's flow: the IPv4 identification, header checksum and UDP
    # checksum change per packet (bytes the run key leaves free): one run.
    b8 = [frame(S0, D2, ident=0x1000 + i, udp_csum=0x2000 + 7 * i, fill=i) for i in range(BURST)]
    # The same bytes changing in a frame that is not untagged IPv4 are
    # compared: no run (each frame differs from the previous at byte 18).
    other = [mac(D2) + mac(S0) + b"\x88\xb5" + bytes(4) + bytes((i, i)) + bytes(60) for i in range(BURST)]
    b9 = other
    p1 = [frame(S1, S0)] * 8                                       # port 1: S1 learned there, to S0 on port 0
    port0 = [b1, b2, b3, b4, b5, b6, b7, b8, b9]
    # Poll order: each round reads port 0's next burst, then port 1's.
    rounds = [[(0, b1), (1, p1)]] + [[(0, b)] for b in port0[1:]]
    runs = 32 + 8 + 31 + 32 + 16 + 32 + 20 + 32  # leading runs of >= 8 equal frames

    wrpcap(str(tmp_path / "in0.pcap"), [Ether(f) for b in port0 for f in b])
    wrpcap(str(tmp_path / "in1.pcap"), [Ether(f) for f in p1])
    (tmp_path / "sw.toml").write_text(CONFIG)
    sock = tmp_path / "ctl.sock"
    vdevs = [f"net_pcap{p},rx_pcap={tmp_path}/in{p}.pcap,tx_pcap={tmp_path}/out{p}.pcap" for p in (0, 1)]
    vdevs += [f"net_pcap{p},tx_pcap={tmp_path}/out{p}.pcap" for p in (2, 3)]
    sw = procs.start("switch", [binary("agq-switch"), *eal_args(unique_prefix("run"), "0", vdevs), "--",
                                "--config", tmp_path / "sw.toml", "--ctl-socket", sock, "--idle-sleep-us", "50",
                                "--burst", str(BURST)])
    total = sum(len(b) for b in port0) + len(p1)
    expected, want = model(rounds)

    c = settle(sw, sock, lambda c: c.get("dp.rx") == total and c.get("fwd_l2_unicast") == want["fwd_l2_unicast"],
               "every frame received and forwarded")
    for name, v in want.items():
        assert c[name] == v, (name, c)
    assert c["dp.run_packets"] == runs, c
    assert c["dp.program_drops"] == want["drops_l2_same_port"], c
    assert c["dp.tx_dropped"] == 0, c
    assert sw.stop() == 0, sw.output()

    for p in range(N_PORTS):
        got = [bytes(pkt) for pkt in rdpcap(str(tmp_path / f"out{p}.pcap"))]
        exp = expected[p]
        assert len(got) == len(exp), f"port {p}: {len(got)} frames, model says {len(exp)}"
        for i, (g, e) in enumerate(zip(got, exp)):
            assert g == e, f"port {p} frame {i}:\n got {g.hex()}\n exp {e.hex()}"


def test_fused_runs_on_two_lcores(tmp_path, procs):
    """Two lcores (-l 0,1), port 0 with an rx queue per lcore: runs of
    ordinary frames take the fused path on both lcores (a run the program
    accepts has no shard, so it stays on the lcore that received it), and
    every frame leaves where a learning switch sends it, in each sender's
    order (each queue has its own sender; between lcores the order is free).
    Ports 2 and 3 have one tx queue: one lcore's batches reach it through
    the owner's tx hand-off ring."""
    S0, S1, D2, D3, DU = 0x10, 0x12, 0x02, 0x03, 0x77
    q0 = ([frame(S0, D2)] * BURST                                                 # one flow
          + [frame(S0, D2, ident=0x100 + i, fill=i) for i in range(BURST)]        # a real sender's flow
          + [frame(S0, DU)] * BURST)                                              # unknown: flood
    q1 = ([frame(S1, D3)] * BURST * 2                                             # two bursts of one flow
          + [frame(S1, D3)] * 16 + [frame(S1, D2)] * 16)                          # a run of 16, then per packet
    runs = 3 * BURST + 2 * BURST + 16
    for q, frames in enumerate((q0, q1)):
        wrpcap(str(tmp_path / f"in0_q{q}.pcap"), [Ether(f) for f in frames])
    (tmp_path / "sw.toml").write_text(CONFIG)
    sock = tmp_path / "ctl.sock"
    vdevs = [f"net_pcap0,rx_pcap={tmp_path}/in0_q0.pcap,rx_pcap={tmp_path}/in0_q1.pcap,tx_pcap={tmp_path}/out0.pcap"]
    vdevs += [f"net_pcap{p},tx_pcap={tmp_path}/out{p}.pcap" for p in (1, 2, 3)]
    sw = procs.start("switch", [binary("agq-switch"), *eal_args(unique_prefix("run2"), "0,1", vdevs), "--",
                                "--config", tmp_path / "sw.toml", "--ctl-socket", sock, "--idle-sleep-us", "50",
                                "--burst", str(BURST)])
    total = len(q0) + len(q1)
    expected = {0: [], 1: [], 2: [], 3: []}
    for f in q0 + q1:
        dst = f[:6]
        if dst in STATIC:
            expected[STATIC[dst]].append(f)
        else:
            for p in (1, 2, 3):
                expected[p].append(f)

    out = sum(len(v) for v in expected.values())
    c = settle(sw, sock, lambda c: c.get("dp.rx") == total and c.get("dp.tx", 0) + c.get("dp.tx_dropped", 0) >= out,
               "every frame received and sent")
    assert "2 lcores" in sw.output(), sw.output()
    assert c["dp.run_packets"] == runs, c
    assert c["dp.tx_dropped"] == 0 and c["dp.handoff"] == 0, c
    assert c["fwd_l2_unicast"] == len(q0) - BURST + len(q1) and c["fwd_flooded"] == BURST, c
    assert sw.stop() == 0, sw.output()
    for p in range(N_PORTS):
        got = [bytes(pkt) for pkt in rdpcap(str(tmp_path / f"out{p}.pcap"))]
        assert sorted(got) == sorted(expected[p]), f"port {p}: {len(got)} frames, model says {len(expected[p])}"
        for src in (S0, S1):  # each sender's frames in its order
            assert [f for f in got if f[6:12] == mac(src)] == [f for f in expected[p] if f[6:12] == mac(src)], \
                f"port {p}: frames of sender {src:#x} out of order"
