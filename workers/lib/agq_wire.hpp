// Frames of the agq protocol (docs/PROTOCOL.md §1) as workers and the PS
// send and receive them, on proto/'s frame builder and the switch's parser.
//
// Default identities (the switch's [[job]] entries must use the same):
// worker w of job j: MAC 02:00:01:jh:jl:w+1, IPv4 10.(128|jh).jl.(w+1);
// the job's PS: same with host byte 254. DATA frames are addressed to the
// PS (without the switch's pipeline they would simply reach it).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "lib/wire.hpp"
#include "proto/agq.hpp"

namespace agq::worker {

inline constexpr size_t kAgqDataFrameLen = 14 + 20 + 8 + proto::Agq::kLen;  // 190, untagged
inline constexpr size_t kAgqHdrOffset = kL4HdrOffset;                          // untagged frames we build
// Untagged frame length of the lane profile (PROTOCOL.md §10): 190 (32 lanes) or 126 (16).
inline constexpr size_t agq_frame_len(unsigned lanes) { return kAgqHdrOffset + 20 + 4 * lanes; }
// UDP source port of a packet of shard k (PROTOCOL.md §10).
inline constexpr uint16_t agq_shard_port(uint32_t shard) { return proto::shard_port(shard); }

Endpoint agq_worker_endpoint(uint16_t job_id, unsigned worker_id);
Endpoint agq_ps_endpoint(uint16_t job_id);

// The agq header in a frame of the lane profile: 20 + 4 x lanes bytes, the
// first `lanes` lanes, n_lanes written as the profile says.
template <>
struct HeaderPolicy<proto::Agq> {
  static void encode(const proto::Agq& h, uint8_t* out, size_t len) {
    if (len == size_t(proto::Agq::kLen)) {
      h.encode(out);
      return;
    }
    uint8_t full[proto::Agq::kLen];
    h.encode(full);
    full[17] = uint8_t((len - 20) / 4);
    std::memcpy(out, full, len);
  }
};

// Frames of the agq protocol (UDP 50100) of a lane profile: lib/wire.hpp's
// one frame builder with the agq header policy.
FrameTemplate agq_frame_template(const Endpoint& src, const Endpoint& dst, unsigned lanes = 32);

// The agq header of a frame read in place (the packet path's parser: no
// copy of the lanes): Ethernet (one optional 802.1Q tag), IPv4, UDP to
// 50100, ver 1, n_lanes 16 or 32 and the frame long enough for them.
// nullptr if the frame is anything else.
const uint8_t* find_agq_header(std::span<const uint8_t> frame);

// The agq header of a frame, if it is one (UDP to 50100, parsed by the switch's parser).
std::optional<proto::Agq> parse_agq(std::span<const uint8_t> frame);

}  // namespace agq::worker
