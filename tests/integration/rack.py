"""A rack in one box: K hosts, each a network namespace with its own kernel
network stack, cabled by a veth pair to a kernel-facing DPDK port of
agq-switch (net_af_xdp on the switch end where it works, net_af_packet
otherwise), plus an optional management network (a Linux bridge in the root
namespace, one more veth per host) on which the switch's read-only job
endpoint (`--job-listen`) can be reached the way a host on another machine
would reach it.

    with Rack(3, tmp_path) as rack:                    # hosts h0..h2
        sw = rack.start_switch(jobs=rack.job_toml(1, workers=[0, 1], ps=2))
        rack.hosts[0].run(["ping", "-c", "1", rack.hosts[1].ip])
        w = rack.start("w0", [binary("agq-worker"), *rack.hosts[0].eal("w0"), "--", ...], host=rack.hosts[0])

Host i (switch port i):
  kernel   10.77.0.(i+1)/24, MAC 02:77:00:00:00:(i+1), on interface <tag>h<i>
  agq      10.77.1.(i+1), MAC 02:77:01:00:00:(i+1): the identity a DPDK
           process in the host (worker, PS, libagq rank) sends with, on a
           net_af_packet port of the same interface (Host.vdev()). A MAC the
           kernel does not own: RESULTs reach the DPDK process and never the
           kernel's UDP stack (which would answer each with ICMP).
  mgmt     10.78.M.(i+1)/24 on <tag>n<i> when mgmt=True; the root namespace
           is 10.78.M.254 on the bridge <tag>br (M chosen free).
The switch knows its hosts: a static MAC entry, a host route and an ARP
proxy entry per host (so ARP is answered by the switch, as a ToR with a
host table does), L2 learning for everything else.

Tear-down is always by the rig: close() (context manager, atexit, SIGTERM
and SIGHUP turned into SystemExit while a rack is up) stops every process
it started, kills whatever else runs in its namespaces, deletes them and
the root-side links and waits until the kernel has removed them. Every name
starts with agqr<tag>; /run/agq-rack/<tag>.json records the owner, so
cleanup_stale() finds and removes the leftovers of a run that was killed
(SIGKILL leaves no chance to clean up); Rack() calls it first.
"""
from __future__ import annotations

import array
import atexit
import fcntl
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Proc, Processes, accepting, binary, eal_args, wait_for  # noqa: E402

PREFIX = "agqr"
STATE_DIR = Path(os.environ.get("AGQ_RACK_STATE", "/run/agq-rack"))
_NAME = re.compile(rf"^{PREFIX}([0-9a-f]{{4}})(h|s|m|n|br)(\d*)$")


def sh(*args, check=True, timeout=30) -> subprocess.CompletedProcess:
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def tx_checksum_off(ifname: str):
    """ethtool -K IF tx off, without ethtool: a veth hands its peer packets
    whose checksum the kernel left for the "hardware" to fill in; through a
    DPDK port nothing fills it in, and TCP between two hosts would fail."""
    SIOCETHTOOL, ETHTOOL_STXCSUM = 0x8946, 0x17
    value = array.array("B", struct.pack("II", ETHTOOL_STXCSUM, 0))
    ifr = struct.pack("16sP", ifname.encode(), value.buffer_info()[0])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s.fileno(), SIOCETHTOOL, ifr)


def _no_ipv6(ifname: str, netns: str | None = None):
    # No router solicitations / ND on the rack's links: only what a test sends.
    path = f"/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6"
    if netns:
        sh("ip", "netns", "exec", netns, "sh", "-c", f"echo 1 > {path}", check=False)
    elif os.path.exists(path):
        Path(path).write_text("1\n")


def _links() -> list[str]:
    out = sh("ip", "-o", "link", "show", check=False).stdout
    return [l.split(":")[1].strip().split("@")[0] for l in out.splitlines() if ":" in l]


def _netns() -> list[str]:
    return [l.split()[0] for l in sh("ip", "netns", "list", check=False).stdout.splitlines() if l.strip()]


