"""A port with a rate ([[port]] rate/queue/ecn_threshold), through the real
agq-switch on pcap ports: a flood (net_pcap infinite_rx, millions of
frames per second) to a port shaped at 50 Mbit/s leaves at about that rate,
the queue never holds more than its limit and drops and counts the excess,
ECT frames leave CE (checksum valid) while Not-ECT ones are left alone and
counted, and meanwhile another port's traffic gets through whole and the
control socket answers. With one lcore and with two (the shaped port's tx
then belongs to lcore 1 and the flood arrives on lcore 0: every frame
crosses the tx hand-off).

The rate is asserted in a generous band (+-30 %, over 2 s): the test checks
the shaper's arithmetic end to end, not this machine's speed.

Ports: 0 = the flood in; 1 = shaped out; 2 = a side stream in; 3 = its way out.
"""
import json
import struct
import time

import pytest

from harness import agqctl, binary, eal_args, unique_prefix, wait_for, accepting

RATE = 50_000_000
OVERHEAD = 24  # the default: preamble, SFD, FCS, inter-frame gap
# 512 frames = 84 ms of the link: with 2 lcores the flood reaches the queue
# from the other lcore, and on a loaded 2-vCPU machine that one can be off
# its CPU for tens of ms; a queue that covers it keeps the link busy.
QUEUE, K = 512, 16
FLOOD_LEN, SIDE_LEN, SIDE_N = 1000, 200, 500  # the side stream fits the tx hand-off ring (1024)
MAC_A = bytes.fromhex("020000000a0a")
MAC_B = bytes.fromhex("020000000b0b")
SRC = bytes.fromhex("020000000001")

CONFIG = f"""
[switch]
pipeline = "agq"
[l2]
learning = false
[[mac]]
mac = "02:00:00:00:0a:0a"
port = 1
[[mac]]
mac = "02:00:00:00:0b:0b"
port = 3
[[port]]
id = 1
rate = "50mbit"
queue = {QUEUE}
ecn_threshold = {K}
"""


def ip_checksum(h: bytes) -> int:
    s = sum(struct.unpack("!10H", h[:20]))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(dst: bytes, length: int, tos: int, ident: int) -> bytes:
    payload = bytes(length - 14 - 28)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, tos, 28 + len(payload), ident, 0, 64, 17, 0,
                     bytes((10, 0, 0, 1)), bytes((10, 0, 0, 2)))
    ip = ip[:10] + struct.pack("!H", ip_checksum(ip)) + ip[12:]
    udp = struct.pack("!HHHH", 40000, 9000, 8 + len(payload), 0)
    return dst + SRC + b"\x08\x00" + ip + udp + payload


def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", 1, i, len(fr), len(fr)))
            f.write(fr)


def read_pcap(path):
    """[(time in s, frame bytes)], microsecond or nanosecond pcap."""
    data = path.read_bytes()
    magic = struct.unpack("<I", data[:4])[0]
    assert magic in (0xA1B2C3D4, 0xA1B23C4D), hex(magic)
    div = 1e6 if magic == 0xA1B2C3D4 else 1e9
    out, at = [], 24
    while at + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack("<IIII", data[at:at + 16])
        at += 16
        out.append((sec + frac / div, data[at:at + incl]))
        at += incl
    return out


