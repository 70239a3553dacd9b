// Frames of the agq protocol (docs/PROTOCOL.md §1) as workers and the PS
// send and receive them, on proto/'s frame builder and the switch's parser.
//
// Default identities (the switch's [[job]] entries must use the same):
// worker w of job j: MAC 02:00:01:jh:jl:w+1, IPv4 10.(128|jh).jl.(w+1);
// the job's PS: same with host byte 254. DATA frames are addressed to the
// PS (without the switch's pipeline they would simply reach it).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "lib/wire.hpp"
#include "proto/agq.hpp"

namespace agq::worker {

inline constexpr size_t kAgqDataFrameLen = 14 + 20 + 8 + proto::Agq::kLen;  // 190, untagged

Endpoint agq_worker_endpoint(uint16_t job_id, unsigned worker_id);
Endpoint agq_ps_endpoint(uint16_t job_id);

// A prebuilt Ethernet/IPv4/UDP(50100) frame; the agq header is written per packet.
class AgqFrameTemplate {
 public:
  AgqFrameTemplate(const Endpoint& src, const Endpoint& dst);
  void write(const proto::Agq& h, uint8_t* out) const;  // kAgqDataFrameLen bytes

 private:
  std::vector<uint8_t> frame_;
};

// The agq header of a frame, if it is one (UDP to 50100, parsed by the switch's parser).
std::optional<proto::Agq> parse_agq(std::span<const uint8_t> frame);

}  // namespace agq::worker
