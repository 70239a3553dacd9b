// Forwarding tests: MAC learning (moves, static precedence, group sources,
// a full table), ageing on synthetic timestamps, host routes before L2, the
// same-port drop, floods that prune the ingress port, the I/G bit for every
// first octet, ARP proxy replies checked byte by byte after deparse, and the
// counters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/forwarding.hpp"
#include "pipeline/parser.hpp"
#include "proto/frame.hpp"

using namespace agq;
using namespace agq::proto;
using agq::pipeline::DropReason;
using agq::pipeline::Forwarding;
using agq::pipeline::ForwardingConfig;
using agq::pipeline::Headers;
using agq::pipeline::parse;
using agq::pipeline::ParserError;
using tna::Decision;
using tna::PortId;

namespace {

constexpr Mac kBroadcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

Mac station(uint8_t n) { return {0x02, 0, 0, 0, 0, n}; }

constexpr int kMinFrame = 60;  // Ethernet minimum without FCS: short frames are padded

// A non-IP frame (local experimental EtherType), padded with a pattern so a
// test can see that nothing past the headers is touched.
std::vector<uint8_t> l2_frame(const Mac& dst, const Mac& src) {
  std::vector<uint8_t> f(kMinFrame, 0xA5);
  Ethernet{dst, src, 0x88B5}.encode(f.data());
  return f;
}

std::vector<uint8_t> udp_frame(const Mac& dst, const Mac& src, uint32_t dst_ip) {
  UdpFrameSpec s;
  s.dst_mac = dst;
  s.src_mac = src;
  s.src_ip = 0x0A000001;
  s.dst_ip = dst_ip;
  s.src_port = 9000;
  s.dst_port = 9001;
  const uint8_t payload[18] = {1, 2, 3};
  return build_udp_frame(s, payload);
}

Arp arp_request(const Mac& sha, uint32_t spa, uint32_t tpa) {
  Arp a;
  a.oper = 1;
  a.sha = sha;
  a.spa = spa;
  a.tha = {};
  a.tpa = tpa;
  return a;
}

std::vector<uint8_t> arp_frame(const Mac& dst, const Mac& src, const Arp& a,
                               std::optional<uint16_t> vlan = std::nullopt) {
  std::vector<uint8_t> f(kMinFrame + (vlan ? Vlan::kLen : 0), 0xA5);
  uint8_t* p = f.data();
  Ethernet{dst, src, vlan ? kEtherTypeVlan : kEtherTypeArp}.encode(p);
  p += Ethernet::kLen;
  if (vlan) {
    Vlan v;
    v.vid = *vlan;
    v.ether_type = kEtherTypeArp;
    v.encode(p);
    p += Vlan::kLen;
  }
  a.encode(p);
  return f;
}

tna::IngressIntrinsicMd md(PortId port, uint64_t ts = 0) {
  tna::IngressIntrinsicMd m;
  m.ingress_port = port;
  m.ingress_mac_tstamp_ns = ts;
  return m;
}

// Parses, applies, deparses: what a program does with a non-AGQ packet.
Decision run(Forwarding& fwd, std::vector<uint8_t>& frame, PortId port, uint64_t ts = 0) {
  Headers h;
  EXPECT_EQ(parse(frame, h), ParserError::None);
  const Decision d = fwd.apply(h, md(port, ts));
  pipeline::deparse(h, frame);
  return d;
}
Decision send(Forwarding& fwd, const Mac& dst, const Mac& src, PortId port, uint64_t ts = 0) {
  auto f = l2_frame(dst, src);
  return run(fwd, f, port, ts);
}

::testing::AssertionResult IsUnicast(const Decision& d, PortId port) {
  if (d.kind == Decision::Kind::Unicast && d.port == port) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "kind " << int(d.kind) << " port " << d.port
                                       << " reason " << d.drop_reason << ", want unicast "
                                       << port;
}
::testing::AssertionResult IsFlood(const Decision& d, PortId exclude) {
  if (d.kind == Decision::Kind::Multicast && d.group == Forwarding::kFloodGroup &&
      d.exclude_port == exclude)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "kind " << int(d.kind) << " group " << d.group
                                       << " exclude " << d.exclude_port << " port " << d.port
                                       << ", want flood excluding " << exclude;
}
::testing::AssertionResult IsDrop(const Decision& d, DropReason r) {
  if (d.kind == Decision::Kind::Drop && d.drop_reason == uint16_t(r))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "kind " << int(d.kind) << " port " << d.port
                                       << " reason " << d.drop_reason << ", want drop "
                                       << pipeline::to_string(r);
}

std::map<std::string, Forwarding::MacEntry> macs(const Forwarding& f) {
  std::map<std::string, Forwarding::MacEntry> m;
  f.for_each_mac([&](const Mac& k, const Forwarding::MacEntry& e) { m[mac_to_string(k)] = e; });
  return m;
}
std::optional<Forwarding::MacEntry> entry(const Forwarding& f, const Mac& mac) {
  auto m = macs(f);
  auto it = m.find(mac_to_string(mac));
  if (it == m.end()) return std::nullopt;
  return it->second;
}

std::map<std::string, uint64_t> counters(const Forwarding& f) {
  std::map<std::string, uint64_t> m;
  f.visit_counters([&](std::string_view n, uint64_t v) { m[std::string(n)] = v; });
  return m;
}

}  // namespace

