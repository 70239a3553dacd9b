"""An independent reference model of the published AGQ program (the
`classic` pipeline), written from the behaviour reference
(shared/reference/agq-published-program.md, §3.5 "faithful mode"), not from
the switch's C++. Tests use it to compute the packets agq-switch must emit.

Only the AGQ path is modelled; ordinary forwarding is left to the tests.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

M32 = 0xFFFFFFFF
AGQ_LEN = 73
AGQ_PORTS = (50000, 50001)


def top(L: int) -> int:
    return (M32 << (32 - L)) & M32 if L else 0


def window(p: int, q: int) -> int:
    return (M32 >> (4 * p)) & ~(M32 >> (4 * q) if q < 8 else 0) & M32


def has(B: int, p: int) -> bool:
    return bool(B & (0x80 >> p))


def next_start(B: int, p: int) -> int:
    for q in range(p + 1, 8):
        if has(B, q):
            return q
    return 8


@dataclass
class AgqHeader:
    job_and_seq: int
    worker_id: int
    total_workers: int
    data: list
    is_ack: int
    hash_id: int
    hash1: int
    hash2: int

    FMT = "!HBB16IBHH"

    @classmethod
    def unpack(cls, b: bytes) -> "AgqHeader":
        v = struct.unpack(cls.FMT, b[:AGQ_LEN])
        return cls(v[0], v[1], v[2], list(v[3:19]), v[19], v[20], v[21] >> 3, v[21] & 7)

    def pack(self) -> bytes:
        return struct.pack(self.FMT, self.job_and_seq, self.worker_id, self.total_workers,
                           *self.data, self.is_ack, self.hash_id,
                           ((self.hash1 & 0x1FFF) << 3) | (self.hash2 & 7))


@dataclass
class ClassicModel:
    ps_port: int
    worker_ports: list
    capacity: int = 35000
    owner: dict = field(default_factory=dict)     # hashID -> jobAndSeq
    start: dict = field(default_factory=dict)     # hashID -> p
    count: dict = field(default_factory=dict)     # hashID -> n (8 bit)
    cursor: dict = field(default_factory=dict)    # hash1 -> next p
    startmap: dict = field(default_factory=dict)  # hash1 -> bitmap
    lanes: dict = field(default_factory=dict)     # hash1 -> [4 x u32]

    def _lanes(self, a):
        return self.lanes.setdefault(a, [0, 0, 0, 0])

    def process(self, P: AgqHeader):
        """Returns ("ps"|"workers"|"drop", P') with P' the header leaving the switch."""
        h, a = P.hash_id, P.hash1
        if h >= self.capacity or a >= self.capacity:
            return "drop", P
        if P.is_ack == 0:
            owner = self.owner.get(h, 0)
            if owner == 0:
                self.owner[h] = P.job_and_seq
                p = self.cursor.get(a, 0)
                self.cursor[a] = (p + 3) & 7
                self.start[h] = p
                Bold = self.startmap.get(a, 0)
                self.startmap[a] = Bold | (0x80 >> p)
                if not has(Bold, p):  # quirk: a live start is not cleared (windows overlap)
                    q = next_start(Bold, p)
                    lanes = self._lanes(a)
                    for k in range(4):
                        lanes[k] &= ~window(p, q) & M32
            elif owner != P.job_and_seq:
                return "drop", P
            p = self.start.get(h, 0)
            B = self.startmap.get(a, 0)
            n = (self.count.get(h, 0) + 1) & 0xFF
            self.count[h] = n
            if has(B, p):
                q = next_start(B, p)
                L = 4 * (q - p)
                lanes = self._lanes(a)
                for k in range(4):
                    x = (P.data[k] & top(L)) >> (4 * p)
                    lanes[k] = (lanes[k] + x) & M32
                    P.data[k] = ((lanes[k] & window(p, q)) << (4 * p)) & M32
            return ("ps" if n == P.total_workers else "drop"), P
        # ACK
        if self.owner.get(h, 0) != P.job_and_seq:
            return "drop", P
        self.owner[h] = 0
        p = self.start.get(h, 0)
        self.start[h] = 0
        self.count[h] = 0
        Bold = self.startmap.get(a, 0)
        self.startmap[a] = (Bold - (0x80 >> p)) & 0xFF
        lanes = self._lanes(a)
        if has(Bold, p):
            q = next_start(Bold, p)
            L = 4 * (q - p)
            for k in range(4):
                x = (P.data[k] & top(L)) >> (4 * p)
                if P.is_ack == 1:
                    lanes[k] &= ~window(p, q) & M32
                    P.data[k] = x
                else:
                    lanes[k] = (lanes[k] + x) & M32
                    P.data[k] = 0
        else:  # ack_t miss: mask_clear and mask_compress stay 0
            for k in range(4):
                if P.is_ack == 1:
                    lanes[k] = 0
                P.data[k] = 0
        return "workers", P
