// The fused path's program side (tna::Program::process_run, what
// SwitchDataplane::ingest calls for a leading run of frames equal in their
// first kRunKeyBytes bytes): for the classic and the agq_fast program, two
// instances fed the same bursts -- one the way the dataplane's fused path
// feeds it (the run decided at once on its first frame, the rest of the
// burst through process_burst), one through process_burst alone (the
// per-packet path) -- must agree on every decision, every frame byte, every
// counter, the MAC table and the learn digests. Scenarios: bursts of one
// flow, one flow except the last frame, an unknown destination (flood), a
// MAC move mid-burst, a destination behind the ingress port, learning by
// digest; and seeded random bursts of every kind of traffic (ARP, classic
// and agq aggregation frames -- runs that agree in their first 44 bytes
// but not after -- VLAN tags, mutations) with control-plane changes between
// bursts. That the dataplane then sends a run's frames where the decision
// says (and counts tx drops) is tests/integration/test_switch_one_flow.py's.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../common/random_frames.hpp"
#include "pipeline/agq_fast/agq_fast_program.hpp"
#include "pipeline/classic/classic_program.hpp"
#include "pipeline/forwarding.hpp"
#include "proto/frame.hpp"

using namespace agq;
using agq::testframes::Frame;
using agq::testframes::FrameGen;

namespace {

constexpr unsigned kKey = tna::Program::kRunKeyBytes;

struct Sink : pipeline::MacDigestSink {
  std::vector<std::string> got;
  void push(const tna::MacDigest& d) override {
    got.push_back(std::string(reinterpret_cast<const char*>(d.mac), 6) + std::to_string(d.port));
  }
};

using Make = std::function<std::unique_ptr<pipeline::SwitchProgram>(tna::ReplicationEngine&)>;

Make classic() {
  return [](tna::ReplicationEngine& pre) -> std::unique_ptr<pipeline::SwitchProgram> {
    return std::make_unique<pipeline::classic::ClassicProgram>(pipeline::classic::ClassicConfig{0, {1, 2}, 64},
                                                               pipeline::ForwardingConfig{}, pre);
  };
}
Make agq_fast() {
  return [](tna::ReplicationEngine& pre) -> std::unique_ptr<pipeline::SwitchProgram> {
    return std::make_unique<pipeline::agq::fast::AgqFastProgram>(pipeline::agq::AgqConfig{},
                                                                 pipeline::ForwardingConfig{}, pre);
  };
}

std::string decision_str(const tna::Decision& d) {
  return std::to_string(int(d.kind)) + "/" + std::to_string(d.port) + "/" + std::to_string(d.group) + "/" +
         std::to_string(d.exclude_port) + "/" + std::to_string(d.drop_reason);
}

// Whether frame b belongs to frame a's run as the dataplane decides it
// (run_length: equal length, bytes [0, kRunKeyBytes) equal except the ones
// tna::Program::run_key_free leaves free).
bool same_key(const Frame& a, const Frame& b) {
  if (a.size() != b.size()) return false;
  const size_t k = std::min<size_t>(a.size(), kKey);
  if (k < kKey) return k == 0 || std::memcmp(a.data(), b.data(), k) == 0;  // empty: data() may be null (UBSan)
  const auto free = tna::Program::run_key_free(a.data());
  for (unsigned i = 0; i < kKey; ++i)
    if (a[i] != b[i] && !tna::Program::run_key_byte_free(free, i)) return false;
  return true;
}

// Two instances of one program: `fused` fed as SwitchDataplane::ingest
// feeds it with its fused path on, `plain` through process_burst only.
struct Pair {
  explicit Pair(const Make& make, bool digests = false) : fused(make(pre_f)), plain(make(pre_p)) {
    for (auto* p : {fused.get(), plain.get()}) {
      p->forwarding().add_static_mac({0x02, 0, 0, 0, 0, 0x02}, 2);
      p->forwarding().add_static_mac({0x02, 0, 0, 0, 0, 0x03}, 3);
    }
    if (digests) {
      fused->set_mac_digest_sink(&sink_f);
      plain->set_mac_digest_sink(&sink_p);
    }
  }

