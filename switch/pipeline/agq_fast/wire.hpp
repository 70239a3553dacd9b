// The agq frame at fixed offsets: where the parser would find the IPv4, UDP
// and agq headers, decided from a few bytes without decoding anything, and
// in-place writes with incremental IPv4 checksum updates (RFC 1624).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "proto/agq.hpp"
#include "proto/bytes.hpp"
#include "proto/headers.hpp"

namespace agq::pipeline::agq::fast {

// Byte offsets inside the agq header (docs/PROTOCOL.md §1).
inline constexpr unsigned kVerType = 0, kFlags = 1, kJobId = 2, kWorkerId = 4, kNumWorkers = 5, kSlot = 6,
                          kReqWidth = 12, kWidth = 13, kPos = 14, kGuard = 15, kNLanes = 17, kEpoch = 18,
                          kLane0 = 20;
// ... inside the IPv4 header (IHL 5) and relative to it.
inline constexpr unsigned kIpChecksum = 10, kIpSrc = 12, kIpDst = 16, kIpToUdp = proto::Ipv4::kLen,
                          kIpToAgq = proto::Ipv4::kLen + proto::Udp::kLen;

// Offsets of an agq frame's IPv4 and agq headers.
struct AgqFrame {
  uint16_t l3 = 0;
  uint16_t agq = 0;
};

inline bool locate_agq_generic(const uint8_t* p, std::size_t n, AgqFrame& f);

// True exactly when pipeline::parse() would accept the frame without error
// and mark its agq header valid (Ethernet, at most one 802.1Q tag, IPv4
// version 4 IHL 5 not a fragment, UDP to port 50100, the whole header of its
// lane profile present). Everything else -- parser errors, ordinary traffic
// -- takes the parser and the Forwarding control, as in the model.
//
// The untagged shape (nearly all agq traffic) is tested first with three
// masked word compares of the bytes the generic path reads one by one:
// EtherType 0x0800 and 0x45 (bytes 12-14), fragment flags/offset and
// protocol (20-21, 23), UDP destination port (36-37). A match means the
// generic path would take exactly those branches, so only the length
// checks remain; anything else (tagged, short, other traffic) takes the
// generic path. tests/unit/agq_fast_diff_test.cpp (LocateAgqFastShapeEqualsTheGenericPath)
// compares the two.
inline bool locate_agq(const uint8_t* p, std::size_t n, AgqFrame& f) {
  constexpr std::size_t kAgq = 14 + kIpToAgq;  // the untagged agq header's offset
  if (n >= kAgq + proto::kAgqFixedLen) [[likely]] {
    uint16_t c;
    std::memcpy(&c, p + 36, 2);  // the UDP destination port, little-endian load
    constexpr uint16_t kWantC = uint16_t(proto::kAgqPort >> 8 | (proto::kAgqPort & 0xFF) << 8);
    if ((proto::plain_udp_mismatch(p) | uint64_t(c ^ kWantC)) == 0) {
      if (n < kAgq + std::size_t(proto::header_len(p[kAgq + kNLanes]))) return false;
      f.l3 = 14;
      f.agq = uint16_t(kAgq);
      return true;
    }
  }
  return locate_agq_generic(p, n, f);
}

// The generic path of locate_agq(): any frame, field by field.
inline bool locate_agq_generic(const uint8_t* p, std::size_t n, AgqFrame& f) {
  if (n < 14) return false;
  std::size_t off = 14;
  uint16_t et = proto::load_be16(p + 12);
  if (et == proto::kEtherTypeVlan) {
    if (n < 18) return false;
    et = proto::load_be16(p + 16);
    off = 18;
  }
  if (et != proto::kEtherTypeIpv4 || n < off + kIpToAgq) return false;
  const uint8_t* ip = p + off;
  // 0x45: version 4, IHL 5; flags MF clear and fragment offset 0; UDP.
  if (ip[0] != 0x45 || (proto::load_be16(ip + 6) & 0x3FFF) != 0 || ip[9] != proto::kIpProtoUdp) return false;
  if (proto::load_be16(ip + kIpToUdp + 2) != proto::kAgqPort) return false;
  const std::size_t agq = off + kIpToAgq;
  if (n < agq + proto::kAgqFixedLen || n < agq + std::size_t(proto::header_len(p[agq + kNLanes]))) return false;
  f.l3 = uint16_t(off);
  f.agq = uint16_t(agq);
  return true;
}

// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m') over the 16-bit words that change.
// Equal to recomputing the checksum whenever the old one was right (a frame
// that arrives with a wrong checksum leaves with a wrong one, as from a router).
// Split in two so that N rewrites of one field of one header (the replicas
// of a RESULT) pay for ~HC + ~m once: ipv4_sum_without(ip, at) is that
// part, ipv4_checksum_with(part, m') the new checksum.
inline uint32_t ipv4_sum_without(const uint8_t* ip, unsigned at) {
  const uint32_t old = proto::load_be32(ip + at);
  return uint32_t(uint16_t(~proto::load_be16(ip + kIpChecksum))) + uint16_t(~(old >> 16)) + uint16_t(~old);
}
inline uint16_t ipv4_checksum_with(uint32_t sum_without, uint32_t new_value) {
  uint32_t sum = sum_without + (new_value >> 16) + (new_value & 0xFFFF);
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  return uint16_t(~sum);
}
// The same, with new_value's addend (new_value >> 16) + (new_value & 0xFFFF)
// computed ahead (ReplicaPatch::dst_sum).
inline uint16_t ipv4_checksum_add(uint32_t sum_without, uint32_t addend) {
  uint32_t sum = sum_without + addend;
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  return uint16_t(~sum);
}
inline void ipv4_replace32(uint8_t* ip, unsigned at, uint32_t new_value) {
  proto::store_be16(ip + kIpChecksum, ipv4_checksum_with(ipv4_sum_without(ip, at), new_value));
  proto::store_be32(ip + at, new_value);
}

// A frame copied whole (a replica: 190 bytes for a 32-lane RESULT): 32-byte
// moves, the last one overlapping the one before, so nothing outside
// [dst, dst + n) is written and nothing outside [src, src + n) read.
// A 32-lane RESULT (190 bytes with no tag) and a 16-lane one (126) take
// fixed straight-line moves, no loop.
inline void copy_frame(uint8_t* dst, const uint8_t* src, std::size_t n) {
#if defined(__AVX2__)
  auto move32 = [dst, src](std::size_t at) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + at),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + at)));
  };
  if (n >= 160 && n <= 192) {
    for (std::size_t at = 0; at < 160; at += 32) move32(at);  // unrolled: a constant trip count
    move32(n - 32);
    return;
  }
  if (n >= 96 && n <= 128) {
    for (std::size_t at = 0; at < 96; at += 32) move32(at);
    move32(n - 32);
    return;
  }
  if (n >= 32) {
    std::size_t i = 0;
    for (; i + 32 < n; i += 32)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + n - 32),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + n - 32)));
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

