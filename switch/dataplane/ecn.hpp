// ECN's Congestion Experienced mark (RFC 3168) set on a frame in place, as a
// DCTCP-style queue does above its threshold: IPv4 (the IPv4 header
// checksum updated incrementally, RFC 1624 eqn. 3) or IPv6, behind up to
// two VLAN tags. Only ECN-capable frames (ECT(0), ECT(1)) are marked; the
// rest is reported so that the queue can count it. No DPDK.
#pragma once

#include <cstdint>

namespace agq::dataplane {

enum class EcnResult : uint8_t {
  Marked,     // was ECT(0) or ECT(1), now CE
  AlreadyCe,  // left as it is
  NotEct,     // an IP frame that is not ECN-capable (the sender asked for no marks)
  NotIp,      // not IPv4/IPv6, or too short to hold the header
};

namespace ecn_detail {
inline uint16_t load16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }
inline void store16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v >> 8);
  p[1] = uint8_t(v);
}
}  // namespace ecn_detail

// Where a frame's IP header starts and which version it is (4 or 6); 0 if
// it has none the marker can read.
inline uint32_t ip_offset(const uint8_t* f, uint32_t len, int* version) {
  using namespace ecn_detail;
  uint32_t at = 12;
  for (int tags = 0; tags <= 2; ++tags) {
    if (len < at + 2) return 0;
    const uint16_t type = load16(f + at);
    if (type == 0x8100 || type == 0x88A8) {
      at += 4;
      continue;
    }
    at += 2;
    if (type == 0x0800 && len >= at + 20 && (f[at] >> 4) == 4) {
      *version = 4;
      return at;
    }
    if (type == 0x86DD && len >= at + 40 && (f[at] >> 4) == 6) {
      *version = 6;
      return at;
    }
    return 0;
  }
  return 0;
}

// What mark_ce would do to the frame, without writing: Marked = ECN-capable.
inline EcnResult ecn_peek(const uint8_t* f, uint32_t len) {
  int v = 0;
  const uint32_t at = ip_offset(f, len, &v);
  if (at == 0) return EcnResult::NotIp;
  const uint8_t e = v == 4 ? (f[at + 1] & 3) : ((f[at + 1] >> 4) & 3);
  return e == 0 ? EcnResult::NotEct : e == 3 ? EcnResult::AlreadyCe : EcnResult::Marked;
}

inline EcnResult mark_ce(uint8_t* f, uint32_t len) {
  using namespace ecn_detail;
  int v = 0;
  const uint32_t at = ip_offset(f, len, &v);
  if (at == 0) return EcnResult::NotIp;
  if (v == 4) {
    // ECN is the low two bits of the TOS byte, the second byte of the
    // header's first 16-bit word.
    const uint8_t e = f[at + 1] & 3;
    if (e == 0) return EcnResult::NotEct;
    if (e == 3) return EcnResult::AlreadyCe;
    const uint16_t old_word = load16(f + at);
    f[at + 1] |= 3;
    const uint16_t new_word = load16(f + at);
    // HC' = ~(~HC + ~m + m'), one's complement sums folded.
    uint32_t s = uint32_t(uint16_t(~load16(f + at + 10))) + uint16_t(~old_word) + new_word;
    s = (s & 0xFFFF) + (s >> 16);
    s = (s & 0xFFFF) + (s >> 16);
    store16(f + at + 10, uint16_t(~s));
    return EcnResult::Marked;
  }
  // IPv6: version(4) traffic class(8) flow label(20); ECN is the traffic
  // class's low two bits, bits 5..4 of the second byte. No checksum.
  const uint8_t e = (f[at + 1] >> 4) & 3;
  if (e == 0) return EcnResult::NotEct;
  if (e == 3) return EcnResult::AlreadyCe;
  f[at + 1] |= 0x30;
  return EcnResult::Marked;
}

}  // namespace agq::dataplane
