// control::Pipes, the control plane's way to the program instances (one per
// lcore): changes reach every instance, reads ask one, counters are summed,
// and with an executor every closure runs on the instance's own thread.
#include <gtest/gtest.h>

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
    if (name == "fwd_flooded") EXPECT_EQ(v, 0u);
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

}  // namespace
}  // namespace agq::control
