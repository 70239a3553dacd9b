// The fast parser view and forwarding control against their references, on
// seeded random frames (ARP requests answered, unanswered and gratuitous;
// IPv4 routed and not; L2 known, unknown, broadcast and multicast; VLAN
// tags; mutations and garbage):
//  - parse_view() agrees with parse() on error, validity and offsets;
//  - Forwarding::apply on the frame's bytes, Forwarding::apply_burst over
//    bursts of random sizes, Forwarding::apply on parsed Headers + deparse,
//    and ForwardingReference (the std::unordered_map
//    implementation it replaced) agree on every decision, every output
//    byte, the MAC tables, the digests and the counters, with control-plane
//    changes (routes, static MACs, proxies, ageing, digests) mid-trace;
//  - FlatTable survives insert/erase churn against a std::map.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../common/random_frames.hpp"
#include "pipeline/flat_table.hpp"
#include "pipeline/forwarding.hpp"
#include "pipeline/parser.hpp"
#include "pipeline/reference/forwarding_reference.hpp"

using namespace agq;
using agq::pipeline::Forwarding;
using agq::pipeline::ForwardingConfig;
using agq::pipeline::FrameView;
using agq::pipeline::Headers;
using agq::pipeline::ParserError;
using agq::pipeline::reference::ForwardingReference;
using agq::testframes::Frame;
using agq::testframes::FrameGen;

namespace {

struct Sink : pipeline::MacDigestSink {
  std::vector<std::pair<proto::Mac, tna::PortId>> got;
  void push(const tna::MacDigest& d) override {
    got.push_back({{d.mac[0], d.mac[1], d.mac[2], d.mac[3], d.mac[4], d.mac[5]}, d.port});
  }
};

bool same(const tna::Decision& a, const tna::Decision& b) {
  return a.kind == b.kind && a.port == b.port && a.group == b.group && a.exclude_port == b.exclude_port &&
         a.drop_reason == b.drop_reason;
}

template <typename Fwd>
std::vector<std::pair<std::string, uint64_t>> counters(const Fwd& f) {
  std::vector<std::pair<std::string, uint64_t>> v;
  f.visit_counters([&](std::string_view n, uint64_t x) { v.emplace_back(n, x); });
  return v;
}

template <typename Fwd>
std::map<proto::Mac, std::tuple<tna::PortId, bool, uint64_t>> mac_table(const Fwd& f) {
  std::map<proto::Mac, std::tuple<tna::PortId, bool, uint64_t>> m;
  f.for_each_mac([&](const proto::Mac& k, const auto& e) { m[k] = {e.port, e.is_static, e.last_seen_ns}; });
  return m;
}
template <typename Fwd>
std::map<uint32_t, tna::PortId> routes(const Fwd& f) {
  std::map<uint32_t, tna::PortId> m;
  f.for_each_route([&](uint32_t k, tna::PortId p) { m[k] = p; });
  return m;
}
template <typename Fwd>
std::map<uint32_t, proto::Mac> proxies(const Fwd& f) {
  std::map<uint32_t, proto::Mac> m;
  f.for_each_arp_proxy([&](uint32_t k, const proto::Mac& v) { m[k] = v; });
  return m;
}

}  // namespace

TEST(ParserView, AgreesWithParseOnRandomAndMutatedFrames) {
  FrameGen gen(42);
  unsigned errors = 0, agq = 0, classic = 0, arp = 0;
  for (int i = 0; i < 200000; ++i) {
    const Frame f = gen.any(i % 2 == 0, 40);
    Headers h;
    const ParserError e = pipeline::parse(f, h);
    FrameView v;
    ASSERT_EQ(pipeline::parse_view(f.data(), f.size(), v), e) << "frame " << i;
    ASSERT_EQ(v.error, e);
    if (e != ParserError::None) {
      ++errors;
      continue;
    }
    ASSERT_EQ(v.vlan_valid, h.vlan_valid) << i;
    ASSERT_EQ(v.ipv4_valid, h.ipv4_valid) << i;
    ASSERT_EQ(v.udp_valid, h.udp_valid) << i;
    ASSERT_EQ(v.arp_valid, h.arp_valid) << i;
    ASSERT_EQ(v.agq_classic_valid, h.agq_classic_valid) << i;
    ASSERT_EQ(v.agq_valid, h.agq_valid) << i;
    ASSERT_EQ(v.l3_offset, h.l3_offset) << i;
    ASSERT_EQ(v.l4_offset, h.l4_offset) << i;
    ASSERT_EQ(v.payload_offset, h.payload_offset) << i;
    agq += v.agq_valid;
    classic += v.agq_classic_valid;
    arp += v.arp_valid;
  }
  EXPECT_GT(errors, 1000u);
  EXPECT_GT(agq, 1000u);
  EXPECT_GT(classic, 1000u);
  EXPECT_GT(arp, 1000u);
}

