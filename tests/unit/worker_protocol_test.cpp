// The worker and PS engines end to end through the switch's real classic
// pipeline, in one process with simulated time: exact results, several
// logical workers behind one port, and the recoveries the classic protocol
// allows (lost contribution, lost ACK, a worker replaced by a --join worker),
// plus the "no reply" diagnostic.
#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <map>

#include "lib/ps_engine.hpp"
#include "lib/worker_engine.hpp"
#include "pipeline/classic/classic_program.hpp"

using namespace agq;
using namespace agq::worker;

namespace {

// Port 0 = PS, port 1.. = one worker engine each.
class Fabric {
 public:
  struct Sink final : TxSink {
    std::deque<std::pair<uint16_t, std::vector<uint8_t>>> q;
    uint16_t switch_port = 0;
    bool send(uint16_t, std::span<const uint8_t> f) override {
      q.emplace_back(switch_port, std::vector<uint8_t>(f.begin(), f.end()));
      return true;
    }
  };

  Fabric(const JobSpec& job, unsigned worker_ports)
      : prog_(make_cfg(worker_ports), pipeline::ForwardingConfig{}, pre_) {
    ps_cfg.job = job;
    ps_cfg.assume_fresh_switch = true;
    ps_cfg.retry_ns = 1'000'000'000ull;
    ps_cfg.log = stdout;
  }

  static pipeline::classic::ClassicConfig make_cfg(unsigned n) {
    pipeline::classic::ClassicConfig c;
    c.ps_port = 0;
    for (unsigned i = 1; i <= n; ++i) c.worker_ports.push_back(tna::PortId(i));
    return c;
  }

  void start_ps() {
    std::string err;
    ASSERT_TRUE(ps.init(ps_cfg, err)) << err;
  }
  WorkerEngine& add_worker(uint16_t sw_port, std::vector<unsigned> ids, bool join = false) {
    WorkerConfig c;
    c.job = ps_cfg.job;
    c.ids = ids;
    c.ports.assign(ids.size(), 0);
    c.join = join;
    c.reply_timeout_ns = 5'000'000'000ull;
    auto w = std::make_unique<WorkerEngine>();
    std::string err;
    EXPECT_TRUE(w->init(c, err)) << err;
    workers[sw_port] = std::move(w);
    sinks[sw_port].switch_port = sw_port;
    return *workers[sw_port];
  }

  // One round: every engine ticks, every frame crosses the switch.
  void step() {
    ps_sink.switch_port = 0;
    ps.tick(now, ps_sink);
    for (auto& [port, w] : workers)
      if (w) w->tick(now, sinks[port]);
    pump(ps_sink);
    for (auto& [port, s] : sinks) pump(s);
    now += 100'000;  // 100 us per round
  }

  bool run(uint64_t max_rounds, std::function<bool()> done) {
    for (uint64_t i = 0; i < max_rounds; ++i) {
      if (done()) return true;
      step();
    }
    return done();
  }

  std::function<bool(uint16_t from, uint16_t to, const RxPacket&)> drop;  // loss injection
  PsConfig ps_cfg;
  PsEngine ps;
  std::map<uint16_t, std::unique_ptr<WorkerEngine>> workers;
  uint64_t now = 1'000'000'000ull;

 private:
  void deliver(uint16_t from, uint16_t to, const std::vector<uint8_t>& f) {
    if (drop && drop(from, to, classify(f))) return;
    if (to == 0)
      ps.on_frame(0, f, now);
    else if (workers.count(to) && workers[to])
      workers[to]->on_frame(0, f, now);
  }
  void pump(Sink& s) {
    while (!s.q.empty()) {
      auto [port, f] = std::move(s.q.front());
      s.q.pop_front();
      if (drop && drop(port, 0xFFFF, classify(f))) continue;  // lost before the switch
      tna::IngressIntrinsicMd md;
      md.ingress_port = port;
      const tna::Decision d = prog_.process(f, md);
      if (d.kind == tna::Decision::Kind::Unicast) deliver(port, d.port, f);
      if (d.kind == tna::Decision::Kind::Multicast)
        for (tna::PortId p : pre_.member_ports(d.group))
          if (p != d.exclude_port) deliver(port, p, f);
    }
  }

  tna::ReplicationEngine pre_;
  pipeline::classic::ClassicProgram prog_;
  Sink ps_sink;
  std::map<uint16_t, Sink> sinks;
};

JobSpec small_job(unsigned workers, uint64_t elements = 4000, uint32_t window = 64) {
  JobSpec j;
  j.total_workers = uint8_t(workers);
  j.elements = elements;
  j.window = window;
  return j;
}

bool all_done(Fabric& f) {
  for (auto& [p, w] : f.workers)
    if (w && !w->finished()) return false;
  return f.ps.finished();
}

}  // namespace