#if defined(__AVX2__)
// copy_frame() of bytes [64, n) only, n >= 64 (the replica's first 64
// bytes are written whole by its rewrite, after this): 32-byte moves, the
// last one overlapping (for n < 96, into bytes < 64).
inline void copy_frame_from64(uint8_t* dst, const uint8_t* src, std::size_t n) {
  auto move32 = [dst, src](std::size_t at) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + at),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + at)));
  };
  if (n >= 160 && n <= 192) {
    for (std::size_t at = 64; at < 160; at += 32) move32(at);
    move32(n - 32);
    return;
  }
  if (n >= 96 && n <= 128) {
    move32(64);
    move32(n - 32);
    return;
  }
  if (n == 64) return;
  std::size_t i = 64;
  for (; i + 32 < n; i += 32) move32(i);
  move32(n - 32);
}
#endif

inline void set_dst_mac(uint8_t* frame, const proto::Mac& mac) { std::memcpy(frame, mac.data(), 6); }

// Source and destination swapped (MACs and IPv4): the one's-complement sum
// of the IPv4 header does not change, so neither does its checksum.
inline void swap_addresses(uint8_t* frame, uint8_t* ip) {
  uint8_t t[6];
  std::memcpy(t, frame, 6);
  std::memcpy(frame, frame + 6, 6);
  std::memcpy(frame + 6, t, 6);
  uint32_t a, b;
  std::memcpy(&a, ip + kIpSrc, 4);
  std::memcpy(&b, ip + kIpDst, 4);
  std::memcpy(ip + kIpSrc, &b, 4);
  std::memcpy(ip + kIpDst, &a, 4);
}

}  // namespace agq::pipeline::agq::fast
