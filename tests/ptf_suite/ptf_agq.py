"""PTF target of the packet test suite: the same cases (cases.py), run by
ptf against tofino-model or a Tofino with the SDE.

    # agq program (p4src/agq/agq.p4), installed with p4src/bfrt/setup_agq.py
    # from a config whose ports are the roles' ports (see README.md):
    sudo ptf --test-dir tests/ptf_suite --pypath tests/ptf_suite \\
        --interface 0@veth1 --interface 1@veth3 --interface 2@veth5 --interface 3@veth7 \\
        --test-params "pipeline='agq';ports='ps=0,w0=1,w1=2,h=3'" ptf_agq

    # classic = the published AGQ program on its own ports (160 PS, 176 worker):
    ... --test-params "pipeline='classic';ports='ps=160,w0=176,w1=184,h=168'" ptf_agq

`ports` maps each role to a PTF port number (the device port the --interface
flag binds). One PTF test class per case is generated; a case of the other
pipeline is skipped. Each step: send_packet, then verify_packet for every
expected frame and verify_no_other_packets — byte-exact, like the software
target.
"""
import ptf
import ptf.testutils as testutils
from ptf.base_tests import BaseTest

import cases as suite


def _port_map():
    params = testutils.test_params_get()
    pm = dict(suite.PORT_OF)
    for kv in str(params.get("ports", "")).split(","):
        if "=" in kv:
            role, port = kv.split("=")
            pm[role.strip()] = int(port)
    return pm, str(params.get("pipeline", "agq"))


class _SuiteCase(BaseTest):
    case = None

    def setUp(self):
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()

    def runTest(self):
        pm, pipeline = _port_map()
        if self.case.pipeline != pipeline:
            self.skipTest(f"case for the {self.case.pipeline} pipeline; target runs {pipeline}")
        for st in self.case.steps:
            testutils.send_packet(self, pm[st.send_role], st.frame)
            for role, frames in st.expect.items():
                for f in frames:
                    testutils.verify_packet(self, f, pm[role])
            testutils.verify_no_other_packets(self)


for _c in suite.all_cases():
    globals()[_c.name] = type(_c.name, (_SuiteCase,), {"case": _c})
del _c