// --- learning ---------------------------------------------------------------

TEST(ForwardingLearning, LearnsSourcePortAndTimestamp) {
  Forwarding fwd;
  EXPECT_TRUE(IsFlood(send(fwd, station(2), station(1), 3, 1234), 3));
  auto e = entry(fwd, station(1));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->port, 3);
  EXPECT_FALSE(e->is_static);
  EXPECT_EQ(e->last_seen_ns, 1234u);
  // The reverse direction is now known unicast, and learns station 2.
  EXPECT_TRUE(IsUnicast(send(fwd, station(1), station(2), 5, 2000), 3));
  EXPECT_EQ(entry(fwd, station(2))->port, 5);
  EXPECT_TRUE(IsUnicast(send(fwd, station(2), station(1), 3, 3000), 5));
  EXPECT_EQ(counters(fwd)["fwd_learned"], 2u);
  EXPECT_EQ(counters(fwd)["fwd_l2_unicast"], 2u);
  EXPECT_EQ(counters(fwd)["fwd_flooded"], 1u);
}

TEST(ForwardingLearning, SeenAgainRefreshesLastSeenWithoutCountingALearn) {
  Forwarding fwd;
  send(fwd, kBroadcast, station(1), 3, 100);
  send(fwd, kBroadcast, station(1), 3, 900);
  EXPECT_EQ(entry(fwd, station(1))->last_seen_ns, 900u);
  EXPECT_EQ(counters(fwd)["fwd_learned"], 1u);
  EXPECT_EQ(counters(fwd)["fwd_moved"], 0u);
}

TEST(ForwardingLearning, MoveUpdatesPortAndCounts) {
  Forwarding fwd;
  send(fwd, kBroadcast, station(1), 1, 10);
  send(fwd, kBroadcast, station(1), 2, 20);
  auto e = entry(fwd, station(1));
  EXPECT_EQ(e->port, 2);
  EXPECT_EQ(e->last_seen_ns, 20u);
  EXPECT_TRUE(IsUnicast(send(fwd, station(1), station(9), 3), 2));
  // Back and forth: every change of port is one move, staying put is none.
  send(fwd, kBroadcast, station(1), 2, 30);
  send(fwd, kBroadcast, station(1), 1, 40);
  auto c = counters(fwd);
  EXPECT_EQ(c["fwd_moved"], 2u);
  EXPECT_EQ(c["fwd_learned"], 2u);  // station 1 and station 9
  EXPECT_EQ(entry(fwd, station(1))->port, 1);
}

TEST(ForwardingLearning, StaticEntryIsNeverOverwrittenByLearning) {
  Forwarding fwd;
  ASSERT_TRUE(fwd.add_static_mac(station(1), 4));
  for (PortId p = 0; p < 8; ++p) send(fwd, kBroadcast, station(1), p, 1000 + p);
  auto e = entry(fwd, station(1));
  EXPECT_EQ(e->port, 4);
  EXPECT_TRUE(e->is_static);
  EXPECT_EQ(e->last_seen_ns, 0u);
  EXPECT_EQ(counters(fwd)["fwd_moved"], 0u);
  EXPECT_EQ(counters(fwd)["fwd_learned"], 0u);
  EXPECT_TRUE(IsUnicast(send(fwd, station(1), station(2), 0), 4));
}

TEST(ForwardingLearning, StaticReplacesLearnedButNotStatic) {
  Forwarding fwd;
  send(fwd, kBroadcast, station(1), 2, 50);
  ASSERT_TRUE(fwd.add_static_mac(station(1), 6));
  auto e = entry(fwd, station(1));
  EXPECT_EQ(e->port, 6);
  EXPECT_TRUE(e->is_static);
  EXPECT_FALSE(fwd.add_static_mac(station(1), 7));  // present
  EXPECT_EQ(entry(fwd, station(1))->port, 6);
  ASSERT_TRUE(fwd.remove_mac(station(1)));
  EXPECT_FALSE(fwd.remove_mac(station(1)));
  // Removed: learnable again.
  send(fwd, kBroadcast, station(1), 2, 60);
  EXPECT_FALSE(entry(fwd, station(1))->is_static);
}

TEST(ForwardingLearning, GroupSourcesAreNeverLearned) {
  Forwarding fwd;
  send(fwd, station(2), kBroadcast, 1);
  // Every first octet with the I/G bit set, e.g. IPv4/IPv6 multicast MACs.
  for (int o = 1; o < 256; o += 2) send(fwd, station(2), Mac{uint8_t(o), 0, 0x5e, 0, 0, 1}, 1);
  EXPECT_TRUE(macs(fwd).empty());
  EXPECT_EQ(counters(fwd)["fwd_learned"], 0u);
}

