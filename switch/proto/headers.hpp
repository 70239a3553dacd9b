// Header types of the switch's parser (the PHV), with host-order fields, and
// their wire sizes. decode()/encode() convert one header from/to its bytes.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>

#include "proto/bytes.hpp"

namespace agq::proto {

using Mac = std::array<uint8_t, 6>;
std::string mac_to_string(const Mac& m);
bool mac_from_string(const std::string& s, Mac& out);
std::string ipv4_to_string(uint32_t ip);
bool ipv4_from_string(const std::string& s, uint32_t& out);

inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;
inline constexpr uint8_t kIpProtoUdp = 17;

struct Ethernet {
  static constexpr int kLen = 14;
  Mac dst{}, src{};
  uint16_t ether_type = 0;
  void decode(const uint8_t* p);
  void encode(uint8_t* p) const;
};

struct Vlan {
  static constexpr int kLen = 4;
  uint8_t pcp = 0;
  uint8_t cfi = 0;
  uint16_t vid = 0;
  uint16_t ether_type = 0;
  void decode(const uint8_t* p);
  void encode(uint8_t* p) const;
};

struct Ipv4 {
  static constexpr int kLen = 20;  // options are not parsed
  uint8_t version = 4, ihl = 5, diffserv = 0;
  uint16_t total_len = 0, identification = 0;
  uint8_t flags = 0;
  uint16_t frag_offset = 0;
  uint8_t ttl = 64, protocol = 0;
  uint16_t hdr_checksum = 0;
  uint32_t src = 0, dst = 0;
  void decode(const uint8_t* p);
  void encode(uint8_t* p) const;
  uint16_t compute_checksum() const;  // over this header with checksum field 0
};

struct Udp {
  static constexpr int kLen = 8;
  uint16_t src_port = 0, dst_port = 0, length = 0, checksum = 0;
  void decode(const uint8_t* p);
  void encode(uint8_t* p) const;
};

struct Arp {
  static constexpr int kLen = 28;  // Ethernet/IPv4 ARP
  uint16_t htype = 1, ptype = kEtherTypeIpv4;
  uint8_t hlen = 6, plen = 4;
  uint16_t oper = 0;
  Mac sha{};
  uint32_t spa = 0;
  Mac tha{};
  uint32_t tpa = 0;
  void decode(const uint8_t* p);
  void encode(uint8_t* p) const;
};

// The published AGQ program's header ("NEW", 73 bytes, big-endian):
//   0 jobAndSeq:16  2 workerID:8  3 total_workers:8  4 data0..15: 16x32
//   68 isACK:8  69 hashID:16  71 hash1:13|hash2:3
inline constexpr uint16_t kAgqClassicPortA = 50000;
inline constexpr uint16_t kAgqClassicPortB = 50001;
inline constexpr int kAgqClassicLanes = 16;      // data fields carried
inline constexpr int kAgqClassicAggLanes = 4;    // data0..3 are aggregated

struct AgqClassic {
  static constexpr int kLen = 73;
  uint16_t job_and_seq = 0;
  uint8_t worker_id = 0;
  uint8_t total_workers = 0;
  std::array<uint32_t, kAgqClassicLanes> data{};
  uint8_t is_ack = 0;
  uint16_t hash_id = 0;
  uint16_t hash1 = 0;  // 13 bits
  uint8_t hash2 = 0;   // 3 bits
  void decode(const uint8_t* p);
  void encode(uint8_t* p) const;
};

// The shape nearly all aggregation traffic has -- untagged, EtherType IPv4,
// version 4 IHL 5, not a fragment (MF clear, offset 0), UDP -- as two masked
// word compares of bytes 12-14, 20-21 and 23, where the parser walks them
// branch by branch: zero exactly when a frame of at least 42 bytes has it
// (the parser then finds UDP at 34 and its payload at 42). A mismatch word,
// not a bool, so that callers OR in their own compares without a branch.
inline uint64_t plain_udp_mismatch(const uint8_t* p) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);
  uint64_t a, b;
  std::memcpy(&a, p + 12, 8);  // byte 12 is the low byte
  std::memcpy(&b, p + 20, 8);
  constexpr uint64_t kMaskA = 0xFFFFFF, kWantA = 0x450008;  // 08 00 45
  constexpr uint64_t kMaskB = 0xFF00FF3F, kWantB = uint64_t(kIpProtoUdp) << 24;
  return ((a & kMaskA) ^ kWantA) | ((b & kMaskB) ^ kWantB);
}

// docs/PROTOCOL.md section 10, one convention for both protocols: a packet
// with aggregation state has a 12-bit shard, owned by lcore shard mod L;
// senders put shard_port(shard) in the UDP source port so that NICs
// (rte_flow/RSS on that port) and multi-queue peers can steer it.
inline constexpr uint32_t kShardMask = 0x0FFFu;
inline constexpr uint16_t shard_port(uint32_t shard) { return uint16_t(0xC000u | (shard & kShardMask)); }
// The reader's side: the shard a UDP source port carries, or kNoShard for a
// port outside 0xC000..0xCFFF (a frame without aggregation state).
inline constexpr uint32_t kNoShard = 0xFFFFFFFFu;
inline constexpr uint32_t shard_of_port(uint16_t src_port) {
  return (src_port & 0xF000u) == 0xC000u ? uint32_t(src_port & kShardMask) : kNoShard;
}
// A classic packet's shard is its aggregator (hash1): the aggregator's
// registers and, by the published host invariant hashID == hash1 << 3 |
// hash2, its 8 seq slots all live in that shard, as in one Tofino pipe.
inline constexpr uint32_t classic_shard(uint16_t hash1) { return hash1 & kShardMask; }

}  // namespace agq::proto