TEST(WorkerProtocol, TwoWorkersExactThroughTheClassicPipeline) {
  Fabric f(small_job(2), 2);
  f.start_ps();
  f.add_worker(1, {0});
  f.add_worker(2, {1});
  ASSERT_TRUE(f.run(100000, [&] { return all_done(f); }));
  const auto& v = f.ps.verify_stats();
  EXPECT_EQ(v.checked, 1000u);
  EXPECT_EQ(v.exact, 1000u);
  EXPECT_EQ(v.mismatches, 0u);
  EXPECT_EQ(v.resyncs, 0u);
  EXPECT_GT(v.width_hist[8], 0u);  // 32-bit windows (p = 0)
  EXPECT_GT(v.width_hist[1], 0u);  // ... and the cursor's 4-bit ones (p = 7)
  EXPECT_EQ(f.ps.counters().retries, 0u);
  EXPECT_LE(v.exact_results.max_over_bound, 1.0);
}

TEST(WorkerProtocol, FourLogicalWorkersBehindOnePort) {
  Fabric f(small_job(4, 2000, 128), 2);
  f.start_ps();
  f.add_worker(1, {0, 2});
  f.add_worker(2, {1, 3});
  ASSERT_TRUE(f.run(100000, [&] { return all_done(f); }));
  EXPECT_EQ(f.ps.verify_stats().exact, 500u);
  EXPECT_EQ(f.ps.verify_stats().mismatches, 0u);
}

TEST(WorkerProtocol, LostContributionIsRecoveredByThePsRetry) {
  Fabric f(small_job(2), 2);
  int dropped = 0;
  f.drop = [&](uint16_t from, uint16_t to, const RxPacket& r) {
    if (to == 0xFFFF && from == 2 && r.chunk == 70 && r.kind == Kind::Contribution && !dropped) return ++dropped > 0;
    return false;
  };
  f.start_ps();
  f.add_worker(1, {0});
  f.add_worker(2, {1});
  ASSERT_TRUE(f.run(200000, [&] { return all_done(f); }));
  EXPECT_EQ(dropped, 1);
  EXPECT_EQ(f.ps.verify_stats().exact, 1000u);
  EXPECT_EQ(f.ps.verify_stats().mismatches, 0u);
  EXPECT_GE(f.ps.counters().retries, 1u);
  EXPECT_EQ(f.workers[1]->counters().retransmissions, 1u);  // worker 0 had been counted: sends again
}

TEST(WorkerProtocol, LostAckToOneWorkerIsRecovered) {
  Fabric f(small_job(2), 2);
  int dropped = 0;
  f.drop = [&](uint16_t, uint16_t to, const RxPacket& r) {
    if (to == 1 && r.chunk == 5 && r.kind == Kind::Ack && !dropped) return ++dropped > 0;
    return false;
  };
  f.start_ps();
  f.add_worker(1, {0});
  f.add_worker(2, {1});
  ASSERT_TRUE(f.run(200000, [&] { return all_done(f); }));
  EXPECT_EQ(dropped, 1);
  EXPECT_EQ(f.ps.verify_stats().exact, 1000u);
  EXPECT_EQ(f.ps.verify_stats().mismatches, 0u);
}

TEST(WorkerProtocol, KilledWorkerReplacedByAJoiningWorker) {
  Fabric f(small_job(2, 8000), 2);
  f.start_ps();
  f.add_worker(1, {0});
  f.add_worker(2, {1});
  ASSERT_TRUE(f.run(100000, [&] { return f.ps.counters().chunks_done >= 300; }));
  f.workers[2].reset();  // killed: whatever it had sent stays counted in the switch
  f.run(50, [] { return false; });
  f.add_worker(2, {1}, /*join=*/true);
  ASSERT_TRUE(f.run(400000, [&] { return all_done(f); }));
  EXPECT_EQ(f.ps.verify_stats().checked, 2000u);
  EXPECT_EQ(f.ps.verify_stats().mismatches, 0u);
  EXPECT_GE(f.ps.counters().retries, 1u);
}

TEST(WorkerProtocol, NoSwitchGivesADiagnostic) {
  JobSpec j = small_job(2);
  WorkerConfig c;
  c.job = j;
  c.port_names = {"net_memif0"};
  c.reply_timeout_ns = 1'000'000'000ull;
  WorkerEngine w;
  std::string err;
  ASSERT_TRUE(w.init(c, err)) << err;
  Fabric::Sink nowhere;
  uint64_t t = 1;
  for (; t < 3'000'000'000ull && !w.failed(); t += 10'000'000ull) w.tick(t, nowhere);
  ASSERT_TRUE(w.failed());
  EXPECT_NE(w.diagnostic().find("no reply from the switch on port 0 (net_memif0) after 1.0 s"), std::string::npos)
      << w.diagnostic();
  EXPECT_EQ(w.failure_code(), 3);
}

TEST(WorkerProtocol, PackedWindowsAreClassifiedNotFailed) {
  JobSpec j = small_job(2, 4000, 64);
  j.seqs_per_agg = 8;
  Fabric f(j, 2);
  f.start_ps();
  f.add_worker(1, {0});
  f.add_worker(2, {1});
  ASSERT_TRUE(f.run(100000, [&] { return all_done(f); }));
  const auto& v = f.ps.verify_stats();
  EXPECT_EQ(v.checked, 1000u);
  EXPECT_EQ(v.mismatches, 0u);
  EXPECT_EQ(v.exact + v.order_dependent, 1000u);
}