def _pid_alive(pid: int) -> bool:
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _kill_netns_procs(ns: str):
    _stop_pids([int(p) for p in sh("ip", "netns", "pids", ns, check=False).stdout.split() if p.isdigit()])


def _stop_pids(pids: list[int]):
    # SIGTERM first: agq-switch and agq-worker stop their ports and remove
    # their sockets; SIGKILL after 3 s.
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and any(_pid_alive(p) for p in pids):
            time.sleep(0.05)


def remove_tag(tag: str):
    """Everything of rack `tag`: processes in its namespaces, the recorded
    processes of its root namespace (the switch), namespaces, links, state."""
    state = STATE_DIR / f"{tag}.json"
    if state.exists():
        try:
            ours = []
            for pid in json.loads(state.read_text()).get("pids", []):
                # Only a process that is still ours: its command line names the tag.
                try:
                    if tag in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                        ours.append(pid)
                except FileNotFoundError:
                    pass
            _stop_pids(ours)
        except (OSError, ValueError):
            pass
    mine = f"{PREFIX}{tag}"
    for ns in _netns():
        if ns.startswith(mine):
            _kill_netns_procs(ns)
            sh("ip", "netns", "del", ns, check=False)
    for l in _links():
        if l.startswith(mine):
            sh("ip", "link", "del", l, check=False)
    # Namespace and veth removal finish asynchronously in the kernel.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (leftovers(tag)):
        for l in _links():
            if l.startswith(mine):
                sh("ip", "link", "del", l, check=False)
        time.sleep(0.05)
    state.unlink(missing_ok=True)


def leftovers(tag: str | None = None) -> list[str]:
    """Namespaces and links of rack `tag` (any rack: None) that exist now."""
    want = f"{PREFIX}{tag}" if tag else PREFIX
    return [n for n in _netns() + _links() if n.startswith(want) and _NAME.match(n)]


def cleanup_stale() -> list[str]:
    """Removes the racks whose owner is gone (not persistent racks of
    scripts/rack.sh, which `rack.sh down` removes). Returns their tags."""
    tags = {_NAME.match(n).group(1) for n in leftovers()}
    if STATE_DIR.exists():
        tags |= {p.stem for p in STATE_DIR.glob("*.json")}
    removed = []
    for tag in sorted(tags):
        state = STATE_DIR / f"{tag}.json"
        try:
            st = json.loads(state.read_text())
        except (OSError, ValueError):
            st = {}
        if st.get("persistent") or (st.get("owner") and _pid_alive(int(st["owner"]))):
            continue
        remove_tag(tag)
        removed.append(tag)
    return removed


def _unused_tag() -> str:
    # Never one a live rack (or its leftovers) has: close() removes every
    # name with its tag.
    for _ in range(100):
        tag = uuid.uuid4().hex[:4]
        if not leftovers(tag) and not (STATE_DIR / f"{tag}.json").exists():
            return tag
    raise RuntimeError("no unused rack tag (scripts/rack.sh list)")


class Host:
    def __init__(self, rack: "Rack", index: int):
        self.rack, self.index = rack, index
        t = rack.tag
        self.name = f"h{index}"
        self.netns = f"{PREFIX}{t}h{index}"
        self.ifname = f"{PREFIX}{t}h{index}"    # the host's end of its data link
        self.switch_if = f"{PREFIX}{t}s{index}"  # the switch's end (root namespace)
        self.port = index                        # switch port
        self.ip = f"{rack.subnet}.0.{index + 1}"
        self.mac = f"02:77:00:00:00:{index + 1:02x}"
        self.agq_ip = f"{rack.subnet}.1.{index + 1}"
        self.agq_mac = f"02:77:01:00:00:{index + 1:02x}"
        self.mgmt_ip = f"{rack.mgmt_net}.{index + 1}" if rack.mgmt else None

    def argv(self, argv) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *[str(a) for a in argv]]

    def run(self, argv, timeout=60, check=False) -> subprocess.CompletedProcess:
        r = subprocess.run(self.argv(argv), capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"{self.name}: {' '.join(map(str, argv))}: exit {r.returncode}\n{r.stdout}{r.stderr}")
        return r

    def vdev(self, index: int = 0) -> str:
        """A DPDK port on this host's link for a process in the host. Always
        af_packet: af_xdp would take every frame away from the host's kernel."""
        return f"net_af_packet{index},iface={self.ifname}"

    def eal(self, name: str, lcores: str = "1", mem_mb: int = 128) -> list[str]:
        return eal_args(f"{PREFIX}{self.rack.tag}{name}", lcores, [self.vdev()], mem_mb=mem_mb)


