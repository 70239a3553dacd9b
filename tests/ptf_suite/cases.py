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

from classic_model import AgqHeader as ClassicHeader, ClassicModel  # noqa: E402
from agq_proto import (DATA, F_RETRANSMIT, F_VERSION, PS_RESULT, RESULT, AgqHeader,  # noqa: E402
                       agq_frame)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agq_model import AGQ_OFF, AgqModel, Job, Worker, low  # noqa: E402

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
    lanes: int = 0         # agq: the lane profile of the config's jobs (32, or 16: PROTOCOL §10)


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

    def agq_step(role, h: ClassicHeader):
        frame = udp_frame(role, "ps", h.pack())
        verdict, out = model.process(ClassicHeader.unpack(h.pack()))
        new = frame[:-len(h.pack())] + out.pack()
        exp = {"ps": [new]} if verdict == "ps" else {"w0": [new], "w1": [new]} if verdict == "workers" else {}
        return Step(role, frame, exp)

    # The reference's worked example (§3.5): two contributions, then the PS's ACK.
    steps.append(agq_step("w0", ClassicHeader(1, 0, 2, list(d), 0, 300, 37, 4)))
    steps.append(agq_step("w1", ClassicHeader(1, 1, 2, list(d), 0, 300, 37, 4)))
    ack = ClassicHeader(1, 0, 2, list(d), 1, 300, 37, 4)
    frame = udp_frame("ps", "w0", ack.pack())
    verdict, out = model.process(ClassicHeader.unpack(ack.pack()))
    assert verdict == "workers"
    new = frame[:-len(ack.pack())] + out.pack()
    steps.append(Step("ps", frame, {"w0": [new], "w1": [new]}))
    cases.append(Case("classic_worked_example", "classic", CLASSIC_CONFIG, steps))

    # Ordinary traffic next to the classic pipeline: a host route.
    f = udp_frame("w0", "h", b"not aggregation" * 3, sport=9000, dport=9000)
    cases.append(Case("classic_routed_udp", "classic", CLASSIC_CONFIG, [Step("w0", f, {"h": [f]})]))
    return cases


# ----------------------------------------------------------------- agq
# The boot epoch the suite's switch runs with (PROTOCOL §11: in every frame
# the switch makes), fixed so that frames compare byte for byte.
SUITE_EPOCH = 0x5EED
# One configuration per lane profile for every agq case, so a Tofino loads it
# once (p4src/bfrt/setup_agq.py) and runs the whole suite: lanes = 32 for a
# Tofino 2 build, lanes = 16 for the Tofino 1 build (which a Tofino 2 build
# also serves). Each case uses its own aggregator row of job 1 (4 slots per
# row: slots 64, rows 16 -> row_shift 2) so the cases are independent on a
# switch that is not reset between them. Job 2 has the same hosts with the
# worker ids swapped.
PROFILES = (32, 16)


def agq_config(lanes: int = 32) -> str:
    return f"""
[switch]
pipeline = "agq"
epoch = {SUITE_EPOCH}
[agq]
total_rows = 64
total_slots = 256
[[job]]
id = 1
workers = 2
slots = 64
rows = 16
lanes = {lanes}
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
[[job]]
id = 2
workers = 2
slots = 16
rows = 4
lanes = {lanes}
delivery = "multicast"
ps_port = {PORT_OF['ps']}
ps_ip = "{IP['ps']}"
ps_mac = "{MAC['ps']}"
[[job.worker]]
id = 0
port = {PORT_OF['w1']}
ip = "{IP['w1']}"
mac = "{MAC['w1']}"
[[job.worker]]
id = 1
port = {PORT_OF['w0']}
ip = "{IP['w0']}"
mac = "{MAC['w0']}"
[l2]
learning = false
[[route]]
ip = "{IP['h']}"
port = {PORT_OF['h']}
"""


AGQ_CONFIG = agq_config(32)


