"""One packet test suite, two targets: the test cases, written once as data.

A case is a configuration (TOML for agq-switch; the same keys name the
Tofino ports through the setup script) with symbolic port ROLES, and a list
of steps. Each step sends one frame on one role's port and expects exactly
the given frames (byte for byte) on the given roles, and nothing on the other
roles. Expected frames come from the tests' own models (tests/pkt/
classic_model.py for the classic pipeline, the PROTOCOL.md formulas for agq),
never from the switch's output.

Targets:
  sw_target.py  agq-switch on net_tap ports, scapy send/sniff (CI:
                tests/integration/test_ptf_suite_sw.py)
  ptf_agq.py    PTF (ptf -t ... on tofino-model or a Tofino with the SDE);
                roles -> device ports through the test parameter `ports`
"""
from __future__ import annotations

import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pkt"))

from classic_model import AgqHeader, ClassicModel  # noqa: E402

# Roles: port index of each role on the software target (DPDK port ids,
# in --vdev order). A Tofino maps them to device ports (ptf_agq.py).
ROLES = ("ps", "w0", "w1", "h")
PORT_OF = {"ps": 0, "w0": 1, "w1": 2, "h": 3}

MAC = {"ps": "02:00:00:00:00:64", "w0": "02:00:00:00:01:01", "w1": "02:00:00:00:01:02",
       "h": "02:00:00:00:09:09"}
IP = {"ps": "10.2.2.100", "w0": "10.2.2.1", "w1": "10.2.2.2", "h": "10.2.2.9"}


@dataclass
class Step:
    send_role: str
    frame: bytes
    expect: dict[str, list[bytes]] = field(default_factory=dict)   # role -> frames, in order


@dataclass
class Case:
    name: str
    pipeline: str          # "classic" | "agq"
    config: str            # TOML (ports as PORT_OF)
    steps: list[Step]


def mac_bytes(m: str) -> bytes:
    return bytes(int(x, 16) for x in m.split(":"))


def ip_bytes(s: str) -> bytes:
    return bytes(int(x) for x in s.split("."))


def ip_checksum(h: bytes) -> int:
    s = sum(struct.unpack("!10H", h))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def udp_frame(src: str, dst: str, payload: bytes, sport=50000, dport=50000,
              dst_mac: str | None = None, src_mac: str | None = None) -> bytes:
    eth = mac_bytes(dst_mac or MAC[dst]) + mac_bytes(src_mac or MAC[src]) + b"\x08\x00"
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + len(payload), 1, 0, 64, 17, 0,
                     ip_bytes(IP[src]), ip_bytes(IP[dst]))
    ip = ip[:10] + struct.pack("!H", ip_checksum(ip)) + ip[12:]
    return eth + ip + struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload


# ----------------------------------------------------------------- classic
CLASSIC_CONFIG = f"""
[switch]
pipeline = "classic"
[classic]
ps_port = {PORT_OF['ps']}
worker_ports = [{PORT_OF['w0']}, {PORT_OF['w1']}]
[l2]
learning = false
[[route]]
ip = "{IP['h']}"
port = {PORT_OF['h']}
"""


def classic_cases() -> list[Case]:
    cases = []
    model = ClassicModel(PORT_OF["ps"], [PORT_OF["w0"], PORT_OF["w1"]])
    d = [0x0000F0C0, 0x0146F43C, 0x0015B4C9, 0x00DCEEE3] + list(range(12))
    steps = []

    def agq_step(role, h: AgqHeader):
        frame = udp_frame(role, "ps", h.pack())
        verdict, out = model.process(AgqHeader.unpack(h.pack()))
        new = frame[:-len(h.pack())] + out.pack()
        exp = {"ps": [new]} if verdict == "ps" else {"w0": [new], "w1": [new]} if verdict == "workers" else {}
        return Step(role, frame, exp)

    # The reference's worked example (§3.5): two contributions, then the PS's ACK.
    steps.append(agq_step("w0", AgqHeader(1, 0, 2, list(d), 0, 300, 37, 4)))
    steps.append(agq_step("w1", AgqHeader(1, 1, 2, list(d), 0, 300, 37, 4)))
    ack = AgqHeader(1, 0, 2, list(d), 1, 300, 37, 4)
    frame = udp_frame("ps", "w0", ack.pack())
    verdict, out = model.process(AgqHeader.unpack(ack.pack()))
    assert verdict == "workers"
    new = frame[:-len(ack.pack())] + out.pack()
    steps.append(Step("ps", frame, {"w0": [new], "w1": [new]}))
    cases.append(Case("classic_worked_example", "classic", CLASSIC_CONFIG, steps))

    # Ordinary traffic next to the classic pipeline: a host route.
    f = udp_frame("w0", "h", b"not aggregation" * 3, sport=9000, dport=9000)
    cases.append(Case("classic_routed_udp", "classic", CLASSIC_CONFIG, [Step("w0", f, {"h": [f]})]))
    return cases