  // One rx burst: every frame from `port` at time `now`. Returns how many
  // frames the fused instance decided as a run.
  unsigned burst(const std::vector<Frame>& in, tna::PortId port, uint64_t now, unsigned min_run = 2) {
    std::vector<Frame> a = in, b = in;
    std::vector<tna::BurstPacket> pa(in.size()), pb(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      pa[i] = {a[i].data(), uint16_t(a[i].size()), {}, {}};
      pa[i].md.ingress_port = port;
      pa[i].md.ingress_mac_tstamp_ns = now;
      pb[i] = pa[i];
      pb[i].bytes = b[i].data();
    }
    // The fused instance: a leading run, decided once, then the rest.
    unsigned r = 0;
    if (!in.empty()) {
      r = 1;
      while (r < in.size() && same_key(in[0], in[r])) ++r;
    }
    unsigned start = 0;
    if (r >= min_run && fused->process_run(pa[0], r)) {
      for (unsigned i = 1; i < r; ++i) pa[i].decision = pa[0].decision;
      // What the dataplane relies on to take the fused path on any lcore: a
      // run the program accepts carries no shard state (process_run
      // declines aggregation traffic), so no frame of it has an owner lcore.
      for (unsigned i = 0; i < r; ++i) EXPECT_EQ(fused->shard_of(in[i]), tna::kAnyShard) << "frame " << i;
      start = r;
    } else {
      r = 0;
    }
    if (start < in.size()) fused->process_burst(pa.data() + start, unsigned(in.size() - start));
    if (!in.empty()) plain->process_burst(pb.data(), unsigned(in.size()));
    for (size_t i = 0; i < in.size(); ++i) {
      EXPECT_EQ(decision_str(pa[i].decision), decision_str(pb[i].decision)) << "frame " << i << " of " << in.size();
      EXPECT_EQ(a[i], b[i]) << "frame " << i;
    }
    decisions.insert(decisions.end(), pb.begin(), pb.end());
    return r;
  }

  void expect_equal_state() const {
    EXPECT_EQ(counters(*fused), counters(*plain));
    EXPECT_EQ(macs(*fused), macs(*plain));
    EXPECT_EQ(sink_f.got, sink_p.got);
  }
  static std::vector<std::string> counters(const tna::Program& p) {
    std::vector<std::string> v;
    p.visit_counters([&](std::string_view n, uint64_t x) { v.push_back(std::string(n) + "=" + std::to_string(x)); });
    return v;
  }
  static std::vector<std::string> macs(const pipeline::SwitchProgram& p) {
    std::vector<std::string> v;
    p.forwarding().for_each_mac([&](const proto::Mac& m, const pipeline::Forwarding::MacEntry& e) {
      v.push_back(std::string(m.begin(), m.end()) + "/" + std::to_string(e.port) + "/" +
                  std::to_string(e.is_static) + "/" + std::to_string(e.last_seen_ns));
    });
    std::sort(v.begin(), v.end());
    return v;
  }
  uint64_t counter(const std::string& name) const {
    uint64_t v = 0;
    fused->visit_counters([&](std::string_view n, uint64_t x) {
      if (n == name) v = x;
    });
    return v;
  }