def _jobs(lanes: int = 32):
    """The jobs of agq_config(lanes) for the model (agq_model.py)."""
    def w(role):
        return Worker(role, IP[role], MAC[role])
    common = dict(ps_role="ps", ps_ip=IP["ps"], ps_mac=MAC["ps"], lanes=lanes)
    return [Job(1, 2, 64, 16, {0: w("w0"), 1: w("w1")}, **common),
            Job(2, 2, 16, 4, {0: w("w1"), 1: w("w0")}, **common)]


def agq_header(typ, flags, job, worker, n, slot, seq, req, width, pos, guard, exp, lanes, epoch=0) -> bytes:
    """The agq header bytes, n_lanes = len(lanes) (32 or 16)."""
    return (struct.pack("!BBHBBHIBBBBbBH", (1 << 4) | typ, flags, job, worker, n, slot, seq, req, width, pos,
                        guard, exp, len(lanes), epoch) + struct.pack(f"!{len(lanes)}I", *lanes))


def _data(role, job, wid, slot, seq, req, lanes, flags=0, n=2, **kw) -> bytes:
    """A worker's DATA frame to the PS address (the switch aggregates it on
    the way); n_lanes = len(lanes) and min_width (the width byte) = req
    unless given (the workers' default: a grant of R or the PS)."""
    h = AgqHeader(type=DATA, flags=flags, job_id=job, worker_id=wid, num_workers=n, slot=slot, seq=seq,
                  req_width=req, width=req, exponent=-6, n_lanes=len(lanes), lanes=list(lanes))
    for k, val in kw.items():
        setattr(h, k, val)
    return agq_frame(h, src_mac=MAC[role], dst_mac=MAC["ps"], src_ip=IP[role], dst_ip=IP["ps"])


class _Scenario:
    """Builds a case's steps: each frame goes through the PROTOCOL.md model
    (agq_model.py), which says what the switch must emit."""

    def __init__(self, lanes: int):
        self.model = AgqModel(_jobs(lanes), SUITE_EPOCH)
        self.steps: list[Step] = []

    def send(self, role, frame, expect_count=None):
        exp = self.model.process(role, frame)
        if expect_count is not None:  # the scenario's own sanity check of the model's verdict
            got = sum(len(v) for v in exp.values())
            assert got == expect_count, (got, expect_count, exp.keys())
        self.steps.append(Step(role, frame, exp))
        return exp


