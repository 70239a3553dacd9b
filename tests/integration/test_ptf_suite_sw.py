"""The packet test suite (tests/ptf_suite/cases.py) against the real
agq-switch on net_tap ports: the software target of "one suite, two targets"
(the Tofino target is tests/ptf_suite/ptf_agq.py). Plus the classic flow the
way AGQ's own scripts drive a Tofino: worker sends (scapy), the PS sniffs the
aggregate and ACKs it, the workers receive the ACK."""
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ptf_suite"))

from harness import binary  # noqa: E402

import cases as suite  # noqa: E402
from sw_target import PortCapture, SwTarget  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/dev/net/tun"),
                                reason="net_tap needs root and /dev/net/tun")

CASES = suite.all_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_suite_case(tmp_path, case):
    with SwTarget(tmp_path, case.config, binary("agq-switch")) as t:
        t.run_case(case)


def test_classic_scapy_flow_worker_ps_ack(tmp_path):
    """AGQ's code/pkt flow: two workers send (agq_scapy), the PS sniffs the
    completed aggregate (2x the values), ACKs it, both workers get the ACK."""
    from scapy.layers.inet import IP
    from scapy.layers.l2 import Ether
    from agq_scapy import AGQ, ack_for, agq_frame

    def agq(frames, is_ack):  # the sniffers' filter of AGQ's scripts
        return [p for p in map(Ether, frames) if AGQ in p and p[AGQ].is_ack == is_ack]

    vals = [0x0000F0C0, 0x0146F43C, 0x0015B4C9, 0x00DCEEE3]
    with SwTarget(tmp_path, suite.CLASSIC_CONFIG, binary("agq-switch")) as t, PortCapture(t.ifaces) as cap:
        # No fixed waits: each send returns once the switch has processed the
        # frame and everything it sent has been captured (SwTarget.send).
        for wid, role in enumerate(("w0", "w1")):
            t.send(cap, role, bytes(agq_frame(vals, src_mac=suite.MAC[role], src_ip=suite.IP[role],
                                              dst_ip=suite.IP["ps"], job_and_seq=1, worker_id=wid,
                                              total_workers=2, hash_id=300)),
                   want={"ps": 1} if role == "w1" else {})
        agg = agq(cap.got["ps"], 0)
        assert len(agg) == 1, agg
        assert agg[0][AGQ].lanes() == [2 * v for v in vals]
        t.send(cap, "ps", bytes(ack_for(agg[0])), want={"w0": 1, "w1": 1})  # the PS's ACK, as send_ack.py builds it
        for role in ("w0", "w1"):
            acks = agq(cap.got[role], 1)
            assert len(acks) == 1, (role, acks)
            assert acks[0][AGQ].job_and_seq == 1 and acks[0][AGQ].hash_id == 300
            assert acks[0][IP].dst == agg[0][IP].src     # ack_for answers the sender of the aggregate