  tna::ReplicationEngine pre_f, pre_p;
  std::unique_ptr<pipeline::SwitchProgram> fused, plain;
  Sink sink_f, sink_p;
  std::vector<tna::BurstPacket> decisions;  // the plain instance's, for scenario checks
};

Frame udp(uint8_t src, uint8_t dst, uint16_t dport = 9000, size_t payload = 73) {
  proto::UdpFrameSpec s;
  s.src_mac = {0x02, 0, 0, 0, 0, src};
  s.dst_mac = {0x02, 0, 0, 0, 0, dst};
  s.src_ip = 0x0A000001u + src;
  s.dst_ip = 0x0A000001u + dst;
  s.src_port = 1234;
  s.dst_port = dport;
  return proto::build_udp_frame(s, std::vector<uint8_t>(payload, 0x5A));
}

std::vector<Frame> repeat(const Frame& f, unsigned n) { return std::vector<Frame>(n, f); }

class ProcessRun : public ::testing::TestWithParam<const char*> {
 protected:
  Make make() const { return std::string(GetParam()) == "classic" ? classic() : agq_fast(); }
};

TEST_P(ProcessRun, OneFlowIsDecidedOnceAndCountedForEveryFrame) {
  Pair p(make());
  EXPECT_EQ(p.burst(repeat(udp(0x40, 0x02), 32), 0, 100), 32u);  // learns 0x40 on port 0
  EXPECT_EQ(p.burst(repeat(udp(0x40, 0x02), 32), 0, 100), 32u);  // same stamp: no refresh write
  EXPECT_EQ(p.burst(repeat(udp(0x40, 0x02), 32), 0, 200), 32u);  // refresh
  p.expect_equal_state();
  EXPECT_EQ(p.counter("fwd_l2_unicast"), 96u);
  EXPECT_EQ(p.counter("fwd_learned"), 1u);
  for (const auto& b : p.decisions) EXPECT_EQ(decision_str(b.decision), decision_str(tna::Decision::unicast(2)));
}

TEST_P(ProcessRun, OneFlowExceptTheLastFrame) {
  Pair p(make());
  std::vector<Frame> b = repeat(udp(0x40, 0x02), 31);
  b.push_back(udp(0x40, 0x03));
  EXPECT_EQ(p.burst(b, 0, 100), 31u);
  b.back() = udp(0x40, 0x02, 9000, 74);  // the same headers, one byte longer
  EXPECT_EQ(p.burst(b, 0, 100), 31u);
  p.expect_equal_state();
  EXPECT_EQ(decision_str(p.decisions[31].decision), decision_str(tna::Decision::unicast(3)));
}

// A real sender's flow changes the IPv4 identification, the header checksum
// and the UDP checksum per packet: still one run (run_key_free), decided as
// the per-packet path decides every frame. In a frame that is not untagged
// IPv4 the same bytes are compared.
TEST_P(ProcessRun, ARealSendersFlowIsOneRun) {
  Pair p(make());
  std::vector<Frame> b;
  for (unsigned i = 0; i < 32; ++i) {
    Frame f = udp(0x40, 0x02);
    f[18] = uint8_t(i >> 8), f[19] = uint8_t(i);                  // identification
    f[24] = uint8_t(0x11 * i), f[25] = uint8_t(0x35 + i);          // header checksum
    f[40] = uint8_t(0x70 + i), f[41] = uint8_t(3 * i);             // UDP checksum
    f[50] = uint8_t(i);                                            // payload
    b.push_back(f);
  }
  EXPECT_EQ(p.burst(b, 0, 100), 32u);
  for (auto& f : b) f[17] ^= 1;  // the IPv4 total length: compared
  b[0][17] ^= 1;
  EXPECT_EQ(p.burst(b, 0, 100), 0u);  // frame 1 differs in a compared byte: no run
  p.expect_equal_state();
  EXPECT_EQ(p.counter("fwd_l2_unicast"), 64u);

  Frame other = udp(0x40, 0x02);
  other[12] = 0x88, other[13] = 0xB5;  // not IPv4: byte 18 is compared
  Frame other2 = other;
  other2[18] ^= 0xFF;
  EXPECT_FALSE(same_key(other, other2));
  EXPECT_TRUE(same_key(b[1], b[2]));
}

TEST_P(ProcessRun, UnknownDestinationFloods) {
  Pair p(make());
  EXPECT_EQ(p.burst(repeat(udp(0x40, 0x77), 32), 1, 100), 32u);
  p.expect_equal_state();
  EXPECT_EQ(p.counter("fwd_flooded"), 32u);
  EXPECT_EQ(decision_str(p.decisions[5].decision),
            decision_str(tna::Decision::multicast(pipeline::Forwarding::kFloodGroup, 1)));
}

TEST_P(ProcessRun, MacMoveMidBurstThenDestinationBehindTheIngressPort) {
  Pair p(make());
  EXPECT_EQ(p.burst(repeat(udp(0x50, 0x40), 8), 1, 100), 8u);  // 0x50 learned on port 1 (0x40 unknown: flood)
  // Port 0: a run of 0x40 -> 0x50 (to port 1), then 0x50 itself speaks on
  // port 0 (a move) and the rest of the burst follows it.
  std::vector<Frame> b = repeat(udp(0x40, 0x50), 16);
  for (int i = 0; i < 16; ++i) b.push_back(udp(0x50, 0x02));
  EXPECT_EQ(p.burst(b, 0, 200), 16u);
  // 0x40 -> 0x50, now behind port 0 = the ingress port: dropped, counted.
  EXPECT_EQ(p.burst(repeat(udp(0x40, 0x50), 32), 0, 300), 32u);
  p.expect_equal_state();
  EXPECT_EQ(p.counter("fwd_moved"), 1u);
  EXPECT_EQ(decision_str(p.decisions.back().decision),
            decision_str(tna::Decision::drop(uint16_t(pipeline::DropReason::L2SamePort))));
  const std::string drops = std::string(GetParam()) == "classic" ? "drops_l2_same_port" : "";
  if (!drops.empty()) {
    EXPECT_EQ(p.counter(drops), 32u);
  }
}

TEST_P(ProcessRun, LearningByDigestReportsOnce) {
  Pair p(make(), /*digests=*/true);
  EXPECT_EQ(p.burst(repeat(udp(0x41, 0x02), 32), 0, 100), 32u);
  EXPECT_EQ(p.burst(repeat(udp(0x41, 0x02), 32), 0, 100), 32u);
  p.expect_equal_state();
  EXPECT_EQ(p.sink_f.got.size(), 1u);
}

TEST_P(ProcessRun, AggregationArpAndErrorsAreDeclined) {
  Pair p(make());
  FrameGen gen(7);
  for (int k = 0; k < 20; ++k) {
    const Frame f = k % 3 == 0 ? gen.arp() : k % 3 == 1 ? gen.classic() : gen.agq();
    p.burst(repeat(f, 8), 0, 100 + k);
  }
  Frame truncated = udp(0x40, 0x02, 50000, 10);  // a classic AGQ header cut short: parser error
  EXPECT_EQ(p.burst(repeat(truncated, 8), 0, 500), 0u);
  p.expect_equal_state();
}

// Seeded random bursts: a leading run of one frame (or of frames equal in
// their first 44 bytes only) of any kind, then random frames; control-plane
// changes between bursts.
TEST_P(ProcessRun, RandomBurstsEqualThePerPacketPath) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Pair p(make(), /*digests=*/seed == 3);
    FrameGen gen(seed);
    uint64_t now = 1000;
    unsigned runs = 0;
    for (int burst = 0; burst < 1500; ++burst) {
      if (gen.chance(10)) {
        const proto::Mac m = gen.any_station();
        const tna::PortId port = tna::PortId(gen.below(5));
        const uint32_t host = gen.any_host();
        switch (gen.below(4)) {
          case 0:
            p.fused->forwarding().add_static_mac(m, port);
            p.plain->forwarding().add_static_mac(m, port);
            break;
          case 1:
            p.fused->forwarding().remove_mac(m);
            p.plain->forwarding().remove_mac(m);
            break;
          case 2:
            p.fused->forwarding().add_route(host, port);
            p.plain->forwarding().add_route(host, port);
            break;
          default:
            p.fused->forwarding().set_ageing_ns(50);
            p.plain->forwarding().set_ageing_ns(50);
            p.fused->forwarding().age_out(now);
            p.plain->forwarding().age_out(now);
        }
      }
      if (gen.chance(70)) now += gen.below(40);
      const Frame first = gen.any(gen.chance(30), 10);
      std::vector<Frame> b;
      const unsigned run = unsigned(1 + gen.below(40));
      for (unsigned i = 0; i < run; ++i) {
        Frame f = first;
        // Equal in the key bytes, not after (aggregation payloads differ).
        if (gen.chance(20) && f.size() > kKey) f[kKey + gen.below(f.size() - kKey)] ^= uint8_t(1 + gen.below(255));
        b.push_back(std::move(f));
      }
      const unsigned tail = unsigned(gen.below(6));
      for (unsigned i = 0; i < tail; ++i) b.push_back(gen.any(gen.chance(30), 10));
      if (p.burst(b, tna::PortId(gen.below(5)), now) > 0) ++runs;
      if (::testing::Test::HasFailure()) return;
    }
    p.expect_equal_state();
    EXPECT_GT(runs, 200u);
  }
}

INSTANTIATE_TEST_SUITE_P(Programs, ProcessRun, ::testing::Values("classic", "agq_fast"));

}  // namespace
