// Shared helpers of the classic pipeline tests: a program with PS port 1 and
// worker ports {2, 3}, and a one-call "send this AGQ header" that returns the
// decision and the bytes that would leave the switch.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "pipeline/classic/classic_program.hpp"
#include "pipeline/drop_reason.hpp"
#include "pipeline/parser.hpp"
#include "proto/frame.hpp"
#include "tna/pre.hpp"

namespace agq::classic_test {

using pipeline::DropReason;
using pipeline::classic::ClassicConfig;
using pipeline::classic::ClassicProgram;
using proto::AgqClassic;
using tna::Decision;

inline constexpr tna::PortId kIngressPort = 0;
inline constexpr tna::PortId kPsPort = 1;
inline const std::vector<tna::PortId> kWorkerPorts = {2, 3};

inline proto::UdpFrameSpec frame_spec(std::optional<uint16_t> vlan = std::nullopt) {
  proto::UdpFrameSpec s;
  s.dst_mac = {0x02, 0, 0, 0, 0, 0x10};
  s.src_mac = {0x02, 0, 0, 0, 0, 0x01};
  s.vlan_id = vlan;
  s.src_ip = 0x0A020201;  // 10.2.2.1
  s.dst_ip = 0x0A020203;  // 10.2.2.3
  return s;
}

// A data packet for seq `jas` in slot hash_id (hash1/hash2 derived as hosts do).
inline AgqClassic agq_pkt(uint16_t jas, uint16_t hash_id, uint8_t total_workers,
                          std::vector<uint32_t> data4 = {}, uint8_t is_ack = 0) {
  AgqClassic a;
  a.job_and_seq = jas;
  a.worker_id = 0;
  a.total_workers = total_workers;
  for (std::size_t k = 0; k < data4.size() && k < a.data.size(); ++k) a.data[k] = data4[k];
  // data4..15: recognisable filler that must pass through untouched.
  for (int k = 4; k < proto::kAgqClassicLanes; ++k) a.data[k] = 0xD0D00000u + uint32_t(k);
  a.is_ack = is_ack;
  a.hash_id = hash_id;
  a.hash1 = uint16_t(hash_id >> 3);
  a.hash2 = uint8_t(hash_id & 7);
  return a;
}

inline AgqClassic ack_pkt(uint16_t jas, uint16_t hash_id, std::vector<uint32_t> data4 = {},
                          uint8_t is_ack = 1) {
  return agq_pkt(jas, hash_id, 2, std::move(data4), is_ack);
}

struct Sent {
  Decision decision;
  std::vector<uint8_t> in;   // frame as sent
  std::vector<uint8_t> out;  // frame after process()
  AgqClassic agq;            // AGQ header of `out`
};

class ClassicFixture : public ::testing::Test {
 protected:
  explicit ClassicFixture(ClassicConfig cfg = {kPsPort, kWorkerPorts, 35000})
      : prog(std::move(cfg), pipeline::ForwardingConfig{}, pre) {}

  Sent send(const AgqClassic& a, std::optional<uint16_t> vlan = std::nullopt) {
    return send_frame(proto::build_agq_classic_frame(frame_spec(vlan), a));
  }
  Sent send_frame(std::vector<uint8_t> f) {
    Sent s;
    s.in = f;
    tna::IngressIntrinsicMd md;
    md.ingress_port = kIngressPort;
    s.decision = prog.process(f, md);
    s.out = f;
    pipeline::Headers h;
    if (pipeline::parse(s.out, h) == pipeline::ParserError::None) s.agq = h.agq_classic;
    return s;
  }
  uint64_t counter(std::string_view name) const {
    uint64_t v = ~0ull;
    prog.visit_counters([&](std::string_view n, uint64_t x) {
      if (n == name) v = x;
    });
    EXPECT_NE(v, ~0ull) << "no counter " << name;
    return v;
  }

  tna::ReplicationEngine pre;
  ClassicProgram prog;
};

inline bool is_drop(const Decision& d, DropReason r) {
  return d.kind == Decision::Kind::Drop && d.drop_reason == uint16_t(r);
}
inline bool is_unicast(const Decision& d, tna::PortId p) {
  return d.kind == Decision::Kind::Unicast && d.port == p;
}
inline bool is_worker_multicast(const Decision& d) {
  return d.kind == Decision::Kind::Multicast && d.group == ClassicProgram::kWorkerGroup;
}

}  // namespace agq::classic_test
