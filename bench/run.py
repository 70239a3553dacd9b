#!/usr/bin/python3
"""Runs agq-switch's benchmark set and writes results/<date>/results.md,
results.json and PNG plots. Numbers only: nothing here passes or fails on
time. See bench/README.md for what each part measures and why.

  bench/run.py            full set (~10-15 min on 2 cores)
  bench/run.py --quick    short run (~3 min)

Quiet by default: one progress line (rewritten in place on a terminal).
Every process it starts is stopped by pid (SIGINT, then SIGKILL) when it
finishes, on Ctrl-C and on errors; DPDK runtime directories and memif
sockets it created are removed.
"""
from __future__ import annotations

import argparse
import atexit
import datetime as dt
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1]
# Frame sizes: l2 and classic frames are Eth + IPv4 + UDP + the 73-byte
# classic AGQ header (115 B); agq DATA frames carry the 148-byte agq header
# with 32 lanes (190 B).
FRAME_BYTES = {"l2": 115, "classic": 115, "agq": 190}

# agq traffic of the switch benchmarks: N logical workers per stream behind
# the stream's port, req_width bits, a window of slots (bench_gen --traffic
# agq; its addresses: 10.200.k.(w+1), PS 10.200.k.254). The environment
# may set another shape (AGQ_WORKERS, AGQ_WIDTH, AGQ_SLOTS): the PGO
# training (scripts/build-pgo.sh) runs one the benchmark does not measure.
AGQ_WORKERS = int(os.environ.get("AGQ_WORKERS", 4))
AGQ_WIDTH = int(os.environ.get("AGQ_WIDTH", 16))
AGQ_SLOTS = int(os.environ.get("AGQ_SLOTS", 256))


def agq_jobs(ports: list[tuple[int, int]]) -> str:
    """[agq] + one [[job]] per stream k = (worker port, PS port): job k + 1,
    all N workers on the stream's port, rows for AGQ_WIDTH-bit windows."""
    t = "[agq]\ntotal_rows = 4096\ntotal_slots = 32768\n"
    for k, (port, ps) in enumerate(ports):
        t += (f'[[job]]\nid = {k + 1}\nworkers = {AGQ_WORKERS}\nslots = {AGQ_SLOTS}\n'
              f'rows = {AGQ_SLOTS * AGQ_WIDTH // 32}\ndelivery = "multicast"\nps_port = {ps}\n'
              f'ps_ip = "10.200.{k}.254"\nps_mac = "02:00:c8:{k:02x}:00:fe"\n')
        for w in range(AGQ_WORKERS):
            t += (f'[[job.worker]]\nid = {w}\nport = {port}\nip = "10.200.{k}.{w + 1}"\n'
                  f'mac = "02:00:c8:{k:02x}:00:{w:02x}"\n')
    return t


# Pipelines the switch benchmarks run: the switch's pipeline, its config
# sections for the pcap set-up (streams enter on ports 0 and 1, sinks 2 and
# 3) and the memif set-up (generator on port 0, port 1 back to it), and the
# bench_gen traffic. The pipeline-cost part has its own list in
# bench_pipeline.cpp.
PIPELINES = {
    "classic": {
        "pipeline": "classic",
        "pcap_section": '[classic]\nps_port = 2\nworker_ports = [3]\n',
        "memif_section": '[classic]\nps_port = 1\nworker_ports = [0]\n',
        "traffic": "classic",
        "gen_args": [],
    },
    # DATA of job k+1 on stream k; every sequence allocates, aggregates and
    # multicasts a RESULT to its N workers (N replicas back out of the
    # stream's port: the pcap port's dummy tx / the generator's memif port).
    "agq": {
        "pipeline": "agq",
        "pcap_section": agq_jobs([(0, 2), (1, 3)]),
        "memif_section": agq_jobs([(0, 1)]),
        "traffic": "agq",
        "gen_args": ["--workers", AGQ_WORKERS, "--width", AGQ_WIDTH, "--window", AGQ_SLOTS],
    },
}
# Traffic kinds of the throughput/latency parts: plain L2 forwarding through
# the classic program's Forwarding control, then one per pipeline.
TRAFFICS = ["l2"] + list(PIPELINES)
# testpmd io twice: with its default mbuf pool and with packed mbufs.
# Without hugepages (every run here is --no-huge) DPDK keeps each pool object
# inside one 4 KiB page, so a default 2176-byte-room mbuf gets a page of its
# own and every mbuf header lands in the same L1 set. agq-switch builds its
# pool on memory of its own (dataplane/mbuf_pool.cpp: packed at the default
# room, transparent huge pages where the kernel gives them); testpmd's
# nearest equivalent is a room raised until an object is just over a page
# (page - sizeof(rte_mbuf) = 3968 bytes here), so objects are laid back to
# back, 65 cache lines apart: `--mbuf-size`, the like-for-like geometry
# ("testpmd packed"; it still has 4 KiB pages).
PAGE = os.sysconf("SC_PAGE_SIZE")
PACKED_MBUF_ROOM = max(2176, PAGE - 128)
TESTPMD_DUTS = {"testpmd": [], "testpmd_packed": [f"--mbuf-size={PACKED_MBUF_ROOM}"]}
# A 2-lcore rep counts as "fast placement" when every cross-vCPU probe around
# it (bench_xcore, one-way ns) is below this: the VM class shows ~30-60 ns or
# 160-280 ns and nothing between.
FAST_XCORE_NS = 120.0
# pcap replay modes -> dataplane lcores (see Bench.pcap_vdevs).
PCAP_MODES = {"1": 1, "2 steered": 2, "2 hand-off": 2}


# --------------------------------------------------------------------------
# process bookkeeping

class Procs:
    """Every child process, stopped by pid; DPDK prefixes and sockets removed."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.live: list[subprocess.Popen] = []
        self.prefixes: list[str] = []
        self.seq = 0

    def prefix(self, tag: str) -> str:
        self.seq += 1
        p = f"agqb{tag}{os.getpid()}x{self.seq}"
        self.prefixes.append(p)
        return p

    def start(self, name: str, argv: list, env=None) -> subprocess.Popen:
        # A fresh log per process: the per-second rates of an earlier run of
        # the same name must not be read as this run's (they were, in append
        # mode: every rep after the first repeated the first one's numbers).
        self.seq += 1
        name = f"{name}.{self.seq}"
        log = open(self.workdir / f"{name}.log", "wb")
        p = subprocess.Popen([str(a) for a in argv], stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=env)
        log.close()
        p.log_path = self.workdir / f"{name}.log"  # type: ignore[attr-defined]
        self.live.append(p)
        return p

    def stop(self, p: subprocess.Popen, timeout: float = 10.0) -> int | None:
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGINT)
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p in self.live:
            self.live.remove(p)
        return p.returncode

    def wait(self, p: subprocess.Popen, timeout: float) -> int | None:
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        return self.stop(p)

    def close(self):
        for p in reversed(list(self.live)):
            self.stop(p, timeout=5)
        for pre in self.prefixes:
            shutil.rmtree(f"/var/run/dpdk/{pre}", ignore_errors=True)


def output(p) -> str:
    try:
        return Path(p.log_path).read_text(errors="replace")
    except OSError:
        return ""


def json_lines(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return out


def lcore_tids(pid: int, select) -> list[int]:
    """Thread ids of pid that select(pid, tid, name) picks."""
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                if select(pid, int(tid), Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()):
                    out.append(int(tid))
            except (OSError, ValueError):
                pass
    except OSError:
        pass
    return out


def thread_cpu_ns(pid: int, select) -> int | None:
    """CPU time (ns, /proc schedstat) of the threads of pid that
    select(pid, tid, name) picks; None when the process is gone."""
    total, found = 0, False
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            if select(pid, int(tid), name):
                total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
                found = True
        except (OSError, ValueError, IndexError):
            pass
    return total if found else None


def switch_lcore(pid: int, tid: int, name: str) -> bool:
    """agq-switch's dataplane lcores: the main thread (the main lcore) and
    EAL's worker lcores (rte-worker-N in DPDK 22.11, lcore-worker-N in later
    releases); its control and stats threads are not lcores."""
    return tid == pid or name.startswith(("rte-worker", "lcore-worker"))


def testpmd_lcore(pid: int, tid: int, name: str) -> bool:
    """testpmd's forwarding lcores (its main lcore only prints statistics)."""
    return name.startswith(("rte-worker", "lcore-worker"))