class Rack:
    def __init__(self, k: int, workdir: Path, *, driver: str = "auto", mgmt: bool = False,
                 subnet: str = "10.77", persistent: bool = False, tag: str | None = None):
        if not 1 <= k <= 64:
            raise ValueError("a rack has 1..64 hosts")
        if driver not in ("auto", "af_xdp", "af_packet"):
            raise ValueError("driver: auto | af_xdp | af_packet")
        self.k, self.workdir, self.mgmt, self.subnet = k, Path(workdir), mgmt, subnet
        self.requested_driver, self.driver = driver, None
        self.persistent = persistent
        self.tag = tag or _unused_tag()
        self.procs = Processes(self.workdir)
        self.switch: Proc | None = None
        self.ctl = self.workdir / "ctl.sock"
        self.mgmt_net = None
        self.mgmt_root_ip = None
        self._closed = True
        self._old_handlers = {}
        self.hosts: list[Host] = []

    # ---- bring-up -------------------------------------------------------
    def up(self) -> "Rack":
        cleanup_stale()
        if self.mgmt:
            self.mgmt_net = self._free_mgmt_net()
            self.mgmt_root_ip = f"{self.mgmt_net}.254"
        self.hosts = [Host(self, i) for i in range(self.k)]
        self._closed = False
        self._write_state()
        if not self.persistent:
            atexit.register(self.close)
            self._catch_signals()
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def _free_mgmt_net(self) -> str:
        used = sh("ip", "-4", "-o", "addr", "show", check=False).stdout
        start = int(self.tag, 16) % 200
        for i in range(200):
            net = f"10.78.{(start + i) % 200 + 1}"
            if f" {net}." not in used:
                return net
        raise RuntimeError("no free 10.78.x.0/24 for the management network")

    def _build(self):
        t = f"{PREFIX}{self.tag}"
        if self.mgmt:
            br = f"{t}br"
            sh("ip", "link", "add", br, "type", "bridge")
            _no_ipv6(br)
            sh("ip", "addr", "add", f"{self.mgmt_root_ip}/24", "dev", br)
            sh("ip", "link", "set", br, "up")
        for h in self.hosts:
            sh("ip", "netns", "add", h.netns)
            sh("ip", "link", "add", h.switch_if, "type", "veth", "peer", "name", h.ifname)
            sh("ip", "link", "set", h.ifname, "address", h.mac)
            tx_checksum_off(h.ifname)
            _no_ipv6(h.switch_if)
            sh("ip", "link", "set", h.ifname, "netns", h.netns)
            sh("ip", "link", "set", h.switch_if, "up")
            n = ["ip", "-n", h.netns]
            sh(*n, "link", "set", "lo", "up")
            _no_ipv6(h.ifname, h.netns)
            sh(*n, "addr", "add", f"{h.ip}/24", "dev", h.ifname)
            sh(*n, "link", "set", h.ifname, "up")
            if self.mgmt:
                root_end, host_end = f"{t}m{h.index}", f"{t}n{h.index}"
                sh("ip", "link", "add", root_end, "type", "veth", "peer", "name", host_end)
                _no_ipv6(root_end)
                sh("ip", "link", "set", root_end, "master", f"{t}br")
                sh("ip", "link", "set", host_end, "netns", h.netns)
                sh("ip", "link", "set", root_end, "up")
                _no_ipv6(host_end, h.netns)
                sh(*n, "addr", "add", f"{h.mgmt_ip}/24", "dev", host_end)
                sh(*n, "link", "set", host_end, "up")

    def _catch_signals(self):
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                self._old_handlers[sig] = signal.signal(sig, _exit_on_signal)

    def _write_state(self):
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        pids = [p.pid for p in self.procs.procs]
        st = {"owner": None if self.persistent else os.getpid(), "persistent": self.persistent,
              "hosts": self.k, "pids": pids, "workdir": str(self.workdir), "driver": self.driver,
              "mgmt": self.mgmt_root_ip}
        tmp = STATE_DIR / f"{self.tag}.json.new"
        tmp.write_text(json.dumps(st))
        tmp.rename(STATE_DIR / f"{self.tag}.json")

    # ---- the switch and processes ---------------------------------------
    def switch_toml(self, pipeline: str = "agq", jobs: str = "", extra: str = "") -> str:
        out = [f'[switch]\npipeline = "{pipeline}"\n']
        if pipeline == "agq":
            out.append("[agq]\ntotal_rows = 64\ntotal_slots = 256\n")
        else:
            out.append("[classic]\nps_port = 0\nworker_ports = [%s]\n" % ", ".join(str(h.port) for h in self.hosts[1:]))
        out.append("[l2]\nlearning = true\nageing_s = 300\n")
        for h in self.hosts:
            out.append(f'[[mac]]\nmac = "{h.mac}"\nport = {h.port}\n'
                       f'[[route]]\nip = "{h.ip}"\nport = {h.port}\n'
                       f'[[arp_proxy]]\nip = "{h.ip}"\nmac = "{h.mac}"\n')
        return "\n".join(out + [jobs, extra])

    def job_toml(self, job_id: int, workers: list[int], ps: int | None = None, slots: int = 32, rows: int = 8,
                 delivery: str = "multicast", max_width: int = 32, ps_ip: str | None = None) -> str:
        """A [[job]] whose worker w is host workers[w] (its agq identity, its
        port) and whose PS is host `ps`; `ps_ip` overrides the PS address the
        switch uses (to test a PS that disagrees)."""
        out = [f'[[job]]\nid = {job_id}\nworkers = {len(workers)}\nslots = {slots}\nrows = {rows}\n'
               f'delivery = "{delivery}"\nmax_width = {max_width}\n']
        if ps is not None:
            p = self.hosts[ps]
            out.append(f'ps_port = {p.port}\nps_ip = "{ps_ip or p.agq_ip}"\nps_mac = "{p.agq_mac}"\n')
        for w, hi in enumerate(workers):
            h = self.hosts[hi]
            out.append(f'[[job.worker]]\nid = {w}\nport = {h.port}\nip = "{h.agq_ip}"\nmac = "{h.agq_mac}"\n')
        return "".join(out)

    def start_switch(self, pipeline: str = "agq", jobs: str = "", extra_toml: str = "", args=(),
                     lcores: str = "0") -> Proc:
        cfg = self.workdir / "rack-switch.toml"
        cfg.write_text(self.switch_toml(pipeline, jobs, extra_toml))
        drivers = ["af_xdp", "af_packet"] if self.requested_driver == "auto" else [self.requested_driver]
        for n, drv in enumerate(drivers):
            vdevs = [f"net_{drv}{h.port},iface={h.switch_if}" for h in self.hosts]
            sw = self.start(f"switch-{drv}", [binary("agq-switch"),
                                              *eal_args(f"{PREFIX}{self.tag}sw{n}", lcores, vdevs), "--",
                                              "--config", cfg, "--ctl-socket", self.ctl, "--idle-sleep-us", "50",
                                              *args])
            wait_for(lambda: accepting(self.ctl) or not sw.alive(), 30, what="rack switch up")
            if sw.alive():
                self.switch, self.driver = sw, drv
                self._write_state()
                return sw
            if n + 1 == len(drivers):
                raise RuntimeError(f"agq-switch did not start on {drv} ports:\n{sw.output()[-3000:]}")
        raise AssertionError("unreachable")

    def start(self, name: str, argv, host: Host | None = None) -> Proc:
        """A process in `host` (None: the root namespace), stopped by close()."""
        p = self.procs.start(name, host.argv(argv) if host else [str(a) for a in argv])
        self._write_state()
        return p

    # ---- tear-down ------------------------------------------------------
    def close(self):
        if self._closed:
            return
        self._closed = True
        try:
            self.procs.close()
        finally:
            remove_tag(self.tag)
            for sig, old in self._old_handlers.items():
                try:
                    signal.signal(sig, old)
                except (ValueError, TypeError):
                    pass
            self._old_handlers.clear()
            try:
                atexit.unregister(self.close)
            except Exception:
                pass

    def __enter__(self) -> "Rack":
        return self.up()

    def __exit__(self, *exc):
        self.close()


