// The fast classic pipeline against its reference model (the TNA-vocabulary
// program it replaced, reference/classic_reference.*), on seeded random
// traces: classic data and ACKs over a small register space (collisions,
// slot reuse, windows shrinking and regrowing, 8-bit wraps, bad indices,
// odd isACK values, jobAndSeq 0), ordinary ARP/IPv4/L2/VLAN traffic through
// the forwarding control, mutated and malformed frames, control-plane
// changes mid-trace, and both process() and process_burst(). Every decision,
// every output byte, every register cell, every counter, the MAC tables and
// the MAC digests must be equal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "../common/random_frames.hpp"
#include "pipeline/classic/classic_program.hpp"
#include "pipeline/reference/classic_reference.hpp"
#include "tna/pre.hpp"

using namespace agq;
using agq::pipeline::ForwardingConfig;
using agq::pipeline::classic::ClassicConfig;
using agq::pipeline::classic::ClassicProgram;
using agq::pipeline::reference::ClassicReference;
using agq::testframes::Frame;
using agq::testframes::FrameGen;

namespace {

struct Sink : pipeline::MacDigestSink {
  std::vector<tna::MacDigest> got;
  void push(const tna::MacDigest& d) override { got.push_back(d); }
};

std::string describe(const tna::Decision& d) {
  return "kind " + std::to_string(int(d.kind)) + " port " + std::to_string(d.port) + " group " +
         std::to_string(d.group) + " exclude " + std::to_string(d.exclude_port) + " reason " +
         std::to_string(d.drop_reason);
}
bool same(const tna::Decision& a, const tna::Decision& b) {
  return a.kind == b.kind && a.port == b.port && a.group == b.group && a.exclude_port == b.exclude_port &&
         a.drop_reason == b.drop_reason;
}

std::vector<std::pair<std::string, uint64_t>> counters(const tna::Program& p) {
  std::vector<std::pair<std::string, uint64_t>> v;
  p.visit_counters([&](std::string_view n, uint64_t x) { v.emplace_back(n, x); });
  return v;
}

template <typename Fwd>
std::map<proto::Mac, std::pair<tna::PortId, uint64_t>> mac_table(const Fwd& f) {
  std::map<proto::Mac, std::pair<tna::PortId, uint64_t>> m;
  f.for_each_mac([&](const proto::Mac& k, const auto& e) { m[k] = {e.port, e.last_seen_ns | uint64_t(e.is_static) << 63}; });
  return m;
}

// Both programs with the same configuration and control-plane state.
struct Pair {
  Pair(ClassicConfig cfg, ForwardingConfig fcfg) : fast(cfg, fcfg, pre_fast), ref(cfg, fcfg, pre_ref) {}
  tna::ReplicationEngine pre_fast, pre_ref;
  ClassicProgram fast;
  ClassicReference ref;

