"""PTF target of the packet test suite: the same cases (cases.py), run by
ptf against tofino-model or a Tofino with the SDE.

    # agq program (p4src/agq/agq.p4, either target), installed with
    # p4src/bfrt/setup_agq.py from the suite's config of the target's lane
    # profile (python3 tests/ptf_suite/cases.py DIR writes agq_suite.toml,
    # 32 lanes, and agq_suite_l16.toml, 16 lanes; its ports are the roles'
    # ports, see p4src/README.md):
    sudo ptf --test-dir tests/ptf_suite --pypath tests/ptf_suite --pypath p4src/bfrt \\
        --interface 0@veth1 --interface 1@veth3 --interface 2@veth5 --interface 3@veth7 \\
        --test-params "pipeline='agq';target='tofino2';ports='ps=0,w0=1,w1=2,h=3';grpc='localhost:50052'" ptf_agq
    # Tofino 1 (the 16-lane build, setup with AGQ_TARGET=tofino and
    # agq_suite_l16.toml): target='tofino' runs the *_l16 cases. A Tofino 2
    # build loaded with agq_suite_l16.toml runs them with lanes='16'.

    # classic = the published AGQ program on its own ports (160 PS, 176 worker):
    ... --test-params "pipeline='classic';ports='ps=160,w0=176,w1=184,h=168'" ptf_agq

`ports` maps each role to a PTF port number (the device port the --interface
flag binds). One PTF test class per case is generated; a case of the other
pipeline is skipped. Each step: send_packet, then verify_packet for every
expected frame and verify_no_other_packets — byte-exact, like the software
target.

With `grpc` (the BFRt gRPC address of bf_switchd), every agq case first
zeroes the registers of the program (setup_agq.BFRT_REGISTERS: the C++
register names, checked against the compiler's bfrt.json by ctest
p4_bfrt_names), so the suite can be run again without reloading the
program. The expected frames carry the suite's boot epoch (cases.SUITE_EPOCH,
`[switch] epoch` of agq_suite.toml, which setup_agq.py installs in epoch_t).
Not run here: no tofino-model on this machine (p4src/README.md).
"""
import ptf
import ptf.testutils as testutils
from ptf.base_tests import BaseTest

import cases as suite

try:
    import setup_agq   # p4src/bfrt (--pypath)
except ImportError:    # classic runs need no BFRt names
    setup_agq = None


def _params():
    params = testutils.test_params_get()
    pm = dict(suite.PORT_OF)
    for kv in str(params.get("ports", "")).split(","):
        if "=" in kv:
            role, port = kv.split("=")
            pm[role.strip()] = int(port)
    target = str(params.get("target", "tofino2"))
    # The lane profile of the installed config: the build's lanes per pass by default.
    lanes = int(params.get("lanes", setup_agq.TARGETS[target] if setup_agq else 32))
    return pm, str(params.get("pipeline", "agq")), target, params.get("grpc"), lanes


def clear_registers(grpc_addr: str, target: str) -> None:
    """Zero every agq register through BFRt gRPC, by the bfrt.json names."""
    import bfrt_grpc.client as gc  # the SDE's client
    iface = gc.ClientInterface(grpc_addr, client_id=0, device_id=0)
    try:
        iface.bind_pipeline_config("agq")
        info = iface.bfrt_info_get("agq")
        dev = gc.Target(device_id=0, pipe_id=0xFFFF)
        for name in setup_agq.bfrt_registers(target).values():
            info.table_get(name).entry_del(dev, [])   # no keys: every index back to its initial value
    finally:
        iface.tear_down_stream()


class _SuiteCase(BaseTest):
    case = None

    def setUp(self):
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()

    def runTest(self):
        pm, pipeline, target, grpc, lanes = _params()
        if self.case.pipeline != pipeline:
            self.skipTest(f"case for the {self.case.pipeline} pipeline; target runs {pipeline}")
        if pipeline == "agq" and self.case.lanes != lanes:
            self.skipTest(f"case for {self.case.lanes}-lane jobs; the installed config has {lanes}")
        if pipeline == "agq" and grpc:
            clear_registers(str(grpc), target)
        for st in self.case.steps:
            testutils.send_packet(self, pm[st.send_role], st.frame)
            for role, frames in st.expect.items():
                for f in frames:
                    testutils.verify_packet(self, f, pm[role])
            testutils.verify_no_other_packets(self)


for _c in suite.all_cases():
    globals()[_c.name] = type(_c.name, (_SuiteCase,), {"case": _c})
del _c