def wait_for(pred, timeout: float, interval: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(interval)
    return False


# A memif rep's switch that refused less than this share of the generator's
# frames ran at the generator's rate, not its own (summarize()).
SWITCH_LIMITED_REFUSED = 0.10


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# --------------------------------------------------------------------------
# progress line

class Progress:
    def __init__(self, verbose: bool):
        self.tty = sys.stderr.isatty()
        self.verbose = verbose
        self.t0 = time.monotonic()
        self.last = ""

    def __call__(self, msg: str):
        line = f"[bench {time.monotonic() - self.t0:5.0f}s] {msg}"
        if self.tty and not self.verbose:
            sys.stderr.write("\r\033[K" + line[:150])
            sys.stderr.flush()
        elif self.verbose or msg.split(":")[0] != self.last.split(":")[0]:
            print(line, file=sys.stderr, flush=True)  # not a terminal: one line per part
        self.last = msg

    def done(self):
        if self.tty and not self.verbose:
            sys.stderr.write("\n")


# --------------------------------------------------------------------------
# the parts

def eal(prefix: str, lcores: list[str], vdevs: list[str], mem: int = 1024) -> list[str]:
    args = ["--no-huge", "-m", str(mem), "--no-pci", *lcores, "--file-prefix", prefix,
            "--log-level=warning", "--no-telemetry"]
    return args + [f"--vdev={v}" for v in vdevs]


class Bench:
    def __init__(self, args, build: Path, work: Path, progress: Progress):
        self.a, self.build, self.work, self.progress = args, build, work, progress
        self.procs = Procs(work)
        self.quick = args.quick
        self.bin = {
            "switch": build / "switch" / "agq-switch",
            "worker": build / "workers" / "agq-worker",
            "pipeline": build / "bench" / "bench_pipeline",
            "gen": build / "bench" / "bench_gen",
            "mpi": build / "bench" / "bench_mpi_allreduce",
            "stages": build / "bench" / "bench_worker_stages",
            "ctl": build / "switch" / "agqctl",
            "xcore": build / "bench" / "bench_xcore",
        }
        self.testpmd = shutil.which("dpdk-testpmd")
        self.worker_extra: list[str] = []  # agq-worker flags of the build being measured (--compare)
        # agq workers' memif rings: 2^11 descriptors. N = 8 puts 4 logical
        # workers x 256 slots = 1024 RESULTs in flight towards one process,
        # exactly the default ring (2^10): a descheduled worker then loses
        # RESULTs in the switch's tx (dp.tx_dropped) at "0 % loss".
        self.rsize = os.environ.get("AGQ_MEMIF_RSIZE", ",rsize=11")

    # ---- pipeline cost (Google Benchmark) --------------------------------
    def pipeline_cost(self) -> dict:
        self.progress("pipeline cost: bench_pipeline")
        out = self.work / "bench_pipeline.json"
        reps = 1 if self.quick else 3
        argv = [self.bin["pipeline"], f"--benchmark_min_time={0.05 if self.quick else 0.3}",
                f"--benchmark_repetitions={reps}", "--benchmark_report_aggregates_only=true",
                f"--benchmark_out={out}", "--benchmark_out_format=json"]
        p = self.procs.start("bench_pipeline", argv)
        self.procs.wait(p, 1200)  # ~100 rows x reps; a loaded 2-vCPU machine stretches each
        data = json.loads(out.read_text())
        rows = {}
        for b in data["benchmarks"]:
            if reps > 1 and b.get("aggregate_name") != "median":
                continue
            name = b.get("run_name", b["name"])
            rows[name] = {k: b[k] for k in ("ns_per_pkt", "ns_per_elem", "ns_per_lane", "values_per_cell", "drop_frac",
                                             "trace_pkts", "lanes", "width_bits", "passes_per_pkt", "out_per_pkt")
                          if k in b}
        return {"repetitions": reps, "benchmarks": rows}

    # ---- switch throughput, pcap replay ------------------------------------
    def traffics(self) -> list[str]:
        return [t for t in TRAFFICS if not self.a.traffic or t in self.a.traffic.split(",")]

    def pcap_modes(self) -> list[str]:
        """--pcap-modes: "1", "steered", "hand-off" (short names of PCAP_MODES)."""
        if not self.a.pcap_modes:
            return list(PCAP_MODES)
        want = self.a.pcap_modes.split(",")
        return [m for m in PCAP_MODES if m in want or m.removeprefix("2 ") in want]

    def baseline_switch(self) -> Path | None:
        """--baseline-build: a second agq-switch (e.g. main's) run beside this
        build's on the same ports, in the same reps (the "baseline" DUT)."""
        return self.a.baseline_build / "switch" / "agq-switch" if self.a.baseline_build else None

    @staticmethod
    def gen_traffic(t: str) -> list:
        pipe = PIPELINES.get(t, {})
        return ["--traffic", pipe.get("traffic", t), *pipe.get("gen_args", [])]

    def pcaps(self) -> dict:
        """Per traffic and stream: the whole stream (key "all") and, for the
        steered modes, one file per rx queue: agq and classic frames whose
        shard % 2 == q (as rte_flow on the UDP source port would steer them);
        shard-less traffic (l2) gets the whole stream on both queues."""
        d = {}
        for t in self.traffics():
            for s in (0, 1):
                for q in ("all", 0, 1):
                    f = self.work / f"{t}_{s}_{q}.pcap"
                    split = ["--shard-mod", 2, "--shard-rem", q] if t in ("agq", "classic") and q != "all" else []
                    subprocess.run([str(a) for a in [self.bin["gen"], "--write-pcap", f, *self.gen_traffic(t),
                                    "--stream", s, *split]], check=True, capture_output=True)
                    d[(t, s, q)] = f
        return d

    @staticmethod
    def pcap_vdevs(traffic: str, mode: str, pcaps: dict) -> tuple[list[str], int]:
        """The replay ports of a mode and their rx queue count: "1" and
        "2 steered" replay a stream as two rx queues split by shard parity (a
        queue per lcore, every packet on its owner's queue); "2 hand-off" as
        one queue, so half of every agq stream reaches the other lcore
        through its hand-off ring."""
        qs = ["all"] if mode == "2 hand-off" else [0, 1]
        vdevs = [f"net_pcap{s}," + ",".join(f"rx_pcap={pcaps[(traffic, s, q)]}" for q in qs) + ",infinite_rx=1"
                 for s in (0, 1)]
        vdevs += ["net_null0,no-rx=1", "net_null1,no-rx=1"]
        return vdevs, len(qs)

    def config(self, name: str, section: str, extra: str = "", pipeline: str = "classic") -> Path:
        f = self.work / f"{name}.toml"
        f.write_text(f'[switch]\npipeline = "{pipeline}"\n' + section + extra)
        return f

    def run_pcap_switch(self, traffic: str, mode: str, pcaps: dict, seconds: float,
                        binary: Path | None = None) -> float | None:
        pipe = PIPELINES.get(traffic, PIPELINES["classic"])
        # static MACs: stream k's frames go to sink port 2 + k
        macs = ('[[mac]]\nmac = "02:00:00:00:00:02"\nport = 2\n'
                '[[mac]]\nmac = "02:00:00:00:01:02"\nport = 3\n')
        cfg = self.config(f"pcap_{traffic}", pipe["pcap_section"], macs, pipe["pipeline"])
        vdevs, _ = self.pcap_vdevs(traffic, mode, pcaps)
        lcores = PCAP_MODES[mode]
        core = ["-l", "0" if lcores == 1 else "0,1"]
        sock = self.work / "ctl.sock"
        p = self.procs.start(f"switch_pcap_{traffic}_{mode.replace(' ', '_')}",
                             [binary or self.bin["switch"], *eal(self.procs.prefix("sp"), core, vdevs), "--",
                              "--config", cfg, "--ctl-socket", sock, "--idle-sleep-us", "0",
                              "--stats-interval", "1", "--quiet"])
        # Packets that reached a program: rx minus those a full hand-off ring
        # dropped (the replay is not flow-controlled, so an overloaded owner
        # lcore would otherwise count as throughput).
        rates = self.sample(p, r"stats: rx [\d.]+ Mpps  processed ([\d.]+) Mpps", seconds,
                            lcore_threads=switch_lcore)
        return median(rates) if rates else None

    def sample(self, p, pattern: str, seconds: float, split: str | None = None,
               lcore_threads=None) -> list[float]:
        """Per-second rates from a running process's log: waits for the first
        report (start-up takes a while), then `seconds` more; the first
        report (a partial second) is dropped. With lcore_threads (a
        predicate on (pid, tid, thread name)), self.last_cpu is set to the
        CPU those threads got over the same window, in vCPUs (1.0 = one
        vCPU all the time): on a shared machine a busy-polling lcore gets
        less than a whole vCPU, and rate / CPU is what one lcore does per
        second of CPU it actually had."""
        def reports():
            text = output(p)
            if split:
                return [sum(int(x) for x in re.findall(pattern, b)) / 1e6 for b in text.split(split)[1:]]
            return [float(m.group(1)) for m in re.finditer(pattern, text)]
        wait_for(lambda: len(reports()) >= 1 or p.poll() is not None, 30, 0.1)
        t0, c0 = time.monotonic(), thread_cpu_ns(p.pid, lcore_threads) if lcore_threads else None
        wait_for(lambda: len(reports()) >= 2 + seconds or p.poll() is not None, seconds + 5, 0.1)
        t1, c1 = time.monotonic(), thread_cpu_ns(p.pid, lcore_threads) if lcore_threads else None
        self.last_cpu = (c1 - c0) / 1e9 / (t1 - t0) if c0 is not None and c1 is not None and c1 > c0 else None
        self.procs.stop(p)
        return reports()[1:]

    def run_pcap_testpmd(self, traffic: str, mode: str, pcaps: dict, seconds: float,
                         dut: str = "testpmd") -> float | None:
        vdevs, nq = self.pcap_vdevs(traffic, mode, pcaps)
        lcores = PCAP_MODES[mode]
        # Forwarding lcores on the switch's CPUs; testpmd's main lcore (which
        # only prints statistics and sleeps) on the other CPU or beside it.
        cores = ["--lcores", "0@1,1@0"] if lcores == 1 else ["--lcores", "0@0,1@0,2@1"]
        p = self.procs.start(f"{dut}_pcap_{traffic}_{mode.replace(' ', '_')}",
                             ["stdbuf", "-oL", self.testpmd, *eal(self.procs.prefix("tp"), cores, vdevs), "--",
                              "--forward-mode=io", "--stats-period", "1", "--total-num-mbufs=16384",
                              "--portlist=0,2,1,3", f"--nb-cores={lcores}", f"--rxq={nq}", f"--txq={nq}",
                              *TESTPMD_DUTS[dut]])
        # A stats block is the sum of Rx-pps over the ports.
        rates = self.sample(p, r"Rx-pps:\s+(\d+)", seconds, split="Port statistics", lcore_threads=testpmd_lcore)
        return median(rates) if rates else None

    def pcap_throughput(self) -> dict:
        pcaps = self.pcaps()
        reps = self.a.reps or (1 if self.quick else 3)
        seconds = 3 if self.quick else 5
        runs = []
        modes = [m for m in PCAP_MODES if m in self.pcap_modes()]
        base = self.baseline_switch()
        for r in range(reps):
            for traffic in self.traffics():
                for mode in modes:
                    # interleaved, alternating order: every DUT sees the same machine state
                    order = ["switch", "testpmd", "testpmd_packed"] + (["baseline"] if base else [])
                    if r % 2:
                        order.reverse()
                    res = {}
                    if n_lcores(mode) > 1:  # the host's vCPU placement, before and after this rep's DUTs
                        res["xcore_ns"] = [self.xcore_ns()]
                    for dut in order:
                        self.progress(f"throughput pcap: rep {r + 1}/{reps} {traffic} lcores={mode} {dut}")
                        self.last_cpu = None
                        if dut in TESTPMD_DUTS:
                            # testpmd, the reference, is started twice and the
                            # faster start kept: from one start to the next it
                            # runs ~10% (pcap) to ~3x (memif) slower for no
                            # reason of the machine's (bench/README, session
                            # 2026-11-27 II). This can only lower the ratios.
                            best, best_cpu = None, None
                            for _ in range(2):
                                self.last_cpu = None
                                v = self.run_pcap_testpmd(traffic, mode, pcaps, seconds, dut)
                                if v is not None and (best is None or v > best):
                                    best, best_cpu = v, self.last_cpu
                            res[dut], res[dut + "_cpu"] = best, best_cpu
                            continue
                        res[dut] = self.run_pcap_switch(traffic, mode, pcaps, seconds,
                                                        base if dut == "baseline" else None)
                        res[dut + "_cpu"] = self.last_cpu
                    if "xcore_ns" in res:
                        res["xcore_ns"].append(self.xcore_ns())
                    runs.append({"rep": r, "traffic": traffic, "lcores": mode, **res})
        return {"seconds_per_run": seconds, "reps": reps, "runs": runs, "summary": summarize(runs),
                "scaling": scaling(runs)}

    def xcore_ns(self) -> float | None:
        """One-way cache-line latency between vCPUs 0 and 1 (bench_xcore's
        ping-pong median), or None without the tool. On this VM class it is
        ~30 ns or 160-280 ns depending on where the host put the vCPUs, and
        every 2-lcore rate follows it (the hand-off above all)."""
        if not self.bin["xcore"].exists():
            return None
        try:
            out = subprocess.run([str(self.bin["xcore"]), "--rounds", "5000", "--batches", "5"],
                                 capture_output=True, text=True, timeout=20).stdout
        except subprocess.TimeoutExpired:
            return None
        m = re.search(r"one_way_ns ([\d.]+)", out)
        return float(m.group(1)) if m else None

    def wait_close_vcpus(self, what: str, limit_s: float = 60.0) -> float | None:
        """xcore_ns(), probed again every 5 s while the vCPUs are apart
        (>= FAST_XCORE_NS), for at most limit_s: the last probe (None
        without the tool)."""
        deadline = time.monotonic() + limit_s
        v = self.xcore_ns()
        while v is not None and v >= FAST_XCORE_NS and time.monotonic() < deadline:
            self.progress(f"{what}: vCPUs apart ({v:.0f} ns), waiting")
            time.sleep(5)
            v = self.xcore_ns()
        return v

    # ---- profile-guided build: the training run --------------------------
    def pgo_train(self) -> dict:
        """--only pgo_train (scripts/build-pgo.sh): the pcap replays of every
        traffic and mode, a few seconds each, with the --build-dir switch --
        an AGQ_PGO=generate build, whose profiles are written as each switch
        exits. Returns the (instrumented, so slow) rates, for the log only."""
        pcaps = self.pcaps()
        secs = 2.0 if self.a.quick else 4.0
        rates = {}
        for traffic in self.traffics():
            for mode in self.pcap_modes():
                self.progress(f"pgo training: {traffic}, {mode} lcore(s)")
                rates[f"{traffic} {mode}"] = self.run_pcap_switch(traffic, mode, pcaps, secs)
        return rates

    # ---- instructions per packet: callgrind on the 1-lcore pcap replay -----
    # Where each DUT's instructions go, by group of functions (first match).
    INSTR_GROUPS = [
        ("port I/O", r"librte_net_pcap|librte_net_null"),
        ("TLS lookups", r"__tls_get_addr"),
        ("replicas", r"SwitchDataplane::multicast|egress_replicas"),
        ("program", r"::pipeline::|process_burst|process_run"),
        ("dataplane", r"agq::dataplane::"),
    ]

    def instructions(self) -> dict:
        """Instructions per packet, counted (callgrind), not timed: a number a
        loaded machine does not disturb. Each DUT (this agq-switch, the
        --baseline-build one, testpmd io) replays the same 1-lcore pcap
        ports under callgrind twice, for a short and a long time; the
        difference of the two runs' instructions over the difference of
        their packets is the per-packet cost without start-up and exit.
        Lane kernels run as AVX2 under valgrind (no AVX-512)."""
        if not (shutil.which("valgrind") and shutil.which("callgrind_annotate")):
            return {"skipped": "valgrind is not installed (scripts/setup.sh installs it)"}
        pcaps = self.pcaps()
        short, long_ = (4, 12) if self.quick else (8, 30)
        base = self.baseline_switch()
        rows = []
        for traffic in self.traffics():
            for dut in ["switch"] + (["baseline"] if base else []) + (["testpmd"] if self.testpmd else []):
                runs = []
                for secs in (short, long_):
                    self.progress(f"instructions: {traffic} {dut} {secs} s under callgrind")
                    r = self.callgrind_run(traffic, dut, secs, pcaps, base)
                    if r:
                        runs.append(r)
                if len(runs) != 2 or runs[1]["packets"] <= runs[0]["packets"]:
                    rows.append({"traffic": traffic, "dut": dut, "status": "failed"})
                    continue
                dp = runs[1]["packets"] - runs[0]["packets"]
                groups = {g: (runs[1]["groups"].get(g, 0) - runs[0]["groups"].get(g, 0)) / dp
                          for g in [n for n, _ in self.INSTR_GROUPS] + ["other"]}
                rows.append({"traffic": traffic, "dut": dut, "status": "ok", "packets": dp,
                             "per_packet": (runs[1]["total"] - runs[0]["total"]) / dp, "groups": groups,
                             "top": runs[1]["top"]})
        return {"seconds": [short, long_], "rows": rows}

    def callgrind_run(self, traffic: str, dut: str, secs: float, pcaps: dict, base: Path | None) -> dict | None:
        vdevs, nq = self.pcap_vdevs(traffic, "1", pcaps)
        out = self.work / f"callgrind_{traffic}_{dut}_{secs}.out"
        vg = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        sock = self.work / "ctl_cg.sock"
        sock.unlink(missing_ok=True)
        if dut == "testpmd":
            p = self.procs.start(f"cg_testpmd_{traffic}", [*vg, self.testpmd, *eal(self.procs.prefix("ct"), ["--lcores", "0@0,1@0"], vdevs),
                                                          "--", "--forward-mode=io", "--stats-period", "1",
                                                          "--total-num-mbufs=16384", "--portlist=0,2,1,3",
                                                          "--nb-cores=1", f"--rxq={nq}", f"--txq={nq}"])
            if not wait_for(lambda: "Rx-pps" in output(p) or p.poll() is not None, 120, 0.2):
                self.procs.stop(p)
                return None
            time.sleep(secs)
            self.procs.stop(p, timeout=60)
            m = re.findall(r"Accumulated forward statistics for all ports\s*\+*\s*RX-packets:\s*(\d+)", output(p))
            packets = int(m[-1]) if m else None
        else:
            pipe = PIPELINES.get(traffic, PIPELINES["classic"])
            macs = ('[[mac]]\nmac = "02:00:00:00:00:02"\nport = 2\n'
                    '[[mac]]\nmac = "02:00:00:00:01:02"\nport = 3\n')
            cfg = self.config(f"cg_{traffic}", pipe["pcap_section"], macs, pipe["pipeline"])
            binary = base if dut == "baseline" else self.bin["switch"]
            p = self.procs.start(f"cg_{dut}_{traffic}", [*vg, binary, *eal(self.procs.prefix("cs"), ["-l", "0"], vdevs), "--",
                                                         "--config", cfg, "--ctl-socket", sock, "--idle-sleep-us", "0",
                                                         "--stats-interval", "1", "--quiet"])
            if not wait_for(lambda: "stats: rx" in output(p) or p.poll() is not None, 120, 0.2):
                self.procs.stop(p)
                return None
            time.sleep(secs)
            c = subprocess.run([str(self.bin["ctl"]), "--socket", str(sock), "counters"], capture_output=True,
                               text=True, timeout=30).stdout
            self.procs.stop(p, timeout=60)
            packets = next((int(l.split()[1]) for l in c.splitlines() if l.split()[:1] == ["dp.rx"]), None)
        if not packets or not out.exists():
            return None
        ann = subprocess.run(["callgrind_annotate", "--inclusive=no", str(out)], capture_output=True,
                             text=True).stdout
        total, groups, top = 0, {}, []
        for line in ann.splitlines():
            m = re.match(r"\s*([\d,]+) \([\s\d.]+%\)\s+(.*)$", line)
            if not m:
                continue
            n, what = int(m.group(1).replace(",", "")), m.group(2)
            if "PROGRAM TOTALS" in what:
                total = n
                continue
            g = next((name for name, rx in self.INSTR_GROUPS if re.search(rx, what)), "other")
            groups[g] = groups.get(g, 0) + n
            if len(top) < 12:
                top.append((n, re.sub(r"\(.*", "", what.split(":", 1)[-1])[:90]))
        return {"packets": packets, "total": total, "groups": groups, "top": top}

    # ---- memif: generator process -> DUT -> generator ----------------------
    def memif_vdevs(self, role: str, n: int = 2) -> list[str]:
        return [f"net_memif{i},role={role},id=0,socket={self.work}/m{i}.sock,socket-abstract=no" for i in range(n)]

    def start_dut(self, dut: str, name: str, pipeline: str = "classic"):
        for i in range(3):
            (self.work / f"m{i}.sock").unlink(missing_ok=True)
        vdevs = self.memif_vdevs("server")
        if dut == "switch":
            pipe = PIPELINES[pipeline]
            cfg = self.config(f"memif_{pipeline}", pipe["memif_section"],
                              '[[mac]]\nmac = "02:00:00:00:00:02"\nport = 1\n', pipe["pipeline"])
            p = self.procs.start(name, [self.bin["switch"], *eal(self.procs.prefix("sm"), ["-l", "0"], vdevs), "--",
                                        "--config", cfg, "--ctl-socket", self.work / "ctl.sock",
                                        "--idle-sleep-us", "0", "--quiet"])
        else:
            p = self.procs.start(name, ["stdbuf", "-oL", self.testpmd, *eal(self.procs.prefix("tm"), ["--lcores", "0@0,1@0"], vdevs),
                                        "--", "--forward-mode=io", "--stats-period", "1", "--record-core-cycles",
                                        "--total-num-mbufs=16384", "--nb-cores=1", *TESTPMD_DUTS[dut]])
        wait_for(lambda: all((self.work / f"m{i}.sock").exists() for i in range(2)), 15)
        return p

    def switch_busy(self, sock: Path) -> tuple[int, int] | None:
        """(dp.busy_cycles, dp.rx) of the running switch, or None."""
        try:
            out = subprocess.run([str(self.bin["ctl"]), "--socket", str(sock), "counters"], capture_output=True,
                                 text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        c = {l.split()[0]: int(l.split()[1]) for l in out.splitlines() if len(l.split()) == 2 and l.split()[1].isdigit()}
        return (c["dp.busy_cycles"], c["dp.rx"]) if "dp.busy_cycles" in c and "dp.rx" in c else None

    def gen(self, traffic: str, seconds: float, rate: float = 0.0, cpu_of: list[int] | None = None,
            on_report=None) -> dict | None:
        """Throughput runs (rate 0) send prebuilt frames (bench_gen --reuse:
        no per-packet allocation, copy or stamp; only the memif copies), so
        the generator outruns the device under test: its tx_refused (frames
        the DUT's full rings refused) shows it. Latency runs (paced) build
        and stamp every frame. (A zero-copy memif client would copy even
        less, but needs hugepages on both sides: a --no-huge server cannot
        map its regions, "mmap failed: No such device".)"""
        vdevs = self.memif_vdevs("client")
        argv = eal(self.procs.prefix("g"), ["-l", "1"], vdevs, 512)
        extra = ["--reuse"] if rate == 0 else []
        if cpu_of:
            extra += ["--cpu-of", ",".join(str(t) for t in cpu_of)]
        if on_report:  # stays connected after its report until on_report() returns (then SIGINT)
            extra += ["--linger", 30]
        p = self.procs.start("gen", [self.bin["gen"], *argv, "--",
                                     *self.gen_traffic(traffic), "--seconds", seconds, "--warmup", 1 if rate == 0 else 0.5,
                                     "--rate-mpps", f"{rate:.4f}", *extra])
        if on_report:
            wait_for(lambda: json_lines(output(p)) or p.poll() is not None, seconds + 30, 0.1)
            on_report()
            self.procs.stop(p)  # the report is out: end the linger
        else:
            self.procs.wait(p, seconds + 30)
        js = json_lines(output(p))
        return js[-1] if js else None

    def memif(self) -> dict:
        reps = self.a.reps or (1 if self.quick else 3)
        secs = 2 if self.quick else 4
        lat_secs = 1.5 if self.quick else 3
        low = 0.05  # Mpps: one packet every 20 us, no queueing anywhere
        runs, lat = [], []
        # The generator runs on the other vCPU, so every memif rate follows
        # the host's vCPU placement (xcore_ns): probed before and after each
        # device's runs (see the loop below), printed beside the table.
        placement: list[list[tuple[str, float | None]]] = []
        switch_cap: dict = {}  # the switch's saturation rate: sets the 80% load, for testpmd too
        r = 0

        def run_dut(dut: str, res: dict, lat_dut: list) -> None:
            # testpmd forwards every traffic as it is: one instance; the
            # switch runs the pipeline of the traffic (l2 on classic).
            groups = {}
            for t in self.traffics():
                pipeline = PIPELINES[t]["pipeline"] if dut == "switch" and t in PIPELINES else "classic"
                groups.setdefault(pipeline, []).append(t)
            for pipeline, ts in groups.items():
                p = self.start_dut(dut, f"{dut}_memif_{pipeline}", pipeline)
                for t in ts:
                    self.progress(f"throughput memif: rep {r + 1}/{reps} {t} {dut}")
                    sel = switch_lcore if dut == "switch" else testpmd_lcore
                    # The lcores' CPU over the generator's measured interval
                    # exactly (bench_gen --cpu-of): testpmd's forwarding lcore
                    # starts polling only once the links are up, so over the
                    # generator's whole run (its start-up, the warm-up) it
                    # looked starved (0.83-0.88 of a vCPU where it had 1.00).
                    tids = lcore_tids(p.pid, sel)
                    t0, c0 = time.monotonic(), thread_cpu_ns(p.pid, sel)
                    # Busy TSC cycles per packet, which the generator's
                    # limit does not hide: the switch's dp.busy_cycles / dp.rx
                    # over this run; testpmd's --record-core-cycles, which it
                    # prints when stopped -- with its memif link still up
                    # (a peer leaving resets the port statistics it divides
                    # by), so only after its last traffic and when no
                    # latency run follows (--memif-lean).
                    busy0 = self.switch_busy(self.work / "ctl.sock") if dut == "switch" else None
                    stop_at_report = (dut.startswith("testpmd") and self.a.memif_lean and t == ts[-1])
                    g = self.gen(t, secs, cpu_of=tids, on_report=(lambda: self.procs.stop(p)) if stop_at_report else None)
                    if dut == "switch":
                        busy1 = self.switch_busy(self.work / "ctl.sock")
                        res[t]["switch_busy_cyc"] = (
                            (busy1[0] - busy0[0]) / (busy1[1] - busy0[1])
                            if busy0 and busy1 and busy1[1] > busy0[1] else None)
                    elif stop_at_report:
                        m = re.findall(r"CPU cycles/packet=([0-9.]+)", output(p))
                        res[t][dut + "_busy_cyc"] = float(m[-1]) if m else None
                    if g is None and p.poll() is None:
                        # No report: on a loaded machine the generator can
                        # miss a DUT still setting up its memif server
                        # (dpdk-on-this-machine.md P6); once more, else the
                        # rep has no number (never a zero).
                        self.progress(f"throughput memif: rep {r + 1}/{reps} {t} {dut}: no report, again")
                        t0, c0 = time.monotonic(), thread_cpu_ns(p.pid, sel)
                        g = self.gen(t, secs, cpu_of=tids)
                    t1, c1 = time.monotonic(), thread_cpu_ns(p.pid, sel)
                    # Over the whole generator run, kept for comparison (and
                    # the fallback when the generator could not read them).
                    run_cpu = (c1 - c0) / 1e9 / (t1 - t0) if c0 and c1 and c1 > c0 else None
                    res[t][dut + "_cpu_whole_run"] = run_cpu
                    watched = g.get("watched_cpu") if g else None
                    res[t][dut + "_cpu"] = watched if watched is not None and watched >= 0 else run_cpu
                    res[t][dut] = g["tx_mpps"] if g else None
                    res[t][dut + "_delivered"] = g["rx_mpps"] if g else None
                    # Share of the generator's frames the DUT's rings refused:
                    # > 0 means the DUT, not the generator, set the rate.
                    res[t][dut + "_refused"] = (g["tx_refused"] / (g["tx_refused"] + g["tx_pkts"])
                                                if g and g["tx_refused"] + g["tx_pkts"] else None)
                    if dut == "switch" and g:
                        switch_cap[t] = g["tx_mpps"]
                # latency: the switch and testpmd io (not with --memif-lean)
                for t in ts if dut != "testpmd_packed" and not self.a.memif_lean else []:
                    for load, rate in (("low", low), ("80%", 0.8 * (switch_cap.get(t) or 0))):
                        if rate <= 0:
                            continue
                        self.progress(f"latency memif: rep {r + 1}/{reps} {t} {dut} {load} ({rate:.2f} Mpps)")
                        g = self.gen(t, lat_secs, rate)
                        if g:
                            lat_dut.append({"rep": r, "dut": dut, "traffic": t, "load": load, "rate_mpps": rate,
                                            "achieved_mpps": g["tx_mpps"], "p50_ns": g["lat_p50_ns"],
                                            "p99_ns": g["lat_p99_ns"], "p999_ns": g["lat_p999_ns"],
                                            "max_ns": g["lat_max_ns"], "samples": g["lat_samples"]})
                self.procs.stop(p)

        for r in range(reps):
            # Interleaved, alternating order; a testpmd-first rep uses the
            # previous rep's switch capacity for its 80% load.
            # --memif-lean: the row's two devices only, no latency runs -- a
            # rep in ~1/3 of the time, so a run gets enough reps with the
            # vCPUs close (the ratio issue 9 names) to give it a spread.
            order = ["switch", "testpmd"] + ([] if self.a.memif_lean else ["testpmd_packed"])
            if r % 2:
                order.reverse()
            res = {t: {} for t in self.traffics()}
            placement.append([])
            for dut in order:
                # A device measured while the host had the vCPUs apart runs
                # slower for that reason alone: wait (bounded) for them to be
                # close before its runs, and when the probe after its runs
                # says they moved apart, run the device once more. testpmd,
                # the reference, also has a slow mode of its own (~10 instead
                # of ~28 Mpps on memif, CPU and placement alike, from one
                # start to the next): it is started twice per rep and each
                # traffic keeps the faster start -- which can only lower the
                # switch's ratios.
                starts = 2 if dut.startswith("testpmd") else 1
                kept: dict = {t: {} for t in self.traffics()}
                kept_lat: dict = {}
                attempt = 0
                while attempt < starts + 1:
                    before = self.wait_close_vcpus(f"throughput memif: rep {r + 1}/{reps} {dut}")
                    got = {t: {} for t in self.traffics()}
                    lat_dut: list[dict] = []
                    run_dut(dut, got, lat_dut)
                    after = self.xcore_ns()
                    placement[-1].append((dut, before))
                    placement[-1].append((dut + " after", after))
                    apart = any(v is not None and v >= FAST_XCORE_NS for v in (before, after))
                    for t in self.traffics():
                        if got[t].get(dut) and (not kept[t].get(dut) or got[t][dut] > kept[t][dut]):
                            kept[t] = dict(got[t], **{dut + "_vcpus_apart": apart})
                            kept_lat[t] = [x for x in lat_dut if x["traffic"] == t]
                    attempt += 1
                    if attempt >= starts and not (apart and attempt == starts):
                        break
                    if apart:
                        self.progress(f"throughput memif: rep {r + 1}/{reps} {dut}: vCPUs apart "
                                      f"({fmt(before, 0)}/{fmt(after, 0)} ns), once more")
                for t in self.traffics():
                    res[t].update(kept[t])
                    lat.extend(kept_lat.get(t, []))
            for t in self.traffics():
                runs.append({"rep": r, "traffic": t, "lcores": 1, **res[t]})
        lat_sum = []
        for dut in ("switch", "testpmd"):
            for t in self.traffics():
                for load in ("low", "80%"):
                    xs = [x for x in lat if x["dut"] == dut and x["traffic"] == t and x["load"] == load]
                    if xs:
                        lat_sum.append({"dut": dut, "traffic": t, "load": load,
                                        "rate_mpps": median([x["rate_mpps"] for x in xs]),
                                        **{k: median([x[k] for x in xs]) for k in ("p50_ns", "p99_ns", "p999_ns")}})
        return {"seconds_per_run": secs, "reps": reps, "runs": runs, "summary": summarize(runs),
                "latency_runs": lat, "latency": lat_sum, "placement": placement,
                "generator": "bench_gen --reuse (prebuilt frames, refcount; copy-mode memif client)"}

    # ---- end to end: agq-worker through agq-switch vs MPI_Allreduce --------
    def e2e_one(self, n: int, mbytes: int, switch_lcores: int = 1, rings: int = 1) -> dict | None:
        """The classic pipeline: a PS and n logical workers in two processes.
        switch_lcores 2: the switch on both CPUs (idle back-off 100 us, as
        everything shares them), its memif ports with `rings` queue pairs;
        rings 2: PS and workers connect with two rings and send each frame
        on its shard's (--switch-lcores 2), rings 1: one ring, the switch
        hands every other frame between its lcores."""
        elements = mbytes * (1 << 20) // 4
        for i in range(3):
            (self.work / f"m{i}.sock").unlink(missing_ok=True)
        cfg = self.config("e2e", '[classic]\nps_port = 0\nworker_ports = [1, 2]\n')
        ctl = self.work / "ctl.sock"
        ctl.unlink(missing_ok=True)
        lcores = ["-l", "0"] if switch_lcores == 1 else ["-l", "0,1"]
        sw = self.procs.start("e2e_switch", [self.bin["switch"],
                                             *eal(self.procs.prefix("es"), lcores, self.memif_vdevs("server", 3)),
                                             "--", "--config", cfg, "--ctl-socket", ctl,
                                             "--idle-sleep-us", "0" if switch_lcores == 1 else "100",
                                             "--memif-queues", rings, "--quiet"])
        if not wait_for(lambda: all((self.work / f"m{i}.sock").exists() for i in range(3)) and ctl.exists(), 15):
            self.procs.stop(sw)
            return None
        job = ["--workers", n, "--elements", elements, "--window", 1024, "--progress", 0, "--json",
               "--stall-timeout", 30] + (["--switch-lcores", rings] if rings > 1 else [])

        def worker(name, sock, extra):
            v = f"net_memif0,role=client,id=0,socket={self.work}/m{sock}.sock,socket-abstract=no"
            return self.procs.start(name, [self.bin["worker"], *eal(self.procs.prefix(name), ["-l", "1"], [v], 256),
                                           "--", *extra, *job])

        ps = worker("e2e_ps", 0, ["--role", "ps", "--fresh-switch"])
        wait_for(lambda: "ready" in output(ps) or ps.poll() is not None, 15)
        # N logical workers in two processes (worker ports 1 and 2): a 2-core
        # machine cannot give every worker a core; ids alternate between them.
        ws = [worker(f"e2e_w{k}", 1 + k, ["--ids", ",".join(str(i) for i in range(k, n, 2))]) for k in range(2)]
        budget = 600
        for w in ws:
            self.procs.wait(w, budget)
        self.procs.wait(ps, 30)
        handoff = None
        if switch_lcores > 1:
            c = subprocess.run([str(self.bin["ctl"]), "--socket", str(ctl), "counters"], capture_output=True,
                               text=True, timeout=10).stdout
            handoff = next((int(l.split()[1]) for l in c.splitlines() if l.split()[:1] == ["dp.handoff"]), None)
        self.procs.stop(sw)
        wj = [json_lines(output(w)) for w in ws]
        pj = json_lines(output(ps))
        if not all(wj) or not pj:
            return {"workers": n, "mbytes": mbytes, "status": "failed"}
        wj = [x[-1] for x in wj]
        pj = pj[-1]
        secs = max(w["seconds"] for w in wj)
        return {"workers": n, "mbytes": mbytes, "elements": elements, "switch_lcores": switch_lcores,
                "rings": rings, "handoff": handoff,
                "status": "ok" if all(w["status"] == "ok" for w in wj) and pj["status"] == "ok" else "failed",
                "seconds": secs, "elements_per_s": elements / secs,
                "goodput_gbps": elements * 32 / secs / 1e9,
                "retransmissions": sum(w["counters"]["retransmissions"] for w in wj),
                "ps_retries": pj["counters"]["retries"], "mismatches": pj.get("mismatches"),
                "quantization_rms": pj.get("quantization_error", {}).get("rms")}

    def e2e_agq_one(self, n: int, mbytes: int, verify: str = "sample:64", loss: float = 0.0) -> dict | None:
        """agq pipeline: one job of n workers (ids alternate between switch
        ports 1 and 2, two worker processes), PS on port 0 for fallback,
        256 slots in 128 rows, one round, error budget 1e-3; addresses as
        agq-worker derives them (workers/README.md)."""
        elements = mbytes * (1 << 20) // 4
        for i in range(3):
            (self.work / f"m{i}.sock").unlink(missing_ok=True)
        job = ('[agq]\ntotal_rows = 256\ntotal_slots = 512\n[[job]]\nid = 1\n'
               f'workers = {n}\nslots = 256\nrows = 128\ndelivery = "multicast"\nps_port = 0\n'
               'ps_ip = "10.128.1.254"\nps_mac = "02:00:01:00:01:fe"\n')
        for w in range(n):
            job += (f'[[job.worker]]\nid = {w}\nport = {1 + w % 2}\nip = "10.128.1.{w + 1}"\n'
                    f'mac = "02:00:01:00:01:{w + 1:02x}"\n')
        cfg = self.work / "e2e_agq.toml"
        cfg.write_text('[switch]\npipeline = "agq"\n' + job)
        ctl = self.work / "ctl.sock"
        sw = self.procs.start("e2e_agq_switch", [self.bin["switch"],
                                                 *eal(self.procs.prefix("eq"), ["-l", "0"], self.memif_vdevs("server", 3)),
                                                 "--", "--config", cfg, "--ctl-socket", ctl, "--idle-sleep-us", "0",
                                                 "--quiet"])
        if not wait_for(lambda: all((self.work / f"m{i}.sock").exists() for i in range(3)), 15):
            self.procs.stop(sw)
            return None
        if loss:
            # the switch's drop simulator on every port, both directions
            wait_for(lambda: ctl.exists(), 10)
            for port in range(3):
                for d in ("rx", "tx"):
                    subprocess.run([str(self.bin["switch"].parent / "agqctl"), "--socket", str(ctl), "drop",
                                    str(port), d, str(loss)], capture_output=True, timeout=10)
        args = ["--protocol", "agq", "--job-id", 1, "--workers", n, "--slots", 256, "--rows", 128,
                "--elements", elements, "--rounds", 1, "--error-budget", "1e-3", "--progress", 0, "--json",
                "--verify", verify, *self.worker_extra]

        def proc(name, sock, extra):
            v = f"net_memif0,role=client,id=0,socket={self.work}/m{sock}.sock,socket-abstract=no{self.rsize}"
            return self.procs.start(name, [self.bin["worker"], *eal(self.procs.prefix(name), ["-l", "1"], [v], 256),
                                           "--", *extra, *args])

        ps = proc("e2e_agq_ps", 0, ["--role", "ps"])
        wait_for(lambda: "ready" in output(ps) or ps.poll() is not None, 15)
        ws = [proc(f"e2e_agq_w{k}", 1 + k, ["--ids", ",".join(str(i) for i in range(k, n, 2))]) for k in range(2)]
        for w in ws:
            self.procs.wait(w, 600)
        self.procs.stop(ps)
        self.procs.stop(sw)
        wj = [json_lines(output(w)) for w in ws]
        if not all(wj):
            return {"workers": n, "mbytes": mbytes, "status": "failed", "pipeline": "agq"}
        wj = [x[-1] for x in wj]
        secs = max(w["seconds"] for w in wj) or float("nan")
        return {"pipeline": "agq", "workers": n, "mbytes": mbytes, "elements": elements, "verify": verify,
                "loss": loss,
                "status": "ok" if all(w["status"] == "ok" for w in wj) else "failed",
                "seconds": secs, "elements_per_s": elements / secs,
                "goodput_gbps": elements * 32 / secs / 1e9,
                "retransmissions": sum(w["retransmissions"] for w in wj),
                # DATA sent by the workers (first transmissions + retransmissions)
                "data_sent": sum(w["counters"]["tx_pkts"] for w in wj),
                "fast_retransmissions": sum(w["engine"].get("fast_retransmissions", 0) for w in wj),
                "tail_probes": sum(w["engine"].get("tail_probes", 0) for w in wj),
                "spurious_retransmissions": sum(w["engine"].get("spurious_retransmissions", 0) for w in wj),
                "engine": [w["engine"] for w in wj],
                "process": [w.get("process", {}) for w in wj],
                "counters": [w["counters"] for w in wj],
                "mismatches": sum(w["mismatches"] for w in wj),
                "avg_granted_bits": wj[0]["memory"]["avg_granted_bits"],
                "memory_saving_x": wj[0]["memory"]["saving_x"],
                "quantization_rms": wj[0]["quantization_error"]["rms"]}

    def mpi_one(self, n: int, mbytes: int) -> dict | None:
        mpirun = shutil.which("mpirun")
        if not mpirun or not self.bin["mpi"].exists():
            return None
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_btl="self,vader", OMPI_MCA_mpi_yield_when_idle="1")
        p = self.procs.start("mpi", [mpirun, "-np", n, "--oversubscribe", "--bind-to", "none",
                                     self.bin["mpi"], "--bytes", mbytes << 20, "--reps", 1 if self.quick else 3],
                             env=env)
        self.procs.wait(p, 300)
        js = json_lines(output(p))
        if not js:
            return None
        j = js[-1]
        return {"workers": n, "mbytes": mbytes, "seconds": j["seconds_median"],
                "elements_per_s": j["elements_per_s"],
                "goodput_gbps": j["elements"] * 32 / j["seconds_median"] / 1e9 if j["seconds_median"] else None,
                "wrong_elements": j["wrong_elements"]}

    def worker_stages(self) -> list[dict]:
        """The worker's own per-element costs (bench_worker_stages: encode,
        decode, verify of a checked chunk, the engine without I/O)."""
        if not self.bin["stages"].exists():
            return []
        self.progress("end to end: worker stage costs (bench_worker_stages)")
        out = self.work / "stages.json"
        subprocess.run([self.bin["stages"], "--benchmark_min_time=0.2", f"--benchmark_out={out}",
                        "--benchmark_out_format=json"], capture_output=True, timeout=300)
        if not out.exists():
            return []
        return [{"name": b["name"], "ns_per_elem": b.get("ns_per_elem")}
                for b in json.loads(out.read_text()).get("benchmarks", [])]

    def e2e(self) -> dict:
        stages = self.worker_stages()
        if self.quick:
            plan = {2: [1, 4, 16], 4: [1, 4], 8: [1, 4]}
            budget = 20.0
        else:
            plan = {2: [1, 16, 64, 256], 4: [1, 16, 64, 256], 8: [1, 16, 64, 256]}
            budget = 60.0
        have_workers = self.bin["worker"].exists()
        agq, agqp, mpi, skipped = [], [], [], []
        agq_max_mb = 64  # the agq pipeline: tensors of 1..64 MB
        for n, sizes in plan.items():
            # elements/s of the previous size: predicts the next run's time,
            # for each protocol on its own
            rate = agq_rate = None
            for mb in sizes:
                elements = mb * (1 << 20) // 4
                if not have_workers:
                    pass
                elif rate and elements / rate > budget:
                    # agq-worker would take too long; the MPI reference is cheap, keep it
                    skipped.append({"workers": n, "mbytes": mb, "predicted_s": elements / rate,
                                    "pipeline": "classic"})
                else:
                    self.progress(f"end to end: agq-worker N={n} {mb} MB")
                    r = self.e2e_one(n, mb)
                    if r:
                        agq.append(r)
                        rate = r.get("elements_per_s")
                if have_workers and mb <= agq_max_mb:
                    if agq_rate and elements / agq_rate > budget:
                        skipped.append({"workers": n, "mbytes": mb, "predicted_s": elements / agq_rate,
                                        "pipeline": "agq"})
                    else:
                        self.progress(f"end to end: agq-worker --protocol agq N={n} {mb} MB")
                        r = self.e2e_agq_one(n, mb)
                        if r:
                            agqp.append(r)
                            agq_rate = r.get("elements_per_s") if r.get("status") == "ok" else None
                        if r:
                            # beside it: 1% loss on every port and direction (every size: the
                            # loss/loss-free time ratio is the figure), and for the first size
                            # every result verified
                            beside = [("sample:64", 0.01)] + ([("all", 0.0)] if mb == sizes[0] else [])
                            for v, loss in beside:
                                self.progress(f"end to end: agq N={n} {mb} MB --verify {v} loss {loss}")
                                x = self.e2e_agq_one(n, mb, v, loss)
                                if x:
                                    agqp.append(x)
                self.progress(f"end to end: MPI_Allreduce N={n} {mb} MB")
                m = self.mpi_one(n, mb)
                if m:
                    mpi.append(m)
        # The classic pipeline on a 2-lcore switch: one memif ring per link
        # (software hand-off) vs one ring per switch lcore (steered by the
        # senders), interleaved.
        lcores2 = []
        if have_workers:
            mb2 = 16 if self.quick else 64
            for rep in range(2 if self.quick else 3):
                for rings in (1, 2):
                    self.progress(f"end to end: classic N=2 {mb2} MB, 2-lcore switch, {rings} ring(s), rep {rep + 1}")
                    r = self.e2e_one(2, mb2, switch_lcores=2, rings=rings)
                    if r:
                        lcores2.append(dict(r, rep=rep))
        return {"agq": agq, "agq_pipeline": agqp, "mpi": mpi, "skipped": skipped, "time_budget_s": budget,
                "workers_built": have_workers, "worker_stages": stages, "classic_lcores2": lcores2}

    def loss_pairs(self, points: list[tuple[int, int]], builds: list[tuple[str, Path, list[str]]], reps: int) -> dict:
        """The agq protocol's loss cost only: per repetition, per (N, MB)
        point and per build (interleaved, so every build sees the same
        load), one loss-free run and one at 1% loss on every port and
        direction; the figure is time(1%) / time(0%) of the same pair."""
        runs = []
        saved = dict(self.bin)
        for rep in range(reps):
            for n, mb in points:
                for name, bdir, extra in builds:
                    self.bin["switch"] = bdir / "switch" / "agq-switch"
                    self.bin["worker"] = bdir / "workers" / "agq-worker"
                    self.worker_extra = extra
                    pair = {}
                    for loss in (0.0, 0.01):
                        self.progress(f"loss pairs: rep {rep + 1}/{reps} N={n} {mb} MB {name} loss {loss}")
                        pair[loss] = self.e2e_agq_one(n, mb, "sample:64", loss) or {"status": "failed"}
                    ok = all(x.get("status") == "ok" for x in pair.values())
                    runs.append({"build": name, "rep": rep, "workers": n, "mbytes": mb,
                                 "free": pair[0.0], "lossy": pair[0.01],
                                 "ratio": pair[0.01]["seconds"] / pair[0.0]["seconds"] if ok else None,
                                 "loadavg": os.getloadavg()[0]})
        self.bin = saved
        self.worker_extra = []
        summary = []
        for n, mb in points:
            for name, _, _ in builds:
                rs = [r["ratio"] for r in runs if r["build"] == name and (r["workers"], r["mbytes"]) == (n, mb)
                      and r["ratio"] is not None]
                fails = sum(1 for r in runs if r["build"] == name and (r["workers"], r["mbytes"]) == (n, mb)
                            and r["ratio"] is None)
                summary.append({"build": name, "workers": n, "mbytes": mb, "pairs": len(rs), "failed": fails,
                                "ratio_median": median(rs) if rs else None,
                                "ratio_min": min(rs) if rs else None, "ratio_max": max(rs) if rs else None})
        return {"runs": runs, "summary": summary, "builds": [[n, " ".join([str(b), *e])] for n, b, e in builds]}


def n_lcores(lc) -> int:
    """1, 2 or a pcap mode ("2 steered", "2 hand-off") -> lcores."""
    return PCAP_MODES.get(lc, lc) if isinstance(lc, str) else lc


def per_cpu(x: dict, dut: str):
    """Mpps per vCPU-second the DUT's forwarding lcores actually got."""
    r, c = x.get(dut), x.get(dut + "_cpu")
    return r / c if r and c else None


def scaling(runs: list[dict]) -> list[dict]:
    """2 lcores / 1 lcore of the switch, per rep (same rep = same machine
    state), then the median (min-max), per traffic and 2-lcore mode; the
    same for testpmd (its own ceiling on these ports and this machine),
    and the switch's ratio of Mpps per vCPU-second (2 lcores / 1 lcore; 1.0
    = each lcore does as much per second of CPU as a lone one: linear)."""
    out = []
    for t in TRAFFICS:
        for mode in ("2 steered", "2 hand-off"):
            xs, tps, eff, xcore, fast, fast_tp = [], [], [], [], [], []
            for r in {x["rep"] for x in runs}:
                one = next((x for x in runs if x["rep"] == r and x["traffic"] == t and x["lcores"] == "1"), None)
                two = next((x for x in runs if x["rep"] == r and x["traffic"] == t and x["lcores"] == mode), None)
                if not one or not two:
                    continue
                if one.get("switch") and two.get("switch"):
                    xs.append(two["switch"] / one["switch"])
                if one.get("testpmd") and two.get("testpmd"):
                    tps.append(two["testpmd"] / one["testpmd"])
                if per_cpu(one, "switch") and per_cpu(two, "switch"):
                    eff.append(per_cpu(two, "switch") / per_cpu(one, "switch"))
                probes = [v for v in two.get("xcore_ns") or [] if v is not None]
                xcore.append(probes)
                # The host's fast placement around the whole rep (both probes):
                # the rep says what the design does; a slow rep, what the VM did.
                if probes and max(probes) < FAST_XCORE_NS:
                    if one.get("switch") and two.get("switch"):
                        fast.append(two["switch"] / one["switch"])
                    if one.get("testpmd") and two.get("testpmd"):
                        fast_tp.append(two["testpmd"] / one["testpmd"])
            if xs:
                out.append({"traffic": t, "mode": mode, "ratio_median": median(xs), "ratio_min": min(xs),
                            "ratio_max": max(xs), "testpmd_ratio_median": median(tps),
                            "per_cpu_ratio_median": median(eff),
                            "per_cpu_ratio_min": min(eff) if eff else None,
                            "per_cpu_ratio_max": max(eff) if eff else None,
                            "xcore_ns": xcore, "fast_reps": len(fast), "fast_ratio_median": median(fast),
                            "fast_ratio_min": min(fast) if fast else None,
                            "fast_ratio_max": max(fast) if fast else None,
                            "fast_testpmd_ratio_median": median(fast_tp)})
    return out


def summarize(runs: list[dict]) -> list[dict]:
    """Median per (traffic, lcores) of each DUT and of the per-rep ratio,
    plus the CPU each DUT's lcores got and the ratio of Mpps per vCPU-second."""
    out = []
    keys = sorted({(r["traffic"], r["lcores"]) for r in runs}, key=lambda k: (TRAFFICS.index(k[0]), str(k[1])))
    for t, lc in keys:
        rs = [r for r in runs if r["traffic"] == t and r["lcores"] == lc]
        sw = median([r.get("switch") for r in rs])
        tp = median([r.get("testpmd") for r in rs])
        ratios = [r["switch"] / r["testpmd"] for r in rs if r.get("switch") and r.get("testpmd")]
        packed = [r["switch"] / r["testpmd_packed"] for r in rs if r.get("switch") and r.get("testpmd_packed")]
        packed_cpu = [per_cpu(r, "switch") / per_cpu(r, "testpmd_packed") for r in rs
                      if per_cpu(r, "switch") and per_cpu(r, "testpmd_packed")]
        cpu_ratios = [per_cpu(r, "switch") / per_cpu(r, "testpmd") for r in rs
                      if per_cpu(r, "switch") and per_cpu(r, "testpmd")]
        # memif: the reps in which no device ran while the host had the two
        # vCPUs apart (a generator on the other vCPU then sets the rate).
        close_all = [r for r in rs if r.get("switch") and r.get("testpmd")
                     and not any(v for k, v in r.items() if k.endswith("_vcpus_apart"))]
        # ... in which the switch set its own rate: a switch that refused
        # (almost) none of the generator's frames ran at the generator's
        # rate, and so (refusing little too) did testpmd -- such a rep
        # compares the generator with itself (~1.0) and says nothing of the
        # switch. (Only memif reps have refusal counts; pcap reps pass.)
        close_runs = [r for r in close_all
                      if r.get("switch_refused") is None or r["switch_refused"] >= SWITCH_LIMITED_REFUSED]
        close = [r["switch"] / r["testpmd"] for r in close_runs]
        close_cpu = [per_cpu(r, "switch") / per_cpu(r, "testpmd") for r in close_runs
                     if per_cpu(r, "switch") and per_cpu(r, "testpmd")]
        # The same reps in ns per packet per vCPU-second: testpmd io's is the
        # ports' I/O alone (memif's copies, alloc and free); the switch's
        # minus it is the switch's own work; and a switch at 0.8x per vCPU
        # may spend at most a quarter of testpmd's on its own work.
        close_ns = [(1e3 / per_cpu(r, "testpmd"), 1e3 / per_cpu(r, "switch")) for r in close_runs
                    if per_cpu(r, "switch") and per_cpu(r, "testpmd")]
        # Busy TSC cycles per packet (memif, --memif-lean): what each device
        # spends per packet whoever set the rate, so the close reps where
        # the generator did count too; testpmd's over the switch's is the
        # ratio of their capacities (a rate ratio is at most that of the
        # slower of device and generator).
        cyc = [(r["switch_busy_cyc"], r["testpmd_busy_cyc"]) for r in close_all
               if r.get("switch_busy_cyc") and r.get("testpmd_busy_cyc")]
        cap = [tc / sc for sc, tc in cyc]
        out.append({"traffic": t, "lcores": lc, "switch_mpps": sw, "testpmd_mpps": tp,
                    "capacity_reps": len(cap), "capacity_ratio_median": median(cap),
                    "capacity_ratio_min": min(cap) if cap else None, "capacity_ratio_max": max(cap) if cap else None,
                    "close_switch_cyc": median([sc for sc, _ in cyc]), "close_testpmd_cyc": median([tc for _, tc in cyc]),
                    # testpmd io's cycles are memif's I/O; the switch's beyond
                    # them its own work, which 0.8x caps at a quarter of the I/O.
                    "close_own_cyc": median([sc - tc for sc, tc in cyc]),
                    "close_budget_cyc": median([0.25 * tc for _, tc in cyc]),
                    "ratio_median": median(ratios), "ratio_min": min(ratios) if ratios else None,
                    "ratio_max": max(ratios) if ratios else None,
                    "close_reps": len(close), "ratio_close_median": median(close),
                    "close_generator_limited": len(close_all) - len(close_runs),
                    "ratio_close_min": min(close) if close else None, "ratio_close_max": max(close) if close else None,
                    "close_rep_ids": [r.get("rep") for r in close_runs],
                    "close_switch_mpps": median([r["switch"] for r in close_runs]),
                    "close_testpmd_mpps": median([r["testpmd"] for r in close_runs]),
                    "close_testpmd_refused": median([r.get("testpmd_refused") for r in close_runs]),
                    "close_cpu_ratio_median": median(close_cpu),
                    "close_testpmd_ns": median([t for t, _ in close_ns]),
                    "close_switch_ns": median([w for _, w in close_ns]),
                    "close_own_ns": median([w - t for t, w in close_ns]),
                    "close_budget_ns": median([0.25 * t for t, _ in close_ns]),
                    "switch_cpu": median([r.get("switch_cpu") for r in rs]),
                    "testpmd_cpu": median([r.get("testpmd_cpu") for r in rs]),
                    "cpu_ratio_median": median(cpu_ratios),
                    "cpu_ratio_min": min(cpu_ratios) if cpu_ratios else None,
                    "cpu_ratio_max": max(cpu_ratios) if cpu_ratios else None,
                    "packed_mpps": median([r.get("testpmd_packed") for r in rs]),
                    "packed_ratio_median": median(packed), "packed_ratio_min": min(packed) if packed else None,
                    "packed_ratio_max": max(packed) if packed else None,
                    "packed_cpu_ratio_median": median(packed_cpu),
                    "baseline_mpps": median([r.get("baseline") for r in rs]),
                    "baseline_packed_ratio_median": median([r["baseline"] / r["testpmd_packed"] for r in rs
                                                            if r.get("baseline") and r.get("testpmd_packed")]),
                    "baseline_ratio_median": median([r["baseline"] / r["testpmd"] for r in rs
                                                     if r.get("baseline") and r.get("testpmd")]),
                    "baseline_cpu_ratio_median": median([per_cpu(r, "baseline") / per_cpu(r, "testpmd") for r in rs
                                                         if per_cpu(r, "baseline") and per_cpu(r, "testpmd")]),
                    "switch_over_baseline": median([r["switch"] / r["baseline"] for r in rs
                                                    if r.get("switch") and r.get("baseline")]),
                    "switch_refused": median([r.get("switch_refused") for r in rs]),
                    "testpmd_refused": median([r.get("testpmd_refused") for r in rs]),
                    "switch_mpps_per_lcore": sw / n_lcores(lc) if sw else None,
                    "frame_bytes": FRAME_BYTES[t],
                    "switch_gbps": sw * FRAME_BYTES[t] * 8 / 1e3 if sw else None})
    return out


def memory_efficiency() -> list[dict]:
    """Classic aggregator memory: 4 lanes x 32 bit (reg0..3) per aggregator,
    plus 2 bytes per aggregator (insert_posi, data_isEmpty) and 4 bytes per
    seq slot (job_and_seq 16, start_posi 8, worker_agg 8). A window of L bits
    lets 32/L seqs share one aggregator."""
    rows = []
    for L in (32, 16, 8, 4):
        per_agg = 32 // L
        lane_bytes = 16
        with_ctl = lane_bytes + 2 + 4 * per_agg
        rows.append({"width_bits": L, "seqs_per_aggregator": per_agg,
                     "seqs_per_mib_lanes": per_agg * (1 << 20) / lane_bytes,
                     "seqs_per_mib_with_control": per_agg * (1 << 20) / with_ctl,
                     "vs_32bit_design": per_agg * (lane_bytes + 2 + 4) / with_ctl})
    return rows


# --------------------------------------------------------------------------
# report

def fmt(x, nd=2):
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def fmt_range(lo, hi, nd=2) -> str:
    """lo–hi, or one dash when there is no range (e.g. a device not run)."""
    if lo is None and hi is None:
        return "–"
    return f"{fmt(lo, nd)}–{fmt(hi, nd)}"


def machine() -> dict:
    model = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    load = os.getloadavg()
    return {"cpu_model": model, "cores": os.cpu_count(), "kernel": platform.release(),
            "loadavg_at_start": [round(x, 2) for x in load]}


def build_kind(build: Path | None) -> str | None:
    """How a build directory was made, from its CMakeCache.txt: its build
    type and, for scripts/build-pgo.sh's, PGO ("use": with a profile)."""
    if build is None:
        return None
    try:
        cache = (build / "CMakeCache.txt").read_text()
    except OSError:
        return "unknown (no CMakeCache.txt)"
    get = lambda k: (re.search(rf"^{k}:[A-Z]+=(.*)$", cache, re.M) or [None, ""])[1]
    kind = get("CMAKE_BUILD_TYPE") or "no build type"
    if get("AGQ_PGO"):
        kind += f", PGO {get('AGQ_PGO')}"
    return kind


def markdown(res: dict) -> str:
    m = res["machine"]
    builds = res.get("builds", {})
    L = [f"# agq-switch benchmarks — {res['date']}", "",
         f"Command: `{res['command']}`  ", f"Machine: {m['cpu_model']}, {m['cores']} cores, kernel {m['kernel']}, "
         f"load average at start {m['loadavg_at_start']}  ", f"Mode: {'quick' if res['quick'] else 'full'}; "
         f"wall time {res['wall_s']:.0f} s  ",
         "Builds: " + "; ".join(f"{k}: {v}" for k, v in builds.items() if v), ""]
    if "pipeline" in res:
        b = res["pipeline"]["benchmarks"]
        L += ["## Pipeline cost (Google Benchmark, one core, no DPDK)", "",
              "ns/element = time per gradient element contributed (DATA packets that count x lanes; ACKs, "
              "duplicates and resends are overhead in it). Multicast RESULTs include one frame copy and "
              "egress() per replica. passes = 1 + resubmissions per agq packet; frames out = replicas + "
              "unicasts per packet in.", "",
              "| benchmark | ns/packet | ns/element | lanes | width bits | passes/pkt | frames out/pkt | "
              "dropped in switch | packets in cycle |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for k, v in b.items():
            if k.startswith("Pipeline/"):
                L.append(f"| {k.removeprefix('Pipeline/')} | {fmt(v.get('ns_per_pkt'), 1)} | "
                         f"{fmt(v.get('ns_per_elem'), 2)} | {fmt(v.get('lanes'), 0) if v.get('lanes') else '–'} | "
                         f"{fmt(v.get('width_bits'), 0) if v.get('width_bits') else '–'} | "
                         f"{fmt(v.get('passes_per_pkt'), 2)} | {fmt(v.get('out_per_pkt'), 2)} | "
                         f"{fmt(v.get('drop_frac'), 2)} | {fmt(v.get('trace_pkts'), 0)} |")
        L += ["", "| lane add (4 lanes x 8192 cells, random aggregators) | ns/lane | values per 32-bit cell |",
              "|---|---:|---:|"]
        for k, v in b.items():
            if k.startswith("BM_LaneAdd"):
                L.append(f"| {k.removeprefix('BM_LaneAdd_')} | {fmt(v.get('ns_per_lane'), 3)} | "
                         f"{fmt(v.get('values_per_cell'), 0)} |")
        L.append("")
    for key, title in (("pcap", "Switch throughput: net_pcap infinite_rx replay (in-process) → net_null"),
                       ("memif", "Switch throughput: memif from a generator process (bench_gen, other core)")):
        if key not in res:
            continue
        r = res[key]
        L += [f"## {title}", "",
              f"Median of {r['reps']} interleaved runs of {r['seconds_per_run']} s each. Mpps = packets the "
              "device under test received per second (input side). Ratio = agq-switch / dpdk-testpmd io on "
              "the same ports, per run, then the median (min–max). testpmd packed = testpmd io with "
              f"`--mbuf-size={PACKED_MBUF_ROOM}`: its mbuf objects back to back instead of one per 4 KiB "
              "page, as agq-switch lays its pool without hugepages (agq-switch's pool also gets transparent "
              "huge pages, which testpmd's cannot): the nearest like-for-like I/O limit. Each testpmd run is "
              "the faster of two starts (testpmd has slow starts of its own: ~10% on the replay, ~3x on "
              "memif), which can only lower the switch's ratios.", "",
              "vCPU = CPU time the forwarding lcores got per second of the run (memif: of the generator's "
              "measured interval exactly, read by bench_gen --cpu-of; busy-polling lcores get "
              "less than their share on a loaded machine); per-vCPU ratio = (Mpps / vCPU) of the switch "
              "over that of testpmd, per run, then the median (min–max): what each does per second of CPU "
              "it actually had.", "",
              "| traffic | dataplane lcores | agq-switch Mpps | per lcore | Gbit/s | frame B | "
              "testpmd io Mpps | ratio | ratio range | vCPU switch / testpmd | per-vCPU ratio | range | "
              "testpmd packed Mpps | ratio to packed | range | per-vCPU |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---|---:|---:|---|---:|"]
        for s in r["summary"]:
            L.append(f"| {s['traffic']} | {s['lcores']} | {fmt(s['switch_mpps'])} | {fmt(s['switch_mpps_per_lcore'])} "
                     f"| {fmt(s['switch_gbps'])} | {s.get('frame_bytes', '–')} | {fmt(s['testpmd_mpps'])} | "
                     f"{fmt(s['ratio_median'], 3)} | {fmt_range(s['ratio_min'], s['ratio_max'], 3)} | "
                     f"{fmt(s.get('switch_cpu'))} / {fmt(s.get('testpmd_cpu'))} | {fmt(s.get('cpu_ratio_median'), 3)} | "
                     f"{fmt_range(s.get('cpu_ratio_min'), s.get('cpu_ratio_max'), 3)} | "
                     f"{fmt(s.get('packed_mpps'))} | {fmt(s.get('packed_ratio_median'), 3)} | "
                     f"{fmt_range(s.get('packed_ratio_min'), s.get('packed_ratio_max'), 3)} | "
                     f"{fmt(s.get('packed_cpu_ratio_median'), 3)} |")
        L.append("")
        if any(s.get("baseline_mpps") for s in r["summary"]):
            L += ["Baseline (`--baseline-build`): a second agq-switch binary in the same reps, same ports; "
                  "ratios are medians over reps.", "",
                  "| traffic | dataplane lcores | baseline Mpps | baseline / testpmd | per vCPU | "
                  "baseline / testpmd packed | this build / baseline |", "|---|---:|---:|---:|---:|---:|---:|"]
            for s in r["summary"]:
                L.append(f"| {s['traffic']} | {s['lcores']} | {fmt(s.get('baseline_mpps'))} | "
                         f"{fmt(s.get('baseline_ratio_median'), 3)} | {fmt(s.get('baseline_cpu_ratio_median'), 3)} | "
                         f"{fmt(s.get('baseline_packed_ratio_median'), 3)} | "
                         f"{fmt(s.get('switch_over_baseline'), 3)} |")
            L.append("")
        if key == "memif":
            L += [f"Generator: {r.get('generator', 'bench_gen')}. Refused = share of the generator's frames the "
                  "device's full rings refused (median): above 0, the device under test, not the generator, "
                  "set the rate.", "", "| traffic | refused by agq-switch | refused by testpmd io |",
                  "|---|---:|---:|"]
            for s in r["summary"]:
                L.append(f"| {s['traffic']} | {fmt(s.get('switch_refused'), 3)} | {fmt(s.get('testpmd_refused'), 3)} |")
            L.append("")
            L += ["Ratio over the reps in which no device ran with the vCPUs apart (see the placement below; "
                  "such a device kept the faster of its attempts, and that was still one apart): the "
                  "device's own rate, not the host's placement. \"Close\" spans ~30-120 ns, and within it the "
                  "generator's own limit moves: when testpmd io refused (almost) none of the generator's frames, "
                  "testpmd ran at the generator's rate, not its own, and the ratio is an upper bound of the "
                  "switch's ratio to testpmd's capacity; the per-vCPU ratio and the probes say how far. "
                  "The same reps in ns per packet per vCPU-second: testpmd io's is the ports' I/O alone, the "
                  "switch's minus it is the switch's own work (its program, replicas, decisions), and 0.8x "
                  "per vCPU leaves that own work at most a quarter of testpmd's (with testpmd io at the "
                  "generator's rate both overstate what testpmd spends: the Capacity table below counts it). "
                  "A close rep in which the "
                  f"switch refused less than {SWITCH_LIMITED_REFUSED:.0%} of the generator's frames is left "
                  "out: the generator, not the switch, set both devices' rates there.", "",
                  "| traffic | reps, vCPUs close | ratio (median) | range | switch / testpmd io Mpps | "
                  "testpmd io refused | per-vCPU ratio | ns per packet per vCPU: testpmd io / switch | "
                  "switch's own work, ns / what 0.8x per vCPU leaves it | probes of those reps, ns (median) |",
                  "|---|---:|---:|---|---|---:|---:|---|---|---:|"]
            placement = r.get("placement") or []
            for s in r["summary"]:
                probes = [v for i in s.get("close_rep_ids") or [] if isinstance(i, int) and i < len(placement)
                          for _, v in placement[i] if v is not None]
                gl = s.get("close_generator_limited") or 0
                L.append(f"| {s['traffic']} | {s.get('close_reps', 0)} of {r['reps']}"
                         f"{f' (+{gl} generator-limited, left out)' if gl else ''} | "
                         f"{fmt(s.get('ratio_close_median'), 3)} | "
                         f"{fmt_range(s.get('ratio_close_min'), s.get('ratio_close_max'), 3)} | "
                         f"{fmt(s.get('close_switch_mpps'), 2)} / {fmt(s.get('close_testpmd_mpps'), 2)} | "
                         f"{fmt(s.get('close_testpmd_refused'), 3)} | {fmt(s.get('close_cpu_ratio_median'), 3)} | "
                         f"{fmt(s.get('close_testpmd_ns'), 1)} / {fmt(s.get('close_switch_ns'), 1)} | "
                         f"{fmt(s.get('close_own_ns'), 1)} / {fmt(s.get('close_budget_ns'), 1)} | "
                         f"{fmt(median(probes), 0)} |")
            L.append("")
            if any(s.get("capacity_reps") for s in r["summary"]):
                L += ["Capacity (--memif-lean): busy TSC cycles per packet over the same close reps, "
                      "generator-limited ones included -- agq-switch's dp.busy_cycles / dp.rx, testpmd io's "
                      "--record-core-cycles (the cycles of the rounds that received something, rx to tx). "
                      "They do not depend on which of device and generator was slower, so testpmd's over "
                      "the switch's is the ratio of their capacities; the rate ratio above is at most that "
                      "of the slower of testpmd and the generator.", "",
                      "| traffic | reps | switch / testpmd io, cycles per packet | capacity ratio (median) | range | "
                      "switch's own work / what 0.8x leaves it, cycles |",
                      "|---|---:|---|---:|---|---|"]
                for s in r["summary"]:
                    if s.get("capacity_reps"):
                        L.append(f"| {s['traffic']} | {s['capacity_reps']} | {fmt(s.get('close_switch_cyc'), 1)} / "
                                 f"{fmt(s.get('close_testpmd_cyc'), 1)} | {fmt(s.get('capacity_ratio_median'), 3)} | "
                                 f"{fmt_range(s.get('capacity_ratio_min'), s.get('capacity_ratio_max'), 3)} | "
                                 f"{fmt(s.get('close_own_cyc'), 1)} / {fmt(s.get('close_budget_cyc'), 1)} |")
                L.append("")
            if any(v is not None for rep in r.get("placement") or [] for _, v in rep):
                L += ["Host placement: one-way cache-line latency between the two vCPUs (bench_xcore, ns) "
                      "before and after each device's runs. The generator runs on the other vCPU, so a device "
                      "measured while the vCPUs were apart (160-280 ns instead of ~30-60) ran slower for that "
                      f"reason alone: before its runs the bench waits (up to 60 s) for a probe below "
                      f"{FAST_XCORE_NS:.0f} ns, and a device whose after-probe is not below it runs once more. "
                      "testpmd (io and packed) is started twice per rep, as it has a slow mode of its own "
                      "(~10 Mpps) from one start to the next; the table keeps, per traffic, the faster of a "
                      "device's attempts (every attempt's probes listed).", ""]
                for i, rep in enumerate(r["placement"]):
                    L.append(f"- rep {i + 1}: " + ", ".join(f"{d} {fmt(v, 0)}" for d, v in rep))
                L.append("")
        if r.get("scaling"):
            L += ["Lcore scaling (agq-switch, 2 lcores / 1 lcore, per rep, median (min–max)). \"2 steered\": "
                  "every packet arrives on the rx queue of the lcore that owns its shard (one pcap per queue, "
                  "split by shard as rte_flow on the UDP source port would); \"2 hand-off\": one rx queue per "
                  "port, packets of the other lcore's shards go through its hand-off rte_ring. Both lcores "
                  "and the replay share this machine's 2 vCPUs.", "",
                  "testpmd 2 / 1 = the same for testpmd io on the same ports (the ceiling this machine "
                  "gives); per vCPU = the switch's Mpps per vCPU-second, 2 lcores / 1 lcore (1.00 = "
                  "each lcore as efficient as a lone one, i.e. linear). Cross-vCPU ns = one-way "
                  "cache-line latency between the two vCPUs (bench_xcore ping-pong) before / after each "
                  "rep's 2-lcore runs: the host's vCPU placement, ~30 ns or 160-280 ns on this VM class, "
                  "which every cross-core rate follows (the hand-off most).", "",
                  f"Fast-placement reps: the reps whose probes were all below {FAST_XCORE_NS:.0f} ns, "
                  "their count, the switch's 2 / 1 median (min–max) over them and testpmd's: what the "
                  "design does when the host lets two vCPUs share cache lines at the usual cost.", "",
                  "| traffic | mode | 2 / 1 lcore | range | testpmd 2 / 1 | per vCPU 2 / 1 | range | "
                  "cross-vCPU ns per rep | fast reps | 2 / 1 fast | range | testpmd 2 / 1 fast |",
                  "|---|---|---:|---|---:|---:|---|---|---:|---:|---|---:|"]
            for x in r["scaling"]:
                xc = ", ".join("/".join(f"{v:.0f}" for v in rep) for rep in x.get("xcore_ns") or [] if rep)
                fast_range = (f"{fmt_range(x['fast_ratio_min'], x['fast_ratio_max'], 2)}"
                              if x.get("fast_reps") else "–")
                L.append(f"| {x['traffic']} | {x['mode']} | {fmt(x['ratio_median'], 2)} | "
                         f"{fmt_range(x['ratio_min'], x['ratio_max'], 2)} | {fmt(x.get('testpmd_ratio_median'), 2)} | "
                         f"{fmt(x.get('per_cpu_ratio_median'), 2)} | "
                         f"{fmt_range(x.get('per_cpu_ratio_min'), x.get('per_cpu_ratio_max'), 2)} | "
                         f"{xc or '–'} | {x.get('fast_reps', 0)} | {fmt(x.get('fast_ratio_median'), 2)} | "
                         f"{fast_range} | {fmt(x.get('fast_testpmd_ratio_median'), 2)} |")
            L.append("")
        if any(s["traffic"] == "agq" for s in r["summary"]):
            L += [f"agq traffic: DATA of {AGQ_WORKERS} logical workers per stream at {AGQ_WIDTH} bits, "
                  f"{AGQ_SLOTS} slots; every {AGQ_WORKERS} packets in make one RESULT multicast to "
                  f"{AGQ_WORKERS} replicas (egress rewrite each). testpmd io forwards the same DATA frames as they are.", ""]
    if "memif" in res and res["memif"]["latency"]:
        L += ["## Latency: bench_gen tx → device → bench_gen rx over memif (TSC stamps in the frame, same core)", "",
              "agq (switch): the completing DATA's tx → each of its RESULT replicas' rx (absorbed contributions "
              "produce no frame); testpmd returns every DATA frame.", "",
              "| device | traffic | load | offered Mpps | p50 µs | p99 µs | p99.9 µs |", "|---|---|---|---:|---:|---:|---:|"]
        for x in res["memif"]["latency"]:
            L.append(f"| {x['dut']} | {x['traffic']} | {x['load']} | {fmt(x['rate_mpps'], 3)} | "
                     f"{fmt(x['p50_ns'] / 1e3, 1)} | {fmt(x['p99_ns'] / 1e3, 1)} | {fmt(x['p999_ns'] / 1e3, 1)} |")
        L.append("")
    if "e2e" in res:
        e = res["e2e"]
        L += ["## End to end: N logical agq-workers (2 processes) + PS through agq-switch vs MPI_Allreduce", ""]
        if not e["workers_built"]:
            L += ["agq-worker is not built: only the MPI reference ran.", ""]
        L += ["| N | tensor MB | agq s | agq elem/s | agq Gbit/s | retransmissions | PS retries | mismatches | "
              "MPI s | MPI elem/s | MPI Gbit/s | agq/MPI |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        mpi = {(m["workers"], m["mbytes"]): m for m in e["mpi"]}
        agq = {(a["workers"], a["mbytes"]): a for a in e["agq"]}
        for k in sorted(set(mpi) | set(agq)):
            a, m = agq.get(k, {}), mpi.get(k, {})
            ratio = (a["elements_per_s"] / m["elements_per_s"]) if a.get("elements_per_s") and m.get("elements_per_s") else None
            L.append(f"| {k[0]} | {k[1]} | {fmt(a.get('seconds'))} | {fmt(a.get('elements_per_s'), 0) if a else '–'} | "
                     f"{fmt(a.get('goodput_gbps'), 3)} | {fmt(a.get('retransmissions'))} | {fmt(a.get('ps_retries'))} | "
                     f"{fmt(a.get('mismatches'))} | {fmt(m.get('seconds'), 3)} | "
                     f"{fmt(m.get('elements_per_s'), 0) if m else '–'} | {fmt(m.get('goodput_gbps'), 3)} | {fmt(ratio, 3)} |")
        if e.get("agq_pipeline"):
            L += ["", "The agq pipeline (`agq-worker --protocol agq`, one round, error budget 1e-3, "
                  "256 slots in 128 rows), same tensors; verify = results checked against the scalar "
                  "reference (sample:64 = one chunk in 64), loss = the switch's drop simulator on every port "
                  "and direction:", "",
                  "| N | tensor MB | verify | loss | status | s | elem/s | Gbit/s | retransmissions (fast, probes, "
                  "spurious) | % of DATA | time / loss-free | mismatches | "
                  "avg granted bits | switch memory vs 32 bit | rms error | classic elem/s | MPI elem/s |",
                  "|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
            free = {(a["workers"], a["mbytes"]): a for a in e["agq_pipeline"]
                    if not a.get("loss") and a.get("verify") == "sample:64" and a.get("status") == "ok"}
            for a in e["agq_pipeline"]:
                k = (a["workers"], a["mbytes"])
                f = free.get(k)
                ratio = a["seconds"] / f["seconds"] if f and a.get("status") == "ok" and a is not f else None
                share = 100.0 * a["retransmissions"] / a["data_sent"] if a.get("data_sent") else None
                L.append(f"| {a['workers']} | {a['mbytes']} | {a.get('verify', 'all')} | {a.get('loss', 0):g} | "
                         f"{a.get('status', '–')} | {fmt(a.get('seconds'))} | "
                         f"{fmt(a.get('elements_per_s'), 0)} | {fmt(a.get('goodput_gbps'), 3)} | "
                         f"{fmt(a.get('retransmissions'))} ({fmt(a.get('fast_retransmissions'))}, "
                         f"{fmt(a.get('tail_probes'))}, {fmt(a.get('spurious_retransmissions'))}) | {fmt(share, 3)} | "
                         f"{fmt(ratio)} | {fmt(a.get('mismatches'))} | "
                         f"{fmt(a.get('avg_granted_bits'))} | {fmt(a.get('memory_saving_x'))}x | "
                         f"{fmt(a.get('quantization_rms'), 6)} | {fmt(agq.get(k, {}).get('elements_per_s'), 0)} | "
                         f"{fmt(mpi.get(k, {}).get('elements_per_s'), 0)} |")
        if e.get("classic_lcores2"):
            L += ["", "The classic pipeline on a 2-lcore switch (N = 2, two worker processes, everything on the "
                  "2 vCPUs, switch idle back-off 100 us): one memif ring per link (every other frame handed "
                  "between the switch's lcores) vs one ring per switch lcore (`--memif-queues 2`, "
                  "`--switch-lcores 2`: each frame on its shard's ring, docs/PROTOCOL.md §10), interleaved:", "",
                  "| rep | rings | status | s | elem/s | switch hand-offs | mismatches |", "|---:|---:|---|---:|---:|---:|---:|"]
            for a in e["classic_lcores2"]:
                L.append(f"| {a['rep'] + 1} | {a.get('rings')} | {a.get('status')} | {fmt(a.get('seconds'), 3)} | "
                         f"{fmt(a.get('elements_per_s'), 0)} | {fmt(a.get('handoff'))} | {fmt(a.get('mismatches'))} |")
        if e.get("worker_stages"):
            L += ["", "The worker's own cost per tensor element (`bench_worker_stages`, no DPDK, one core; "
                  "verify = per element of a checked chunk, divide by K for sample:K; engine = encode + "
                  "bookkeeping + timers + decode of an N = 1 job through an in-memory loopback):", "",
                  "| stage | ns per element |", "|---|---:|"]
            for s in e["worker_stages"]:
                L.append(f"| {s['name']} | {fmt(s.get('ns_per_elem'), 3)} |")
        if e["skipped"]:
            L += ["", "Skipped (predicted time over the per-run budget of "
                  f"{e['time_budget_s']:.0f} s): " + ", ".join(f"{s.get('pipeline', 'classic')} N={s['workers']} "
                                                                f"{s['mbytes']} MB (~{s['predicted_s']:.0f} s)"
                                                                for s in e["skipped"])]
        L.append("")
    if "instr" in res:
        ins = res["instr"]
        L += ["## Instructions per packet: callgrind, 1-lcore pcap replay", ""]
        if ins.get("skipped"):
            L += [ins["skipped"], ""]
        else:
            names = [n for n, _ in Bench.INSTR_GROUPS] + ["other"]
            L += [f"Counted, not timed: each DUT replayed the 1-lcore pcap ports under callgrind for "
                  f"{ins['seconds'][0]} s and {ins['seconds'][1]} s; per packet = the difference of the two "
                  "runs' instructions over the difference of their packets (received), so start-up and exit "
                  "cancel. Lane kernels are AVX2 under valgrind. Groups by function: " +
                  "; ".join(f"{n} = `{rx}`" for n, rx in Bench.INSTR_GROUPS) + ".", "",
                  "| traffic | DUT | packets | instructions / packet | " + " | ".join(names) + " |",
                  "|---|---|---:|---:|" + "---:|" * len(names)]
            for r in ins["rows"]:
                if r["status"] != "ok":
                    L.append(f"| {r['traffic']} | {r['dut']} | failed | | " + " | " * len(names))
                    continue
                L.append(f"| {r['traffic']} | {r['dut']} | {r['packets']} | {r['per_packet']:.0f} | " +
                         " | ".join(f"{r['groups'].get(n, 0):.0f}" for n in names) + " |")
        L.append("")
    if "loss_pairs" in res:
        lp = res["loss_pairs"]
        L += ["## agq loss cost: time at 1% loss / loss-free time, pairs interleaved per build", "",
              "Builds: " + ", ".join(f"{n} = `{b}`" for n, b in lp["builds"]), "",
              "| N | tensor MB | build | pairs | median | min | max | failed |", "|---:|---:|---|---:|---:|---:|---:|---:|"]
        for x in lp["summary"]:
            L.append(f"| {x['workers']} | {x['mbytes']} | {x['build']} | {x['pairs']} | {fmt(x['ratio_median'])} | "
                     f"{fmt(x['ratio_min'])} | {fmt(x['ratio_max'])} | {x['failed']} |")
        L += ["", "Every pair (s loss-free, s at 1%, ratio; retransmissions at 1% as % of DATA; load average):", "",
              "| rep | N | MB | build | s 0% | s 1% | ratio | retx % 1% | retx % 0% | load |",
              "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
        for r in lp["runs"]:
            def share(x):
                return 100.0 * x["retransmissions"] / x["data_sent"] if x.get("data_sent") else None
            L.append(f"| {r['rep']} | {r['workers']} | {r['mbytes']} | {r['build']} | {fmt(r['free'].get('seconds'), 3)} | "
                     f"{fmt(r['lossy'].get('seconds'), 3)} | {fmt(r['ratio'])} | {fmt(share(r['lossy']), 3)} | "
                     f"{fmt(share(r['free']), 4)} | {r['loadavg']:.1f} |")
        L.append("")
    if "memory" in res:
        L += ["## Aggregator memory (classic): concurrent sequences per MiB", "",
              "| granted width | seqs per aggregator | per MiB of lane registers | per MiB incl. control registers | "
              "vs 32 bit per gradient |", "|---:|---:|---:|---:|---:|"]
        for r in res["memory"]:
            L.append(f"| {r['width_bits']} | {r['seqs_per_aggregator']} | {r['seqs_per_mib_lanes']:.0f} | "
                     f"{r['seqs_per_mib_with_control']:.0f} | {r['vs_32bit_design']:.2f}x |")
        L.append("")
    if res.get("agq_memory_md"):
        L += ["## Aggregator memory and quantization error (agq): bench_memory", "",
              res["agq_memory_md"].strip(), ""]
    return "\n".join(L)


def plots(res: dict, out: Path) -> list[str]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    made = []
    if "pipeline" in res:
        b = res["pipeline"]["benchmarks"]
        names = [k for k in b if k.startswith("Pipeline/")]
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 1.5 + 0.22 * len(names)), sharey=True)
        ax.barh([n.removeprefix("Pipeline/") for n in names], [b[n]["ns_per_pkt"] for n in names])
        ax.invert_yaxis()
        ax.set_xlabel("ns per packet (one core)")
        ax.set_title("Pipeline cost: process() (+ egress per replica)", fontsize=9)
        ax2.barh([n.removeprefix("Pipeline/") for n in names], [b[n].get("ns_per_elem", 0) for n in names])
        ax2.set_xlabel("ns per gradient element contributed")
        ax2.set_title("per element (classic 4 lanes, agq 32 lanes)", fontsize=9)
        fig.tight_layout()
        fig.savefig(out / "pipeline_cost.png", dpi=100)
        plt.close(fig)
        made.append("pipeline_cost.png")
        names = [k for k in b if k.startswith("BM_LaneAdd")]
        fig, ax = plt.subplots(figsize=(6, 3))
        ax.bar([n.removeprefix("BM_LaneAdd_") for n in names], [b[n]["ns_per_lane"] for n in names])
        ax.set_ylabel("ns per lane")
        ax.set_title("Packed (masked, shifted) add vs plain 32-bit add")
        fig.tight_layout()
        fig.savefig(out / "lane_add.png", dpi=100)
        plt.close(fig)
        made.append("lane_add.png")
    rows = []
    for key in ("pcap", "memif"):
        for s in res.get(key, {}).get("summary", []):
            rows.append((f"{key}\n{s['traffic']} x{s['lcores']}", s))
    if rows:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
        x = range(len(rows))
        a1.bar([i - 0.2 for i in x], [r[1]["switch_mpps"] or 0 for r in rows], 0.4, label="agq-switch")
        a1.bar([i + 0.2 for i in x], [r[1]["testpmd_mpps"] or 0 for r in rows], 0.4, label="testpmd io")
        a1.set_xticks(list(x), [r[0] for r in rows], fontsize=7)
        a1.set_ylabel("Mpps (input)")
        a1.legend()
        a1.set_title("Throughput")
        a2.bar(list(x), [r[1]["ratio_median"] or 0 for r in rows])
        a2.set_xticks(list(x), [r[0] for r in rows], fontsize=7)
        a2.set_ylabel("agq-switch / testpmd")
        a2.set_title("Ratio (median of interleaved runs)")
        fig.tight_layout()
        fig.savefig(out / "throughput.png", dpi=100)
        plt.close(fig)
        made.append("throughput.png")
    lat = res.get("memif", {}).get("latency", [])
    if lat:
        fig, ax = plt.subplots(figsize=(9, 4))
        labels = [f"{x['dut']}\n{x['traffic']} {x['load']}" for x in lat]
        for j, (k, lab) in enumerate((("p50_ns", "p50"), ("p99_ns", "p99"), ("p999_ns", "p99.9"))):
            ax.bar([i + (j - 1) * 0.27 for i in range(len(lat))], [x[k] / 1e3 for x in lat], 0.27, label=lab)
        ax.set_xticks(range(len(lat)), labels, fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("µs")
        ax.legend()
        ax.set_title("Latency over memif (generator tx → device → generator rx)")
        fig.tight_layout()
        fig.savefig(out / "latency.png", dpi=100)
        plt.close(fig)
        made.append("latency.png")
    am = res.get("agq_memory")
    if am:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
        ws = [r["width_bits"] for r in am]
        a1.plot(ws, [r["seqs_per_mib"] for r in am], "-o", label="agq (measured on AgqProgram)")
        a1.plot(ws, [r["seqs_per_mib_with_control"] for r in am], "-^", label="agq incl. control registers")
        a1.plot(ws, [r["seqs_per_mib_32bit"] for r in am], "--s", label="32 bit per gradient (SwitchML-like)")
        a1.plot(ws, [r["seqs_per_mib_32bit_with_control"] for r in am], ":s", label="32 bit incl. control registers")
        a1.set_xlabel("granted width (bits)")
        a1.set_ylabel("concurrent sequences per MiB")
        a1.set_yscale("log", base=2)
        a1.set_xticks(ws)
        a1.legend(fontsize=7)
        a1.set_title("Aggregator memory")
        for key, lab, style in (("n4_normal", "N=4 normal", "-o"), ("n4_laplace", "N=4 Laplace", "--o"),
                                ("n8_normal", "N=8 normal", "-^"), ("n8_laplace", "N=8 Laplace", "--^")):
            pts = [(r["width_bits"], r["err"][key][0]) for r in am if r["err"][key][0] > 0]
            a2.plot([p[0] for p in pts], [p[1] for p in pts], style, label=lab)
        a2.set_yscale("log")
        a2.set_xlabel("granted width (bits)")
        a2.set_ylabel("rms error / max |sum|")
        a2.set_xticks(ws)
        a2.legend(fontsize=7)
        a2.set_title("Quantization error (switch encoding)")
        fig.tight_layout()
        fig.savefig(out / "memory.png", dpi=100)
        plt.close(fig)
        made.append("memory.png")
    e = res.get("e2e")
    if e and (e["agq"] or e["mpi"]):
        fig, ax = plt.subplots(figsize=(7, 4))
        names = {"agq": "classic", "agq_pipeline": "agq", "mpi": "MPI_Allreduce"}
        for src, style in (("agq", "-o"), ("agq_pipeline", "-^"), ("mpi", "--s")):
            for n in sorted({r["workers"] for r in e.get(src, [])}):
                pts = sorted((r["mbytes"], r["elements_per_s"]) for r in e[src]
                             if r["workers"] == n and r.get("elements_per_s") and not r.get("loss")
                             and r.get("verify", "sample:64") != "all")
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=f"{names[src]} N={n}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tensor MB")
        ax.set_ylabel("aggregated elements/s")
        ax.legend(fontsize=7)
        ax.set_title("End to end")
        fig.tight_layout()
        fig.savefig(out / "end_to_end.png", dpi=100)
        plt.close(fig)
        made.append("end_to_end.png")
    return made


# --------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short run (~3 min)")
    ap.add_argument("--build-dir", type=Path, default=SRC / "build-bench")
    ap.add_argument("--out", type=Path, default=None, help="results folder (default results/<date>)")
    ap.add_argument("--only", default="pipeline,pcap,memif,e2e",
                    help="comma list of parts: pipeline,pcap,memif,e2e,instr (instr: instructions per "
                         "packet under callgrind, not in the default set); pgo_train alone: the training "
                         "replay of scripts/build-pgo.sh, nothing measured")
    ap.add_argument("--traffic", default="",
                    help="comma list of traffics for the pcap/memif parts (default all: " + ",".join(TRAFFICS) + ")")
    ap.add_argument("--pcap-modes", default="",
                    help="comma list of pcap lcore modes: 1,steered,hand-off (default all)")
    ap.add_argument("--baseline-build", type=Path, default=None,
                    help="build dir of a second agq-switch (e.g. main's) measured beside this one in the pcap "
                         "part, same ports, same reps")
    ap.add_argument("--reps", type=int, default=0, help="interleaved repetitions (default 3, quick 1)")
    ap.add_argument("--memif-lean", action="store_true",
                    help="memif part: throughput of the switch and testpmd io only (no testpmd packed, no "
                         "latency runs), so many --reps fit in a run: for the spread of the ratio over the "
                         "reps with the vCPUs close")
    ap.add_argument("--no-build", action="store_true", help="do not run cmake/ninja first")
    ap.add_argument("--pgo", action="store_true",
                    help="measure the profile-guided build (scripts/build-pgo.sh into BUILD-pgo; with --no-build "
                         "it must exist) as the device under test, and the --build-dir build beside it as "
                         "--baseline-build unless one is given")
    ap.add_argument("--no-boost", action="store_true",
                    help="do not raise this run's autogroup priority (other users' compiles then "
                         "take CPU from the benchmarks)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (process logs, pcaps)")
    ap.add_argument("--loss-pairs", default="",
                    help="only the agq protocol's loss cost: comma list of N:MB points (e.g. 2:16,8:4), each "
                         "run loss-free and at 1%% loss, --reps times (default 3), interleaved over the builds")
    ap.add_argument("--compare", action="append", default=[], metavar="'NAME=DIR [WORKER FLAGS]'",
                    help="with --loss-pairs: another build dir (and agq-worker flags) to interleave with "
                         "--build-dir (repeatable)")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    loss_points = []
    try:
        loss_points = [(int(p.split(":")[0]), int(p.split(":")[1])) for p in a.loss_pairs.split(",") if p]
        compare = [(c.split("=", 1)[0], Path(c.split("=", 1)[1].split()[0]), c.split("=", 1)[1].split()[1:])
                   for c in a.compare]
    except (ValueError, IndexError):
        ap.print_usage(sys.stderr)
        print("bench: --loss-pairs takes N:MB[,N:MB...], --compare NAME=DIR", file=sys.stderr)
        return 2
    if compare and not loss_points:
        ap.print_usage(sys.stderr)
        print("bench: --compare only applies to --loss-pairs", file=sys.stderr)
        return 2
    if loss_points:
        parts = {"loss_pairs"}
    else:
        parts = set(a.only.split(","))

    if os.geteuid() != 0:
        print("bench: needs root (DPDK virtual devices, /var/run/dpdk)", file=sys.stderr)
        return 1
    boosted_from = None
    if not a.no_boost:
        # Compiles of other users run in their own autogroups; nice only
        # matters inside a group, so raise this run's group (children
        # inherit) and put it back at exit: the group outlives this process.
        try:
            ag = Path("/proc/self/autogroup")
            boosted_from = int(ag.read_text().split("nice")[1])
            ag.write_text("-10")
        except (OSError, ValueError, IndexError):
            boosted_from = None
    progress = Progress(a.verbose)
    build = a.build_dir
    if not a.no_build:
        progress("build: cmake + ninja " + str(build))
        if not (build / "build.ninja").exists():
            subprocess.run(["cmake", "-S", SRC, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"],
                           check=True, capture_output=not a.verbose)
        targets = ["agq-switch", "bench_pipeline", "bench_gen", "bench_memory", "bench_xcore"]
        r = subprocess.run(["ninja", "-C", build, "-t", "targets", "all"], capture_output=True, text=True)
        for t in ("agq-worker", "bench_mpi_allreduce", "bench_worker_stages"):
            if re.search(rf"^{t}:", r.stdout, re.M):
                targets.append(t)
        subprocess.run(["ninja", "-j2", "-C", build, *targets], check=True, capture_output=not a.verbose)
    if a.pgo:
        # The PGO build (its own training, scripts/build-pgo.sh) is measured;
        # the plain build it was made from runs beside it in the same reps.
        pgo = build.parent / (build.name + "-pgo")
        if not a.no_build:
            progress("build: scripts/build-pgo.sh " + str(pgo))
            subprocess.run([SRC / "scripts" / "build-pgo.sh", pgo], check=True, capture_output=not a.verbose)
            subprocess.run(["ninja", "-j2", "-C", pgo / "use", *targets], check=True, capture_output=not a.verbose)
        if not (pgo / "use" / "switch" / "agq-switch").exists():
            ap.error(f"--pgo: no {pgo / 'use' / 'switch' / 'agq-switch'} (run scripts/build-pgo.sh {pgo})")
        if a.baseline_build is None:
            a.baseline_build = build
        build = pgo / "use"

    date = dt.datetime.now().strftime("%Y-%m-%d")
    out = a.out or SRC / "results" / date
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="agq-bench-"))
    bench = Bench(a, build, work, progress)
    if not bench.testpmd:
        print("bench: dpdk-testpmd not found (Debian package dpdk-dev); throughput ratios need it", file=sys.stderr)

    def cleanup(*_):
        bench.procs.close()
        if boosted_from is not None:
            try:
                Path("/proc/self/autogroup").write_text(str(boosted_from))
            except OSError:
                pass
        if a.keep:
            print(f"bench: logs kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)

    atexit.register(cleanup)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    if "pgo_train" in parts:  # a build step, not a measurement: nothing is written
        for what, mpps in bench.pgo_train().items():
            print(f"pgo training: {what}: {mpps if mpps is None else round(mpps, 2)} Mpps (instrumented)")
        progress.done()
        return 0

    t0 = time.monotonic()
    res = {"date": dt.datetime.now().isoformat(timespec="seconds"), "quick": a.quick,
           "command": "bench/run.py " + " ".join(sys.argv[1:]), "machine": machine(),
           "pipelines": list(PIPELINES),
           "builds": {"this build": build_kind(build), "baseline": build_kind(a.baseline_build)}}
    try:
        if "pipeline" in parts:
            res["pipeline"] = bench.pipeline_cost()
        if "pcap" in parts and bench.testpmd:
            res["pcap"] = bench.pcap_throughput()
        if "memif" in parts and bench.testpmd:
            res["memif"] = bench.memif()
        if "e2e" in parts:
            res["e2e"] = bench.e2e()
        if "instr" in parts:
            res["instr"] = bench.instructions()

        if "loss_pairs" in parts:
            res["loss_pairs"] = bench.loss_pairs(loss_points, [("this", build, [])] + compare, a.reps or 3)
        if "loss_pairs" not in parts:
            res["memory"] = memory_efficiency()
        if "loss_pairs" not in parts and (build / "bench" / "bench_memory").exists():
            progress("aggregator memory: bench_memory")
            mj = work / "bench_memory.json"
            res["agq_memory_md"] = subprocess.run([build / "bench" / "bench_memory", "--json", mj], check=True,
                                                  capture_output=True, text=True).stdout
            res["agq_memory"] = json.loads(mj.read_text())
    except KeyboardInterrupt:
        progress.done()
        print("bench: interrupted; partial results written", file=sys.stderr)
    finally:
        res["wall_s"] = time.monotonic() - t0
        res["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
        (out / "results.json").write_text(json.dumps(res, indent=1, default=str))
        res["plots"] = plots(res, out)
        (out / "results.md").write_text(markdown(res) + "\n" + "".join(
            f"![{p}]({p})\n" for p in res["plots"]))
    progress("done")
    progress.done()
    print(f"bench: results in {out}/results.md ({res['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
