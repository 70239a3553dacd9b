// The agq worker and PS engines end to end through the switch's real
// AgqProgram (process + PRE + per-replica egress), in one process with
// simulated time: 2-4 workers, two concurrent jobs on the same switch,
// random loss of any packet, duplicated deliveries, memory pressure (narrow
// max_width), no memory at all (every sequence falls back to the PS),
// delivery = ps, and OVERFLOW redo. Every result is checked bit for bit by
// every worker (AgqVerifier), so "passes" means exact.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <random>

#include "lib/agq_ps_engine.hpp"
#include "lib/agq_worker_engine.hpp"
#include "pipeline/agq/agq_program.hpp"

using namespace agq;
using namespace agq::worker;
namespace pa = agq::pipeline::agq;

namespace {

// Ports: job j's PS on 100 * j, its worker w on 100 * j + 1 + w.
class Fabric {
 public:
  struct Sink final : TxSink {
    std::deque<std::vector<uint8_t>> q;
    bool send(uint16_t, std::span<const uint8_t> f) override {
      q.emplace_back(f.begin(), f.end());
      return true;
    }
  };
  struct Job {
    AgqJobSpec spec;
    std::unique_ptr<AgqPsEngine> ps;
    std::vector<std::unique_ptr<AgqWorkerEngine>> workers;
    std::vector<AgqWorkerConfig> cfgs;
  };

  explicit Fabric(pa::AgqConfig cfg = {256, 4096}) : prog_(cfg, pipeline::ForwardingConfig{}, pre_) {}

  static tna::PortId ps_port(uint16_t j) { return tna::PortId(100 * j); }
  static tna::PortId worker_port(uint16_t j, unsigned w) { return tna::PortId(100 * j + 1 + w); }

  // Registers the job on the switch (addresses = the workers' defaults) and
  // prepares its engines; call start() after adjusting cfgs.
  Job& add_job(const AgqJobSpec& s, uint8_t max_width = 32, pa::ResultDelivery d = pa::ResultDelivery::Multicast) {
    pa::JobSpec j;
    j.job_id = s.job_id;
    j.num_workers = s.num_workers;
    for (unsigned w = 0; w < s.num_workers; ++w) {
      const Endpoint e = agq_worker_endpoint(s.job_id, w);
      j.workers.push_back({uint8_t(w), worker_port(s.job_id, w), e.ip, e.mac});
    }
    j.slots = s.slots;
    j.rows = s.rows;
    j.delivery = d;
    j.ps_port = ps_port(s.job_id);
    j.ps_ipv4 = agq_ps_endpoint(s.job_id).ip;
    j.ps_mac = agq_ps_endpoint(s.job_id).mac;
    j.max_width = max_width;
    const auto err = prog_.add_job(j);
    EXPECT_FALSE(err.has_value()) << *err;
    Job& job = jobs_[s.job_id];
    job.spec = s;
    for (unsigned w = 0; w < s.num_workers; ++w) {
      AgqWorkerConfig c;
      c.job = s;
      c.ids = {w};
      c.ports = {0};
      c.log = stdout;
      job.cfgs.push_back(c);
    }
    return job;
  }
  void start() {
    for (auto& [id, job] : jobs_) {
      std::string err;
      job.ps = std::make_unique<AgqPsEngine>();
      ASSERT_TRUE(job.ps->init({job.spec, 0}, err)) << err;
      for (auto& c : job.cfgs) {
        job.workers.push_back(std::make_unique<AgqWorkerEngine>());
        ASSERT_TRUE(job.workers.back()->init(c, err)) << err;
      }
    }
  }

  void step() {
    for (auto& [id, job] : jobs_) {
      job.ps->tick(now, sinks_[ps_port(id)]);
      for (unsigned w = 0; w < job.workers.size(); ++w) job.workers[w]->tick(now, sinks_[worker_port(id, w)]);
    }
    for (auto& [port, sink] : sinks_)
      while (!sink.q.empty()) {
        auto f = std::move(sink.q.front());
        sink.q.pop_front();
        if (lose()) continue;  // lost before the switch
        tna::IngressIntrinsicMd md;
        md.ingress_port = port;
        const tna::Decision d = prog_.process(f, md);
        if (d.kind == tna::Decision::Kind::Unicast) deliver(d.port, f);
        if (d.kind == tna::Decision::Kind::Multicast)
          for (const tna::Replica& r : pre_.members(d.group)) {
            std::vector<uint8_t> rep = f;
            prog_.egress(rep, r.port, r.rid);
            deliver(r.port, rep);
          }
      }
    now += 1'000'000;  // 1 ms per step
  }