  template <typename Fn>
  void both(Fn&& fn) {
    fn(fast.forwarding());
    fn(ref.forwarding());
  }
};

void expect_same_state(const Pair& p, uint32_t capacity, const std::string& where) {
  for (uint32_t h = 0; h < capacity; ++h) {
    const auto a = p.fast.seq_slot(h), b = p.ref.seq_slot(h);
    ASSERT_TRUE(a.job_and_seq == b.job_and_seq && a.start_posi == b.start_posi && a.worker_agg == b.worker_agg)
        << where << ": seq slot " << h;
    const auto x = p.fast.aggregator(h), y = p.ref.aggregator(h);
    ASSERT_TRUE(x.insert_posi == y.insert_posi && x.data_isEmpty == y.data_isEmpty && x.reg == y.reg)
        << where << ": aggregator " << h;
  }
  for (uint32_t a = 0; a <= p.fast.aggregator_count(); ++a)
    ASSERT_EQ(p.fast.dump_aggregator(a), p.ref.dump_aggregator(a)) << where << ": dump " << a;
  ASSERT_EQ(counters(p.fast), counters(p.ref)) << where;
  ASSERT_EQ(mac_table(p.fast.forwarding()), mac_table(p.ref.forwarding())) << where;
}

// A classic AGQ frame of one fixed shape (untagged, one UDP port, one
// length): what run.py's classic replay sends, so that whole bursts take
// process_burst's AGQ-vector path (every frame same_parse of frame 0).
// Header fields as FrameGen::classic() draws them.
Frame one_shape_classic(FrameGen& gen, uint32_t slots) {
  proto::AgqClassic a;
  static const uint16_t kJas[] = {1, 2, 3, 0x801, 0x802, 0};
  a.job_and_seq = gen.chance(90) ? kJas[gen.below(5)] : gen.chance(50) ? 0 : uint16_t(gen.below(1u << 16));
  a.worker_id = uint8_t(gen.below(4));
  a.total_workers = gen.chance(90) ? uint8_t(1 + gen.below(4)) : uint8_t(gen.below(256));
  for (auto& d : a.data) d = gen.chance(70) ? uint32_t(gen.below(1u << 24)) : uint32_t(gen.below(1ull << 32));
  a.is_ack = gen.chance(70) ? 0 : gen.chance(85) ? 1 : uint8_t(gen.below(256));
  a.hash_id = uint16_t(gen.chance(95) ? gen.below(slots) : gen.below(1u << 16));
  a.hash1 = gen.chance(95) ? uint16_t(a.hash_id >> 3) : uint16_t(gen.below(1u << 13));
  a.hash2 = uint8_t(a.hash_id & 7);
  proto::UdpFrameSpec s;
  s.dst_mac = gen.station(0);
  s.src_mac = gen.station(1);
  s.src_ip = gen.host(1);
  s.dst_ip = gen.host(2);
  s.src_port = 4000;
  s.dst_port = proto::kAgqClassicPortA;
  return proto::build_agq_classic_frame(s, a);
}

void run_trace(uint64_t seed, bool burst, bool digests, bool one_shape = false) {
  const uint32_t capacity = 40 + uint32_t(seed % 3) * 13;  // not a multiple of 8 for some seeds
  testframes::Universe u;
  u.classic_slots = capacity + 8;  // some indices past the registers
  FrameGen gen(seed, u);
  ClassicConfig cfg{1, seed % 2 ? std::vector<tna::PortId>{2, 3} : std::vector<tna::PortId>{2}, capacity};
  Pair p(cfg, ForwardingConfig{.mac_capacity = 6, .route_capacity = 8, .arp_capacity = 4});
  Sink sink_fast, sink_ref;
  if (digests) {
    p.fast.set_mac_digest_sink(&sink_fast);
    p.ref.forwarding().set_digest_sink(&sink_ref);
  }
  p.both([&](auto& f) {
    f.add_static_mac(gen.station(0), 1);
    f.add_route(gen.host(1), 2);
    f.add_route(gen.host(2), 4);
    f.add_arp_proxy(gen.host(3), gen.station(5));
    f.add_arp_proxy(gen.host(4), gen.station(6));
  });
  ASSERT_EQ(p.pre_fast.groups(), p.pre_ref.groups());

  uint64_t now = 1000;
  std::vector<Frame> pending;  // frames of the current burst
  std::vector<tna::IngressIntrinsicMd> pending_md;
  auto flush = [&](int index) {
    std::vector<Frame> ref_frames = pending;
    std::vector<tna::BurstPacket> pkts(pending.size());
    for (size_t i = 0; i < pending.size(); ++i) pkts[i] = {pending[i].data(), uint16_t(pending[i].size()), pending_md[i], {}};
    if (burst) {
      p.fast.process_burst(pkts.data(), unsigned(pkts.size()));
    } else {
      for (auto& b : pkts) b.decision = p.fast.process(std::span<uint8_t>(b.bytes, b.len), b.md);
    }
    for (size_t i = 0; i < pending.size(); ++i) {
      const tna::Decision want = p.ref.process(ref_frames[i], pending_md[i]);
      ASSERT_TRUE(same(pkts[i].decision, want))
          << "seed " << seed << " packet " << index << "+" << i << ": fast " << describe(pkts[i].decision)
          << ", reference " << describe(want);
      ASSERT_EQ(pending[i], ref_frames[i]) << "seed " << seed << " packet " << index << "+" << i << ": bytes";
    }
    pending.clear();
    pending_md.clear();
  };

  const int kPackets = 6000;
  for (int i = 0; i < kPackets; ++i) {
    // Control plane between bursts, as the lcores apply it.
    if (gen.chance(1)) {
      flush(i);
      switch (gen.below(7)) {
        case 0: { const auto h = gen.any_host(); const auto port = tna::PortId(gen.below(5)); p.both([&](auto& f) { f.add_route(h, port); }); break; }
        case 1: { const auto h = gen.any_host(); p.both([&](auto& f) { f.remove_route(h); }); break; }
        case 2: { const auto m = gen.any_station(); const auto port = tna::PortId(gen.below(5)); p.both([&](auto& f) { f.add_static_mac(m, port); }); break; }
        case 3: { const auto m = gen.any_station(); p.both([&](auto& f) { f.remove_mac(m); }); break; }
        case 4: { const uint64_t t = now; p.both([&](auto& f) { f.set_ageing_ns(500); f.age_out(t); }); break; }
        case 5: p.fast.clear_state(); p.ref.clear_state(); break;
        default:  // the control thread installs every digest reported so far
          for (const auto& d : sink_fast.got) p.fast.forwarding().apply_mac_digest(d, now);
          for (const auto& d : sink_ref.got) p.ref.forwarding().apply_mac_digest(d, now);
          break;
      }
    }
    tna::IngressIntrinsicMd md;
    md.ingress_port = gen.chance(2) ? tna::kNoPort : tna::PortId(gen.below(5));
    md.ingress_mac_tstamp_ns = now;
    md.resubmit_flag = gen.chance(1);
    now += gen.below(50);
    pending.push_back(one_shape ? one_shape_classic(gen, u.classic_slots) : gen.any(false, 12));
    pending_md.push_back(md);
    if (!burst || pending.size() == gen.below(40) + 1 || gen.chance(5)) flush(i);
    if (::testing::Test::HasFatalFailure()) return;
  }
  flush(kPackets);
  if (::testing::Test::HasFatalFailure()) return;
  expect_same_state(p, capacity, "seed " + std::to_string(seed));
  ASSERT_EQ(sink_fast.got.size(), sink_ref.got.size());
  for (size_t i = 0; i < sink_fast.got.size(); ++i) {
    EXPECT_TRUE(std::equal(sink_fast.got[i].mac, sink_fast.got[i].mac + 6, sink_ref.got[i].mac));
    EXPECT_EQ(sink_fast.got[i].port, sink_ref.got[i].port);
  }
  // The traces did reach the interesting states.
  uint64_t completions = 0, released = 0, collisions = 0, parser_errors = 0, routed = 0;
  for (const auto& [n, v] : counters(p.ref)) {
    if (n == "completions") completions = v;
    if (n == "acks_released") released = v;
    if (n == "collisions") collisions = v;
    if (n == "parser_errors") parser_errors = v;
    if (n == "fwd_routed") routed = v;
  }
  EXPECT_GT(completions, 0u);
  EXPECT_GT(released, 0u);
  EXPECT_GT(collisions, 0u);
  if (one_shape) return;  // no malformed or ordinary frames in these traces
  EXPECT_GT(parser_errors, 0u);
  EXPECT_GT(routed, 0u);
}

}  // namespace

