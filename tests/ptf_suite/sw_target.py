"""Software target of the packet test suite: the real agq-switch on net_tap
ports, frames sent and captured with scapy on the kernel side of each tap
(PTF style: send_packet / verify_packets / verify_no_other_packets).

    with SwTarget(workdir, case.config, binary_path) as t:
        t.run_case(case)          # AssertionError with a hex diff on mismatch

Needs root (net_tap) and Debian's scapy (/usr/bin/python3).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from scapy.config import conf
from scapy.sendrecv import AsyncSniffer, sendp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from harness import Processes, eal_args, unique_prefix, wait_for  # noqa: E402

from cases import PORT_OF, ROLES, Case  # noqa: E402

conf.verb = 0


def sh(*argv, check=True):
    return subprocess.run(argv, capture_output=True, text=True, check=check)


class SwTarget:
    def __init__(self, workdir: Path, config: str, switch_bin: Path, settle_s: float = 0.4):
        self.workdir, self.config, self.bin, self.settle = Path(workdir), config, switch_bin, settle_s
        tag = f"{os.getpid() % 100000:05d}"
        self.ifaces = {r: f"apt{tag}{PORT_OF[r]}" for r in ROLES}
        self.procs = Processes(self.workdir)

    def __enter__(self):
        cfg = self.workdir / "suite.toml"
        cfg.write_text(self.config)
        sock = self.workdir / "ctl.sock"
        by_port = sorted(ROLES, key=lambda r: PORT_OF[r])
        vdevs = [f"net_tap{PORT_OF[r]},iface={self.ifaces[r]}" for r in by_port]
        self.sw = self.procs.start("switch", [self.bin, *eal_args(unique_prefix("ptf"), "0", vdevs), "--",
                                              "--config", cfg, "--ctl-socket", sock, "--idle-sleep-us", "50"])
        wait_for(lambda: sock.exists() or not self.sw.alive(), 20, what="control socket")
        if not self.sw.alive():
            self.procs.close()
            raise RuntimeError("agq-switch exited:\n" + self.sw.output())
        for ifc in self.ifaces.values():
            # No kernel chatter (IPv6 RS/ND) on the test ports.
            sh("sysctl", "-q", "-w", f"net.ipv6.conf.{ifc}.disable_ipv6=1", check=False)
            sh("ip", "link", "set", ifc, "up")
        time.sleep(0.3)
        return self

    def __exit__(self, *exc):
        self.procs.close()

    def step(self, role: str, frame: bytes) -> dict[str, list[bytes]]:
        """Sends `frame` on `role`'s port; returns what every port emitted."""
        sniffers = {r: AsyncSniffer(iface=ifc, store=True) for r, ifc in self.ifaces.items()}
        for s in sniffers.values():
            s.start()
        time.sleep(0.2)
        sendp(frame, iface=self.ifaces[role])
        time.sleep(self.settle)
        got = {}
        for r, s in sniffers.items():
            pkts = s.stop() or []
            frames = [bytes(p) for p in pkts if getattr(p, "direction", None) != 4]
            # The kernel side also sees what we sent on that interface.
            got[r] = [f for f in frames if not (r == role and f == frame)]
        return got

    def run_case(self, case: Case):
        for i, st in enumerate(case.steps):
            got = self.step(st.send_role, st.frame)
            for r in ROLES:
                exp = st.expect.get(r, [])
                g = got.get(r, [])
                assert len(g) == len(exp), (f"{case.name} step {i}: port {r}: {len(g)} frames, expected {len(exp)}"
                                            + "".join(f"\n got {x.hex()}" for x in g)
                                            + "".join(f"\n exp {x.hex()}" for x in exp))
                for j, (x, e) in enumerate(zip(g, exp)):
                    assert x == e, f"{case.name} step {i} port {r} frame {j}:\n got {x.hex()}\n exp {e.hex()}"