TEST(ForwardingLearning, DisabledLearnsNothing) {
  Forwarding fwd(ForwardingConfig{.learning = false});
  send(fwd, kBroadcast, station(1), 1);
  EXPECT_TRUE(macs(fwd).empty());
  fwd.set_learning(true);
  send(fwd, kBroadcast, station(1), 1, 5);
  ASSERT_TRUE(entry(fwd, station(1)));
  // Off again: an existing entry neither moves nor refreshes.
  fwd.set_learning(false);
  send(fwd, kBroadcast, station(1), 2, 99);
  EXPECT_EQ(entry(fwd, station(1))->port, 1);
  EXPECT_EQ(entry(fwd, station(1))->last_seen_ns, 5u);
}

TEST(ForwardingLearning, FullTableStopsLearningWithoutHarm) {
  Forwarding fwd(ForwardingConfig{.mac_capacity = 3});
  for (uint8_t n = 1; n <= 3; ++n) send(fwd, kBroadcast, station(n), n, n);
  for (uint8_t n = 4; n <= 40; ++n) send(fwd, kBroadcast, station(n), n, n);
  EXPECT_EQ(macs(fwd).size(), 3u);
  EXPECT_EQ(counters(fwd)["fwd_learned"], 3u);
  EXPECT_EQ(counters(fwd)["fwd_mac_entries"], 3u);
  EXPECT_FALSE(entry(fwd, station(4)));
  // Not learned -> unknown unicast -> flood.
  EXPECT_TRUE(IsFlood(send(fwd, station(4), station(1), 1), 1));
  // Entries already in a full table still move and refresh.
  send(fwd, kBroadcast, station(2), 9, 500);
  EXPECT_EQ(entry(fwd, station(2))->port, 9);
  EXPECT_EQ(entry(fwd, station(2))->last_seen_ns, 500u);
  // A static entry for a new MAC does not fit either; it does after a removal.
  EXPECT_FALSE(fwd.add_static_mac(station(50), 1));
  ASSERT_TRUE(fwd.remove_mac(station(3)));
  EXPECT_TRUE(fwd.add_static_mac(station(50), 1));
  EXPECT_FALSE(entry(fwd, station(4)));
}

// --- learning as a digest (a sink set: the control plane installs) ---------

namespace {
struct RecordingSink : pipeline::MacDigestSink {
  std::vector<tna::MacDigest> got;
  void push(const tna::MacDigest& d) override { got.push_back(d); }
};
Mac mac_of(const tna::MacDigest& d) { return {d.mac[0], d.mac[1], d.mac[2], d.mac[3], d.mac[4], d.mac[5]}; }
}  // namespace

TEST(ForwardingDigest, NewSourcePushesOneDigestAndLeavesTheTableAlone) {
  Forwarding fwd;
  RecordingSink sink;
  fwd.set_digest_sink(&sink);
  // A flow of 50 packets from one unknown station: one digest, no entry.
  for (int i = 0; i < 50; ++i) EXPECT_TRUE(IsFlood(send(fwd, kBroadcast, station(1), 3, 1000 + i), 3));
  ASSERT_EQ(sink.got.size(), 1u);
  EXPECT_EQ(mac_of(sink.got[0]), station(1));
  EXPECT_EQ(sink.got[0].port, 3);
  EXPECT_FALSE(entry(fwd, station(1)));
  EXPECT_EQ(counters(fwd)["fwd_learned"], 0u);
  EXPECT_EQ(counters(fwd)["fwd_digests"], 1u);
  // The control plane installs it (in every instance): now known unicast.
  EXPECT_EQ(fwd.apply_mac_digest(sink.got[0], 2000), Forwarding::DigestResult::Learned);
  EXPECT_TRUE(IsUnicast(send(fwd, station(1), station(2), 5, 2100), 3));
  EXPECT_EQ(entry(fwd, station(1))->last_seen_ns, 2000u);
  EXPECT_EQ(counters(fwd)["fwd_learned"], 1u);
  // Station 2 was new too: its own digest.
  ASSERT_EQ(sink.got.size(), 2u);
  EXPECT_EQ(mac_of(sink.got[1]), station(2));
}

TEST(ForwardingDigest, KnownSourceRefreshesItsHitStateWithoutADigest) {
  Forwarding fwd;
  RecordingSink sink;
  fwd.set_digest_sink(&sink);
  tna::MacDigest d{{0x02, 0, 0, 0, 0, 1}, 3};
  ASSERT_EQ(fwd.apply_mac_digest(d, 100), Forwarding::DigestResult::Learned);
  send(fwd, kBroadcast, station(1), 3, 900);
  EXPECT_TRUE(sink.got.empty());
  EXPECT_EQ(entry(fwd, station(1))->last_seen_ns, 900u);
  EXPECT_EQ(fwd.apply_mac_digest(d, 950), Forwarding::DigestResult::Refreshed);
}

