"""The agq protocol (docs/PROTOCOL.md) for tests: the header (148 bytes, or
84 for the 16-lane profile), whole
frames, the worker's encoding (§2) and a scapy layer. Written from the
document, not from the switch's code, so the tests check one against the
other.

    from agq_proto import AgqHeader, agq_frame, encode_value, expected_lane
    h = AgqHeader(type=DATA, job_id=1, worker_id=0, num_workers=2, slot=3,
                  seq=7, req_width=16, width=16, lanes=[...])   # width: min_width
    frame = agq_frame(h, src_mac=..., dst_mac=..., src_ip=..., dst_ip=...)
    AgqHeader.unpack(frame[-AGQ_LEN:])

Scapy (Debian's /usr/bin/python3): `from agq_proto import AGQ` binds UDP
port 50100, so Ether(raw)[AGQ].lanes works.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field, replace

AGQ_PORT = 50100
LANES = 32
LANES_T1 = 16  # the 16-lane (Tofino 1) profile, PROTOCOL §10
AGQ_LEN = 20 + 4 * LANES  # 148


def lanes_carried(n_lanes: int) -> int:
    """Lanes on the wire for a header with this n_lanes (PROTOCOL §1)."""
    return LANES_T1 if n_lanes == LANES_T1 else LANES


def header_len(n_lanes: int) -> int:
    return 20 + 4 * lanes_carried(n_lanes)
VERSION = 1
DATA, RESULT, PS_RESULT, FALLBACK_DATA = 1, 2, 3, 4
F_VERSION, F_RETRANSMIT, F_OVERFLOW, F_FALLBACK = 1, 2, 4, 8
_FIXED = struct.Struct("!BBHBBHIBBBBbBH")  # 20 bytes before the lanes


@dataclass
class AgqHeader:
    type: int = DATA
    flags: int = 0
    job_id: int = 0
    worker_id: int = 0
    num_workers: int = 0
    slot: int = 0
    seq: int = 0
    req_width: int = 0
    width: int = 0      # DATA: min_width (PROTOCOL §1); RESULT: the granted width
    pos: int = 0
    guard: int = 0
    exponent: int = 0
    n_lanes: int = LANES
    epoch: int = 0  # the switch's boot epoch in frames it makes (PROTOCOL §11)
    lanes: list = field(default_factory=lambda: [0] * LANES)
    ver: int = VERSION

    def pack(self) -> bytes:
        n = len(self.lanes)  # normally lanes_carried(n_lanes); tests may lie in n_lanes
        assert n in (LANES_T1, LANES), n
        return _FIXED.pack((self.ver << 4) | (self.type & 0xF), self.flags, self.job_id, self.worker_id,
                           self.num_workers, self.slot, self.seq, self.req_width, self.width, self.pos,
                           self.guard, self.exponent, self.n_lanes, self.epoch) + \
            struct.pack(f"!{n}I", *[v & 0xFFFFFFFF for v in self.lanes[:n]])

    @classmethod
    def unpack(cls, b: bytes) -> "AgqHeader":
        f = _FIXED.unpack_from(b)
        n = lanes_carried(f[12])
        assert len(b) >= 20 + 4 * n, len(b)
        lanes = list(struct.unpack_from(f"!{n}I", b, 20))
        return cls(type=f[0] & 0xF, ver=f[0] >> 4, flags=f[1], job_id=f[2], worker_id=f[3], num_workers=f[4],
                   slot=f[5], seq=f[6], req_width=f[7], width=f[8], pos=f[9], guard=f[10], exponent=f[11],
                   n_lanes=f[12], epoch=f[13], lanes=lanes)

    def copy(self, **changes) -> "AgqHeader":
        c = replace(self, **changes)
        if "lanes" not in changes:
            c.lanes = list(self.lanes)
        return c


def mac_bytes(mac: str) -> bytes:
    return bytes(int(x, 16) for x in mac.split(":"))


def ip_bytes(ip: str) -> bytes:
    return bytes(int(x) for x in ip.split("."))


def ip_checksum(h: bytes) -> int:
    s = sum(struct.unpack("!10H", h))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def agq_frame(h: AgqHeader, src_mac: str, dst_mac: str, src_ip: str, dst_ip: str,
              sport: int = AGQ_PORT, ttl: int = 64, ip_id: int = 0) -> bytes:
    """Untagged Ethernet/IPv4/UDP(dport 50100, checksum 0)/agq: 190 bytes."""
    payload = h.pack()
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 8 + len(payload), ip_id, 0, ttl, 17, 0,
                     ip_bytes(src_ip), ip_bytes(dst_ip))
    ip = ip[:10] + struct.pack("!H", ip_checksum(ip)) + ip[12:]
    udp = struct.pack("!HHHH", sport, AGQ_PORT, 8 + len(payload), 0)
    return mac_bytes(dst_mac) + mac_bytes(src_mac) + b"\x08\x00" + ip + udp + payload


def rewrite_frame(frame: bytes, h: AgqHeader, dst_mac: str | None = None, dst_ip: str | None = None) -> bytes:
    """`frame` with a new agq header and, optionally, new destination
    MAC/IPv4 (IPv4 checksum recomputed, UDP checksum 0): what the switch's
    RESULT rewrite does to the completing DATA frame (PROTOCOL §4.7)."""
    b = bytearray(frame)
    if dst_mac is not None:
        b[0:6] = mac_bytes(dst_mac)
    if dst_ip is not None:
        b[30:34] = ip_bytes(dst_ip)
    b[24:26] = b"\0\0"
    b[24:26] = struct.pack("!H", ip_checksum(bytes(b[14:34])))
    b[40:42] = b"\0\0"
    b[-AGQ_LEN:] = h.pack()
    return bytes(b)


# ---- §2 encoding --------------------------------------------------------

def guard_bits(n: int) -> int:
    """g = ceil(log2 N), N = 1 -> 0."""
    return 0 if n <= 1 else math.ceil(math.log2(n))


def narrowest_min_width(num_workers: int) -> int:
    """The narrowest min_width a DATA may carry: g + 2 rounded up to 4 bits."""
    return 4 * math.ceil((guard_bits(num_workers) + 2) / 4)


def min_width_valid(min_width: int, req_width: int, num_workers: int) -> bool:
    """§1: a multiple of 4 with g + 2 <= min_width <= req_width."""
    return min_width % 4 == 0 and guard_bits(num_workers) + 2 <= min_width <= req_width


def encode_value(q: int, req_width: int, num_workers: int) -> int:
    """u = q + 2^(b-1) for an already quantized, in-range q (b = R - g)."""
    b = req_width - guard_bits(num_workers)
    assert -(1 << (b - 1)) <= q < (1 << (b - 1)), (q, b)
    return q + (1 << (b - 1))


def expected_lane(us, req_width: int, width: int) -> int:
    """The RESULT lane: sum_i (u_i >> d), d = R - W."""
    d = req_width - width
    return sum(u >> d for u in us)


def decode_lane(s: int, num_workers: int, req_width: int, width: int, exponent: int) -> float:
    g = guard_bits(num_workers)
    d = req_width - width
    return (s - num_workers * (1 << (width - g - 1))) * 2.0 ** (exponent + d)


# ---- scapy layer (optional) ----------------------------------------------

try:
    from scapy.fields import BitEnumField, BitField, ByteField, FieldListField, IntField, ShortField, \
        SignedByteField, XByteField
    from scapy.layers.inet import UDP
    from scapy.packet import Packet, bind_layers

    class AGQ(Packet):
        name = "agq"
        fields_desc = [
            BitField("ver", VERSION, 4),
            BitEnumField("type", DATA, 4, {DATA: "DATA", RESULT: "RESULT", PS_RESULT: "PS_RESULT",
                                           FALLBACK_DATA: "FALLBACK_DATA"}),
            XByteField("flags", 0), ShortField("job_id", 0), ByteField("worker_id", 0),
            ByteField("num_workers", 0), ShortField("slot", 0), IntField("seq", 0),
            ByteField("req_width", 0), ByteField("width", 0), ByteField("pos", 0), ByteField("guard", 0),
            SignedByteField("exponent", 0), ByteField("n_lanes", LANES), ShortField("epoch", 0),
            FieldListField("lanes", [0] * LANES, IntField("", 0),
                           count_from=lambda p: lanes_carried(p.n_lanes)),
        ]

        def mysummary(self):
            return self.sprintf("agq %type% job=%job_id% w=%worker_id%/%num_workers% slot=%slot% seq=%seq%")

    bind_layers(UDP, AGQ, dport=AGQ_PORT)
except ImportError:  # scapy is only in Debian's python3; the encoder above needs none of it
    AGQ = None