TEST(ClassicDifferential, ProcessEqualsReferenceOnRandomTraces) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    run_trace(seed, /*burst=*/false, /*digests=*/false);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(ClassicDifferential, ProcessBurstEqualsReferenceOnRandomTraces) {
  for (uint64_t seed = 101; seed <= 106; ++seed) {
    run_trace(seed, /*burst=*/true, /*digests=*/false);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(ClassicDifferential, WithMacDigestsEqualsReference) {
  for (uint64_t seed = 201; seed <= 204; ++seed) {
    run_trace(seed, seed % 2 == 0, /*digests=*/true);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(ClassicShard, AggregationPacketsAreTheirAggregatorsShardEverythingElseAnyShard) {
  tna::ReplicationEngine pre;
  ClassicProgram prog(ClassicConfig{1, {2, 3}, 64}, ForwardingConfig{}, pre);
  FrameGen gen(7);
  unsigned classic = 0, other = 0;
  for (int i = 0; i < 2000; ++i) {
    Frame f = gen.any(false, 20);
    pipeline::Headers h;
    const bool agq_classic = pipeline::parse(f, h) == pipeline::ParserError::None && h.agq_classic_valid;
    const uint32_t shard = prog.shard_of(f);
    if (agq_classic) {
      EXPECT_EQ(shard, proto::classic_shard(h.agq_classic.hash1));
      ++classic;
    } else {
      EXPECT_EQ(shard, tna::kAnyShard);
      ++other;
    }
  }
  EXPECT_GT(classic, 100u);
  EXPECT_GT(other, 100u);
}

// shard_of's fixed-offset path (untagged IPv4/UDP to a classic port) against
// the parser on the frames one byte away from it: each field that path
// tests, set to what the parser accepts and to what it refuses.
TEST(ClassicShard, NearMissFramesShardAsTheParserSays) {
  tna::ReplicationEngine pre;
  ClassicProgram prog(ClassicConfig{1, {2, 3}, 64}, ForwardingConfig{}, pre);
  proto::AgqClassic h;
  h.hash_id = 0x1234 & 0x7FFF;
  h.hash1 = uint16_t(h.hash_id >> 3);
  h.hash2 = uint8_t(h.hash_id & 7);
  proto::UdpFrameSpec spec;
  spec.dst_port = proto::kAgqClassicPortA;
  const Frame base = proto::build_agq_classic_frame(spec, h);
  spec.vlan_id = 7;
  const Frame tagged = proto::build_agq_classic_frame(spec, h);
  std::vector<Frame> frames = {base, tagged};
  auto with = [&](std::size_t at, uint8_t v) {
    Frame f = base;
    f[at] = v;
    frames.push_back(f);
  };
  with(14, 0x46);  // IHL 6
  with(14, 0x65);  // version 6
  with(14, 0x44);  // IHL 4
  with(20, 0x40);  // DF: still a classic frame
  with(20, 0x20);  // MF
  with(20, 0x80);  // the reserved flag bit: the parser does not look at it
  with(21, 0x01);  // fragment offset
  with(23, 6);     // TCP
  with(12, 0x86);  // EtherType 0x86dd
  with(37, uint8_t(base[37] ^ 1));  // 50001: the other classic port
  with(37, uint8_t(base[37] ^ 2));  // 50002: not a classic port
  frames.push_back(Frame(base.begin(), base.end() - 1));  // one byte short of the header
  Frame longer = base;
  longer.push_back(0);
  frames.push_back(longer);
  unsigned classic = 0;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    pipeline::Headers hd;
    const bool valid = pipeline::parse(frames[i], hd) == pipeline::ParserError::None && hd.agq_classic_valid;
    EXPECT_EQ(prog.shard_of(frames[i]), valid ? proto::classic_shard(hd.agq_classic.hash1) : tna::kAnyShard)
        << "frame " << i;
    classic += valid;
  }
  EXPECT_EQ(classic, 6u);  // base, tagged, DF, the reserved bit, port B, longer
}

// Programs are independent per-lcore instances: two instances fed different
// traffic keep different state, and neither sees the other's.
TEST(ClassicShard, InstancesShareNoState) {
  tna::ReplicationEngine pre_a, pre_b;
  ClassicProgram a(ClassicConfig{1, {2, 3}, 64}, ForwardingConfig{}, pre_a);
  ClassicProgram b(ClassicConfig{1, {2, 3}, 64}, ForwardingConfig{}, pre_b);
  proto::AgqClassic h;
  h.job_and_seq = 5;
  h.total_workers = 2;
  h.hash_id = 17;
  h.hash1 = 2;
  h.hash2 = 1;
  h.data[0] = 0x10;
  proto::UdpFrameSpec s;
  s.dst_mac = {0x02, 0, 0, 0, 0, 9};
  s.src_mac = {0x02, 0, 0, 0, 0, 8};
  Frame f = proto::build_agq_classic_frame(s, h);
  tna::IngressIntrinsicMd md;
  md.ingress_port = 0;
  a.process(f, md);
  EXPECT_EQ(a.seq_slot(17).job_and_seq, 5);
  EXPECT_EQ(b.seq_slot(17).job_and_seq, 0);
  EXPECT_EQ(b.aggregator(2).data_isEmpty, 0);
}

// Bursts of one-shape classic frames (run.py's classic replay): the
// AGQ-vector path of process_burst (no per-frame views, the traffic
// manager's resolved entries, at most two inlined passes) against the
// reference, with resubmit flags and ingress ports drawn per packet.
TEST(ClassicDifferential, OneShapeAgqBurstsEqualReference) {
  for (uint64_t seed = 201; seed <= 206; ++seed) {
    run_trace(seed, /*burst=*/true, /*digests=*/false, /*one_shape=*/true);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// The merged first pass (a first packet and its resubmitted pass run as one
// call) in every case that matters, against the reference's two passes,
// through process() and through the AGQ-vector path of process_burst: a
// first packet whose split_t opens a window (L != 0: pass 1 clears it,
// pass 2 adds), one whose cursor lands on a live start (split_t L == 0:
// nothing cleared), one that completes at once (total_workers 1: to the
// PS), one that is absorbed, jobAndSeq 0 (pass 2 allocates again: two
// separate passes), a packet that arrives as a resubmitted one (no second
// pass), then contributions and ACKs over the windows left behind. Every
// decision, byte, register cell and counter equal.
TEST(ClassicDifferential, MergedFirstPassEqualsTwoPasses) {
  for (const bool burst : {false, true}) {
    const uint32_t capacity = 64;
    ClassicConfig cfg{1, {2}, capacity};
    Pair p(cfg, ForwardingConfig{});
    proto::UdpFrameSpec sp;
    sp.dst_port = proto::kAgqClassicPortA;
    // hash_id = hash1 << 3 | hash2 unless `slot` (the switch does not
    // check the host invariant).
    auto frame = [&](uint16_t jas, uint8_t total, uint8_t is_ack, uint16_t hash1, uint8_t hash2, uint32_t v,
                     int slot = -1) {
      proto::AgqClassic a;
      a.job_and_seq = jas;
      a.total_workers = total;
      a.is_ack = is_ack;
      a.hash1 = hash1;
      a.hash2 = hash2;
      a.hash_id = slot < 0 ? uint16_t(hash1 << 3 | hash2) : uint16_t(slot);
      for (unsigned k = 0; k < 16; ++k) a.data[k] = v * (k + 1) * 0x01010101u;
      return proto::build_agq_classic_frame(sp, a);
    };
    std::vector<Frame> frames;
    std::vector<bool> resubmitted;
    auto add = [&](Frame f, bool resub = false) {
      frames.push_back(std::move(f));
      resubmitted.push_back(resub);
    };
    // Aggregator 1: nine first packets without an ACK. The cursor runs
    // 0,3,6,1,4,7,2,5 and lands on the live start 0 at the ninth (L == 0).
    for (uint8_t s = 0; s < 8; ++s) add(frame(uint16_t(0x100 + s), 2, 0, 1, s, 0x11 + s));
    add(frame(0x1FF, 2, 0, 1, 0, 0x77));              // slot 8 (hash2 0) is taken: a collision
    add(frame(0x1FE, 2, 0, 1, 0, 0x78, /*slot=*/40));  // the ninth first packet on aggregator 1
    // Aggregator 2: completes at once; then absorbed first + its completion.
    add(frame(0x200, 1, 0, 2, 0, 0x0F000000));
    add(frame(0x201, 2, 0, 2, 1, 0x00F00000));
    add(frame(0x201, 2, 0, 2, 1, 0x00F00000));
    // Aggregator 3: a seq at position 0 with low bits set, then a first
    // packet that arrives as a resubmitted one (one pass: it clears its
    // window [3, 8), cutting into the first seq's sums, and goes out).
    add(frame(0x301, 3, 0, 3, 0, 0x00345678));
    add(frame(0x301, 3, 0, 3, 0, 0x00345678));
    add(frame(0x300, 2, 0, 3, 1, 0x654321), /*resub=*/true);
    add(frame(0x300, 2, 0, 3, 1, 0x654321));
    // Aggregator 4: jobAndSeq 0 behind a seq at position 0: pass 1 at
    // position 3 (L 20: it truncates and shifts its data), pass 2 from the
    // original data allocates again at position 6.
    add(frame(0x401, 2, 0, 4, 0, 0x00ABCDEF));
    add(frame(0, 3, 0, 4, 1, 0x00123456));
    // ACKs free windows; new first packets reuse them (the window clear
    // under the add), with the other seqs' contributions in between.
    add(frame(0x103, 2, 1, 1, 3, 0));
    add(frame(0x101, 2, 0, 1, 1, 0x21));
    add(frame(0x103, 2, 0, 1, 3, 0x31));
    add(frame(0x103, 2, 0, 1, 3, 0x32));
    add(frame(0x200, 1, 1, 2, 0, 0));
    add(frame(0x202, 3, 0, 2, 0, 0x0A000000));
    add(frame(0x202, 3, 0, 2, 0, 0x0B000000));
    add(frame(0x202, 3, 0, 2, 0, 0x0C000000));

    std::vector<Frame> ref_frames = frames;
    std::vector<tna::BurstPacket> pkts(frames.size());
    for (size_t i = 0; i < frames.size(); ++i) {
      tna::IngressIntrinsicMd md;
      md.ingress_port = 3;
      md.resubmit_flag = resubmitted[i];
      pkts[i] = {frames[i].data(), uint16_t(frames[i].size()), md, {}};
    }
    if (burst)
      p.fast.process_burst(pkts.data(), unsigned(pkts.size()));  // one vector: every frame of one shape
    else
      for (auto& b : pkts) b.decision = p.fast.process(std::span<uint8_t>(b.bytes, b.len), b.md);
    for (size_t i = 0; i < frames.size(); ++i) {
      const tna::Decision want = p.ref.process(ref_frames[i], pkts[i].md);
      ASSERT_TRUE(same(pkts[i].decision, want))
          << (burst ? "burst" : "process") << " packet " << i << ": fast " << describe(pkts[i].decision)
          << ", reference " << describe(want);
      ASSERT_EQ(frames[i], ref_frames[i]) << (burst ? "burst" : "process") << " packet " << i << ": bytes";
    }
    expect_same_state(p, capacity, burst ? "burst" : "process");
    // The trace did reach the cases above.
    uint64_t resubmits = 0, completions = 0, collisions = 0, allocations = 0;
    for (const auto& [n, v] : counters(p.ref)) {
      if (n == "resubmits") resubmits = v;
      if (n == "completions") completions = v;
      if (n == "collisions") collisions = v;
      if (n == "allocations") allocations = v;
    }
    EXPECT_GE(resubmits, 12u);
    EXPECT_GE(completions, 3u);
    EXPECT_EQ(collisions, 1u);
    EXPECT_GT(allocations, resubmits);  // the resubmitted arrival, jobAndSeq 0's second allocation
  }
}
