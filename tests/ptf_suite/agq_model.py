"""A model of the agq switch written from docs/PROTOCOL.md (sections 1-4, 7,
8), for the packet test suite: feed it the frames a case sends, it returns
the frames the switch must emit on each role's port. It never looks at the
switch (neither its code nor its output): the suite checks one against the
other, on agq-switch and on a Tofino alike.

State per job (PROTOCOL §3), kept per job since a job only sees its own rows
and slots: per (slot, v) the bitmap, count and window (pos, w units,
FALLBACK, OVERFLOW); per (row, v) the live units and the cells (one per
lane of the job's profile, 32 or 16: PROTOCOL §10).
"""
from __future__ import annotations

import math
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pkt"))

from agq_proto import (DATA, F_FALLBACK, F_OVERFLOW, F_RETRANSMIT,  # noqa: E402
                       FALLBACK_DATA, LANES, PS_RESULT, RESULT, VERSION, AgqHeader, guard_bits,
                       ip_bytes, ip_checksum, mac_bytes)

UNITS = 8  # 4-bit units per 32-bit cell, unit 0 the most significant
AGQ_OFF = 14 + 20 + 8  # the agq header in the suite's frames (untagged, IHL 5)


@dataclass
class Worker:
    role: str     # the port role it sits behind
    ip: str
    mac: str


@dataclass
class Job:
    id: int
    n: int
    slots: int
    rows: int
    workers: dict[int, Worker]
    ps_role: str
    ps_ip: str
    ps_mac: str
    delivery: str = "multicast"
    max_width: int = 32
    lanes: int = LANES    # the job's lane profile: n_lanes of its packets (32 or 16)

    @property
    def g(self) -> int:
        return guard_bits(self.n)

    @property
    def row_shift(self) -> int:
        # §3: slots_per_row = 2^k, the smallest with ceil(slots / 2^k) <= rows
        k = 0
        while math.ceil(self.slots / (1 << k)) > self.rows:
            k += 1
        return k


@dataclass
class _Slot:
    bitmap: int = 0
    count: int = 0
    pos: int = 0
    w: int = 0            # units; 0 = no window
    fallback: bool = False
    overflow: bool = False


@dataclass
class _Row:
    live: set = field(default_factory=set)           # units in a live window
    cells: list = field(default_factory=lambda: [0] * LANES)


def low(bits: int) -> int:
    return (1 << bits) - 1 if bits > 0 else 0


def alloc(live: set, want: int) -> tuple[int, int]:
    """§4 step 5 / PIPELINE alloc_t: the smallest maximal free run that holds
    `want` units (lowest position on ties), window at its start; else the
    widest free run (lowest position on ties), all of it; nothing free: 0."""
    runs, u = [], 0
    while u < UNITS:
        if u in live:
            u += 1
            continue
        start = u
        while u < UNITS and u not in live:
            u += 1
        runs.append((u - start, start))
    fits = [r for r in runs if r[0] >= want]
    if fits:
        _, pos = min(fits)
        return pos, want
    if not runs:
        return 0, 0
    length, pos = max(runs, key=lambda r: (r[0], -r[1]))
    return pos, length