TEST(ForwardingDigest, MoveIsReportedNotApplied) {
  Forwarding fwd;
  RecordingSink sink;
  fwd.set_digest_sink(&sink);
  ASSERT_EQ(fwd.apply_mac_digest({{0x02, 0, 0, 0, 0, 1}, 3}, 0), Forwarding::DigestResult::Learned);
  for (int i = 0; i < 10; ++i) send(fwd, kBroadcast, station(1), 4, 10);
  ASSERT_EQ(sink.got.size(), 1u);
  EXPECT_EQ(sink.got[0].port, 4);
  EXPECT_EQ(entry(fwd, station(1))->port, 3);  // not moved by the data plane
  EXPECT_EQ(counters(fwd)["fwd_moved"], 0u);
  EXPECT_EQ(fwd.apply_mac_digest(sink.got[0], 20), Forwarding::DigestResult::Moved);
  EXPECT_EQ(entry(fwd, station(1))->port, 4);
  EXPECT_EQ(counters(fwd)["fwd_moved"], 1u);
  // Moving back is a new (MAC, port): reported again at once.
  send(fwd, kBroadcast, station(1), 3, 30);
  ASSERT_EQ(sink.got.size(), 2u);
  EXPECT_EQ(sink.got[1].port, 3);
}

TEST(ForwardingDigest, LostDigestIsRepeatedAfterTheFilterInterval) {
  Forwarding fwd;
  RecordingSink sink;
  fwd.set_digest_sink(&sink);
  const uint64_t t0 = 5'000'000'000ull;
  send(fwd, kBroadcast, station(1), 3, t0);
  send(fwd, kBroadcast, station(1), 3, t0 + Forwarding::kDigestRepeatNs - 1);
  EXPECT_EQ(sink.got.size(), 1u);
  // The control plane never installed it (a full ring): ask again.
  send(fwd, kBroadcast, station(1), 3, t0 + Forwarding::kDigestRepeatNs);
  EXPECT_EQ(sink.got.size(), 2u);
}

TEST(ForwardingDigest, StaticGroupAndNoPortAreNeverReportedOrInstalled) {
  Forwarding fwd;
  RecordingSink sink;
  fwd.set_digest_sink(&sink);
  ASSERT_TRUE(fwd.add_static_mac(station(7), 2));
  send(fwd, kBroadcast, station(7), 3, 0);  // static: never moved by learning
  Mac group = station(8);
  group[0] |= 1;
  send(fwd, kBroadcast, group, 3, 0);
  send(fwd, kBroadcast, station(9), tna::kNoPort, 0);
  EXPECT_TRUE(sink.got.empty());
  EXPECT_EQ(fwd.apply_mac_digest({{0x02, 0, 0, 0, 0, 7}, 3}, 0), Forwarding::DigestResult::Refused);
  EXPECT_EQ(fwd.apply_mac_digest({{0x03, 0, 0, 0, 0, 8}, 3}, 0), Forwarding::DigestResult::Refused);
  EXPECT_EQ(fwd.apply_mac_digest({{0x02, 0, 0, 0, 0, 9}, tna::kNoPort}, 0), Forwarding::DigestResult::Refused);
  EXPECT_EQ(entry(fwd, station(7))->port, 2);
}

TEST(ForwardingDigest, LearningOffReportsNothing) {
  Forwarding fwd(ForwardingConfig{.learning = false});
  RecordingSink sink;
  fwd.set_digest_sink(&sink);
  send(fwd, kBroadcast, station(1), 3, 0);
  EXPECT_TRUE(sink.got.empty());
}

TEST(ForwardingDigest, WithoutASinkLearnsDirectly) {
  Forwarding fwd;
  RecordingSink sink;
  fwd.set_digest_sink(&sink);
  fwd.set_digest_sink(nullptr);
  send(fwd, kBroadcast, station(1), 3, 0);
  EXPECT_EQ(entry(fwd, station(1))->port, 3);
  EXPECT_TRUE(sink.got.empty());
}

// --- ageing -----------------------------------------------------------------

TEST(ForwardingAgeing, RemovesOnlyLearnedEntriesOlderThanTheAgeingTime) {
  Forwarding fwd(ForwardingConfig{.ageing_ns = 1000});
  ASSERT_TRUE(fwd.add_static_mac(station(9), 9));
  send(fwd, kBroadcast, station(1), 1, 100);
  send(fwd, kBroadcast, station(2), 2, 100);
  send(fwd, kBroadcast, station(2), 2, 900);  // refreshed
  EXPECT_EQ(fwd.age_out(1100), 0u);           // station 1 is exactly 1000 old: not older
  EXPECT_EQ(fwd.age_out(1101), 1u);           // now it is
  EXPECT_FALSE(entry(fwd, station(1)));
  ASSERT_TRUE(entry(fwd, station(2)));
  EXPECT_EQ(fwd.age_out(1900), 0u);
  EXPECT_EQ(fwd.age_out(1901), 1u);
  EXPECT_EQ(counters(fwd)["fwd_aged"], 2u);
  // Static entries never age.
  EXPECT_EQ(fwd.age_out(UINT64_MAX), 0u);
  ASSERT_TRUE(entry(fwd, station(9)));
  // An aged-out destination is unknown again: flooded.
  EXPECT_TRUE(IsFlood(send(fwd, station(1), station(9), 0, 2000), 0));
}

TEST(ForwardingAgeing, ZeroMeansNever) {
  Forwarding fwd(ForwardingConfig{.ageing_ns = 0});
  send(fwd, kBroadcast, station(1), 1, 0);
  EXPECT_EQ(fwd.age_out(UINT64_MAX), 0u);
  EXPECT_EQ(macs(fwd).size(), 1u);
  fwd.set_ageing_ns(10);
  EXPECT_EQ(fwd.age_out(11), 1u);
  EXPECT_EQ(counters(fwd)["fwd_aged"], 1u);
}

