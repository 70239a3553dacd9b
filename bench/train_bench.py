#!/usr/bin/python3
"""The training benchmark: workers/examples/train_ddp.py at full size (2 and
4 processes, 300 steps, small MLP on generated data) through one agq-switch
vs plain Gloo allreduce, in one run, side by side. Writes
results/<date>/train/{summary.json,train.png,results.md} and prints the
Markdown table. Numbers only: nothing passes or fails on time.

    bench/train_bench.py                    # builds what it needs in build/ first
    bench/train_bench.py --quick            # 2 processes, 100 steps
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1]


def loadavg():
    return os.getloadavg()[0]


def table(summary):
    rows = ["| procs | params | final loss Gloo / agq (rel. diff) | accuracy Gloo / agq | step ms Gloo / agq (ratio) "
            "| agq bits/element (vs 32) | granted widths | max error / bound | fallbacks | overflow redos "
            "| retransmissions |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for n, s in summary["runs"].items():
        q = s["agq"]
        e = q["quantization_error"]
        rows.append(f"| {n} | {s['params']} | {s['final_loss_gloo']:.4f} / {s['final_loss_agq']:.4f} "
                    f"({s['loss_rel_diff']:.2%}) | {s['accuracy_gloo']:.3f} / {s['accuracy_agq']:.3f} "
                    f"| {s['step_ms_gloo']:.2f} / {s['step_ms_agq']:.2f} (x{s['step_time_ratio_agq_over_gloo']:.2f}) "
                    f"| {q['avg_granted_bits']:.2f} ({q['memory_saving_x']:.2f}x less) "
                    f"| {', '.join(f'{w}b:{c}' for w, c in sorted(q['granted_width_histogram'].items(), key=lambda x: int(x[0])))} "
                    f"| {e['max_abs']:.3g} / {e['max_bound']:.3g} ({e['violations']} over) | {q['fallbacks']} "
                    f"| {q['overflow_redos']} | {q['retransmissions']} |")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    out = args.out or SRC / "results" / datetime.date.today().isoformat() / "train"
    out.mkdir(parents=True, exist_ok=True)
    build = Path(os.environ.get("AGQ_BUILD_DIR", SRC / "build"))
    if not args.no_build:
        subprocess.run(["cmake", "-S", str(SRC), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["ninja", "-C", str(build), "agq-switch", "agqctl", "agq-worker", "_agq"], check=True)
    cmd = [sys.executable, str(SRC / "workers" / "examples" / "train_ddp.py"), "--out", str(out)]
    cmd += ["--procs", "2", "--steps", "100"] if args.quick else ["--procs", "2", "4", "--steps", "300"]
    load0 = loadavg()
    t0 = datetime.datetime.utcnow()
    rc = subprocess.run(cmd, env=dict(os.environ, AGQ_BUILD_DIR=str(build))).returncode
    load1 = loadavg()
    summary = json.loads((out / "summary.json").read_text())
    md = (f"Training benchmark, {t0:%Y-%m-%d %H:%M} UTC, `{' '.join(cmd[1:])}`; load average {load0:.2f} at the "
          f"start, {load1:.2f} at the end.\n\n{table(summary)}\n")
    (out / "results.md").write_text(md)
    print(md)
    print(f"wrote {out}/results.md, summary.json, train.png")
    return rc


if __name__ == "__main__":
    sys.exit(main())