class AgqModel:
    def __init__(self, jobs: list[Job], epoch: int):
        self.jobs = {j.id: j for j in jobs}
        self.epoch = epoch  # the switch's boot epoch, in every frame it makes (PROTOCOL §11)
        self.slots: dict[tuple, _Slot] = {}
        self.rows: dict[tuple, _Row] = {}

    # ---- helpers ---------------------------------------------------------
    def _slot(self, job, slot, v) -> _Slot:
        return self.slots.setdefault((job.id, slot, v), _Slot())

    def _row(self, job, slot, v) -> _Row:
        return self.rows.setdefault((job.id, slot >> job.row_shift, v), _Row())

    @staticmethod
    def _ip(frame: bytes) -> tuple[str, str]:
        return ".".join(map(str, frame[26:30])), ".".join(map(str, frame[30:34]))

    def _out(self, frame: bytes, h: AgqHeader, dst_mac=None, dst_ip=None, swap=False) -> bytes:
        """The frame as it leaves: new agq header, destination rewritten or
        source/destination swapped, IPv4 checksum recomputed, UDP checksum 0."""
        b = bytearray(frame)
        if swap:
            b[0:6], b[6:12] = frame[6:12], frame[0:6]
            b[26:30], b[30:34] = frame[30:34], frame[26:30]
        if dst_mac is not None:
            b[0:6] = mac_bytes(dst_mac)
        if dst_ip is not None:
            b[30:34] = ip_bytes(dst_ip)
        b[24:26] = b"\0\0"
        b[24:26] = struct.pack("!H", ip_checksum(bytes(b[14:34])))
        b[40:42] = b"\0\0"
        b[AGQ_OFF:] = h.copy(epoch=self.epoch).pack()
        return bytes(b)

    def _deliver(self, job, frame, h, out: dict, to_ps: bool = False):
        """A completed RESULT (or a PS answer) to the job's workers: one
        replica per worker, destination and worker_id rewritten; or, for
        delivery = ps, one copy to the PS."""
        if to_ps:
            out.setdefault(job.ps_role, []).append(self._out(frame, h, job.ps_mac, job.ps_ip))
            return
        for wid, w in sorted(job.workers.items()):
            out.setdefault(w.role, []).append(self._out(frame, h.copy(worker_id=wid), w.mac, w.ip))

    # ---- one packet -------------------------------------------------------
    def process(self, in_role: str, frame: bytes) -> dict[str, list[bytes]]:
        """Frames the switch emits for `frame` arriving on `in_role`'s port."""
        out: dict[str, list[bytes]] = {}
        h = AgqHeader.unpack(frame[AGQ_OFF:])
        src_ip, _ = self._ip(frame)
        # §4 step 1: admission; nothing is touched before it passes.
        if h.ver != VERSION or h.n_lanes not in (16, LANES) or h.type not in (DATA, PS_RESULT):
            return out
        if h.job_id in self.jobs and h.n_lanes != self.jobs[h.job_id].lanes:   # not the job's profile
            return out
        job = self.jobs.get(h.job_id)
        if job is None:
            return out
        if h.type == DATA:
            w = job.workers.get(h.worker_id)
            if w is None or w.role != in_role or w.ip != src_ip or h.num_workers != job.n:
                return out
        else:
            unicast = bool(h.flags & F_RETRANSMIT)
            if in_role != job.ps_role or src_ip != job.ps_ip or (unicast and h.worker_id not in job.workers):
                return out
        if h.slot >= job.slots:
            return out
        if h.type == DATA and (h.req_width % 4 or not 4 <= h.req_width <= 32):
            return out
        # A DATA's width byte is its min_width: a multiple of 4 with
        # g + 2 <= min_width <= req_width (§1), else malformed.
        if h.type == DATA and (h.width % 4 or not job.g + 2 <= h.width <= h.req_width):
            return out

        if h.type == PS_RESULT:                                   # §7
            if h.flags & F_RETRANSMIT:
                w = job.workers[h.worker_id]
                r = h.copy(type=RESULT, flags=h.flags | F_FALLBACK)
                out.setdefault(w.role, []).append(self._out(frame, r, w.mac, w.ip))
            else:
                r = h.copy(type=RESULT, flags=(h.flags & ~F_RETRANSMIT) | F_FALLBACK)
                self._deliver(job, frame, r, out)
            return out

        v = h.flags & 1
        bit = 1 << h.worker_id
        s, other = self._slot(job, h.slot, v), self._slot(job, h.slot, 1 - v)
        row = self._row(job, h.slot, v)
        # step 2: bitmap
        seen = bool(s.bitmap & bit)
        s.bitmap |= bit
        other.bitmap &= ~bit
        # step 3: count
        if not seen:
            s.count = 1 if s.count == job.n else s.count + 1
        first = not seen and s.count == 1
        complete = s.count == job.n
        ovf = bool(h.flags & F_OVERFLOW)
        if first:
            # step 5: release the previous window of (slot, v), zero its units, allocate
            if s.w and not s.fallback:
                units = set(range(s.pos, s.pos + s.w))
                row.live -= units
                keep = 0xFFFFFFFF & ~(low(4 * s.w) << 4 * (UNITS - s.pos - s.w))
                row.cells = [c & keep for c in row.cells]
            want = min(h.req_width, job.max_width) // 4
            pos, w = alloc(row.live, want)
            # §2: never narrower than the first contribution's min_width
            # (which leaves W - g >= 2); max_width below it: no window
            if w > 0 and 4 * w >= h.width:
                row.live |= set(range(pos, pos + w))
                s.pos, s.w, s.fallback, s.overflow = pos, w, False, ovf
            else:
                s.pos, s.w, s.fallback, s.overflow = 0, 0, True, ovf
        elif not seen and ovf:
            s.overflow = True                                     # step 4
        if s.fallback:                                            # §7
            f = h.copy(type=FALLBACK_DATA, width=0, pos=0, guard=job.g)
            out.setdefault(job.ps_role, []).append(self._out(frame, f, job.ps_mac, job.ps_ip))
            return out
        end = s.pos + s.w
        if not seen:                                              # step 6
            d = max(h.req_width // 4 - s.w, 0)
            for k in range(job.lanes):
                x = (h.lanes[k] >> (4 * d)) & low(4 * s.w - job.g)
                row.cells[k] = (row.cells[k] + (x << 4 * (UNITS - end))) & 0xFFFFFFFF
        if not complete and not seen:
            return out                                            # absorbed
        if not complete:
            return out                                            # duplicate
        lanes = [(c >> 4 * (UNITS - end)) & low(4 * s.w) for c in row.cells[:job.lanes]]
        flags = v | (F_OVERFLOW if s.overflow else 0)
        r = h.copy(type=RESULT, width=4 * s.w, pos=s.pos, guard=job.g, lanes=lanes)
        if seen:                                                  # retransmission after completion
            r.flags = flags | F_RETRANSMIT
            out.setdefault(in_role, []).append(self._out(frame, r, swap=True))
        else:
            r.flags = flags
            self._deliver(job, frame, r, out, to_ps=job.delivery == "ps")
        return out