# ----------------------------------------------------------------- agq
AGQ_CONFIG = f"""
[switch]
pipeline = "agq"
[agq]
total_rows = 64
total_slots = 256
[[job]]
id = 1
workers = 2
slots = 8
rows = 2
delivery = "multicast"
ps_port = {PORT_OF['ps']}
ps_ip = "{IP['ps']}"
ps_mac = "{MAC['ps']}"
[[job.worker]]
id = 0
port = {PORT_OF['w0']}
ip = "{IP['w0']}"
mac = "{MAC['w0']}"
[[job.worker]]
id = 1
port = {PORT_OF['w1']}
ip = "{IP['w1']}"
mac = "{MAC['w1']}"
[l2]
learning = false
[[route]]
ip = "{IP['h']}"
port = {PORT_OF['h']}
"""


def agq_header(typ, flags, job, worker, n, slot, seq, req, width, pos, guard, exp, lanes) -> bytes:
    return (struct.pack("!BBHBBHIBBBBbBH", (1 << 4) | typ, flags, job, worker, n, slot, seq, req, width, pos,
                        guard, exp, 32, 0) + struct.pack("!32I", *lanes))


def agq_cases() -> list[Case]:
    # Basic reduction, fresh switch, N = 2 (g = 1), R = W = 32 at pos 0 (the
    # empty row's only free run): each worker adds u & low(31); the RESULT
    # carries the sum right-aligned, width 32, pos 0, guard 1, multicast with
    # the destination and worker_id of each replica; the rest of the frame
    # (source addresses) is the completing packet's.
    u0 = [(0x40000000 + 1000 * k) for k in range(32)]
    u1 = [(0x40000000 - 77 * k) for k in range(32)]
    s = [(a & 0x7FFFFFFF) + (b & 0x7FFFFFFF) for a, b in zip(u0, u1)]
    d0 = agq_header(1, 0, 1, 0, 2, 3, 42, 32, 0, 0, 0, -4, u0)
    d1 = agq_header(1, 0, 1, 1, 2, 3, 42, 32, 0, 0, 0, -4, u1)
    f0 = udp_frame("w0", "ps", d0, 50100, 50100)
    f1 = udp_frame("w1", "ps", d1, 50100, 50100)

    def result_for(role, wid):
        r = agq_header(2, 0, 1, wid, 2, 3, 42, 32, 32, 0, 1, -4, s)
        return udp_frame("w1", role, r, 50100, 50100)

    steps = [Step("w0", f0, {}), Step("w1", f1, {"w0": [result_for("w0", 0)], "w1": [result_for("w1", 1)]})]
    cases = [Case("agq_basic_reduction", "agq", AGQ_CONFIG, steps)]
    # A packet from an address that is not the job's worker: dropped.
    bad = udp_frame("h", "ps", agq_header(1, 0, 1, 0, 2, 3, 43, 32, 0, 0, 0, 0, u0), 50100, 50100)
    cases.append(Case("agq_bad_worker_dropped", "agq", AGQ_CONFIG, [Step("w0", bad, {})]))
    f = udp_frame("w0", "h", b"hello" * 10, sport=9000, dport=9000)
    cases.append(Case("agq_routed_udp", "agq", AGQ_CONFIG, [Step("w0", f, {"h": [f]})]))
    return cases


def all_cases() -> list[Case]:
    return classic_cases() + agq_cases()


if __name__ == "__main__":
    # python3 tests/ptf_suite/cases.py DIR: the suite's configs as files, for
    # p4src/bfrt/setup_agq.py (agq) and for reference (classic).
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    (out / "agq_suite.toml").write_text(AGQ_CONFIG)
    (out / "classic_suite.toml").write_text(CLASSIC_CONFIG)
    print(f"wrote {out}/agq_suite.toml, {out}/classic_suite.toml; cases: "
          + ", ".join(c.name for c in all_cases()))