def agq_cases(lanes: int = 32) -> list[Case]:
    """The agq cases for jobs of one lane profile (32 or 16 lanes per
    packet); the 16-lane cases are named *_l16 and use agq_config(16)."""
    cfg = agq_config(lanes)
    sfx = "" if lanes == 32 else f"_l{lanes}"

    def _vals(seed, bits, n=lanes):
        """n lane values of `bits` value bits (biased encodings, PROTOCOL §2)."""
        return [((seed * 2654435761 + k * 40503) >> 3) & low(bits) for k in range(n)]

    def case(name, steps):
        return Case(name + sfx, "agq", cfg, steps, lanes)

    # Basic reduction, fresh switch, N = 2 (g = 1), R = W = 32 at pos 0 (the
    # empty row's only free run): each worker adds u & low(31); the RESULT
    # carries the sum right-aligned, width 32, pos 0, guard 1, multicast with
    # the destination and worker_id of each replica; the rest of the frame
    # (source addresses) is the completing packet's. Hand-computed (no model).
    u0 = [(0x40000000 + 1000 * k) for k in range(lanes)]
    u1 = [(0x40000000 - 77 * k) for k in range(lanes)]
    s = [(a & 0x7FFFFFFF) + (b & 0x7FFFFFFF) for a, b in zip(u0, u1)]
    d0 = agq_header(1, 0, 1, 0, 2, 3, 42, 32, 32, 0, 0, -4, u0)     # min_width 32
    d1 = agq_header(1, 0, 1, 1, 2, 3, 42, 32, 32, 0, 0, -4, u1)
    f0 = udp_frame("w0", "ps", d0, 50100, 50100)
    f1 = udp_frame("w1", "ps", d1, 50100, 50100)

    def result_for(role, wid):
        r = agq_header(2, 0, 1, wid, 2, 3, 42, 32, 32, 0, 1, -4, s, epoch=SUITE_EPOCH)
        return udp_frame("w1", role, r, 50100, 50100)

    steps = [Step("w0", f0, {}), Step("w1", f1, {"w0": [result_for("w0", 0)], "w1": [result_for("w1", 1)]})]
    cases = [case("agq_basic_reduction", steps)]
    # A packet from an address that is not the job's worker: dropped.
    bad = udp_frame("h", "ps", agq_header(1, 0, 1, 0, 2, 3, 43, 32, 32, 0, 0, 0, u0), 50100, 50100)
    cases.append(case("agq_bad_worker_dropped", [Step("w0", bad, {})]))
    if lanes == 32:     # ordinary traffic: no lane profile
        f = udp_frame("w0", "h", b"hello" * 10, sport=9000, dport=9000)
        cases.append(case("agq_routed_udp", [Step("w0", f, {"h": [f]})]))

    # Retransmission after completion (row 1, slot 4): the RESULT of the kept
    # copy goes back to the retransmitting worker only, addresses swapped,
    # RETRANSMIT set; a second retransmission gets it again (nothing added).
    sc = _Scenario(lanes)
    a, b = _vals(1, 31), _vals(2, 31)
    sc.send("w0", _data("w0", 1, 0, 4, 100, 32, a), 0)
    sc.send("w1", _data("w1", 1, 1, 4, 100, 32, b), 2)
    sc.send("w0", _data("w0", 1, 0, 4, 100, 32, a, flags=F_RETRANSMIT), 1)
    sc.send("w1", _data("w1", 1, 1, 4, 100, 32, b, flags=F_RETRANSMIT), 1)
    cases.append(case("agq_retransmit_after_completion", sc.steps))

    # Duplicate of a pending contribution (row 2, slot 8): dropped, and the
    # RESULT holds that worker's values once. R = 16 on an empty row: pos 0, W 16.
    sc = _Scenario(lanes)
    a, b = _vals(3, 15), _vals(4, 15)
    sc.send("w0", _data("w0", 1, 0, 8, 7, 16, a), 0)
    sc.send("w0", _data("w0", 1, 0, 8, 7, 16, a, flags=F_RETRANSMIT), 0)
    sc.send("w1", _data("w1", 1, 1, 8, 7, 16, b), 2)
    cases.append(case("agq_duplicate_ignored", sc.steps))

    # Slot reuse with the other version (row 3, slots 12 and 13): two 16-bit
    # sequences share the v0 half (pos 0 and pos 4); slot 12 then runs on v1
    # (its own half: the whole row, W 32), then on v0 again: the old v0
    # window is released and zeroed, the new one gets pos 0 again next to
    # slot 13's live window, and its RESULT holds only the new values.
    sc = _Scenario(lanes)
    vals = [_vals(10 + i, 15) for i in range(4)]
    sc.send("w0", _data("w0", 1, 0, 12, 1, 16, vals[0]), 0)
    sc.send("w0", _data("w0", 1, 0, 13, 2, 16, vals[1]), 0)
    sc.send("w1", _data("w1", 1, 1, 12, 1, 16, vals[2]), 2)
    sc.send("w1", _data("w1", 1, 1, 13, 2, 16, vals[3]), 2)
    x, y = _vals(20, 31), _vals(21, 31)
    sc.send("w0", _data("w0", 1, 0, 12, 3, 32, x, flags=F_VERSION), 0)
    sc.send("w1", _data("w1", 1, 1, 12, 3, 32, y, flags=F_VERSION), 2)
    p, q = _vals(30, 15), _vals(31, 15)
    sc.send("w1", _data("w1", 1, 1, 12, 4, 16, p), 0)
    sc.send("w0", _data("w0", 1, 0, 12, 4, 16, q), 2)
    cases.append(case("agq_slot_reuse_other_version", sc.steps))

    # PS fallback (row 4, slots 16 and 17): slot 16 takes the whole v0 half
    # (R 32); slot 17's first contribution finds no free unit -> FALLBACK:
    # every DATA of (17, v0), a retransmission too, goes to the PS as
    # FALLBACK_DATA (width 0, pos 0, guard g); the PS's PS_RESULT is
    # multicast as a RESULT with FALLBACK, and a PS_RESULT with RETRANSMIT is
    # unicast to the worker it names.
    sc = _Scenario(lanes)
    a, b = _vals(40, 31), _vals(41, 31)
    sc.send("w0", _data("w0", 1, 0, 16, 50, 32, _vals(42, 31)), 0)
    sc.send("w0", _data("w0", 1, 0, 17, 51, 32, a), 1)
    sc.send("w1", _data("w1", 1, 1, 17, 51, 32, b), 1)
    sc.send("w0", _data("w0", 1, 0, 17, 51, 32, a, flags=F_RETRANSMIT), 1)
    ps_sum = [x + y for x, y in zip(a, b)]       # the PS's software sum at W = R (d = 0)
    psr = AgqHeader(type=PS_RESULT, job_id=1, worker_id=0, num_workers=2, slot=17, seq=51, req_width=32,
                    width=32, pos=0, guard=1, exponent=-6, n_lanes=lanes, lanes=ps_sum)
    sc.send("ps", agq_frame(psr, MAC["ps"], MAC["w0"], IP["ps"], IP["w0"]), 2)
    again = psr.copy(flags=F_RETRANSMIT, worker_id=1)
    sc.send("ps", agq_frame(again, MAC["ps"], MAC["w1"], IP["ps"], IP["w1"]), 1)
    # A PS_RESULT from somewhere else than the job's PS: dropped.
    sc.send("w0", agq_frame(psr, MAC["w0"], MAC["w1"], IP["w0"], IP["w1"]), 0)
    cases.append(case("agq_ps_fallback", sc.steps))

    # Two jobs (row 5 of job 1, slot 20; job 2 slot 4): interleaved
    # contributions to the same slot numbers; each RESULT holds its own job's
    # values, goes to its own job's workers with that job's worker ids.
    sc = _Scenario(lanes)
    a, b, c, d = _vals(50, 31), _vals(51, 31), _vals(52, 15), _vals(53, 15)
    sc.send("w0", _data("w0", 1, 0, 20, 9, 32, a), 0)
    sc.send("w1", _data("w1", 2, 0, 20 % 16, 9, 16, c), 0)
    sc.send("w1", _data("w1", 1, 1, 20, 9, 32, b), 2)
    sc.send("w0", _data("w0", 2, 1, 20 % 16, 9, 16, d), 2)
    cases.append(case("agq_two_jobs_isolated", sc.steps))

    # Unknown job, bad worker and other invalid packets (row 6, slot 24):
    # each dropped without touching state, so the reduction after them is
    # exact.
    sc = _Scenario(lanes)
    a, b = _vals(60, 31), _vals(61, 31)
    invalid = [
        ("w0", _data("w0", 9, 0, 24, 5, 32, a)),                      # unknown job
        ("w0", _data("w0", 1, 1, 24, 5, 32, a)),                      # worker 1 is not on w0's port
        ("w1", _data("w0", 1, 0, 24, 5, 32, a)),                      # worker 0's frame on w1's port
        ("w0", _data("w0", 2, 0, 24 % 16, 5, 32, a)),                 # job 2's worker 0 is w1
        ("w0", _data("w0", 1, 0, 24, 5, 32, a, n=3)),                 # num_workers != N
        ("w0", _data("w0", 1, 0, 64, 5, 32, a)),                      # slot >= slots
        ("w0", _data("w0", 1, 0, 24, 5, 18, a)),                      # width not a multiple of 4
        ("w0", _data("w0", 1, 0, 24, 5, 36, a)),                      # width > 32
        ("w0", _data("w0", 1, 0, 24, 5, 32, a, width=0)),             # min_width 0 < g + 2
        ("w0", _data("w0", 1, 0, 24, 5, 32, a, width=2)),             # min_width < g + 2 (and not 4k)
        ("w0", _data("w0", 1, 0, 24, 5, 32, a, width=6)),             # min_width not a multiple of 4
        ("w0", _data("w0", 1, 0, 24, 5, 16, a, width=20)),            # min_width > req_width
        ("w0", _data("w0", 1, 0, 24, 5, 32, a, width=36)),            # min_width > req_width
        ("w0", _data("w0", 1, 0, 24, 5, 32, a, ver=2)),               # malformed: version
        ("w0", _data("w0", 1, 0, 24, 5, 32, _vals(62, 31, 48 - lanes))),  # malformed: the other lane profile
        ("w0", _data("w0", 1, 0, 24, 5, 32, a, type=RESULT)),         # malformed: a RESULT from a worker
    ]
    for role, fr in invalid:
        sc.send(role, fr, 0)
    sc.send("w0", _data("w0", 1, 0, 24, 5, 32, a), 0)
    sc.send("w1", _data("w1", 1, 1, 24, 5, 32, b), 2)
    cases.append(case("agq_unknown_job_bad_worker_dropped", sc.steps))

    # Grants honour min_width (row 7, slots 28-30; PROTOCOL §2): slot 28
    # takes 24 bits (pos 0), 8 bits stay free; slot 29 asks 16 with
    # min_width 16: the best run is 8 bits, narrower than its minimum ->
    # FALLBACK (PS, exact), no unit taken; slot 30 asks 16 with min_width 8:
    # granted the 8 bits (pos 6), its RESULT width 8 (d = 8).
    sc = _Scenario(lanes)
    sc.send("w0", _data("w0", 1, 0, 28, 70, 24, _vals(70, 23)), 0)
    sc.send("w0", _data("w0", 1, 0, 29, 71, 16, _vals(71, 15)), 1)      # FALLBACK_DATA to the PS
    sc.send("w0", _data("w0", 1, 0, 30, 72, 16, _vals(72, 15), width=8), 0)
    sc.send("w1", _data("w1", 1, 1, 30, 72, 16, _vals(73, 15), width=8), 2)
    sc.send("w1", _data("w1", 1, 1, 29, 71, 16, _vals(74, 15)), 1)      # FALLBACK_DATA to the PS
    assert sc.steps[3].expect["w0"][0][AGQ_OFF + 13] == 8   # RESULT width byte: the 8-bit grant
    cases.append(case("agq_min_width_fallback", sc.steps))

    # min_width at its boundary (row 8, slots 32-33): N = 2, g = 1, so
    # g + 2 = 3 -> min_width 4 is the narrowest valid one. Slot 32 takes
    # 28 bits; slot 33 asks 16 with min_width 4 and is granted the last 4
    # bits (3 value bits), RESULT width 4.
    sc = _Scenario(lanes)
    sc.send("w0", _data("w0", 1, 0, 32, 80, 28, _vals(80, 27)), 0)
    sc.send("w0", _data("w0", 1, 0, 33, 81, 16, _vals(81, 15), width=4), 0)
    sc.send("w1", _data("w1", 1, 1, 33, 81, 16, _vals(82, 15), width=4), 2)
    assert sc.steps[2].expect["w0"][0][AGQ_OFF + 13] == 4
    cases.append(case("agq_min_width_boundary", sc.steps))
    return cases


def all_cases() -> list[Case]:
    return classic_cases() + [c for lanes in PROFILES for c in agq_cases(lanes)]


if __name__ == "__main__":
    # python3 tests/ptf_suite/cases.py DIR: the suite's configs as files, for
    # p4src/bfrt/setup_agq.py (agq) and for reference (classic).
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    (out / "agq_suite.toml").write_text(agq_config(32))
    (out / "agq_suite_l16.toml").write_text(agq_config(16))     # Tofino 1 (AGQ_TARGET=tofino)
    (out / "classic_suite.toml").write_text(CLASSIC_CONFIG)
    print(f"wrote {out}/agq_suite.toml, {out}/agq_suite_l16.toml, {out}/classic_suite.toml; cases: "
          + ", ".join(c.name for c in all_cases()))
