#!/usr/bin/python3
"""A local agq-switch for one job of N ranks (agq_torch.launch.LocalSwitch:
the switch with one memif port per rank plus the job's PS), kept running
until Ctrl-C or SIGTERM. Prints the environment a torchrun job needs to use
it through the "agq" backend:

    /usr/bin/python3 workers/examples/local_switch.py --workers 2 --dir /tmp/agq
    export AGQ_SWITCH_CTL=/tmp/agq/ctl.sock AGQ_JOB=1 AGQ_VDEV='net_memif0,...,socket=/tmp/agq/w{rank}.sock,...'

With --env-file FILE it also writes those lines to FILE (for `. FILE`)
once the switch and the PS are ready."""
import argparse
import shlex
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2, help="ranks of the job (one memif port each)")
    ap.add_argument("--dir", default="/tmp/agq", help="sockets, config and logs")
    ap.add_argument("--job", type=int, default=1)
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--env-file", help="also write the exports here")
    args = ap.parse_args()
    if not 1 <= args.workers <= 32:
        ap.error(f"--workers {args.workers}: 1..32")
    from agq_torch.launch import LocalSwitch
    if args.env_file:
        Path(args.env_file).unlink(missing_ok=True)  # never a stale one while this switch starts
    stop = threading.Event()
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, lambda *_: stop.set())
    with LocalSwitch(args.dir, args.workers, job_id=args.job, slots=args.slots, rows=args.rows) as sw:
        vdev = sw.vdev(0).replace(str(sw.socks[0]), str(sw.socks[0]).replace("w0.sock", "w{rank}.sock"))
        lines = [f"export AGQ_SWITCH_CTL={shlex.quote(str(sw.ctl))}", f"export AGQ_JOB={args.job}",
                 f"export AGQ_VDEV={shlex.quote(vdev)}"]
        print("\n".join(lines), flush=True)
        if args.env_file:
            Path(args.env_file).write_text("\n".join(lines) + "\n")
        print(f"# agq-switch ready ({args.workers} ranks, job {args.job}); Ctrl-C stops it", file=sys.stderr,
              flush=True)
        while not stop.wait(0.5):
            if sw.switch.poll() is not None:
                print(f"agq-switch exited {sw.switch.returncode}:\n{sw.log('switch')[-2000:]}", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
