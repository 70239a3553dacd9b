// The packets workers and the PS exchange, built on proto/ (frame builder,
// AgqClassic header) and parsed with the switch's own parser.
//
// Host-side conventions on top of the classic header (the switch never looks
// at them: data4..15 pass through untouched, also on the ACK path):
//   data4 = chunk index (low 32 bits), data5 = kMagic | kind.
// kind: contribution (worker -> switch), ack (PS: the slot is released),
// retry (PS: the slot was stuck and is released; contributors send again).
// The end of a job is announced by the PS as a broadcast UDP datagram to
// port kDonePort (ordinary traffic for the switch, flooded to every port).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lib/expected_model.hpp"
#include "proto/frame.hpp"
#include "proto/headers.hpp"

namespace agq::worker {

inline constexpr uint32_t kMagic = 0x41470000;  // "AG"
enum class Kind : uint8_t { Contribution = 0, Ack = 1, Retry = 2 };
inline constexpr uint16_t kDonePort = 50002;
inline constexpr size_t kAgqFrameLen = 115;  // untagged Ethernet + IPv4 + UDP + 73-byte header

struct Endpoint {
  proto::Mac mac{};
  uint32_t ip = 0;
};
// Default identities: worker w of job j = 02:00:00:00:j:w+1 / 10.j.0.w+1,
// PS = 02:00:00:00:j:fe / 10.j.0.254.
Endpoint worker_endpoint(uint8_t job_id, unsigned worker_id);
Endpoint ps_endpoint(uint8_t job_id);

// Offset of the protocol header in the untagged frames the workers build.
inline constexpr size_t kL4HdrOffset = proto::Ethernet::kLen + proto::Ipv4::kLen + proto::Udp::kLen;

// How a protocol's header goes into a frame of `len` header bytes (both
// protocols' headers encode their full length; a shorter agq lane profile
// overrides it, lib/agq_wire.hpp).
template <class H>
struct HeaderPolicy {
  static void encode(const H& h, uint8_t* out, size_t /*len*/) { h.encode(out); }
};

// The one frame builder of both protocols: a prebuilt Ethernet/IPv4/UDP
// frame from src to dst (UDP port `port` both ways) whose header (len bytes,
// the UDP payload) is written per packet: write<H> for a whole frame, or
// only L2-L4 when the packet path writes the header itself in place.
class FrameTemplate {
 public:
  FrameTemplate(const Endpoint& src, const Endpoint& dst, uint16_t port, size_t header_len);
  // Ethernet/IPv4/UDP (kL4HdrOffset bytes), UDP source port src_port.
  void write_l2l4(uint8_t* out, uint16_t src_port) const;
  void write_l2l4(uint8_t* out) const;  // the template's own source port
  // The whole frame for h (frame_len() bytes).
  template <class H>
  void write(const H& h, uint8_t* out) const {
    write_l2l4(out);
    HeaderPolicy<H>::encode(h, out + kL4HdrOffset, header_len_);
  }
  template <class H>
  void write(const H& h, uint8_t* out, uint16_t src_port) const {
    write_l2l4(out, src_port);
    HeaderPolicy<H>::encode(h, out + kL4HdrOffset, header_len_);
  }
  size_t frame_len() const { return kL4HdrOffset + header_len_; }
  size_t header_len() const { return header_len_; }

 private:
  std::vector<uint8_t> frame_;
  size_t header_len_;
};

// The classic protocol's frames (73-byte header, UDP kAgqClassicPortA).
FrameTemplate classic_frame_template(const Endpoint& src, const Endpoint& dst);
// The UDP source port of a classic frame: its aggregator's shard
// (docs/PROTOCOL.md section 10), so a NIC or a multi-queue peer can steer it
// to the switch lcore that owns the aggregator.
inline uint16_t classic_src_port(const proto::AgqClassic& h) {
  return proto::shard_port(proto::classic_shard(h.hash1));
}

proto::AgqClassic make_agq(uint16_t job_and_seq, uint8_t worker_id, uint8_t total_workers, uint16_t hash_id,
                           uint8_t is_ack, uint64_t chunk, Kind kind, const Lanes& lanes);

struct RxPacket {
  enum class Type : uint8_t { Other, Agq, Done } type = Type::Other;
  proto::AgqClassic agq;   // Type::Agq
  bool ours = false;       // data5 carries kMagic
  Kind kind = Kind::Contribution;
  uint32_t chunk = 0;      // data4
  uint8_t done_job = 0;    // Type::Done
  uint64_t done_chunks = 0;
};
RxPacket classify(std::span<const uint8_t> frame);

std::vector<uint8_t> build_done_frame(const Endpoint& ps, uint8_t job_id, uint64_t chunks);

}  // namespace agq::worker
