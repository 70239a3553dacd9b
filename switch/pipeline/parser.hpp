// The switch parser (shared by every program) and its deparser.
//
//   start -> ethernet -> 0x8100: vlan (one tag) -> 0x0800: ipv4 | 0x0806: arp | else accept
//                     -> 0x0800: ipv4 -> proto 17, IHL 5, not a fragment: udp -> else accept
//                     -> 0x0806: arp
//   udp -> dst port 50000/50001: agq_classic -> accept
//       -> dst port 50100: agq (docs/PROTOCOL.md) -> accept
//
// Differences from the published AGQ parser, all on packets it could not
// aggregate anyway: a truncated header, IPv4 version != 4 or IHL < 5 is a
// parser error (the packet is dropped and counted); IPv4 with options or a
// non-first fragment is not parsed beyond IPv4 (it is forwarded as ordinary
// traffic, where the published parser would read the options as UDP).
#pragma once

#include <cstdint>
#include <span>

#include "proto/agq.hpp"
#include "proto/headers.hpp"

namespace agq::pipeline {

enum class ParserError : uint8_t {
  None = 0,
  Truncated,      // a header runs past the end of the frame
  BadIpv4Header,  // version != 4 or IHL < 5
};
const char* to_string(ParserError e);

struct Headers {
  proto::Ethernet ethernet;
  proto::Vlan vlan;
  proto::Ipv4 ipv4;
  proto::Udp udp;
  proto::Arp arp;
  proto::AgqClassic agq_classic;
  proto::Agq agq;
  bool vlan_valid = false, ipv4_valid = false, udp_valid = false, arp_valid = false,
       agq_classic_valid = false, agq_valid = false;
  // Byte offsets of the headers in the frame (valid when the header is).
  uint16_t l3_offset = 0, l4_offset = 0, payload_offset = 0;
};

ParserError parse(std::span<const uint8_t> frame, Headers& hdr);

// Writes every valid header back at its offset; bytes of invalid headers and
// the rest of the payload are left as they are.
void deparse(const Headers& hdr, std::span<uint8_t> frame);

inline bool is_agq_classic_port(uint16_t p) {
  return p == proto::kAgqClassicPortA || p == proto::kAgqClassicPortB;
}

}  // namespace agq::pipeline