  bool run(unsigned max_steps) {
    for (unsigned i = 0; i < max_steps; ++i) {
      bool all = true;
      for (auto& [id, job] : jobs_)
        for (auto& w : job.workers) {
          if (w->failed()) return false;
          all &= w->finished();
        }
      if (all) return true;
      step();
    }
    return false;
  }

  uint64_t counter(std::string_view name) const {
    uint64_t v = 0;
    prog_.visit_counters([&](std::string_view n, uint64_t x) { if (n == name) v = x; });
    return v;
  }

  void dump_counters() const {
    prog_.visit_counters([](std::string_view n, uint64_t x) {
      if (x) std::printf("  %.*s %llu\n", int(n.size()), n.data(), (unsigned long long)x);
    });
  }

  double loss = 0, dup = 0;
  uint64_t now = 1'000'000'000ull;
  std::map<uint16_t, Job> jobs_;

 private:
  bool lose() { return loss > 0 && std::bernoulli_distribution(loss)(rng_); }
  void deliver(tna::PortId port, const std::vector<uint8_t>& f) {
    if (lose()) return;  // lost after the switch
    const int copies = dup > 0 && std::bernoulli_distribution(dup)(rng_) ? 2 : 1;
    for (auto& [id, job] : jobs_) {
      for (int c = 0; c < copies; ++c) {
        if (port == ps_port(id)) job.ps->on_frame(0, f, now);
        for (unsigned w = 0; w < job.workers.size(); ++w)
          if (port == worker_port(id, w)) job.workers[w]->on_frame(0, f, now);
      }
    }
  }
  tna::ReplicationEngine pre_;
  pa::AgqProgram prog_;
  std::map<tna::PortId, Sink> sinks_;
  std::mt19937 rng_{11};
};

AgqJobSpec spec(uint16_t id, unsigned n, uint64_t elements, uint32_t slots, uint32_t rows, uint32_t rounds = 2) {
  AgqJobSpec s;
  s.job_id = id;
  s.num_workers = uint8_t(n);
  s.elements = elements;
  s.slots = slots;
  s.rows = rows;
  s.rounds = rounds;
  return s;
}

void expect_exact(const Fabric::Job& job) {
  const uint64_t chunks = job.spec.chunks() * job.spec.rounds;
  for (auto& w : job.workers) {
    EXPECT_FALSE(w->failed()) << w->diagnostic();
    EXPECT_TRUE(w->finished());
    EXPECT_EQ(w->stats().mismatches, 0u);
    EXPECT_EQ(w->stats().bad_header, 0u);
    EXPECT_EQ(w->stats().exact, w->stats().results);
    EXPECT_EQ(w->counters().chunks_done, chunks);
    EXPECT_LE(w->stats().error.max_over_bound, 1.0 + 1e-9);
    EXPECT_EQ(w->aggregate(), job.workers[0]->aggregate());  // every worker holds the same tensor
  }
}

}  // namespace

TEST(AgqWorkerProtocol, TwoToFourWorkersExact) {
  for (unsigned n : {2u, 3u, 4u}) {
    Fabric f;
    f.add_job(spec(1, n, 32 * 150 + 7, 32, 16, 3));  // 2 slots per row: 2 x 16 bits fit a cell
    f.start();
    ASSERT_TRUE(f.run(20000)) << n;
    expect_exact(f.jobs_[1]);
    const AgqStats& s = f.jobs_[1].workers[0]->stats();
    // A chunk whose budget asks R > 16 finds only the 16 bits its row
    // neighbour left: min_width = R (PROTOCOL.md §5) makes it a fallback
    // (exact at the PS), never a narrower grant. Rare at this budget.
    EXPECT_LE(s.fallbacks, s.seqs / 20) << n;
    // The PS's answer to a fallback comes a round trip later than a
    // switch RESULT: at most one retransmission each (none otherwise).
    EXPECT_LE(s.retransmissions, s.fallbacks) << n;
    EXPECT_GE(s.row_seqs_max, 2u) << "slots of a row share its cells";
    EXPECT_EQ(f.counter("agq_results") + s.fallbacks, s.seqs) << n;
  }
}

