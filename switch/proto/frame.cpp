#include "proto/frame.hpp"

namespace agq::proto {

std::vector<uint8_t> build_udp_frame(const UdpFrameSpec& spec, std::span<const uint8_t> payload) {
  std::vector<uint8_t> f(size_t(udp_payload_offset(spec)) + payload.size());
  uint8_t* p = f.data();
  Ethernet eth{spec.dst_mac, spec.src_mac, spec.vlan_id ? kEtherTypeVlan : kEtherTypeIpv4};
  eth.encode(p);
  p += Ethernet::kLen;
  if (spec.vlan_id) {
    Vlan v;
    v.vid = *spec.vlan_id;
    v.ether_type = kEtherTypeIpv4;
    v.encode(p);
    p += Vlan::kLen;
  }
  Ipv4 ip;
  ip.total_len = uint16_t(Ipv4::kLen + Udp::kLen + payload.size());
  ip.ttl = spec.ttl;
  ip.protocol = kIpProtoUdp;
  ip.src = spec.src_ip;
  ip.dst = spec.dst_ip;
  ip.hdr_checksum = ip.compute_checksum();
  ip.encode(p);
  p += Ipv4::kLen;
  Udp u{spec.src_port, spec.dst_port, uint16_t(Udp::kLen + payload.size()), 0};
  u.encode(p);
  p += Udp::kLen;
  std::copy(payload.begin(), payload.end(), p);
  return f;
}

std::vector<uint8_t> build_agq_classic_frame(const UdpFrameSpec& spec, const AgqClassic& agq) {
  uint8_t payload[AgqClassic::kLen];
  agq.encode(payload);
  return build_udp_frame(spec, payload);
}

}  // namespace agq::proto
