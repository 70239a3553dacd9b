"""Software target of the packet test suite: the real agq-switch on net_tap
ports, frames sent and captured with raw packet sockets on the kernel side
of each tap (PTF style: send_packet / verify_packets /
verify_no_other_packets); a step waits on the switch's counters, never a
fixed time.

    with SwTarget(workdir, case.config, binary_path) as t:
        t.run_case(case)          # AssertionError with a hex diff on mismatch

Needs root (net_tap) and Debian's scapy (/usr/bin/python3).
"""
from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

from scapy.config import conf

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from harness import Processes, agqctl, counters, eal_args, unique_prefix, wait_for  # noqa: E402

from cases import PORT_OF, ROLES, Case  # noqa: E402

conf.verb = 0


def sh(*argv, check=True):
    return subprocess.run(argv, capture_output=True, text=True, check=check)


ETH_P_ALL = 0x0003


class PortCapture:
    """Raw AF_PACKET sockets on the kernel side of every tap, open (bound)
    before anything is sent, so no frame can be missed by a capture thread
    that has not started yet. `got[role]` holds the frames the switch sent
    to that tap (incoming on the kernel side); frames the kernel sent into
    the switch (PACKET_OUTGOING: our own frame, kernel chatter) are kept
    apart in `kernel_sent`."""

    def __init__(self, ifaces: dict[str, str]):
        self.socks: dict[str, socket.socket] = {}
        self.got: dict[str, list[bytes]] = {r: [] for r in ifaces}
        self.kernel_sent: dict[str, list[bytes]] = {r: [] for r in ifaces}
        try:
            for r, ifc in ifaces.items():
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                self.socks[r] = s
                s.bind((ifc, ETH_P_ALL))
                s.setblocking(False)
        except BaseException:
            self.close()
            raise

    def send(self, role: str, frame: bytes):
        self.socks[role].send(frame)

    def poll(self, timeout: float):
        """Reads every frame that is queued, waiting up to `timeout` for one."""
        ready, _, _ = select.select(list(self.socks.values()), [], [], timeout)
        for r, s in self.socks.items():
            if s not in ready:
                continue
            while True:
                try:
                    data, addr = s.recvfrom(65535)
                except BlockingIOError:
                    break
                (self.kernel_sent if addr[2] == socket.PACKET_OUTGOING else self.got)[r].append(data)

    def close(self):
        for s in self.socks.values():
            s.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class SwTarget:
    def __init__(self, workdir: Path, config: str, switch_bin: Path):
        self.workdir, self.config, self.bin = Path(workdir), config, switch_bin
        tag = f"{os.getpid() % 100000:05d}"
        self.ifaces = {r: f"apt{tag}{PORT_OF[r]}" for r in ROLES}
        self.procs = Processes(self.workdir)

    def __enter__(self):
        cfg = self.workdir / "suite.toml"
        cfg.write_text(self.config)
        sock = self.sock = self.workdir / "ctl.sock"
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
        # Let the kernel's link-up chatter (sent before disable_ipv6 took
        # effect) reach the switch, then wait until the dataplane has
        # processed it (went idle after this reading), so none of it is
        # still on its way out when the first step starts capturing.
        time.sleep(0.3)
        idle = counters(sock)["dp.idle_sleeps"]
        wait_for(lambda: counters(sock)["dp.idle_sleeps"] > idle, 30, what="the dataplane to go idle")
        return self

    def __exit__(self, *exc):
        self.procs.close()

    def port_stats(self) -> dict[str, dict]:
        """`agqctl ports --json`: per-role rx_packets/tx_packets of the switch's ports."""
        r = agqctl(self.sock, "ports", "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        by_port = {row["port"]: row for row in json.loads(r.stdout)}
        return {role: by_port[PORT_OF[role]] for role in ROLES}

    def wait_processed(self, role: str, rx_before: int, tx_before: dict[str, int],
                       tx_at_least: dict[str, int], timeout: float):
        """Waits until the switch has received the frame sent on `role`
        (that port's rx_packets advanced), finished the poll round that
        processed it (the dataplane went idle afterwards: dp.idle_sleeps
        advanced past a reading taken after the rx), and sent at least
        `tx_at_least[r]` frames on every role. Returns the per-role count of
        frames the switch transmitted since `tx_before`."""
        deadline = time.monotonic() + timeout
        wait_for(lambda: self.port_stats()[role]["rx_packets"] > rx_before,
                 max(deadline - time.monotonic(), 0.1), what=f"the switch to receive the frame on {role}")
        # An idle back-off sleep counted after this reading is a poll round
        # that started after the frame's round was processed and flushed.
        idle = counters(self.sock)["dp.idle_sleeps"]
        wait_for(lambda: counters(self.sock)["dp.idle_sleeps"] > idle,
                 max(deadline - time.monotonic(), 0.1), what="the dataplane to finish the frame's poll round")

        def sent():
            st = self.port_stats()
            d = {r: st[r]["tx_packets"] - tx_before[r] for r in ROLES}
            return d if all(d[r] >= tx_at_least.get(r, 0) for r in ROLES) else None
        try:
            return wait_for(sent, max(deadline - time.monotonic(), 0.1), what="the switch's tx counters")
        except TimeoutError:  # fewer frames than expected: the comparison below says which
            st = self.port_stats()
            return {r: st[r]["tx_packets"] - tx_before[r] for r in ROLES}

    def step(self, role: str, frame: bytes, expect: dict[str, list[bytes]] | None = None,
             timeout: float = 30.0) -> dict[str, list[bytes]]:
        """Sends `frame` on `role`'s port; returns what every port emitted.

        No fixed waits: the capture sockets are open before the frame is
        sent; the step ends once the switch has demonstrably processed the
        frame (its counters, wait_processed) and every frame its tx counters
        say it sent (at least the `expect`ed ones) has been captured -- or at
        the deadline `timeout`, generous for a loaded machine."""
        with PortCapture(self.ifaces) as cap:
            before = {r: len(cap.got[r]) for r in ROLES}
            self.send(cap, role, frame, {r: len(f) for r, f in (expect or {}).items()}, timeout)
            return {r: cap.got[r][before[r]:] for r in ROLES}

    def send(self, cap: PortCapture, role: str, frame: bytes, want: dict[str, int] | None = None,
             timeout: float = 30.0):
        """Sends `frame` on `role`'s port through `cap`, waits until the
        switch has processed it and sent at least `want[r]` frames on each
        role, and until `cap` has captured every frame the switch sent."""
        before = self.port_stats()
        have = {r: len(cap.got[r]) for r in ROLES}
        cap.send(role, frame)
        tx = self.wait_processed(role, before[role]["rx_packets"], {r: before[r]["tx_packets"] for r in ROLES},
                                 want or {}, timeout)
        deadline = time.monotonic() + timeout
        # Every frame the switch put on a tap reaches that tap's socket.
        while not all(len(cap.got[r]) - have[r] >= tx[r] for r in ROLES) and time.monotonic() < deadline:
            cap.poll(0.05)
        cap.poll(0)  # and whatever else is already queued

    def run_case(self, case: Case):
        for i, st in enumerate(case.steps):
            got = self.step(st.send_role, st.frame, st.expect)
            for r in ROLES:
                exp = st.expect.get(r, [])
                g = got.get(r, [])
                assert len(g) == len(exp), (f"{case.name} step {i}: port {r}: {len(g)} frames, expected {len(exp)}"
                                            + "".join(f"\n got {x.hex()}" for x in g)
                                            + "".join(f"\n exp {x.hex()}" for x in exp))
                for j, (x, e) in enumerate(zip(g, exp)):
                    assert x == e, f"{case.name} step {i} port {r} frame {j}:\n got {x.hex()}\n exp {e.hex()}"
