#include "pipeline/parser.hpp"

namespace agq::pipeline {

using namespace agq::proto;

const char* to_string(ParserError e) {
  switch (e) {
    case ParserError::None: return "none";
    case ParserError::Truncated: return "truncated";
    case ParserError::BadIpv4Header: return "bad_ipv4_header";
  }
  return "?";
}

ParserError parse(std::span<const uint8_t> frame, Headers& hdr) {
  hdr = Headers{};
  const uint8_t* p = frame.data();
  const size_t n = frame.size();
  size_t off = 0;

  if (n < size_t(Ethernet::kLen)) return ParserError::Truncated;
  hdr.ethernet.decode(p);
  off = Ethernet::kLen;
  uint16_t ether_type = hdr.ethernet.ether_type;

  if (ether_type == kEtherTypeVlan) {
    if (n < off + Vlan::kLen) return ParserError::Truncated;
    hdr.vlan.decode(p + off);
    hdr.vlan_valid = true;
    off += Vlan::kLen;
    ether_type = hdr.vlan.ether_type;
  }
  hdr.l3_offset = uint16_t(off);

  if (ether_type == kEtherTypeArp) {
    if (n < off + Arp::kLen) return ParserError::Truncated;
    hdr.arp.decode(p + off);
    hdr.arp_valid = true;
    return ParserError::None;
  }
  if (ether_type != kEtherTypeIpv4) return ParserError::None;

  if (n < off + Ipv4::kLen) return ParserError::Truncated;
  hdr.ipv4.decode(p + off);
  if (hdr.ipv4.version != 4 || hdr.ipv4.ihl < 5) return ParserError::BadIpv4Header;
  hdr.ipv4_valid = true;
  off += Ipv4::kLen;
  const bool fragment = hdr.ipv4.frag_offset != 0 || (hdr.ipv4.flags & 1);
  if (hdr.ipv4.protocol != kIpProtoUdp || hdr.ipv4.ihl != 5 || fragment) return ParserError::None;

  hdr.l4_offset = uint16_t(off);
  if (n < off + Udp::kLen) return ParserError::Truncated;
  hdr.udp.decode(p + off);
  hdr.udp_valid = true;
  off += Udp::kLen;
  hdr.payload_offset = uint16_t(off);

  if (is_agq_classic_port(hdr.udp.dst_port)) {
    if (n < off + AgqClassic::kLen) return ParserError::Truncated;
    hdr.agq_classic.decode(p + off);
    hdr.agq_classic_valid = true;
  } else if (hdr.udp.dst_port == kAgqPort) {
    // 20 fixed bytes, then the lanes of its profile (n_lanes 16: 16 lanes,
    // anything else: 32); a shorter frame is truncated (PROTOCOL §1).
    if (n < off + kAgqFixedLen || n < off + header_len(p[off + 17])) return ParserError::Truncated;
    hdr.agq.decode(p + off);
    hdr.agq_valid = true;
  }
  return ParserError::None;
}

void deparse(const Headers& hdr, std::span<uint8_t> frame) {
  uint8_t* p = frame.data();
  hdr.ethernet.encode(p);
  if (hdr.vlan_valid) hdr.vlan.encode(p + Ethernet::kLen);
  if (hdr.arp_valid) hdr.arp.encode(p + hdr.l3_offset);
  if (hdr.ipv4_valid) hdr.ipv4.encode(p + hdr.l3_offset);
  if (hdr.udp_valid) hdr.udp.encode(p + hdr.l4_offset);
  if (hdr.agq_classic_valid) hdr.agq_classic.encode(p + hdr.payload_offset);
  if (hdr.agq_valid) hdr.agq.encode(p + hdr.payload_offset);
}

}  // namespace agq::pipeline