// same_parse() (a frame shaped like the previous one takes its view without
// a parse) is exact: whenever it says yes, parse_view() of the second frame
// gives the first frame's view, field for field. Pairs: identical frames,
// frames with a few header bytes changed (inside and outside the bytes the
// parser reads), truncated copies, unrelated frames.
TEST(ParserView, SameParseIsExact) {
  FrameGen gen(7);
  unsigned said_same = 0, said_same_differing = 0;
  auto same_view = [](const FrameView& a, const FrameView& b) {
    return a.error == b.error && a.vlan_valid == b.vlan_valid && a.ipv4_valid == b.ipv4_valid &&
           a.udp_valid == b.udp_valid && a.arp_valid == b.arp_valid && a.agq_classic_valid == b.agq_classic_valid &&
           a.agq_valid == b.agq_valid && a.l3_offset == b.l3_offset && a.l4_offset == b.l4_offset &&
           a.payload_offset == b.payload_offset;
  };
  for (int i = 0; i < 200000; ++i) {
    Frame a = gen.any(i % 3 == 0, 30);
    Frame b = a;
    switch (gen.below(5)) {
      case 0: break;
      case 4:  // a byte past the compared ones (an agq header's n_lanes decides its truncation)
        if (b.size() > pipeline::kSameParseMinLen)
          b[pipeline::kSameParseMinLen + gen.below(b.size() - pipeline::kSameParseMinLen)] = uint8_t(gen.below(256));
        break;
      case 1:  // a few bytes of the headers
        for (unsigned k = 0, n = unsigned(1 + gen.below(3)); k < n && !b.empty(); ++k)
          b[gen.below(std::min<size_t>(b.size(), 64))] = uint8_t(gen.below(256));
        break;
      case 2: b.resize(size_t(gen.below(b.size() + 1))); break;
      default: b = gen.any(i % 2 == 0, 30); break;
    }
    // In buffers like mbufs' (the compare reads 32 bytes from offset 12 of
    // frames of at least kSameParseMinLen bytes).
    std::array<uint8_t, 2048> ba{}, bb{};
    ASSERT_LE(std::max(a.size(), b.size()), ba.size());
    std::copy(a.begin(), a.end(), ba.begin());
    std::copy(b.begin(), b.end(), bb.begin());
    FrameView va, vb;
    pipeline::parse_view(ba.data(), a.size(), va);
    if (!pipeline::same_parse(ba.data(), a.size(), va, bb.data(), b.size())) continue;
    ++said_same;
    said_same_differing += a != b;
    pipeline::parse_view(b.data(), b.size(), vb);
    ASSERT_TRUE(same_view(va, vb)) << "pair " << i;
  }
  EXPECT_GT(said_same, 40000u);
  EXPECT_GT(said_same_differing, 5000u);  // the IPv4 mask: bytes the parser does not read may differ
}

// An agq header cut short of the 32 lanes its n_lanes byte promises is a
// parser error; the same bytes saying 16 lanes are a valid 16-lane frame:
// the n_lanes byte, past the compared ones, decides, so an error view is
// never a model (agq_fast's parse loop met this on its differential test).
TEST(ParserView, SameParseRefusesATruncatedAgqModel) {
  FrameGen gen(3);
  Frame f;
  FrameView v;
  do {
    f = gen.agq();
    pipeline::parse_view(f.data(), f.size(), v);
  } while (!v.agq_valid || v.vlan_valid);
  const size_t at = v.payload_offset + 17;
  Frame a = f;
  a.resize(v.payload_offset + proto::header_len(proto::kAgqLanesT1));
  a[at] = uint8_t(proto::kAgqLanes);
  Frame b = a;
  b[at] = uint8_t(proto::kAgqLanesT1);
  std::array<uint8_t, 2048> ba{}, bb{};
  std::copy(a.begin(), a.end(), ba.begin());
  std::copy(b.begin(), b.end(), bb.begin());
  FrameView va, vb;
  ASSERT_EQ(pipeline::parse_view(ba.data(), a.size(), va), ParserError::Truncated);
  ASSERT_EQ(pipeline::parse_view(bb.data(), b.size(), vb), ParserError::None);
  ASSERT_TRUE(vb.agq_valid);
  EXPECT_FALSE(pipeline::same_parse(ba.data(), a.size(), va, bb.data(), b.size()));
}