TEST(ForwardingAgeing, TimestampAheadOfNowIsFresh) {
  // The dataplane's clock may run ahead of the control thread's: an entry
  // seen "in the future" must not look 2^64 ns old.
  Forwarding fwd(ForwardingConfig{.ageing_ns = 1000});
  send(fwd, kBroadcast, station(1), 1, 50000);
  EXPECT_EQ(fwd.age_out(10), 0u);
  EXPECT_EQ(fwd.age_out(51000), 0u);
  EXPECT_EQ(fwd.age_out(51001), 1u);
}

// Ageing reads a dense index of the learned keys, not the table's slots.
// Every way an entry is learned, refreshed, moved, made static, removed,
// aged or put back, in a seeded random order over a small table (so it also
// fills up and refuses): after each step idle_learned() at several instants
// equals what a walk of the whole table finds.
// idle_learned (and for_each_mac) read dmac's key list, kept beside the
// slots through every change; the expectation here is built from point
// lookups of every station instead, which read only the slots.
TEST(ForwardingAgeing, IdleLearnedAgreesWithLookupsOfEveryStationThroughEveryChange) {
  constexpr uint64_t kAge = 100;
  Forwarding fwd(ForwardingConfig{.ageing_ns = kAge, .mac_capacity = 16});
  auto walk = [&](uint64_t now) {
    std::vector<uint64_t> want;
    for (unsigned n = 1; n <= 40; ++n) {
      const auto e = fwd.find_mac(station(uint8_t(n)));
      if (e && !e->is_static && now > e->last_seen_ns && now - e->last_seen_ns > kAge)
        want.push_back(Forwarding::mac_key(station(uint8_t(n))));
    }
    std::sort(want.begin(), want.end());
    return want;
  };
  auto lookups = [&] {
    std::map<Mac, Forwarding::MacEntry> want;
    for (unsigned n = 1; n <= 40; ++n)
      if (const auto e = fwd.find_mac(station(uint8_t(n)))) want[station(uint8_t(n))] = *e;
    return want;
  };
  uint64_t rng = 0x2545F4914F6CDD1Dull;
  auto below = [&](uint64_t n) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng % n;
  };
  uint64_t now = 1000;
  std::size_t learned_max = 0, full = 0, aged = 0, restored = 0;
  for (int step = 0; step < 20000; ++step) {
    now += below(15);
    const Mac m = station(uint8_t(1 + below(40)));  // more stations than the table holds
    const PortId port = PortId(below(4));
    switch (below(8)) {
      case 0: case 1: send(fwd, kBroadcast, m, port, now); break;  // learn, refresh, move
      case 2: {
        tna::MacDigest d{{m[0], m[1], m[2], m[3], m[4], m[5]}, port};
        fwd.apply_mac_digest(d, now);
        break;
      }
      case 3: if (below(4) == 0) fwd.add_static_mac(m, port); break;  // replaces a learned entry
      case 4: fwd.remove_mac(m); break;
      case 5: aged += fwd.age_out(now); break;
      case 6: {  // the multi-lcore ageing: idle keys from "every instance", some refreshed since
        std::vector<uint64_t> keys = fwd.idle_learned(now);
        if (below(2)) keys.push_back(Forwarding::mac_key(m));  // one that may be fresh or static
        std::sort(keys.begin(), keys.end());
        keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
        fwd.expire_idle(keys, now + below(3) * kAge);
        break;
      }
      default: restored += fwd.restore_learned(Forwarding::mac_key(m), port, now); break;
    }
    std::size_t learned = 0, entries = 0;
    std::map<Mac, Forwarding::MacEntry> listed;
    fwd.for_each_mac([&](const Mac& k, const Forwarding::MacEntry& e) {
      learned += !e.is_static, ++entries;
      listed[k] = e;
    });
    const auto want = lookups();
    ASSERT_EQ(entries, want.size()) << "step " << step;  // each entry listed once
    ASSERT_EQ(listed.size(), want.size()) << "step " << step;
    for (const auto& [k, e] : want) {
      ASSERT_TRUE(listed.count(k)) << "step " << step;
      ASSERT_EQ(listed[k].port, e.port);
      ASSERT_EQ(listed[k].is_static, e.is_static);
      ASSERT_EQ(listed[k].last_seen_ns, e.last_seen_ns);
    }
    learned_max = std::max(learned_max, learned);
    full += entries == 16;
    for (uint64_t t : {now, now + kAge, now + kAge + 1, now + 3 * kAge})
      ASSERT_EQ(fwd.idle_learned(t), walk(t)) << "step " << step << " t " << t;
  }
  // The walk went through the interesting states, not just an empty table.
  EXPECT_GE(learned_max, 12u);
  EXPECT_GT(full, 100u);  // and refused stations
  EXPECT_GT(aged, 100u);
  EXPECT_GT(restored, 100u);
}

// --- L2 decisions -----------------------------------------------------------