def counters_json(ctl):
    r = agqctl(ctl, "counters", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def queue_row(ctl, port):
    r = agqctl(ctl, "queues", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [q for q in json.loads(r.stdout) if q["port"] == port]
    assert len(rows) == 1, r.stdout
    return rows[0]


@pytest.mark.parametrize("lcores", ["0", "0,1"])
def test_shaped_port_delivers_its_rate_drops_the_excess_and_marks_ect(tmp_path, procs, lcores):
    flood = [frame(MAC_A, FLOOD_LEN, 0x02 if i % 2 == 0 else 0x00, i) for i in range(128)]
    side = [frame(MAC_B, SIDE_LEN, 0, i) for i in range(SIDE_N)]
    write_pcap(tmp_path / "flood.pcap", flood)
    write_pcap(tmp_path / "side.pcap", side)
    cfg = tmp_path / "sw.toml"
    cfg.write_text(CONFIG)
    ctl = tmp_path / "ctl.sock"
    vdevs = [f"net_pcap0,rx_pcap={tmp_path}/flood.pcap,infinite_rx=1,tx_pcap={tmp_path}/out0.pcap",
             f"net_pcap1,tx_pcap={tmp_path}/out1.pcap",
             f"net_pcap2,rx_pcap={tmp_path}/side.pcap,tx_pcap={tmp_path}/out2.pcap",
             f"net_pcap3,tx_pcap={tmp_path}/out3.pcap"]
    sw = procs.start("switch", [binary("agq-switch"), *eal_args(unique_prefix("rate"), lcores, vdevs, mem_mb=512),
                                "--", "--config", cfg, "--ctl-socket", ctl])
    wait_for(lambda: accepting(ctl) or not sw.alive(), 30, what="switch up")
    assert sw.alive(), sw.output()
    out = sw.output()
    assert f"egress 50 Mbit/s, queue {QUEUE} packets, ECN above {K} packets" in out, out

    time.sleep(0.5)  # the flood fills the queue; the bucket's first burst goes
    c0 = counters_json(ctl)
    q0, t0, w0 = queue_row(ctl, 1), time.monotonic(), time.time()
    time.sleep(2.0)
    q1, t1, w1 = queue_row(ctl, 1), time.monotonic(), time.time()
    c1 = counters_json(ctl)
    # Frame bytes per second: the link carries RATE bit/s of frame + overhead.
    want = RATE / 8 * FLOOD_LEN / (FLOOD_LEN + OVERHEAD)
    got = (q1["dequeued_bytes"] - q0["dequeued_bytes"]) / (t1 - t0)
    moved = {k: c1[k] - c0[k] for k in ("dp.rx", "dp.tx", "dp.busy_rounds", "dp.idle_sleeps", "dp.tx_dropped")}
    assert 0.7 * want < got < 1.3 * want, (got, want, q0, q1, moved, t1 - t0)

    # The flood is far above the rate: the queue stays full, drops, marks.
    assert q1["dropped_packets"] > 10 * q1["dequeued_packets"], q1
    assert q1["dropped_bytes"] == q1["dropped_packets"] * FLOOD_LEN, q1
    assert K <= q1["max_depth_packets"] <= QUEUE, q1
    assert q1["depth_packets"] <= QUEUE and q1["depth_bytes"] == q1["depth_packets"] * FLOOD_LEN, q1
    assert q1["enqueued_packets"] >= q1["dequeued_packets"] + 0, q1
    assert q1["ecn_marked"] > 0 and q1["ecn_not_ect"] > 0, q1
    assert q1["rate_bps"] == RATE and q1["limit"] == QUEUE and q1["ecn_threshold"] == K, q1
    # The same numbers in 'counters' and 'ports' (the port's tx drops include the queue's).
    c = counters_json(ctl)
    assert c["dp.queue.1.dropped_packets"] >= q1["dropped_packets"], c
    assert c["dp.queue.1.ecn_marked"] >= q1["ecn_marked"], c
    r = agqctl(ctl, "ports", "--json")
    assert r.returncode == 0, r.stderr
    port1 = [p for p in json.loads(r.stdout) if p["port"] == 1][0]
    assert port1["tx_dropped"] >= q1["dropped_packets"], port1

    # agqctl top shows the queue.
    r = agqctl(ctl, "top", "--iterations", "1", "--interval", "0.5")
    assert r.returncode == 0 and "QUEUE" in r.stdout and "NOT-ECT/s" in r.stdout, r.stdout + r.stderr

    # The side stream went through whole while the flood ran.
    wait_for(lambda: json.loads(agqctl(ctl, "ports", "--json").stdout)[3]["tx_packets"] >= SIDE_N, 20,
             what="the side stream out of port 3")
    assert sw.stop() == 0, sw.output()

    sent = read_pcap(tmp_path / "out1.pcap")
    assert len(sent) > 1000, len(sent)
    # The departures themselves (net_pcap stamps each frame with the wall
    # clock as it writes it), over the same two seconds.
    window = [(t, f) for t, f in sent if w0 <= t <= w1]
    span = window[-1][0] - window[0][0]
    assert span > 1.5, (span, w0, w1, sent[0][0], sent[-1][0])
    rate_pcap = sum(len(f) for _, f in window[1:]) / span
    assert 0.7 * want < rate_pcap < 1.3 * want, (rate_pcap, want)

    ect = ce = 0
    for _, f in sent:
        assert len(f) == FLOOD_LEN and f[:6] == MAC_A
        ip = f[14:34]
        assert ip_checksum(ip[:10] + b"\0\0" + ip[12:]) == struct.unpack("!H", ip[10:12])[0], "IPv4 checksum"
        ident, tos = struct.unpack("!H", ip[4:6])[0], ip[1]
        original = flood[ident % len(flood)]
        assert f[34:] == original[34:] and ip[2:10] == original[16:24] and ip[12:] == original[26:34]
        if ident % 2 == 1:
            assert tos == 0x00, "Not-ECT frames are never marked"
        else:
            ect += 1
            assert tos in (0x02, 0x03)
            ce += tos == 0x03
    # Most ECT frames found the flooded queue above K (not all: the first
    # ones, and those after a catch-up that emptied it).
    assert ect > 0 and ce >= 0.5 * ect, (ce, ect)
    print(f"lcores {lcores}: {8 * got / 1e6:.2f} Mbit/s by the counters, {8 * rate_pcap / 1e6:.2f} by the pcap "
          f"(frame bits; want {8 * want / 1e6:.2f}); dropped {q1['dropped_packets']}, CE {ce} of {ect} ECT, "
          f"max depth {q1['max_depth_packets']}")

    got_side = read_pcap(tmp_path / "out3.pcap")
    assert [f for _, f in got_side] == side, "the unshaped port got the side stream whole, in order"


def test_a_bad_link_setting_names_the_file_line_and_field(tmp_path):
    from harness import run
    cases = [
        ("[[port]]\nid = 1\nrate = \"50mbps\"\n", ":6: port[0].rate:", "bits, not bytes"),
        ("[[port]]\nid = 1\nrate = \"1gbit\"\nqueue = 8\necn_threshold = 8\n", ":8: port[0].ecn_threshold:",
         "not below the queue"),
        ("[[port]]\nid = 5\nrate = \"1gbit\"\n", ":5: port[0].id: port 5 does not exist", "(2 ports: 0..1)"),
    ]
    for i, (section, where, what) in enumerate(cases):
        cfg = tmp_path / f"bad{i}.toml"
        cfg.write_text('[classic]\nps_port = 0\nworker_ports = [1]\n' + section)
        r = run([binary("agq-switch"), *eal_args(unique_prefix("ratecfg"), "0", ["net_null0", "net_null1"]),
                 "--", "--config", cfg, "--ctl-socket", tmp_path / f"c{i}.sock"], timeout=60)
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"{cfg}{where}" in r.stderr and what in r.stderr, r.stderr


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    import os
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_slow_link_paces_its_queue_and_its_lcore_sleeps_meanwhile(tmp_path, procs):
    """200 frames at once into a 1 Mbit/s port: they leave one per frame
    time (8.2 ms of 1000 + 24 bytes), none dropped, and while the queue
    waits for credit the lcore sleeps in its idle back-off (its sleeps end
    at the head's departure) instead of spinning."""
    n, rate = 200, 1_000_000
    write_pcap(tmp_path / "burst.pcap", [frame(MAC_A, FLOOD_LEN, 0x02, i) for i in range(n)])
    cfg = tmp_path / "sw.toml"
    cfg.write_text('[switch]\npipeline = "agq"\n[[mac]]\nmac = "02:00:00:00:0a:0a"\nport = 1\n'
                   f'[[port]]\nid = 1\nrate = "1mbit"\nqueue = {n + 50}\n')
    ctl = tmp_path / "ctl.sock"
    vdevs = [f"net_pcap0,rx_pcap={tmp_path}/burst.pcap,tx_pcap={tmp_path}/out0.pcap",
             f"net_pcap1,tx_pcap={tmp_path}/out1.pcap"]
    sw = procs.start("switch", [binary("agq-switch"), *eal_args(unique_prefix("slow"), "0", vdevs), "--",
                                "--config", cfg, "--ctl-socket", ctl])
    wait_for(lambda: accepting(ctl) or not sw.alive(), 30, what="switch up")
    assert sw.alive(), sw.output()
    wait_for(lambda: queue_row(ctl, 1)["enqueued_packets"] == n, 20, what="the burst in the queue")
    c0, cpu0, t0 = counters_json(ctl), cpu_seconds(sw.pid), time.monotonic()
    time.sleep(1.0)
    c1, cpu1, t1 = counters_json(ctl), cpu_seconds(sw.pid), time.monotonic()
    q = queue_row(ctl, 1)
    assert 0 < q["depth_packets"] < n, q
    assert c1["dp.idle_sleeps"] - c0["dp.idle_sleeps"] > 50, (c0["dp.idle_sleeps"], c1["dp.idle_sleeps"])
    # A spinning lcore would take a whole vCPU; a sleeping one a fraction.
    assert (cpu1 - cpu0) / (t1 - t0) < 0.5, (cpu1 - cpu0, t1 - t0)
    wait_for(lambda: queue_row(ctl, 1)["dequeued_packets"] == n, 20, what="the queue drained")
    q = queue_row(ctl, 1)
    assert q["dropped_packets"] == 0 and q["depth_packets"] == 0, q
    assert sw.stop() == 0, sw.output()
    sent = read_pcap(tmp_path / "out1.pcap")
    assert [struct.unpack("!H", f[18:20])[0] for _, f in sent] == list(range(n)), "all of them, in order"
    # The first frames go at once (the bucket's 3076 bytes); the rest one
    # frame time apart.
    frame_time = (FLOOD_LEN + OVERHEAD) * 8 / rate
    span = sent[-1][0] - sent[0][0]
    want = (n - 3) * frame_time
    assert 0.7 * want < span < 1.3 * want, (span, want)
    # (Not frame by frame: after a gap in the lcore's polls a backlogged
    # queue catches up, several frames at once.)
    gaps = sorted(b[0] - a[0] for a, b in zip(sent[3:], sent[4:]))
    print(f"1 Mbit/s: {n} frames over {span:.3f} s (want {want:.3f}), median gap {gaps[len(gaps) // 2] * 1e3:.2f} ms "
          f"(frame time {frame_time * 1e3:.2f}), {c1['dp.idle_sleeps'] - c0['dp.idle_sleeps']} idle sleeps and "
          f"{(cpu1 - cpu0) / (t1 - t0):.2f} vCPU while it waited")