def job_endpoint(sw: Proc, timeout: float = 20) -> tuple[str, str]:
    """(ip, port) of the job endpoint a switch started with --job-listen
    printed (port 0 in the flag: the one the kernel chose)."""
    m = wait_for(lambda: re.search(r"job endpoint .* on tcp:([\d.]+):(\d+)", sw.output()) or not sw.alive(),
                 timeout, what="job endpoint line")
    if m is True:
        raise RuntimeError(f"agq-switch died:\n{sw.output()[-3000:]}")
    return m.group(1), m.group(2)


def _exit_on_signal(signum, frame):
    # SystemExit unwinds through every `with Rack(...)` and then atexit.
    raise SystemExit(128 + signum)


def _main(argv):
    """scripts/rack.sh's back end: up / down / list / cleanup."""
    import argparse
    ap = argparse.ArgumentParser(prog="rack.sh")
    sub = ap.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up")
    u.add_argument("hosts", type=int)
    u.add_argument("--driver", default="auto", choices=["auto", "af_xdp", "af_packet"])
    u.add_argument("--mgmt", action="store_true")
    u.add_argument("--no-switch", action="store_true")
    u.add_argument("--dir", default=None)
    u.add_argument("--switch-args", default="")
    d = sub.add_parser("down")
    d.add_argument("tag", nargs="?")
    sub.add_parser("list")
    sub.add_parser("cleanup")
    a = ap.parse_args(argv)
    if a.cmd == "up":
        tag = _unused_tag()
        wd = Path(a.dir or f"/tmp/agq-rack-{tag}")
        wd.mkdir(parents=True, exist_ok=True)
        rack = Rack(a.hosts, wd, driver=a.driver, mgmt=a.mgmt, persistent=True, tag=tag)
        rack.up()
        try:
            if not a.no_switch:
                rack.start_switch(args=a.switch_args.split())  # keeps running: rack.sh down stops it
        except BaseException:
            rack.close()
            raise
        print(f"rack {tag}: {a.hosts} hosts, work dir {wd}")
        if rack.switch:
            print(f"  agq-switch on net_{rack.driver} ports, pid {rack.switch.pid}, log {rack.switch.log}, "
                  f"config {wd / 'rack-switch.toml'}")
            print(f"  agqctl --socket {rack.ctl} counters")
        if rack.mgmt:
            print(f"  management network: root namespace {rack.mgmt_root_ip} (bridge {PREFIX}{tag}br)")
        for h in rack.hosts:
            print(f"  {h.name}: ip netns exec {h.netns} ...   kernel {h.ip} {h.mac} on {h.ifname}, "
                  f"agq {h.agq_ip} {h.agq_mac} (--vdev={h.vdev()}), switch port {h.port}"
                  + (f", mgmt {h.mgmt_ip}" if h.mgmt_ip else ""))
        print(f"  scripts/rack.sh down {tag}")
        return 0
    if a.cmd == "down":
        tags = [a.tag] if a.tag else sorted({_NAME.match(n).group(1) for n in leftovers()} |
                                             ({p.stem for p in STATE_DIR.glob("*.json")} if STATE_DIR.exists() else set()))
        for t in tags:
            remove_tag(t)
            print(f"rack {t}: removed")
        return 0
    if a.cmd == "list":
        for p in sorted(STATE_DIR.glob("*.json")) if STATE_DIR.exists() else []:
            print(p.stem, p.read_text())
        for n in leftovers():
            print(" ", n)
        return 0
    for t in cleanup_stale():
        print(f"rack {t}: stale, removed")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
