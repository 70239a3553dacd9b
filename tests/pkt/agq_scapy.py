"""Scapy layer for the AGQ classic header (the published program's "NEW"
73-byte header) for tests and users. Use Debian's scapy: /usr/bin/python3.

    from agq_scapy import AGQ, agq_frame
    p = agq_frame(job_and_seq=1, worker_id=0, total_workers=2, hash_id=300,
                  data=[0xF0C0, 0x0146F43C, 0x0015B4C9, 0x00DCEEE3])
    p.show(); bytes(p)              # 115 bytes, UDP 50000 -> 50000
    Ether(raw)[AGQ].data0           # dissects UDP port 50000/50001

hash1/hash2 default to hashID >> 3 / hashID & 7 (the published invariant).
data4/data5 carry agq-worker's chunk index and kind (see workers/lib/wire.hpp);
the switch ignores them.
"""
from scapy.fields import BitField, ByteField, IntField, ShortField
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, bind_layers

AGQ_PORTS = (50000, 50001)
AGQ_LEN = 73
WORKER_MAGIC = 0x41470000  # data5 of agq-worker packets: magic | kind
KIND_CONTRIBUTION, KIND_ACK, KIND_RETRY = 0, 1, 2


class AGQ(Packet):
    name = "AGQ classic"
    fields_desc = (
        [ShortField("job_and_seq", 1), ByteField("worker_id", 0), ByteField("total_workers", 1)]
        + [IntField(f"data{i}", 0) for i in range(16)]
        + [ByteField("is_ack", 0), ShortField("hash_id", 0),
           BitField("hash1", None, 13), BitField("hash2", None, 3)]
    )

    def post_build(self, pkt, pay):
        # Fill hash1/hash2 from hashID when not given.
        if self.hash1 is None or self.hash2 is None:
            h1 = self.hash_id >> 3 if self.hash1 is None else self.hash1
            h2 = self.hash_id & 7 if self.hash2 is None else self.hash2
            w = ((h1 & 0x1FFF) << 3) | (h2 & 7)
            pkt = pkt[:71] + w.to_bytes(2, "big") + pkt[73:]
        return pkt + pay

    def lanes(self):
        return [getattr(self, f"data{i}") for i in range(4)]

    def mysummary(self):
        kind = "ACK" if self.is_ack else "data"
        return self.sprintf(f"AGQ {kind} jas=%job_and_seq% hashID=%hash_id% w=%worker_id%/%total_workers%")


for _p in AGQ_PORTS:
    bind_layers(UDP, AGQ, dport=_p)


def agq_frame(data=(), src_mac="02:00:00:00:01:01", dst_mac="02:00:00:00:01:fe",
              src_ip="10.1.0.1", dst_ip="10.1.0.254", sport=50000, dport=50000, **fields):
    """A complete untagged frame (UDP checksum 0, as AGQ hosts send it)."""
    d = {f"data{i}": v for i, v in enumerate(data)}
    d.update(fields)
    return (Ether(src=src_mac, dst=dst_mac) / IP(src=src_ip, dst=dst_ip)
            / UDP(sport=sport, dport=dport, chksum=0) / AGQ(**d))


def ack_for(pkt, data=None):
    """The PS's ACK for a completed aggregate, as the published send_ack.py
    builds it: same jobAndSeq/hashID/hash1/hash2, isACK = 1, the aggregate
    in data0..3."""
    a = pkt[AGQ]
    lanes = a.lanes() if data is None else list(data)
    return agq_frame(lanes, src_mac=pkt[Ether].dst, dst_mac="ff:ff:ff:ff:ff:ff",
                     src_ip=pkt[IP].dst, dst_ip=pkt[IP].src, job_and_seq=a.job_and_seq,
                     worker_id=a.worker_id, total_workers=a.total_workers, is_ack=1,
                     hash_id=a.hash_id, hash1=a.hash1, hash2=a.hash2)