namespace {

void forwarding_trace(uint64_t seed, bool digests) {
  FrameGen gen(seed);
  const ForwardingConfig cfg{.learning = seed % 5 != 0, .ageing_ns = 300, .mac_capacity = 5, .route_capacity = 6,
                             .arp_capacity = 3};
  Forwarding fast(cfg), fast_hdr(cfg), fast_burst(cfg);
  ForwardingReference ref(cfg);
  Sink s_fast, s_hdr, s_ref, s_burst;
  if (digests) {
    fast.set_digest_sink(&s_fast);
    fast_hdr.set_digest_sink(&s_hdr);
    fast_burst.set_digest_sink(&s_burst);
    ref.set_digest_sink(&s_ref);
  }
  // fast_burst gets the same frames through apply_burst(), in bursts of a
  // random size (1..kBurstMax) cut wherever the control plane acts, each
  // frame checked against the reference's decision and bytes at the flush.
  struct Pending {
    Frame in, want;
    tna::IngressIntrinsicMd md;
    tna::Decision want_d;
    int i;
  };
  std::vector<Pending> pending;
  unsigned burst_target = 1;
  auto flush = [&] {
    if (pending.empty()) return;
    // Frames the forwarding stage does not get (not listed in idx) are
    // interleaved, as a program's burst holds aggregation packets too: they
    // must come out untouched.
    std::vector<Frame> bytes;
    std::vector<int> which;  // pending index, -1: not for forwarding
    for (std::size_t k = 0; k < pending.size(); ++k) {
      if (gen.chance(25) && which.size() + 1 < Forwarding::kBurstMax) {
        bytes.push_back(gen.any(false, 0));
        which.push_back(-1);
      }
      bytes.push_back(pending[k].in);
      which.push_back(int(k));
    }
    std::vector<tna::BurstPacket> pkts;
    std::vector<FrameView> views(bytes.size());
    std::vector<uint8_t> idx;
    const tna::Decision untouched = tna::Decision::drop(0xBEEF);
    for (std::size_t k = 0; k < bytes.size(); ++k) {
      pkts.push_back(tna::BurstPacket{bytes[k].data(), uint16_t(bytes[k].size()), {}, untouched});
      if (which[k] < 0) continue;
      pkts[k].md = pending[which[k]].md;
      pipeline::parse_view(bytes[k].data(), bytes[k].size(), views[k]);
      idx.push_back(uint8_t(k));
    }
    const std::vector<Frame> before = bytes;
    fast_burst.apply_burst(pkts.data(), views.data(), idx.data(), unsigned(idx.size()));
    for (std::size_t k = 0; k < bytes.size(); ++k) {
      if (which[k] < 0) {
        ASSERT_TRUE(same(pkts[k].decision, untouched));
        ASSERT_EQ(bytes[k], before[k]);
        continue;
      }
      const Pending& p = pending[which[k]];
      ASSERT_TRUE(same(pkts[k].decision, p.want_d)) << "seed " << seed << " frame " << p.i;
      ASSERT_EQ(bytes[k], p.want) << "seed " << seed << " frame " << p.i;
    }
    pending.clear();
    burst_target = 1 + gen.below(Forwarding::kBurstMax / 2);
  };
  auto all = [&](auto&& fn) {
    flush();
    const auto a = fn(fast), b = fn(fast_hdr), c = fn(ref), d = fn(fast_burst);
    EXPECT_EQ(a, c);
    EXPECT_EQ(b, c);
    EXPECT_EQ(d, c);
  };
  all([&](auto& f) { return f.add_route(gen.host(1), 2); });
  all([&](auto& f) { return f.add_arp_proxy(gen.host(3), gen.station(5)); });
  all([&](auto& f) { return f.add_static_mac(gen.station(0), 1); });

  uint64_t now = 0;
  uint64_t kinds[3] = {};
  Frame last_f;
  tna::IngressIntrinsicMd last_md;
  bool have_last = false;
  unsigned repeats = 0;
  for (int i = 0; i < 20000; ++i) {
    if (gen.chance(2)) {
      const auto h = gen.any_host();
      const auto m = gen.any_station();
      const auto port = tna::PortId(gen.chance(5) ? tna::kNoPort : gen.below(5));
      switch (gen.below(9)) {
        case 0: all([&](auto& f) { return f.add_route(h, port); }); break;
        case 1: all([&](auto& f) { return f.remove_route(h); }); break;
        case 2: all([&](auto& f) { return f.add_static_mac(m, port); }); break;
        case 3: all([&](auto& f) { return f.remove_mac(m); }); break;
        case 4: all([&](auto& f) { return f.add_arp_proxy(h, m); }); break;
        case 5: all([&](auto& f) { return f.remove_arp_proxy(h); }); break;
        case 6: all([&](auto& f) { return f.age_out(now); }); break;
        case 7: {
          tna::MacDigest d{{m[0], m[1], m[2], m[3], m[4], m[5]}, port};
          if (gen.chance(10)) d.mac[0] |= 1;
          flush();
          const int want = int(ref.apply_mac_digest(d, now));
          EXPECT_EQ(int(fast.apply_mac_digest(d, now)), want);
          EXPECT_EQ(int(fast_hdr.apply_mac_digest(d, now)), want);
          EXPECT_EQ(int(fast_burst.apply_mac_digest(d, now)), want);
          break;
        }
        default: all([&](auto& f) { f.clear_counters(); return 0; }); break;
      }
    }
    Frame f = gen.any(false, 15);
    tna::IngressIntrinsicMd md;
    md.ingress_port = gen.chance(2) ? tna::kNoPort : tna::PortId(gen.below(5));
    md.ingress_mac_tstamp_ns = now;
    now += gen.below(20);
    // Runs of one flow (what a NIC burst often is, and what the lookup memos
    // and apply_burst's repeated decisions serve): the previous frame again,
    // from the same port at the same time, or at a later one.
    if (have_last && gen.chance(40)) {
      f = last_f;
      const uint64_t t = md.ingress_mac_tstamp_ns;
      md = last_md;
      if (gen.chance(20)) md.ingress_mac_tstamp_ns = t;
      ++repeats;
    }
    last_f = f;
    last_md = md;
    have_last = true;

    Headers h;
    if (pipeline::parse(f, h) != ParserError::None || h.agq_classic_valid) continue;  // programs' business
    Frame f_fast = f, f_hdr = f, f_ref = f;
    FrameView v;
    pipeline::parse_view(f_fast.data(), f_fast.size(), v);
    const tna::Decision d_fast = fast.apply(f_fast.data(), v, md);

    Headers h2 = h;
    const tna::Decision d_hdr = fast_hdr.apply(h2, md);
    if (d_hdr.kind != tna::Decision::Kind::Drop) pipeline::deparse(h2, f_hdr);

    Headers h3 = h;
    const tna::Decision d_ref = ref.apply(h3, md);
    if (d_ref.kind != tna::Decision::Kind::Drop) pipeline::deparse(h3, f_ref);

    ++kinds[int(d_ref.kind)];
    ASSERT_TRUE(same(d_fast, d_ref)) << "seed " << seed << " frame " << i;
    ASSERT_TRUE(same(d_hdr, d_ref)) << "seed " << seed << " frame " << i;
    ASSERT_EQ(f_fast, f_ref) << "seed " << seed << " frame " << i;
    ASSERT_EQ(f_hdr, f_ref) << "seed " << seed << " frame " << i;
    pending.push_back({f, f_ref, md, d_ref, i});
    if (pending.size() >= burst_target) flush();
    if (::testing::Test::HasFatalFailure()) return;
    if (i % 500 == 0) {
      ASSERT_EQ(mac_table(fast), mac_table(ref)) << "seed " << seed << " frame " << i;
    }
  }
  flush();
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(mac_table(fast_burst), mac_table(ref));
  EXPECT_EQ(counters(fast_burst), counters(ref));
  EXPECT_EQ(s_burst.got, s_ref.got);
  EXPECT_EQ(mac_table(fast), mac_table(ref));
  EXPECT_EQ(mac_table(fast_hdr), mac_table(ref));
  EXPECT_EQ(routes(fast), routes(ref));
  EXPECT_EQ(proxies(fast), proxies(ref));
  EXPECT_EQ(counters(fast), counters(ref));
  EXPECT_EQ(counters(fast_hdr), counters(ref));
  EXPECT_EQ(s_fast.got, s_ref.got);
  EXPECT_EQ(s_hdr.got, s_ref.got);
  if (digests && cfg.learning) {
    EXPECT_FALSE(s_ref.got.empty());
  }
  EXPECT_GT(repeats, 3000u);
  // The trace reached every kind of decision.
  EXPECT_GT(kinds[int(tna::Decision::Kind::Unicast)], 100u);
  EXPECT_GT(kinds[int(tna::Decision::Kind::Multicast)], 100u);
  EXPECT_GT(kinds[int(tna::Decision::Kind::Drop)], 10u);
}

}  // namespace

