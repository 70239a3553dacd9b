#include "lib/agq_wire.hpp"

#include <cstring>

#include "pipeline/parser.hpp"
#include "proto/frame.hpp"

namespace agq::worker {

namespace {

Endpoint agq_endpoint(uint16_t job_id, uint8_t host) {
  const uint8_t jh = uint8_t(job_id >> 8), jl = uint8_t(job_id);
  // 10.128/9 keeps agq jobs apart from the classic workers' 10.j.0.x (j <= 31).
  return {{0x02, 0, 0x01, jh, jl, host},
          uint32_t(10) << 24 | uint32_t(0x80 | jh) << 16 | uint32_t(jl) << 8 | host};
}
}  // namespace

Endpoint agq_worker_endpoint(uint16_t job_id, unsigned worker_id) { return agq_endpoint(job_id, uint8_t(worker_id + 1)); }
Endpoint agq_ps_endpoint(uint16_t job_id) { return agq_endpoint(job_id, 254); }

FrameTemplate agq_frame_template(const Endpoint& src, const Endpoint& dst, unsigned lanes) {
  return FrameTemplate(src, dst, proto::kAgqPort, 20 + 4 * lanes);
}

const uint8_t* find_agq_header(std::span<const uint8_t> f) {
  size_t off = 12;
  if (f.size() < off + 2) return nullptr;
  uint16_t et = uint16_t(f[off] << 8 | f[off + 1]);
  off += 2;
  if (et == 0x8100) {
    if (f.size() < off + 4) return nullptr;
    et = uint16_t(f[off + 2] << 8 | f[off + 3]);
    off += 4;
  }
  if (et != 0x0800 || f.size() < off + 20) return nullptr;
  const uint8_t* ip = f.data() + off;
  const unsigned ihl = ip[0] & 0x0F;
  // IPv4, a whole datagram (no fragment), UDP
  if ((ip[0] >> 4) != 4 || ihl < 5 || (ip[6] & 0x3F) || ip[7] || ip[9] != 17) return nullptr;
  off += 4 * ihl;
  if (f.size() < off + 8 + 20) return nullptr;
  const uint8_t* udp = f.data() + off;
  if (uint16_t(udp[2] << 8 | udp[3]) != proto::kAgqPort) return nullptr;
  const uint8_t* h = udp + 8;
  const unsigned n_lanes = h[17];
  if ((h[0] >> 4) != proto::kAgqVersion || (n_lanes != 16 && n_lanes != 32) ||
      f.size() < off + 8 + 20 + 4 * n_lanes)
    return nullptr;
  return h;
}

std::optional<proto::Agq> parse_agq(std::span<const uint8_t> frame) {
  pipeline::Headers hdr;
  if (pipeline::parse(frame, hdr) != pipeline::ParserError::None || !hdr.agq_valid) return std::nullopt;
  return hdr.agq;
}

}  // namespace agq::worker