TEST(AgqWorkerProtocol, TwoConcurrentJobsWithLossAndDuplicates) {
  for (double loss : {0.01, 0.1}) {
    Fabric f;
    f.loss = loss;
    f.dup = 0.05;
    f.add_job(spec(1, 2, 32 * 120, 32, 8));
    f.add_job(spec(2, 3, 32 * 90, 16, 4), 16);  // memory pressure: at most 16 bits
    for (auto& c : f.jobs_[2].cfgs) c.source = "laplace:0.5";
    f.start();
    ASSERT_TRUE(f.run(200000)) << "loss " << loss;
    expect_exact(f.jobs_[1]);
    expect_exact(f.jobs_[2]);
    EXPECT_LE(f.jobs_[2].workers[0]->stats().avg_granted_bits(), 16.0);
    uint64_t retx = 0;
    for (auto& [id, job] : f.jobs_)
      for (auto& w : job.workers) retx += w->stats().retransmissions;
    EXPECT_GT(retx, 0u);
    EXPECT_GT(f.counter("agq_result_resent") + f.counter("agq_duplicate"), 0u);
  }
}

TEST(AgqWorkerProtocol, NoMemoryFallsBackToThePs) {
  Fabric f;
  f.loss = 0.05;
  // N = 5: g = 3, and max_width 4 leaves 1 value bit < w_min: no window is ever granted.
  f.add_job(spec(1, 5, 32 * 40, 8, 2), 4);
  f.start();
  ASSERT_TRUE(f.run(100000)) << f.jobs_[1].workers[0]->diagnostic();
  expect_exact(f.jobs_[1]);
  const AgqStats& s = f.jobs_[1].workers[0]->stats();
  EXPECT_EQ(s.fallbacks, s.seqs);
  EXPECT_EQ(f.jobs_[1].ps->stats().sequences, s.seqs);
  EXPECT_GT(f.counter("agq_fallback"), 0u);
}

TEST(AgqWorkerProtocol, DeliveryToThePs) {
  Fabric f;
  f.loss = 0.02;
  f.add_job(spec(1, 2, 32 * 60, 16, 4), 32, pa::ResultDelivery::Ps);
  f.start();
  ASSERT_TRUE(f.run(100000)) << f.jobs_[1].workers[0]->diagnostic();
  expect_exact(f.jobs_[1]);
  EXPECT_GT(f.jobs_[1].ps->stats().relayed, 0u);
}

TEST(AgqWorkerProtocol, OverflowRedone) {
  Fabric f;
  f.add_job(spec(1, 2, 32 * 40, 8, 2, 1));
  for (auto& c : f.jobs_[1].cfgs) c.init_scale = 0.25;
  f.start();
  const bool ok = f.run(20000);
  if (!ok) {
    f.dump_counters();
    const auto& ps = f.jobs_[1].ps->stats();
    std::printf("ps: fb %llu dup %llu seqs %llu res %llu resent %llu bad %llu\n", (unsigned long long)ps.fallback_data,
                (unsigned long long)ps.duplicates, (unsigned long long)ps.sequences, (unsigned long long)ps.ps_results,
                (unsigned long long)ps.resent, (unsigned long long)ps.bad);
  }
  ASSERT_TRUE(ok) << f.jobs_[1].workers[0]->diagnostic() << f.jobs_[1].workers.size();
  expect_exact(f.jobs_[1]);
  const AgqStats& s = f.jobs_[1].workers[0]->stats();
  EXPECT_GT(s.redos, 0u);
  EXPECT_EQ(s.error.clipped, 0u);
  EXPECT_GT(f.counter("agq_overflow"), 0u);
}
