#include "lib/agq_wire.hpp"

#include <cstring>

#include "pipeline/parser.hpp"
#include "proto/frame.hpp"

namespace agq::worker {

namespace {
constexpr int kHdrOffset = proto::Ethernet::kLen + proto::Ipv4::kLen + proto::Udp::kLen;

Endpoint agq_endpoint(uint16_t job_id, uint8_t host) {
  const uint8_t jh = uint8_t(job_id >> 8), jl = uint8_t(job_id);
  // 10.128/9 keeps agq jobs apart from the classic workers' 10.j.0.x (j <= 31).
  return {{0x02, 0, 0x01, jh, jl, host},
          uint32_t(10) << 24 | uint32_t(0x80 | jh) << 16 | uint32_t(jl) << 8 | host};
}
}  // namespace

Endpoint agq_worker_endpoint(uint16_t job_id, unsigned worker_id) { return agq_endpoint(job_id, uint8_t(worker_id + 1)); }
Endpoint agq_ps_endpoint(uint16_t job_id) { return agq_endpoint(job_id, 254); }

AgqFrameTemplate::AgqFrameTemplate(const Endpoint& src, const Endpoint& dst) {
  proto::UdpFrameSpec s;
  s.src_mac = src.mac;
  s.dst_mac = dst.mac;
  s.src_ip = src.ip;
  s.dst_ip = dst.ip;
  s.src_port = proto::kAgqPort;
  s.dst_port = proto::kAgqPort;
  uint8_t hdr[proto::Agq::kLen] = {};
  proto::Agq{}.encode(hdr);
  frame_ = proto::build_udp_frame(s, hdr);
}

void AgqFrameTemplate::write(const proto::Agq& h, uint8_t* out) const {
  std::memcpy(out, frame_.data(), kHdrOffset);
  h.encode(out + kHdrOffset);
}

std::optional<proto::Agq> parse_agq(std::span<const uint8_t> frame) {
  pipeline::Headers hdr;
  if (pipeline::parse(frame, hdr) != pipeline::ParserError::None || !hdr.agq_valid) return std::nullopt;
  return hdr.agq;
}

}  // namespace agq::worker
