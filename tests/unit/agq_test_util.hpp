// Shared helpers of the agq pipeline tests: job specs with deterministic
// addresses, DATA / PS_RESULT frames from a worker or the PS, one-call
// send() through the fast program (what the switch runs) with the TNA model
// beside it as the reference (every send, replica and dump compared),
// multicast replicas through egress(), counters and register dumps.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/agq/agq_program.hpp"
#include "pipeline/agq_fast/agq_fast_program.hpp"
#include "pipeline/agq/encoding.hpp"
#include "pipeline/parser.hpp"
#include "proto/agq.hpp"
#include "proto/frame.hpp"
#include "tna/pre.hpp"

namespace agq::agq_test {

using namespace agq::pipeline::agq;
using proto::Agq;
using proto::AgqType;
using tna::Decision;

inline constexpr tna::PortId kPsPort = 1;
inline constexpr uint32_t kPsIp = 0x0A0000FE;  // 10.0.0.254
inline const proto::Mac kPsMac = {0x02, 0, 0, 0, 0, 0xFE};

// Worker w of job j: port 40 * j + w + 2, 10.j.0.(w+1).
inline WorkerSpec worker_spec(uint16_t job, uint8_t w) {
  WorkerSpec s;
  s.worker_id = w;
  s.port = tna::PortId(40 * job + w + 2);
  s.ipv4 = 0x0A000000u | uint32_t(job & 0xFF) << 16 | uint32_t(w + 1);
  s.mac = {0x02, 0x00, uint8_t(job >> 8), uint8_t(job), 0x00, uint8_t(w + 1)};
  return s;
}

inline JobSpec job_spec(uint16_t job, uint8_t n, uint32_t slots, uint32_t rows,
                        ResultDelivery delivery = ResultDelivery::Multicast, uint8_t max_width = 32) {
  JobSpec j;
  j.job_id = job;
  j.num_workers = n;
  for (uint8_t w = 0; w < n; ++w) j.workers.push_back(worker_spec(job, w));
  j.slots = slots;
  j.rows = rows;
  j.delivery = delivery;
  j.ps_port = kPsPort;
  j.ps_ipv4 = kPsIp;
  j.ps_mac = kPsMac;
  j.max_width = max_width;
  return j;
}

// The narrowest min_width a DATA of `j` may carry: 4 * ceil((g + 2) / 4)
// (PROTOCOL §1). A request narrower than it makes the DATA malformed.
inline uint8_t narrowest_min_width(const JobSpec& j) {
  return uint8_t(kUnitBits * min_grant_units(guard_bits(j.num_workers)));
}
inline constexpr int kNarrowest = -1;

// A DATA; min_width defaults to the narrowest valid one (every grant the
// switch can make is accepted), so a test that is not about min_width
// sees the widest-free-run grants.
inline Agq data_pkt(const JobSpec& j, uint8_t w, uint16_t slot, uint8_t v, uint8_t req_width,
                    const std::vector<uint32_t>& lanes, uint32_t seq = 0, uint8_t flags = 0,
                    int min_width = kNarrowest) {
  Agq a;
  a.width = min_width == kNarrowest ? narrowest_min_width(j) : uint8_t(min_width);
  a.type = AgqType::Data;
  a.flags = uint8_t((v & 1) | flags);
  a.job_id = j.job_id;
  a.worker_id = w;
  a.num_workers = j.num_workers;
  a.slot = slot;
  a.seq = seq;
  a.req_width = req_width;
  for (std::size_t k = 0; k < lanes.size() && k < a.lanes.size(); ++k) a.lanes[k] = lanes[k];
  return a;
}

// A frame from worker `w` of `j` (to the PS address, as workers send it).
inline std::vector<uint8_t> worker_frame(const JobSpec& j, uint8_t w, const Agq& a) {
  const WorkerSpec& ws = j.workers.at(w);
  proto::UdpFrameSpec f;
  f.src_mac = ws.mac;
  f.dst_mac = kPsMac;
  f.src_ip = ws.ipv4;
  f.dst_ip = kPsIp;
  f.src_port = proto::kAgqPort;
  f.dst_port = proto::kAgqPort;
  uint8_t payload[Agq::kLen] = {};
  a.encode(payload);
  return proto::build_udp_frame(f, std::span<const uint8_t>(payload, size_t(a.len())));
}
inline std::vector<uint8_t> ps_frame(const Agq& a) {
  proto::UdpFrameSpec f;
  f.src_mac = kPsMac;
  f.dst_mac = {0x01, 0, 0x5e, 0, 0, 1};
  f.src_ip = kPsIp;
  f.dst_ip = 0x0A000001;
  f.src_port = proto::kAgqPort;
  f.dst_port = proto::kAgqPort;
  uint8_t payload[Agq::kLen] = {};
  a.encode(payload);
  return proto::build_udp_frame(f, std::span<const uint8_t>(payload, size_t(a.len())));
}

struct Out {
  Decision decision;
  std::vector<uint8_t> bytes;
  pipeline::Headers hdr;  // parsed `bytes`
  bool parsed = false;
};
struct Replica {
  tna::PortId port;
  uint16_t rid;
  std::vector<uint8_t> bytes;
  pipeline::Headers hdr;
};

inline Out parse_out(Decision d, std::vector<uint8_t> bytes) {
  Out o{d, std::move(bytes), {}, false};
  o.parsed = pipeline::parse(o.bytes, o.hdr) == pipeline::ParserError::None && o.hdr.agq_valid;
  return o;
}

inline bool is_unicast(const Decision& d, tna::PortId p) {
  return d.kind == Decision::Kind::Unicast && d.port == p;
}
inline bool is_drop(const Decision& d, AgqDrop r) {
  return d.kind == Decision::Kind::Drop && d.drop_reason == uint16_t(r);
}

// The expected RESULT lane: sum of the contributions at the granted width.
inline uint32_t expected_lane(const std::vector<uint32_t>& us, unsigned req, unsigned width, unsigned g) {
  uint32_t s = 0;
  for (uint32_t u : us) s += contribution(u, req, width, g);
  return s;
}

// The fast program with its PRE, and the model with its own, usable inside
// or outside a gtest fixture. The tests' expectations are checked on the
// fast program; the model must agree with it on every frame it sends.
class AgqHarness {
 public:
  explicit AgqHarness(AgqConfig cfg = {64, 256})
      : prog(cfg, pipeline::ForwardingConfig{}, pre), model(cfg, pipeline::ForwardingConfig{}, model_pre) {}
  AgqHarness(const AgqHarness&) = delete;
  AgqHarness& operator=(const AgqHarness&) = delete;

