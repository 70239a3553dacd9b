"""Process harness for integration tests: builds EAL command lines for
virtual ports, starts the project's binaries, and guarantees that every
process a test starts is stopped when the test ends, also on failure.

Use it as a pytest fixture (`procs`, see conftest.py) or as a context
manager (`with Processes(tmpdir) as procs:`).
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

SOURCE_DIR = Path(os.environ.get("AGQ_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD_DIR = Path(os.environ.get("AGQ_BUILD_DIR", SOURCE_DIR / "build"))


def binary(name: str) -> Path:
    for cand in (BUILD_DIR / "switch" / name, BUILD_DIR / "workers" / name, BUILD_DIR / "bench" / name,
                 BUILD_DIR / name):
        if cand.exists():
            return cand
    raise FileNotFoundError(f"{name} not built under {BUILD_DIR}")


def unique_prefix(tag: str) -> str:
    """A DPDK --file-prefix no other process on this machine uses."""
    global _prefix_seq
    _prefix_seq += 1
    return f"agq{tag}{os.getpid()}x{_prefix_seq}"


_prefix_seq = 0


def eal_args(prefix: str, lcores: str = "0", vdevs: list[str] = (), mem_mb: int = 256) -> list[str]:
    """EAL flags that work on a NIC-less machine without hugepages."""
    args = ["--no-huge", "-m", str(mem_mb), "--no-pci", "-l", lcores,
            "--file-prefix", prefix, "--log-level=warning", "--no-telemetry"]
    for v in vdevs:
        args.append(f"--vdev={v}")
    return args


def memif_vdev(index: int, socket: Path, role: str, memif_id: int = 0) -> str:
    # socket-abstract=no: a file socket per test, so parallel runs never collide (P5)
    return f"net_memif{index},role={role},id={memif_id},socket={socket},socket-abstract=no"


def wait_for(pred, timeout: float, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def accepting(socket_path: Path) -> bool:
    """The control socket takes connections. Its file exists from bind(),
    before listen(): a client then is refused (seen under load)."""
    import socket
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(str(socket_path))
        return True
    except OSError:
        return False
    finally:
        s.close()


class Proc:
    def __init__(self, name: str, popen: subprocess.Popen, log: Path):
        self.name, self.popen, self.log = name, popen, log

    @property
    def pid(self):
        return self.popen.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, sig=signal.SIGINT, timeout: float = 10.0) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        return self.popen.returncode

    def wait(self, timeout: float) -> int:
        return self.popen.wait(timeout)


class Processes:
    """Starts processes with output captured to files in `workdir`; stops
    all of them (SIGINT, then SIGKILL) on close(), in reverse start order."""

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.procs: list[Proc] = []

    def start(self, name: str, argv: list[str], env=None) -> Proc:
        log = self.workdir / f"{name}.log"
        f = open(log, "wb")
        p = subprocess.Popen([str(a) for a in argv], stdout=f, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=env)
        f.close()
        proc = Proc(name, p, log)
        self.procs.append(proc)
        return proc

    def close(self):
        for p in reversed(self.procs):
            p.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def run(argv: list, timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout)


def agqctl(socket: Path, *words: str, timeout: float = 30.0) -> subprocess.CompletedProcess:
    # Above agqctl's own 15 s (ctl_protocol.hpp): on a loaded 2-vCPU machine
    # the switch's lcores may take a while to be scheduled and ack.
    return run([binary("agqctl"), "--socket", socket, *words], timeout=timeout)


def counters(socket: Path) -> dict[str, int]:
    """`agqctl counters` as a dict name -> value."""
    r = agqctl(socket, "counters")
    assert r.returncode == 0, r.stdout + r.stderr
    out = {}
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


# A classic switch forwarding L2 from memif port 0 to port 1 (the MAC
# bench_gen's l2 traffic is sent to), the set-up of the memif tests.
L2_CONFIG = ('[switch]\npipeline = "classic"\n[classic]\nps_port = 1\nworker_ports = [0]\n'
             '[[mac]]\nmac = "02:00:00:00:00:02"\nport = 1\n')


def memif_switch(procs, tmp_path: Path, tag: str, lcores: str = "0", extra: list = (), config: str = L2_CONFIG):
    """agq-switch (idle back-off 50 us) as the memif server of ports 0 and
    1, up and listening: (process, control socket, [m0.sock, m1.sock])."""
    cfg = tmp_path / "sw.toml"
    cfg.write_text(config)
    ctl = tmp_path / "ctl.sock"
    socks = [tmp_path / f"m{i}.sock" for i in range(2)]
    sw = procs.start("switch", [binary("agq-switch"),
                                *eal_args(unique_prefix(tag), lcores,
                                          [memif_vdev(i, socks[i], "server") for i in range(2)]),
                                "--", "--config", cfg, "--ctl-socket", ctl, "--idle-sleep-us", "50", *extra])
    wait_for(lambda: ctl.exists() and all(s.exists() for s in socks), 30, what="switch up")
    return sw, ctl, socks
