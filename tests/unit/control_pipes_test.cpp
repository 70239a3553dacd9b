// control::Pipes, the control plane's way to the program instances (one per
// lcore): changes reach every instance, reads ask one, counters are summed,
// and with an executor every closure runs on the instance's own thread.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "control/control_plane.hpp"
#include "control/pipes.hpp"
#include "pipeline/classic/classic_program.hpp"
#include "proto/frame.hpp"

namespace agq::control {
namespace {

using pipeline::classic::ClassicConfig;
using pipeline::classic::ClassicProgram;

// Runs instance i's closure on a thread of its own, all at once (as the
// lcores do), and records which instances ran.
class ThreadExecutor : public Executor {
 public:
  void run(const std::vector<unsigned>& which, const std::function<void(unsigned)>& fn) override {
    std::vector<std::thread> ts;
    for (unsigned i : which)
      ts.emplace_back([&fn, i] { fn(i); });
    for (auto& t : ts) t.join();
    ran.insert(ran.end(), which.begin(), which.end());
    ++calls;
  }
  std::vector<unsigned> ran;
  int calls = 0;
};

struct TwoPipes {
  TwoPipes() {
    std::vector<std::unique_ptr<Pipe>> v;
    for (int i = 0; i < 2; ++i) {
      auto p = std::make_unique<Pipe>();
      p->prog = std::make_unique<ClassicProgram>(ClassicConfig{0, {1, 2}, 64}, pipeline::ForwardingConfig{}, p->pre);
      v.push_back(std::move(p));
    }
    pipes = std::make_unique<Pipes>(std::move(v));
  }
  std::unique_ptr<Pipes> pipes;
};

TEST(Pipes, ChangesReachEveryInstanceReadsAskOne) {
  TwoPipes t;
  Pipes& p = *t.pipes;
  ASSERT_EQ(p.count(), 2u);
  EXPECT_TRUE(p.all([](pipeline::SwitchProgram& s) { return s.forwarding().add_route(0x0A000001, 2); }));
  for (unsigned i = 0; i < 2; ++i) {
    int n = 0;
    p.instance(i).forwarding().for_each_route([&](uint32_t ip, tna::PortId port) {
      EXPECT_EQ(ip, 0x0A000001u);
      EXPECT_EQ(port, 2);
      ++n;
    });
    EXPECT_EQ(n, 1) << "instance " << i;
  }
  // The same change again is refused by every instance: instance 0 answers.
  EXPECT_FALSE(p.all([](pipeline::SwitchProgram& s) { return s.forwarding().add_route(0x0A000001, 2); }));
  // on(): one instance only.
  p.on(1, [](pipeline::SwitchProgram& s) { s.forwarding().add_route(0x0A000002, 1); });
  EXPECT_EQ(p.on(0, [](pipeline::SwitchProgram& s) { return s.forwarding().remove_route(0x0A000002); }), false);
  EXPECT_EQ(p.on(1, [](pipeline::SwitchProgram& s) { return s.forwarding().remove_route(0x0A000002); }), true);
  EXPECT_EQ(p.owner(tna::kAnyShard), 0u);
  EXPECT_EQ(p.owner(7), 1u);
  EXPECT_NE(p.pre(1), nullptr);
  EXPECT_NE(p.pre(0), p.pre(1));  // every pipe has its own PRE
}

TEST(Pipes, ExecutorRunsEachInstanceOnItsThreadAndCountersAreSummed) {
  TwoPipes t;
  Pipes& p = *t.pipes;
  ThreadExecutor ex;
  p.set_executor(&ex);
  // One broadcast frame into each instance: fwd_flooded is 1 in each.
  proto::UdpFrameSpec s;
  s.dst_mac = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  s.src_mac = {0x02, 0, 0, 0, 0, 1};
  s.src_port = s.dst_port = 9999;
  const uint8_t payload[8] = {};
  for (unsigned i = 0; i < 2; ++i) {
    auto f = proto::build_udp_frame(s, payload);
    tna::IngressIntrinsicMd md;
    md.ingress_port = 1;
    p.instance(i).process(f, md);
  }
  uint64_t flooded = 0;
  p.visit_counters([&](std::string_view name, uint64_t v) {
    if (name == "fwd_flooded") flooded = v;
  });
  EXPECT_EQ(flooded, 2u);
  EXPECT_EQ(ex.calls, 1);
  EXPECT_EQ(ex.ran.size(), 2u);
  p.all([](pipeline::SwitchProgram& s) { s.clear_counters(); });
  p.visit_counters([&](std::string_view name, uint64_t v) {
    if (name == "fwd_flooded") {
      EXPECT_EQ(v, 0u);
    }
  });
  EXPECT_EQ(ex.calls, 3);
}

// The control plane over two instances: a command changes both.
class NoDataplane : public DataplaneView {
 public:
  std::vector<PortStatsRow> port_stats() override {
    std::vector<PortStatsRow> r;
    for (tna::PortId i = 0; i < 3; ++i) r.push_back({i, "p", "m", true, 0, 0, 0, 0, 0, 0});
    return r;
  }
  void clear_port_stats() override {}
  void visit_counters(const tna::CounterVisitor&) override {}
  void set_sim_drop(tna::PortId, SimDirection, double) override {}
  SimDropRow sim_drop(tna::PortId port) override { return {port, 0, 0, 0, 0}; }
};

TEST(Pipes, ControlCommandsChangeEveryInstance) {
  TwoPipes t;
  NoDataplane dp;
  ControlPlane cp(*t.pipes, dp, "");
  EXPECT_EQ(cp.execute("mac add 02:00:00:00:00:09 2"), "ok\n");
  EXPECT_EQ(cp.execute("arp add 10.0.0.9 02:00:00:00:00:09"), "ok\n");
  for (unsigned i = 0; i < 2; ++i) {
    int macs = 0, arps = 0;
    t.pipes->instance(i).forwarding().for_each_mac([&](const proto::Mac&, const auto&) { ++macs; });
    t.pipes->instance(i).forwarding().for_each_arp_proxy([&](uint32_t, const proto::Mac&) { ++arps; });
    EXPECT_EQ(macs, 1) << i;
    EXPECT_EQ(arps, 1) << i;
  }
  EXPECT_EQ(cp.execute("mac del 02:00:00:00:00:09"), "ok\n");
  EXPECT_NE(cp.execute("mac del 02:00:00:00:00:09").rfind("error: no entry", 0), std::string::npos);
}

// Shared-nothing MAC state: a digest is installed in every instance and
// counted once; each instance refreshes only the entries its own packets hit,
// so ageing removes an entry only when it is idle on every instance, and
// then from every instance (the tables stay equal).
TEST(Pipes, LearnedMacsAreCountedOnceAndAgedOnTheUnionOfTheInstancesViews) {
  TwoPipes t;
  Pipes& p = *t.pipes;
  NoDataplane dp;
  ControlPlane cp(p, dp, "");
  constexpr uint64_t kSecond = 1'000'000'000;
  p.all([](pipeline::SwitchProgram& s) { s.forwarding().set_ageing_ns(5 * kSecond); });
  const tna::MacDigest busy{{0x02, 0, 0, 0, 0, 0xB1}, 1}, idle{{0x02, 0, 0, 0, 0, 0x1D}, 2};
  const uint64_t t0 = 100 * kSecond;
  // The control thread installs both digests in both instances at t0.
  p.all([&](pipeline::SwitchProgram& s) {
    s.forwarding().apply_mac_digest(busy, t0);
    s.forwarding().apply_mac_digest(idle, t0);
  });
  // Station `busy` keeps talking, but only instance 1 sees its packets.
  proto::UdpFrameSpec f;
  f.dst_mac = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  f.src_mac = {0x02, 0, 0, 0, 0, 0xB1};
  f.src_port = f.dst_port = 9999;
  const uint8_t payload[8] = {};
  auto frame = proto::build_udp_frame(f, payload);
  tna::IngressIntrinsicMd md;
  md.ingress_port = 1;
  md.ingress_mac_tstamp_ns = t0 + 8 * kSecond;
  p.instance(1).process(frame, md);
  auto table = [&](unsigned i) {
    std::vector<proto::Mac> macs;
    p.instance(i).forwarding().for_each_mac([&](const proto::Mac& m, const auto&) { macs.push_back(m); });
    std::sort(macs.begin(), macs.end());
    return macs;
  };
  auto counter = [&](std::string_view want) {
    uint64_t v = ~0ull;
    p.visit_counters([&](std::string_view n, uint64_t x) {
      if (n == want) v = x;
    });
    return v;
  };
  EXPECT_EQ(counter("fwd_learned"), 2u);  // not 2 per instance
  EXPECT_EQ(counter("fwd_mac_entries"), 2u);
  EXPECT_EQ(counter("fwd_flooded"), 1u);  // per packet: summed
  // t0 + 10 s: both entries are idle on instance 0; `busy` is fresh on
  // instance 1 (seen 2 s ago), so only `idle` goes, from both instances.
  EXPECT_EQ(cp.age_macs(t0 + 10 * kSecond), 1u);
  const std::vector<proto::Mac> want{{0x02, 0, 0, 0, 0, 0xB1}};
  EXPECT_EQ(table(0), want);
  EXPECT_EQ(table(1), want);
  EXPECT_EQ(counter("fwd_aged"), 1u);
  EXPECT_EQ(counter("fwd_mac_entries"), 1u);
  // t0 + 14 s: `busy` has been idle on instance 1 for 6 s too.
  EXPECT_EQ(cp.age_macs(t0 + 14 * kSecond), 1u);
  EXPECT_TRUE(table(0).empty());
  EXPECT_TRUE(table(1).empty());
  EXPECT_EQ(counter("fwd_aged"), 2u);
  EXPECT_EQ(cp.age_macs(t0 + 20 * kSecond), 0u);
}

// The ageing race: a station idle on every instance when age_macs collects
// the idle entries talks again (on instance 1) before the removal runs. Each
// instance re-checks as it removes: instance 1 keeps the entry, instance 0
// removes it and gets it back, so the station is neither aged nor learned a
// second time, and the tables stay equal.
TEST(Pipes, AStationThatTalksWhileBeingAgedKeepsItsEntryEverywhere) {
  TwoPipes t;
  Pipes& p = *t.pipes;
  constexpr uint64_t kSecond = 1'000'000'000;
  const uint64_t t0 = 100 * kSecond, t_age = t0 + 10 * kSecond;
  const tna::MacDigest busy{{0x02, 0, 0, 0, 0, 0xB1}, 1}, idle{{0x02, 0, 0, 0, 0, 0x1D}, 2};
  proto::UdpFrameSpec f;
  f.dst_mac = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  f.src_mac = {0x02, 0, 0, 0, 0, 0xB1};
  f.src_port = f.dst_port = 9999;
  const uint8_t payload[8] = {};
  auto frame = proto::build_udp_frame(f, payload);
  // Runs every closure on the caller's thread, like lcores that answer at
  // once; before the third one (age_macs' first removal, after both
  // instances reported their idle entries) station `busy` sends a packet
  // that reaches instance 1.
  struct RacingExecutor : Executor {
    Pipes* pipes = nullptr;
    std::vector<uint8_t>* frame = nullptr;
    uint64_t at = 0;
    unsigned calls = 0;
    void run(const std::vector<unsigned>& which, const std::function<void(unsigned)>& fn) override {
      if (++calls == 3) {
        tna::IngressIntrinsicMd md;
        md.ingress_port = 1;
        md.ingress_mac_tstamp_ns = at;
        pipes->instance(1).process(*frame, md);
      }
      for (unsigned i : which) fn(i);
    }
  } ex;
  NoDataplane dp;
  ControlPlane cp(p, dp, "");
  p.all([&](pipeline::SwitchProgram& s) {
    s.forwarding().set_ageing_ns(5 * kSecond);
    s.forwarding().apply_mac_digest(busy, t0);
    s.forwarding().apply_mac_digest(idle, t0);
  });
  ex.pipes = &p;
  ex.frame = &frame;
  ex.at = t_age;
  p.set_executor(&ex);
  auto table = [&](unsigned i) {
    std::vector<proto::Mac> macs;
    p.instance(i).forwarding().for_each_mac([&](const proto::Mac& m, const auto&) { macs.push_back(m); });
    std::sort(macs.begin(), macs.end());
    return macs;
  };
  auto counter = [&](std::string_view want) {
    uint64_t v = ~0ull;
    p.visit_counters([&](std::string_view n, uint64_t x) {
      if (n == want) v = x;
    });
    return v;
  };
  EXPECT_EQ(cp.age_macs(t_age), 1u);  // `idle` only
  ASSERT_GE(ex.calls, 3u);            // the packet went in between
  const std::vector<proto::Mac> want{{0x02, 0, 0, 0, 0, 0xB1}};
  EXPECT_EQ(table(0), want);
  EXPECT_EQ(table(1), want);
  p.set_executor(nullptr);
  EXPECT_EQ(counter("fwd_aged"), 1u);
  EXPECT_EQ(counter("fwd_learned"), 2u);
  EXPECT_EQ(counter("fwd_mac_entries"), 1u);
  for (unsigned i = 0; i < 2; ++i) {
    uint64_t aged = 0;
    p.instance(i).forwarding().visit_counters([&](std::string_view n, uint64_t x) {
      if (n == "fwd_aged") aged = x;
    });
    EXPECT_EQ(aged, 1u) << "instance " << i;  // instance 0's removal of `busy` given back
  }
  // Later, idle everywhere: it goes.
  EXPECT_EQ(cp.age_macs(t_age + 6 * kSecond), 1u);
  EXPECT_TRUE(table(0).empty());
  EXPECT_TRUE(table(1).empty());
  EXPECT_EQ(counter("fwd_aged"), 2u);
}

}  // namespace
}  // namespace agq::control
