#include "lib/wire.hpp"

#include <cstring>

#include "pipeline/parser.hpp"

namespace agq::worker {

namespace {
constexpr char kDoneTag[8] = {'A', 'G', 'Q', 'D', 'O', 'N', 'E', '1'};
}  // namespace

Endpoint worker_endpoint(uint8_t job_id, unsigned worker_id) {
  return {{0x02, 0, 0, 0, job_id, uint8_t(worker_id + 1)},
          uint32_t(10) << 24 | uint32_t(job_id) << 16 | uint32_t((worker_id + 1) & 0xFF)};
}

Endpoint ps_endpoint(uint8_t job_id) {
  return {{0x02, 0, 0, 0, job_id, 0xFE}, uint32_t(10) << 24 | uint32_t(job_id) << 16 | 254};
}

FrameTemplate::FrameTemplate(const Endpoint& src, const Endpoint& dst, uint16_t port, size_t header_len)
    : header_len_(header_len) {
  proto::UdpFrameSpec s;
  s.src_mac = src.mac;
  s.dst_mac = dst.mac;
  s.src_ip = src.ip;
  s.dst_ip = dst.ip;
  s.src_port = s.dst_port = port;
  const std::vector<uint8_t> zero(header_len, 0);
  frame_ = proto::build_udp_frame(s, zero);  // lengths right; the header is written per packet
}

void FrameTemplate::write_l2l4(uint8_t* out) const { std::memcpy(out, frame_.data(), kL4HdrOffset); }

void FrameTemplate::write_l2l4(uint8_t* out, uint16_t src_port) const {
  write_l2l4(out);
  out[kL4HdrOffset - 8] = uint8_t(src_port >> 8);
  out[kL4HdrOffset - 7] = uint8_t(src_port);
}

FrameTemplate classic_frame_template(const Endpoint& src, const Endpoint& dst) {
  return FrameTemplate(src, dst, proto::kAgqClassicPortA, proto::AgqClassic::kLen);
}

proto::AgqClassic make_agq(uint16_t job_and_seq, uint8_t worker_id, uint8_t total_workers, uint16_t hash_id,
                           uint8_t is_ack, uint64_t chunk, Kind kind, const Lanes& lanes) {
  proto::AgqClassic h;
  h.job_and_seq = job_and_seq;
  h.worker_id = worker_id;
  h.total_workers = total_workers;
  for (int k = 0; k < kLanes; ++k) h.data[k] = lanes[k];
  h.data[4] = uint32_t(chunk);
  h.data[5] = kMagic | uint8_t(kind);
  h.is_ack = is_ack;
  h.hash_id = hash_id;
  h.hash1 = hash_id >> 3;  // the published invariant hashID == hash1 << 3 | hash2
  h.hash2 = hash_id & 7;
  return h;
}

RxPacket classify(std::span<const uint8_t> frame) {
  RxPacket r;
  pipeline::Headers hdr;
  if (pipeline::parse(frame, hdr) != pipeline::ParserError::None || !hdr.udp_valid) return r;
  if (hdr.agq_classic_valid) {
    r.type = RxPacket::Type::Agq;
    r.agq = hdr.agq_classic;
    r.ours = (r.agq.data[5] & 0xFFFF0000u) == kMagic;
    r.kind = Kind(r.agq.data[5] & 0xFF);
    r.chunk = r.agq.data[4];
    return r;
  }
  if (hdr.udp.dst_port == kDonePort && frame.size() >= size_t(hdr.payload_offset) + 17 &&
      std::memcmp(frame.data() + hdr.payload_offset, kDoneTag, 8) == 0) {
    const uint8_t* p = frame.data() + hdr.payload_offset + 8;
    r.type = RxPacket::Type::Done;
    r.done_job = p[0];
    for (int i = 0; i < 8; ++i) r.done_chunks = r.done_chunks << 8 | p[1 + i];
  }
  return r;
}

std::vector<uint8_t> build_done_frame(const Endpoint& ps, uint8_t job_id, uint64_t chunks) {
  uint8_t payload[17];
  std::memcpy(payload, kDoneTag, 8);
  payload[8] = job_id;
  for (int i = 0; i < 8; ++i) payload[9 + i] = uint8_t(chunks >> (8 * (7 - i)));
  proto::UdpFrameSpec s;
  s.src_mac = ps.mac;
  s.dst_mac = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  s.src_ip = ps.ip;
  s.dst_ip = ps.ip | 0xFF;  // the job's subnet broadcast
  s.src_port = kDonePort;
  s.dst_port = kDonePort;
  return proto::build_udp_frame(s, payload);
}

}  // namespace agq::worker
