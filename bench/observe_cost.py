#!/usr/bin/python3
"""What the observers cost the dataplane (issue 11): the switch's forwarding
rate with nothing watching, with `agqctl capture` on (rx, both) and with the
job meter of `agqctl top` on, side by side in one run.

Set-up (one process, one dataplane lcore, --no-huge): net_pcap0 replays
115-byte L2 frames with infinite_rx=1 into the switch, a static MAC forwards
them to net_null0 (no-rx). Rate = port 1's tx packets per second (frames forwarded) from
`agqctl ports --json` over `--seconds` after a settling second; modes are
interleaved per rep so load drift hits all of them. Capture writes to
/dev/null (the copy, ring and writer are all paid; disk speed is not
measured). Prints one table (median, min..max, ratio to "off" of the same rep).

    bench/observe_cost.py [--reps 3] [--seconds 2] [--build build]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/integration"))
from harness import Processes, eal_args, unique_prefix, wait_for  # noqa: E402

MODES = {
    "off": None,
    "capture rx": ["capture", "0", "rx", "/dev/null", "--snaplen", "128"],
    "capture both": ["capture", "0", "both", "/dev/null", "--snaplen", "128"],
    "meter (top)": ["meter", "on"],
}


def l2_pcap(path: Path):
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap
    frame = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="10.0.0.1", dst="10.0.0.2") / \
        UDP(sport=7, dport=9) / bytes(73)  # 115 bytes, forwarded by the static MAC
    wrpcap(str(path), [frame] * 64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--build", default=str(ROOT / "build"))
    a = ap.parse_args()
    switch, agqctl = Path(a.build) / "switch/agq-switch", Path(a.build) / "switch/agqctl"
    work = Path(tempfile.mkdtemp(prefix="agq_obscost"))
    l2_pcap(work / "l2.pcap")
    (work / "sw.toml").write_text('[switch]\npipeline = "classic"\n[classic]\nps_port = 1\nworker_ports = [0]\n'
                                  '[[mac]]\nmac = "02:00:00:00:00:02"\nport = 1\n')
    sock = work / "ctl.sock"

    def ctl(*w):
        r = subprocess.run([str(agqctl), "--socket", str(sock), *w], capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            raise RuntimeError(f"agqctl {' '.join(w)}: {r.stderr}")
        return r.stdout

    def rx0():
        return json.loads(ctl("ports", "--json"))[1]["tx_packets"]

    dropped = {m: [] for m in MODES}
    rates = {m: [] for m in MODES}
    ratios = {m: [] for m in MODES}
    with Processes(work) as procs:
        vdevs = [f"net_pcap0,rx_pcap={work}/l2.pcap,infinite_rx=1", "net_null0,no-rx=1"]
        sw = procs.start("switch", [switch, *eal_args(unique_prefix("oc"), "0", vdevs, mem_mb=512), "--",
                                    "--config", work / "sw.toml", "--ctl-socket", sock, "--idle-sleep-us", "0",
                                    "--quiet"])
        wait_for(lambda: sock.exists() or not sw.alive(), 30, what="control socket")
        for rep in range(a.reps):
            this = {}
            for mode, cmd in MODES.items():
                if cmd:
                    ctl(*cmd)
                time.sleep(1.0)
                r0, t0 = rx0(), time.monotonic()
                time.sleep(a.seconds)
                r1, t1 = rx0(), time.monotonic()
                if mode.startswith("capture"):
                    row = json.loads(ctl("capture", "list", "--json"))[0]
                    this[mode + " dropped share"] = row["dropped"] / max(1, row["seen"])
                    ctl("capture", "stop")
                elif cmd:
                    ctl("meter", "off")
                this[mode] = (r1 - r0) / (t1 - t0)
            for m in MODES:
                dropped[m].append(this.get(m + " dropped share", 0.0))
                rates[m].append(this[m])
                ratios[m].append(this[m] / this["off"])
            print(f"rep {rep + 1}: " + ", ".join(f"{m} {this[m] / 1e6:.2f} Mpps" for m in MODES), file=sys.stderr)
        sw.stop()
    load = os.getloadavg()
    print(f"Switch forwarding rate, 115-byte frames, net_pcap replay -> net_null, 1 lcore, --no-huge; "
          f"{a.reps} reps x {a.seconds} s; load average {load[0]:.1f} on {os.cpu_count()} CPUs\n")
    print("| observer | Mpps (median, min..max) | ratio to off (median, min..max) | copies dropped (ring/pool full) |")
    print("|---|---|---|---|")
    for m in MODES:
        r, q = rates[m], ratios[m]
        print(f"| {m} | {statistics.median(r) / 1e6:.2f} ({min(r) / 1e6:.2f}..{max(r) / 1e6:.2f}) | "
              f"{statistics.median(q):.2f} ({min(q):.2f}..{max(q):.2f}) | "
              f"{100 * statistics.median(dropped[m]):.0f}% |")


if __name__ == "__main__":
    main()