  void add(const JobSpec& j) {
    const auto err = prog.add_job(j);
    ASSERT_FALSE(err.has_value()) << *err;
    ASSERT_FALSE(model.add_job(j).has_value());
  }
  bool remove(uint16_t job_id) {
    const bool r = prog.remove_job(job_id);
    EXPECT_EQ(model.remove_job(job_id), r);
    return r;
  }
  void set_epoch(uint16_t e) {
    prog.set_epoch(e);
    model.set_epoch(e);
  }
  Out send_frame(std::vector<uint8_t> f, tna::PortId port) {
    tna::IngressIntrinsicMd md;
    md.ingress_port = port;
    std::vector<uint8_t> m = f;
    const Decision d = prog.process(f, md);
    if (check_model) {
      const Decision dm = model.process(m, md);
      EXPECT_EQ(int(d.kind), int(dm.kind)) << "the model decides otherwise";
      EXPECT_EQ(d.port, dm.port);
      EXPECT_EQ(d.group, dm.group);
      EXPECT_EQ(d.drop_reason, dm.drop_reason);
      EXPECT_EQ(f, m) << "the model's frame differs";
    }
    return parse_out(d, std::move(f));
  }
  Out send(const JobSpec& j, const Agq& a) { return send_frame(worker_frame(j, a.worker_id, a), j.workers.at(a.worker_id).port); }
  Out send_ps(const Agq& a) { return send_frame(ps_frame(a), kPsPort); }

  // The replicas a multicast decision turns into, each through egress().
  std::vector<Replica> replicas(const Out& o) {
    std::vector<Replica> out;
    if (o.decision.kind != Decision::Kind::Multicast) return out;
    for (const tna::Replica& r : pre.members(o.decision.group)) {
      Replica rep{r.port, r.rid, o.bytes, {}};
      prog.egress(rep.bytes, r.port, r.rid);
      if (check_model) {
        std::vector<uint8_t> m = o.bytes;
        model.egress(m, r.port, r.rid);
        EXPECT_EQ(rep.bytes, m) << "the model's replica differs";
      }
      EXPECT_EQ(pipeline::parse(rep.bytes, rep.hdr), pipeline::ParserError::None);
      out.push_back(std::move(rep));
    }
    return out;
  }

  uint64_t counter(std::string_view name) const {
    uint64_t v = ~0ull;
    prog.visit_counters([&](std::string_view n, uint64_t x) {
      if (n == name) v = x;
    });
    EXPECT_NE(v, ~0ull) << "no counter " << name;
    return v;
  }
  // Every register cell of every row (and the slots of each row's job).
  std::vector<std::pair<std::string, uint64_t>> dump_all() const {
    std::vector<std::pair<std::string, uint64_t>> all;
    for (uint32_t r = 0; r < prog.aggregator_count(); ++r) {
      for (auto& c : prog.dump_aggregator(r)) all.push_back(c);
      if (check_model) {
        EXPECT_EQ(prog.dump_aggregator(r), model.dump_aggregator(r)) << "row " << r;
      }
    }
    return all;
  }
  uint64_t cell(uint32_t row, const std::string& name) const {
    for (auto& [n, v] : prog.dump_aggregator(row))
      if (n == name) return v;
    ADD_FAILURE() << "no cell " << name << " in row " << row;
    return 0;
  }

  tna::ReplicationEngine pre;
  pipeline::agq::fast::AgqFastProgram prog;  // what the switch runs
  tna::ReplicationEngine model_pre;
  AgqProgram model;  // the reference
  // Off for a test that changes `prog` behind the harness's back (control commands).
  bool check_model = true;
};

class AgqFixture : public ::testing::Test, public AgqHarness {};

}  // namespace agq::agq_test