TEST(ForwardingL2, UnknownUnicastAndBroadcastFloodPruningTheIngressPort) {
  Forwarding fwd(ForwardingConfig{.learning = false});
  for (PortId p = 0; p < 64; ++p) {
    EXPECT_TRUE(IsFlood(send(fwd, station(2), station(1), p), p)) << p;
    EXPECT_TRUE(IsFlood(send(fwd, kBroadcast, station(1), p), p)) << p;
  }
  EXPECT_EQ(counters(fwd)["fwd_flooded"], 128u);
}

TEST(ForwardingL2, IgBitDecidesForEveryFirstOctet) {
  // For every first octet: a station behind port 3 with that octet. An
  // individual address is learned and then switched to port 3; a group
  // address is neither learned nor looked up: it floods.
  Forwarding fwd;
  for (int o = 0; o < 256; ++o) {
    const Mac m{uint8_t(o), 0x11, 0x22, 0x33, 0x44, 0x55};
    send(fwd, kBroadcast, m, 3);
    const Decision d = send(fwd, m, station(1), 1);
    if (o & 1)
      EXPECT_TRUE(IsFlood(d, 1)) << o;
    else
      EXPECT_TRUE(IsUnicast(d, 3)) << o;
  }
  EXPECT_EQ(counters(fwd)["fwd_learned"], 128u + 1u);  // + station 1
}

TEST(ForwardingL2, DestinationBehindIngressPortIsDropped) {
  Forwarding fwd;
  send(fwd, kBroadcast, station(1), 4);
  ASSERT_TRUE(fwd.add_static_mac(station(2), 4));
  const auto before = counters(fwd);
  EXPECT_TRUE(IsDrop(send(fwd, station(1), station(3), 4), DropReason::L2SamePort));
  EXPECT_TRUE(IsDrop(send(fwd, station(2), station(3), 4), DropReason::L2SamePort));
  auto after = counters(fwd);
  EXPECT_EQ(after["fwd_l2_unicast"], before.at("fwd_l2_unicast"));
  EXPECT_EQ(after["fwd_flooded"], before.at("fwd_flooded"));
  // The dropped packets still taught the switch their source.
  EXPECT_EQ(entry(fwd, station(3))->port, 4);
}

TEST(ForwardingL2, UnknownIngressPortIsNotLearned) {
  Forwarding fwd;
  send(fwd, kBroadcast, station(1), tna::kNoPort);
  EXPECT_TRUE(macs(fwd).empty());
}

// --- IPv4 host routes -------------------------------------------------------

TEST(ForwardingRoutes, HostRouteTakesPrecedenceOverL2) {
  Forwarding fwd;
  const uint32_t ip = 0x0A090909, other = 0x0A090908;
  send(fwd, kBroadcast, station(2), 2);  // station 2 behind port 2
  ASSERT_TRUE(fwd.add_route(ip, 5));
  auto f = udp_frame(station(2), station(1), ip);
  const auto orig = f;
  EXPECT_TRUE(IsUnicast(run(fwd, f, 1), 5));
  EXPECT_EQ(f, orig);  // no MAC rewrite, no TTL decrement, no checksum change
  // ... whatever the destination MAC: broadcast, unknown, multicast.
  for (const Mac& d : {kBroadcast, station(77), Mac{0x01, 0, 0x5e, 0, 0, 1}}) {
    auto g = udp_frame(d, station(1), ip);
    EXPECT_TRUE(IsUnicast(run(fwd, g, 1), 5));
  }
  // Without a route the same frame is switched.
  auto h = udp_frame(station(2), station(1), other);
  EXPECT_TRUE(IsUnicast(run(fwd, h, 1), 2));
  ASSERT_TRUE(fwd.remove_route(ip));
  EXPECT_FALSE(fwd.remove_route(ip));
  auto k = udp_frame(station(2), station(1), ip);
  EXPECT_TRUE(IsUnicast(run(fwd, k, 1), 2));
  auto c = counters(fwd);
  EXPECT_EQ(c["fwd_routed"], 4u);
  EXPECT_EQ(c["fwd_l2_unicast"], 2u);
}

TEST(ForwardingRoutes, RouteBackOutOfTheIngressPortIsDropped) {
  Forwarding fwd;
  ASSERT_TRUE(fwd.add_route(0x0A000005, 3));
  // Even though L2 would have sent it elsewhere: the route decides.
  ASSERT_TRUE(fwd.add_static_mac(station(2), 6));
  auto f = udp_frame(station(2), station(1), 0x0A000005);
  EXPECT_TRUE(IsDrop(run(fwd, f, 3), DropReason::L2SamePort));
  EXPECT_EQ(counters(fwd)["fwd_routed"], 0u);
}

TEST(ForwardingRoutes, ControlPlaneRejectsDuplicatesNoPortAndOverflow) {
  Forwarding fwd(ForwardingConfig{.route_capacity = 2});
  EXPECT_FALSE(fwd.add_route(1, tna::kNoPort));
  EXPECT_TRUE(fwd.add_route(1, 1));
  EXPECT_FALSE(fwd.add_route(1, 2));
  EXPECT_TRUE(fwd.add_route(2, 2));
  EXPECT_FALSE(fwd.add_route(3, 3));
  std::map<uint32_t, PortId> routes;
  fwd.for_each_route([&](uint32_t ip, PortId p) { routes[ip] = p; });
  EXPECT_EQ(routes, (std::map<uint32_t, PortId>{{1, 1}, {2, 2}}));
  EXPECT_EQ(counters(fwd)["fwd_routes"], 2u);
}