TEST(ForwardingDifferential, LearningDirectlyEqualsReference) {
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    forwarding_trace(seed, false);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(ForwardingDifferential, LearningByDigestEqualsReference) {
  for (uint64_t seed = 11; seed <= 16; ++seed) {
    forwarding_trace(seed, true);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(FlatTable, ChurnAgainstStdMap) {
  std::mt19937_64 rng(3);
  pipeline::FlatTable<uint32_t> t(100);
  std::map<uint64_t, uint32_t> m;
  for (int i = 0; i < 200000; ++i) {
    // Keys from a small range collide and form clusters across the wrap.
    const uint64_t k = rng() % 300;
    switch (rng() % 3) {
      case 0: {
        const bool want = m.size() < 100 && !m.count(k);
        ASSERT_EQ(t.insert(k, uint32_t(i)), want);
        if (want) m[k] = uint32_t(i);
        break;
      }
      case 1:
        ASSERT_EQ(t.erase(k), m.erase(k) == 1);
        break;
      default: {
        const uint32_t* v = t.find(k);
        auto it = m.find(k);
        ASSERT_EQ(v != nullptr, it != m.end());
        if (v) {
          ASSERT_EQ(*v, it->second);
        }
      }
    }
    ASSERT_EQ(t.size(), m.size());
    // for_each reads the key list, not the slots: after every change it
    // must visit exactly the present entries, each once, with its value
    // (a key list out of step with a backward shift or a swap-remove shows
    // up here, or as an out-of-range slot under ASan).
    if (i % 7 == 0) {
      std::map<uint64_t, uint32_t> seen;
      std::size_t visits = 0;
      t.for_each([&](uint64_t k, uint32_t v) { seen[k] = v, ++visits; });
      ASSERT_EQ(visits, m.size()) << "step " << i;
      ASSERT_EQ(seen, m) << "step " << i;
    }
  }
  std::map<uint64_t, uint32_t> seen;
  t.for_each([&](uint64_t k, uint32_t v) { seen[k] = v; });
  EXPECT_EQ(seen, m);
  EXPECT_EQ(t.remove_if([](uint64_t k, uint32_t) { return k % 2 == 0; }),
            std::size_t(std::count_if(m.begin(), m.end(), [](auto& e) { return e.first % 2 == 0; })));
  std::erase_if(m, [](auto& e) { return e.first % 2 == 0; });
  seen.clear();
  t.for_each([&](uint64_t k, uint32_t v) { seen[k] = v; });
  EXPECT_EQ(seen, m);
  for (const auto& [k, v] : m) EXPECT_NE(t.find(k), nullptr);
  t.clear();
  EXPECT_EQ(t.size(), 0u);
  t.for_each([&](uint64_t, uint32_t) { ADD_FAILURE() << "an entry after clear()"; });
  for (uint64_t k = 0; k < 300; ++k) EXPECT_EQ(t.find(k), nullptr) << k;
  // Full again after clear(): every slot clear() emptied is usable.
  for (uint64_t k = 0; k < 100; ++k) ASSERT_TRUE(t.insert(k * 7, uint32_t(k)));
  EXPECT_FALSE(t.insert(999, 0));
  for (uint64_t k = 0; k < 100; ++k) ASSERT_EQ(*t.find(k * 7), uint32_t(k));
}
