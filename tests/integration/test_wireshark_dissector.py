"""tools/wireshark/agq.lua under tshark (Debian package): the agq header of
docs/PROTOCOL.md (every field by its documented name, flags decoded, lane
list sized by n_lanes, epoch) and the classic header of docs/CLASSIC.md.
The classic frames are the real switch's output (pcap vdev ports, the
published program's worked example); the agq frames are ones this test
writes to cover every flag, both lane profiles and a truncated header. The
capture test (test_switch_capture.py) dissects what the switch itself sent.
"""
import shutil
import struct
import subprocess

import pytest
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from agq_proto import DATA, FALLBACK_DATA, RESULT, AgqHeader, agq_frame
from classic_model import AgqHeader as ClassicHeader
from harness import SOURCE_DIR, agqctl, binary, counters, eal_args, unique_prefix, wait_for

LUA = SOURCE_DIR / "tools/wireshark/agq.lua"
pytestmark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed (scripts/setup.sh)")


def tshark_fields(pcap, *fields, extra=()):
    argv = ["tshark", "-X", f"lua_script:{LUA}", "-r", str(pcap), "-T", "fields", "-E", "occurrence=a",
            *extra]
    for f in fields:
        argv += ["-e", f]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Lua: Error" not in r.stderr and "lua_script" not in r.stderr, r.stderr
    return [line.split("\t") for line in r.stdout.splitlines()]


def test_agq_fields_flags_and_lane_profiles(tmp_path):
    lanes32 = [0x80000000 | k for k in range(32)]
    lanes16 = [0x1000 + k for k in range(16)]
    frames = [
        agq_frame(AgqHeader(type=DATA, flags=0x07, job_id=513, worker_id=3, num_workers=4, slot=40000,
                            seq=0xDEADBEEF, req_width=12, width=8, exponent=-9, lanes=lanes32),  # min_width 8
                  "02:00:00:00:00:01", "02:00:00:00:00:fe", "10.0.0.1", "10.0.0.254", sport=0xC000 | 0x123),
        agq_frame(AgqHeader(type=RESULT, flags=0x09, job_id=2, worker_id=1, num_workers=2, slot=7, seq=5,
                            req_width=16, width=0, pos=0, guard=1, exponent=3, n_lanes=16, epoch=0xBEEF,
                            lanes=lanes16),
                  "02:00:00:00:00:fe", "02:00:00:00:00:02", "10.0.0.254", "10.0.0.2"),
        agq_frame(AgqHeader(type=FALLBACK_DATA, job_id=9, num_workers=2, seq=1, req_width=8, lanes=lanes32),
                  "02:00:00:00:00:fe", "02:00:00:00:00:64", "10.0.0.254", "10.0.0.100"),
    ]
    truncated = frames[2][:42 + 20 + 8]  # header cut after two lanes: malformed
    pcap = tmp_path / "agq.pcap"
    wrpcap(str(pcap), [Ether(f) for f in frames + [truncated]])
    rows = tshark_fields(pcap, "agq.ver", "agq.type", "agq.flags", "agq.flags.version", "agq.flags.retransmit",
                         "agq.flags.overflow", "agq.flags.fallback", "agq.job_id", "agq.worker_id",
                         "agq.num_workers", "agq.slot", "agq.seq", "agq.req_width", "agq.width", "agq.pos",
                         "agq.guard", "agq.exponent", "agq.n_lanes", "agq.epoch", "agq.shard", "agq.lane",
                         "_ws.expert.message", "agq.min_width")
    d, r, fb, tr = rows
    # byte 13 of a DATA is its min_width (agq.min_width), of the others the granted width
    assert d[:20] == ["1", "1", "0x07", "1", "1", "1", "0", "513", "3", "4", "40000", str(0xDEADBEEF), "12", "",
                      "0", "0", "-9", "32", "0", str(0x123)]
    assert d[22] == "8" and r[22] == "" and fb[22] == ""
    assert d[20].split(",") == [f"0x{v:08x}" for v in lanes32]
    assert r[:19] == ["1", "2", "0x09", "1", "0", "0", "1", "2", "1", "2", "7", "5", "16", "0", "0", "1", "3",
                      "16", str(0xBEEF)]
    assert r[20].split(",") == [f"0x{v:08x}" for v in lanes16]  # 16 lanes for the 16-lane profile
    assert fb[1] == "4" and len(fb[20].split(",")) == 32
    assert tr[1] == "4" and tr[20] == "" and "shorter than 20 + 4 * lanes" in tr[21]
    info = subprocess.run(["tshark", "-X", f"lua_script:{LUA}", "-r", str(pcap)], capture_output=True, text=True,
                          timeout=120).stdout.splitlines()
    assert "DATA job 513 slot 40000 v1 seq 3735928559 worker 3/4 req 12 min 8 [RETRANSMIT,OVERFLOW]" in info[0]
    assert "RESULT job 2 slot 7 v1 seq 5 width 0 pos 0 epoch 48879 [FALLBACK]" in info[1]


CLASSIC_CONFIG = """
[switch]
pipeline = "classic"
[classic]
ps_port = 1
worker_ports = [2, 3]
"""


def test_classic_header_of_the_switch_output(tmp_path, procs):
    """The published program's worked example (reference section 4): two
    contributions of jobAndSeq 1, hashID 300; the PS gets 2x the values."""
    values = [0x0000F0C0, 0x0146F43C, 0x0015B4C9, 0x00DCEEE3] + [0] * 12
    frames = []
    for w in (0, 1):
        h = ClassicHeader(job_and_seq=1, worker_id=w, total_workers=2, data=values, is_ack=0, hash_id=300,
                          hash1=37, hash2=4)
        payload = h.pack()
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + len(payload), w, 0, 64, 17, 0, bytes((10, 2, 2, 1 + w)),
                         bytes((10, 2, 2, 3)))
        udp = struct.pack("!HHHH", 50000, 50000, 8 + len(payload), 0)
        frames.append(bytes.fromhex("020000000010020000000001") + b"\x08\x00" + ip + udp + payload)
    wrpcap(str(tmp_path / "in.pcap"), [Ether(f) for f in frames])
    (tmp_path / "classic.toml").write_text(CLASSIC_CONFIG)
    sock = tmp_path / "ctl.sock"
    vdevs = [f"net_pcap0,rx_pcap={tmp_path}/in.pcap,tx_pcap={tmp_path}/out0.pcap"]
    vdevs += [f"net_pcap{p},tx_pcap={tmp_path}/out{p}.pcap" for p in range(1, 4)]
    sw = procs.start("switch", [binary("agq-switch"), *eal_args(unique_prefix("wsd"), "0", vdevs), "--",
                                "--config", tmp_path / "classic.toml", "--ctl-socket", sock])
    wait_for(lambda: sock.exists() and agqctl(sock, "counters").returncode == 0 and
             counters(sock).get("completions", 0) == 1, 30, what="the classic completion")
    assert sw.stop() == 0, sw.output()
    rows = tshark_fields(tmp_path / "out1.pcap", "agq_classic.jobAndSeq", "agq_classic.workerID",
                         "agq_classic.total_workers", "agq_classic.isACK", "agq_classic.hashID",
                         "agq_classic.hash1", "agq_classic.hash2", "agq_classic.data")
    assert len(rows) == 1, rows
    row = rows[0]
    assert row[:7] == ["1", "1", "2", "0", "300", "37", "4"]
    data = row[7].split(",")
    assert data[:4] == ["0x0001e180", "0x028de878", "0x002b6992", "0x01b9ddc6"] and len(data) == 16
