"""A local agq-switch for one training job: the switch (agq pipeline, one
memif server port per rank plus one for the job's PS), and the PS
(agq-worker --role ps) that sums the sequences the switch has no memory
for. Used by the example, the training benchmark and the tests; every
process it starts is stopped by close(), also on error."""
import os
import signal
import subprocess
import time
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parents[3]
BUILD_DIR = Path(os.environ.get("AGQ_BUILD_DIR", SOURCE_DIR / "build"))


def binary(name: str) -> Path:
    for cand in (BUILD_DIR / "switch" / name, BUILD_DIR / "workers" / name, BUILD_DIR / name):
        if cand.exists():
            return cand
    raise FileNotFoundError(f"{name} is not built under {BUILD_DIR} (ninja -C build agq-switch agq-worker agqctl)")


def endpoint(job: int, host: int):
    """lib/agq_wire.cpp's default identities (the switch's [[job.worker]] use the same)."""
    jh, jl = job >> 8, job & 0xFF
    return f"10.{128 | jh}.{jl}.{host}", f"02:00:01:{jh:02x}:{jl:02x}:{host:02x}"


def memif(index: int, sock: Path, role: str) -> str:
    return f"net_memif{index},role={role},id=0,socket={sock},socket-abstract=no"


class LocalSwitch:
    """Port r = rank r's memif socket; port N = the PS."""

    def __init__(self, workdir, workers: int, job_id: int = 1, slots: int = 64, rows: int = 16,
                 max_width: int = 32, total_rows: int = 64, total_slots: int = 256, lcore: str = "0",
                 idle_sleep_us: int = 100, with_ps: bool = True):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.job_id, self.workers = job_id, workers
        self.socks = [self.dir / f"w{r}.sock" for r in range(workers)] + [self.dir / "ps.sock"]
        self.ctl = self.dir / "ctl.sock"
        self.procs = []
        tag = f"t{os.getpid()}x{int(time.monotonic() * 1000) % 100000}"
        self.tag = tag
        ps_ip, ps_mac = endpoint(job_id, 254)
        cfg = [f'[switch]\npipeline = "agq"\n[agq]\ntotal_rows = {total_rows}\ntotal_slots = {total_slots}\n',
               f'[[job]]\nid = {job_id}\nworkers = {workers}\nslots = {slots}\nrows = {rows}\n'
               f'delivery = "multicast"\nps_port = {workers}\nps_ip = "{ps_ip}"\nps_mac = "{ps_mac}"\n'
               f'max_width = {max_width}\n']
        for w in range(workers):
            ip, mac = endpoint(job_id, w + 1)
            cfg.append(f'[[job.worker]]\nid = {w}\nport = {w}\nip = "{ip}"\nmac = "{mac}"\n')
        self.config = self.dir / "agq.toml"
        self.config.write_text("\n".join(cfg))
        try:
            vd = [f"--vdev={memif(i, s, 'server')}" for i, s in enumerate(self.socks)]
            self._switch_argv = [binary("agq-switch"), *self._eal(f"{tag}sw", lcore, 256), *vd, "--",
                                 "--config", self.config, "--ctl-socket", self.ctl, "--idle-sleep-us", idle_sleep_us]
            self._start_switch()
            if with_ps:
                self.ps = self._start("ps", [binary("agq-worker"), *self._eal(f"{tag}ps", "1", 64),
                                             f"--vdev={memif(0, self.socks[workers], 'client')}", "--",
                                             "--protocol", "agq", "--role", "ps", "--job-id", job_id, "--workers",
                                             workers, "--slots", slots, "--elements", 32, "--progress", 0,
                                             "--idle-sleep-us", idle_sleep_us])
                self._wait(lambda: "ready" in self.log("ps"), self.ps, "PS ready")
        except BaseException:
            self.close()
            raise

    def _start_switch(self):
        self.switch = self._start("switch", self._switch_argv)
        self._wait(lambda: all(s.exists() for s in self.socks) and self.ctl.exists(), self.switch, "switch sockets")

    def restart_switch(self, down_s: float = 0.5):
        """SIGKILL the switch (no orderly disconnect: its peers see their
        links drop) and start it again from the same config after down_s:
        empty registers, a new boot epoch, the job from the config."""
        self.switch.kill()
        self.switch.wait()
        self.procs = [(n, p) for n, p in self.procs if p is not self.switch]
        for s in [*self.socks, self.ctl]:
            s.unlink(missing_ok=True)
        time.sleep(down_s)
        self._start_switch()
        self.procs.insert(0, self.procs.pop())  # close() stops its peers first, as before

    @staticmethod
    def _eal(prefix, lcore, mem):
        return ["--no-huge", "-m", mem, "--no-pci", "-l", lcore, "--file-prefix", prefix,
                "--log-level=warning", "--no-telemetry"]

    def _start(self, name, argv):
        f = open(self.dir / f"{name}.log", "wb")
        p = subprocess.Popen([str(a) for a in argv], stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        f.close()
        self.procs.append((name, p))
        return p

    def log(self, name):
        p = self.dir / f"{name}.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def _wait(self, pred, proc, what, timeout=20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred():
                return
            if proc.poll() is not None:
                raise RuntimeError(f"{what}: the process exited {proc.returncode}:\n{self.log(what.split()[0])[-2000:]}")
            time.sleep(0.05)
        raise TimeoutError(f"timed out after {timeout} s waiting for {what}")

    def vdev(self, rank: int) -> str:
        """The --vdev of rank's port (a memif client of the switch)."""
        return memif(0, self.socks[rank], "client")

    def agqctl(self, *words, check=True) -> str:
        r = subprocess.run([str(binary("agqctl")), "--socket", str(self.ctl), *map(str, words)],
                           capture_output=True, text=True, timeout=10)
        if check and r.returncode != 0:
            raise RuntimeError(f"agqctl {' '.join(map(str, words))}: {r.stderr or r.stdout}")
        return r.stdout

    def counters(self) -> dict:
        out = {}
        for line in self.agqctl("counters").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].lstrip("-").isdigit():
                out[parts[0]] = int(parts[1])
        return out

    def close(self):
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
