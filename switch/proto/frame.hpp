// Builds complete frames (Ethernet [+VLAN] + IPv4 + UDP + payload) for
// workers, tests and tools. IPv4 checksum is valid; the UDP checksum is 0
// ("not computed"), as AGQ hosts send it because the switch rewrites payload.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "proto/headers.hpp"

namespace agq::proto {

struct UdpFrameSpec {
  Mac dst_mac{}, src_mac{};
  std::optional<uint16_t> vlan_id;  // one 802.1Q tag when set
  uint32_t src_ip = 0, dst_ip = 0;
  uint16_t src_port = kAgqClassicPortA, dst_port = kAgqClassicPortA;
  uint8_t ttl = 64;
};

std::vector<uint8_t> build_udp_frame(const UdpFrameSpec& spec, std::span<const uint8_t> payload);
std::vector<uint8_t> build_agq_classic_frame(const UdpFrameSpec& spec, const AgqClassic& agq);

// Offset of the UDP payload in a frame built from `spec`.
inline int udp_payload_offset(const UdpFrameSpec& spec) {
  return Ethernet::kLen + (spec.vlan_id ? Vlan::kLen : 0) + Ipv4::kLen + Udp::kLen;
}

}  // namespace agq::proto