TEST(ForwardingRoutes, ArpIsNeverRouted) {
  // ARP carries no IPv4 header: a host route for its target does not apply.
  Forwarding fwd;
  ASSERT_TRUE(fwd.add_route(0x0A000009, 5));
  auto f = arp_frame(kBroadcast, station(1), arp_request(station(1), 0x0A000001, 0x0A000009));
  EXPECT_TRUE(IsFlood(run(fwd, f, 1), 1));
}

// --- ARP proxy --------------------------------------------------------------

TEST(ForwardingArp, ProxyReplyEveryByte) {
  Forwarding fwd;
  const Mac proxied{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee};
  const Mac requester{0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
  ASSERT_TRUE(fwd.add_arp_proxy(0x0A000009, proxied));
  auto f = arp_frame(kBroadcast, requester, arp_request(requester, 0x0A000001, 0x0A000009));
  ASSERT_EQ(f.size(), 60u);
  EXPECT_TRUE(IsUnicast(run(fwd, f, 7, 42), 7));

  // Written out by hand, independently of the header encoders.
  const std::vector<uint8_t> want = {
      0x02, 0x00, 0x00, 0x00, 0x00, 0x01,  // eth dst = requester
      0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,  // eth src = proxied MAC
      0x08, 0x06,                          // ARP
      0x00, 0x01, 0x08, 0x00, 0x06, 0x04,  // Ethernet / IPv4, 6, 4
      0x00, 0x02,                          // reply
      0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,  // sha = proxied MAC
      0x0a, 0x00, 0x00, 0x09,              // spa = the asked-for address
      0x02, 0x00, 0x00, 0x00, 0x00, 0x01,  // tha = requester
      0x0a, 0x00, 0x00, 0x01,              // tpa = requester's address
      0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5,  // padding untouched
      0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5,
  };
  ASSERT_EQ(want.size(), 60u);
  EXPECT_EQ(f, want);
  auto c = counters(fwd);
  EXPECT_EQ(c["fwd_arp_answered"], 1u);
  EXPECT_EQ(c["fwd_flooded"], 0u);
  // The requester was learned from the request.
  EXPECT_EQ(entry(fwd, requester)->port, 7);
  EXPECT_EQ(entry(fwd, requester)->last_seen_ns, 42u);
}

TEST(ForwardingArp, ProxyReplyKeepsTheVlanTag) {
  Forwarding fwd;
  const Mac proxied{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee};
  ASSERT_TRUE(fwd.add_arp_proxy(0xC0A80102, proxied));
  // A unicast request (RFC 1122 re-validation) is answered the same way.
  auto f = arp_frame(proxied, station(1), arp_request(station(1), 0xC0A80101, 0xC0A80102),
                     uint16_t{42});
  EXPECT_TRUE(IsUnicast(run(fwd, f, 2), 2));
  const std::vector<uint8_t> want = {
      0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,
      0x81, 0x00, 0x00, 0x2a, 0x08, 0x06,  // tag kept, VID 42
      0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02,
      0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xc0, 0xa8, 0x01, 0x02,
      0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0xc0, 0xa8, 0x01, 0x01,
      0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5,
      0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5,
  };
  EXPECT_EQ(f, want);
}

TEST(ForwardingArp, WithoutProxyEntryIsSwitchedUnchanged) {
  Forwarding fwd;
  ASSERT_TRUE(fwd.add_arp_proxy(0x0A000009, station(9)));
  // Broadcast request for another address: flooded, bytes untouched.
  auto f = arp_frame(kBroadcast, station(1), arp_request(station(1), 0x0A000001, 0x0A000008));
  auto orig = f;
  EXPECT_TRUE(IsFlood(run(fwd, f, 1), 1));
  EXPECT_EQ(f, orig);
  // A unicast request to a known station: switched to it.
  send(fwd, kBroadcast, station(3), 3);
  auto g = arp_frame(station(3), station(1), arp_request(station(1), 0x0A000001, 0x0A000003));
  EXPECT_TRUE(IsUnicast(run(fwd, g, 1), 3));
  // After removal the proxied address is not answered any more.
  ASSERT_TRUE(fwd.remove_arp_proxy(0x0A000009));
  EXPECT_FALSE(fwd.remove_arp_proxy(0x0A000009));
  auto h = arp_frame(kBroadcast, station(1), arp_request(station(1), 0x0A000001, 0x0A000009));
  EXPECT_TRUE(IsFlood(run(fwd, h, 1), 1));
  EXPECT_EQ(counters(fwd)["fwd_arp_answered"], 0u);
}

TEST(ForwardingArp, OnlyEthernetIpv4RequestsThatAskAreAnswered) {
  Forwarding fwd;
  const uint32_t ip = 0x0A000009;
  ASSERT_TRUE(fwd.add_arp_proxy(ip, station(9)));
  std::vector<Arp> not_answered;
  Arp a = arp_request(station(1), 0x0A000001, ip);
  a.oper = 2;  // a reply
  not_answered.push_back(a);
  for (uint16_t op : {0, 3, 4, 8, 0xFFFF}) {
    a = arp_request(station(1), 0x0A000001, ip);
    a.oper = op;
    not_answered.push_back(a);
  }
  not_answered.push_back(arp_request(station(1), ip, ip));  // gratuitous
  a = arp_request(station(1), 0x0A000001, ip);
  a.htype = 6;  // IEEE 802 networks
  not_answered.push_back(a);
  a = arp_request(station(1), 0x0A000001, ip);
  a.ptype = 0x86DD;
  not_answered.push_back(a);
  a = arp_request(station(1), 0x0A000001, ip);
  a.hlen = 8;
  not_answered.push_back(a);
  a = arp_request(station(1), 0x0A000001, ip);
  a.plen = 16;
  not_answered.push_back(a);
  for (const Arp& r : not_answered) {
    auto f = arp_frame(kBroadcast, station(1), r);
    const auto orig = f;
    EXPECT_TRUE(IsFlood(run(fwd, f, 1), 1)) << r.oper << " " << r.htype;
    EXPECT_EQ(f, orig);
  }
  EXPECT_EQ(counters(fwd)["fwd_arp_answered"], 0u);
  // An ARP probe (sender address 0.0.0.0, RFC 5227) for a proxied address is
  // answered: the address is in use.
  auto p = arp_frame(kBroadcast, station(1), arp_request(station(1), 0, ip));
  EXPECT_TRUE(IsUnicast(run(fwd, p, 1), 1));
  Headers h;
  ASSERT_EQ(parse(p, h), ParserError::None);
  EXPECT_EQ(h.arp.tpa, 0u);
  EXPECT_EQ(h.arp.spa, ip);
}

TEST(ForwardingArp, ControlPlane) {
  Forwarding fwd(ForwardingConfig{.arp_capacity = 1});
  EXPECT_FALSE(fwd.add_arp_proxy(1, kBroadcast));
  EXPECT_FALSE(fwd.add_arp_proxy(1, Mac{0x01, 0, 0x5e, 0, 0, 1}));
  EXPECT_TRUE(fwd.add_arp_proxy(1, station(1)));
  EXPECT_FALSE(fwd.add_arp_proxy(1, station(2)));
  EXPECT_FALSE(fwd.add_arp_proxy(2, station(2)));  // full
  int n = 0;
  fwd.for_each_arp_proxy([&](uint32_t ip, const Mac& m) {
    EXPECT_EQ(ip, 1u);
    EXPECT_EQ(m, station(1));
    ++n;
  });
  EXPECT_EQ(n, 1);
}

TEST(ForwardingControl, StaticMacRejectsGroupAddressesAndNoPort) {
  Forwarding fwd;
  EXPECT_FALSE(fwd.add_static_mac(kBroadcast, 1));
  EXPECT_FALSE(fwd.add_static_mac(Mac{0x33, 0x33, 0, 0, 0, 1}, 1));
  EXPECT_FALSE(fwd.add_static_mac(station(1), tna::kNoPort));
  EXPECT_TRUE(macs(fwd).empty());
}

// --- counters ---------------------------------------------------------------

TEST(ForwardingCounters, StableNamesOrderAndClear) {
  Forwarding fwd(ForwardingConfig{.ageing_ns = 10});
  ASSERT_TRUE(fwd.add_route(0x0A000005, 5));
  ASSERT_TRUE(fwd.add_arp_proxy(0x0A000009, station(9)));
  send(fwd, kBroadcast, station(1), 1, 0);    // learned, flooded
  send(fwd, station(1), station(2), 2, 0);    // learned, l2 unicast
  send(fwd, kBroadcast, station(2), 3, 0);    // moved, flooded
  auto u = udp_frame(station(1), station(2), 0x0A000005);
  run(fwd, u, 3, 0);                          // routed
  auto a = arp_frame(kBroadcast, station(2), arp_request(station(2), 0x0A000001, 0x0A000009));
  run(fwd, a, 3, 0);                          // answered
  fwd.age_out(100);                           // aged 2

  std::vector<std::pair<std::string, uint64_t>> got;
  fwd.visit_counters([&](std::string_view n, uint64_t v) { got.emplace_back(n, v); });
  const std::vector<std::pair<std::string, uint64_t>> want = {
      {"fwd_routed", 1},  {"fwd_l2_unicast", 1}, {"fwd_flooded", 2},
      {"fwd_arp_answered", 1}, {"fwd_learned", 2}, {"fwd_moved", 1},
      {"fwd_aged", 2},    {"fwd_digests", 0}, {"fwd_mac_entries", 0}, {"fwd_routes", 1},
  };
  EXPECT_EQ(got, want);

  send(fwd, kBroadcast, station(1), 1, 200);
  fwd.clear_counters();
  got.clear();
  fwd.visit_counters([&](std::string_view n, uint64_t v) { got.emplace_back(n, v); });
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first);
    // Table sizes are state, not counters: they survive a clear.
    const uint64_t expect = got[i].first == "fwd_mac_entries" ? 1 : got[i].first == "fwd_routes";
    EXPECT_EQ(got[i].second, expect) << got[i].first;
  }
}
