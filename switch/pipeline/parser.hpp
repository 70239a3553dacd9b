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

#include <immintrin.h>

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

// The same parse graph without decoding a field that is not needed to walk
// it: which headers are valid and where they start. The fast pipelines read
// and write the few fields they use in place at these offsets. Agrees with
// parse() on every frame (error, validity, offsets; tested on random and
// mutated frames by parser_view_test and the fuzz driver).
struct FrameView {
  ParserError error = ParserError::None;
  bool vlan_valid = false, ipv4_valid = false, udp_valid = false, arp_valid = false,
       agq_classic_valid = false, agq_valid = false;
  uint16_t l3_offset = 0, l4_offset = 0, payload_offset = 0;
};

inline ParserError parse_view(const uint8_t* p, size_t n, FrameView& v) {
  using namespace ::agq::proto;
  v = FrameView{};
  auto fail = [&](ParserError e) { v.error = e; return e; };
  if (n < size_t(Ethernet::kLen)) return fail(ParserError::Truncated);
  uint16_t ether_type = load_be16(p + 12);
  size_t off = Ethernet::kLen;
  if (ether_type == kEtherTypeVlan) {
    if (n < off + Vlan::kLen) return fail(ParserError::Truncated);
    v.vlan_valid = true;
    ether_type = load_be16(p + off + 2);
    off += Vlan::kLen;
  }
  v.l3_offset = uint16_t(off);
  if (ether_type == kEtherTypeArp) {
    if (n < off + Arp::kLen) return fail(ParserError::Truncated);
    v.arp_valid = true;
    return ParserError::None;
  }
  if (ether_type != kEtherTypeIpv4) return ParserError::None;
  if (n < off + Ipv4::kLen) return fail(ParserError::Truncated);
  const uint8_t* ip = p + off;
  const uint8_t version_ihl = ip[0];
  if ((version_ihl >> 4) != 4 || (version_ihl & 0x0F) < 5) return fail(ParserError::BadIpv4Header);
  v.ipv4_valid = true;
  off += Ipv4::kLen;
  // Not UDP, options (IHL != 5), or a fragment (MF set or an offset): stop.
  if (ip[9] != kIpProtoUdp || version_ihl != 0x45 || (load_be16(ip + 6) & 0x3FFF) != 0)
    return ParserError::None;
  v.l4_offset = uint16_t(off);
  if (n < off + Udp::kLen) return fail(ParserError::Truncated);
  v.udp_valid = true;
  const uint16_t dst_port = load_be16(p + off + 2);
  off += Udp::kLen;
  v.payload_offset = uint16_t(off);
  if (dst_port == kAgqClassicPortA || dst_port == kAgqClassicPortB) {
    if (n < off + AgqClassic::kLen) return fail(ParserError::Truncated);
    v.agq_classic_valid = true;
  } else if (dst_port == kAgqPort) {
    // 20 fixed bytes, then the lanes of its profile (as parse()).
    if (n < off + kAgqFixedLen || n < off + header_len(p[off + 17])) return fail(ParserError::Truncated);
    v.agq_valid = true;
  }
  return ParserError::None;
}

// Whether frame b parses exactly as frame a did (parse_view(b) would equal
// `va`, the view of a): the cached-key idea of VPP's nodes applied to the
// parser, for a burst of one flow (consecutive frames of the same header
// shape). Exact, not a heuristic: both frames have the same length (every
// truncation check alike) and agree on every byte parse_view reads -- for an
// untagged IPv4 frame the EtherType, version/IHL, fragment field, protocol
// and UDP destination port; for anything else all of bytes 12..43, which
// holds every byte parse_view reads of a VLAN-tagged or non-IPv4 frame. An
// agq frame's truncation also depends on its n_lanes byte (past 43): `va`
// must be neither a valid agq frame nor a parser error (a UDP frame to the
// agq port cut short of the lanes its n_lanes byte promises is one, and an
// equal frame with a smaller n_lanes is valid). One 32-byte compare (AVX2; the project's baseline is
// x86-64-v3), so a repeated frame costs a few instructions instead of a
// parse.
inline constexpr size_t kSameParseMinLen = 44;
inline bool same_parse(const uint8_t* a, size_t a_len, const FrameView& va, const uint8_t* b, size_t b_len) {
  if (a_len != b_len || b_len < kSameParseMinLen || va.agq_valid || va.error != ParserError::None) return false;
  // Bytes 12..43 of both frames: bit i of `eq` set = byte 12 + i equal.
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 12));
  const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 12));
  const uint32_t eq = uint32_t(_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, y)));
  // Untagged IPv4 (a's EtherType; b's must then be equal too): bytes 12-13
  // EtherType, 14 version/IHL, 20-21 flags/fragment offset, 23 protocol,
  // 36-37 UDP destination port. Anything else: all 32 bytes.
  constexpr uint32_t kIpv4Read = 1u << 0 | 1u << 1 | 1u << 2 | 1u << 8 | 1u << 9 | 1u << 11 | 1u << 24 | 1u << 25;
  const uint32_t need = va.ipv4_valid && !va.vlan_valid ? kIpv4Read : ~0u;
  return (~eq & need) == 0;
}

// Writes every valid header back at its offset; bytes of invalid headers and
// the rest of the payload are left as they are.
void deparse(const Headers& hdr, std::span<uint8_t> frame);

inline bool is_agq_classic_port(uint16_t p) {
  return p == proto::kAgqClassicPortA || p == proto::kAgqClassicPortB;
}

}  // namespace agq::pipeline
