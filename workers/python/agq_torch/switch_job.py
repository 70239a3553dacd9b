"""The job a training process joins: from the switch (`agqctl job get ID
--json`, docs/PROTOCOL.md section 12) or given explicitly."""
import json
import os
import shutil
import subprocess
from pathlib import Path


class JobError(RuntimeError):
    pass


def _agqctl() -> str:
    build = Path(os.environ.get("AGQ_BUILD_DIR", Path(__file__).resolve().parents[3] / "build"))
    for cand in (build / "switch" / "agqctl", build / "agqctl"):
        if cand.exists():
            return str(cand)
    found = shutil.which("agqctl")
    if not found:
        raise JobError(f"agqctl not found under {build} nor on PATH (build it: ninja -C build agqctl)")
    return found


def job_from_switch(ctl_socket, job_id: int, timeout: float = 5.0) -> dict:
    """The job's parameters as the switch holds them. Raises JobError naming
    the job when the switch does not know it or cannot be reached."""
    try:
        r = subprocess.run([_agqctl(), "--socket", str(ctl_socket), "job", "get", str(job_id), "--json"],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise JobError(f"job {job_id}: the switch's control socket {ctl_socket} did not answer in {timeout} s")
    if r.returncode != 0:
        msg = (r.stderr or r.stdout).strip()
        raise JobError(f"job {job_id}: the switch at {ctl_socket} does not give it: {msg}")
    try:
        job = json.loads(r.stdout)
    except json.JSONDecodeError as e:
        raise JobError(f"job {job_id}: the switch's answer is not JSON ({e}): {r.stdout[:200]!r}")
    for key in ("id", "workers", "slots", "rows", "max_width", "lanes"):
        if key not in job:
            raise JobError(f"job {job_id}: the switch's answer has no '{key}' (PROTOCOL.md section 12)")
    return job


def reset_job(ctl_socket, job_id: int, timeout: float = 5.0):
    """`agqctl job reset ID`: zero the job's slots and rows on the switch.
    A job's slots keep their state after its processes exit; a new set of
    ranks numbers its chunks from 0 again and would be answered with the old
    run's kept RESULTs. Call it once (e.g. on rank 0, before a barrier and
    before any rank opens its AgqClient) when a job is started again on a
    switch that is still running."""
    r = subprocess.run([_agqctl(), "--socket", str(ctl_socket), "job", "reset", str(job_id)],
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise JobError(f"job {job_id}: the switch at {ctl_socket} cannot reset it: {(r.stderr or r.stdout).strip()}")


def explicit_job(job_id: int, workers: int, slots: int, rows: int = 0, max_width: int = 32, lanes: int = 32) -> dict:
    """A job given by hand (addresses: lib/agq_wire's default identities)."""
    return {"id": job_id, "workers": workers, "slots": slots, "rows": rows, "max_width": max_width, "lanes": lanes}


def client_args(job: dict, rank: int) -> dict:
    """Keyword arguments of _agq.Client for `rank` in `job`."""
    if not 0 <= rank < job["workers"]:
        raise JobError(f"job {job['id']}: rank {rank} is not a worker of it (workers = {job['workers']})")
    args = dict(job_id=job["id"], num_workers=job["workers"], worker_id=rank, slots=job["slots"],
                rows=job.get("rows", 0), lanes=job.get("lanes", 32), max_width=job.get("max_width", 32),
                row_shift=job.get("row_shift", -1))
    table = job.get("worker_table") or []
    me = [w for w in table if w.get("id") == rank]
    if me:
        args.update(self_ip=me[0]["ip"], self_mac=me[0]["mac"])
    if job.get("ps"):
        args.update(ps_ip=job["ps"]["ip"], ps_mac=job["ps"]["mac"])
    return args
