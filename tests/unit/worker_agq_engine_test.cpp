// The agq worker and PS engines end to end through a small reference switch
// written from docs/PROTOCOL.md §4 (bitmap dedup, count, kept result,
// fallback to the PS, a grant cap for memory pressure). It checks the
// workers' side of the protocol independently of the real AgqProgram
// (worker_agq_protocol_test.cpp runs the same engines through that one):
// exact results over several rounds with adaptive widths, loss of any packet
// kind, duplicates, partial grants, fallback, overflow redo, no hang.
#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <map>
#include <random>

#include "lib/agq_ps_engine.hpp"
#include "lib/agq_worker_engine.hpp"

using namespace agq;
using namespace agq::worker;

namespace {

// One job; port 0 = PS, port 1 + w = worker w.
class ModelSwitch {
 public:
  ModelSwitch(const AgqJobSpec& job, int grant_cap) : job_(job), cap_(grant_cap), g_(agqc::guard_bits(job.num_workers)) {
    st_.resize(size_t(job.slots) * 2);
  }
  // Returns (port, frame) pairs to deliver.
  std::vector<std::pair<uint16_t, proto::Agq>> process(uint16_t in_port, const proto::Agq& h) {
    std::vector<std::pair<uint16_t, proto::Agq>> out;
    if (h.type == proto::AgqType::PsResult) {
      if (h.flags & proto::kAgqFlagRetransmit)
        out.push_back({uint16_t(1 + h.worker_id), as_result(h, h.worker_id)});
      else
        for (unsigned w = 0; w < job_.num_workers; ++w) out.push_back({uint16_t(1 + w), as_result(h, w)});
      return out;
    }
    if (h.type != proto::AgqType::Data || in_port != 1 + h.worker_id) return out;
    S& s = st_[size_t(h.slot) * 2 + h.version_bit()];
    S& other = st_[size_t(h.slot) * 2 + (h.version_bit() ^ 1)];
    const uint32_t bit = 1u << h.worker_id;
    const bool seen = s.bitmap & bit;
    s.bitmap |= bit;
    other.bitmap &= ~bit;
    if (!seen) {
      s.count = s.count == job_.num_workers ? 1 : s.count + 1;
      if (s.count == 1) {  // first: allocate (no occupancy model: the cap plays memory pressure)
        min_widths.push_back(h.width);
        // min_width (the DATA's width byte): a grant is at least it or the PS's
        // (ignore_min_width: a misbehaving switch that grants the cap anyway).
        s.width = std::min<int>(h.req_width, cap_);
        s.fallback = s.width - g_ < 2 || (!ignore_min_width && s.width < h.width);
        s.overflow = false;
        s.lanes.fill(0);
        s.hdr = h;
        s.bitmap = bit;
      }
      s.overflow |= (h.flags & proto::kAgqFlagOverflow) != 0;
    }
    if (s.fallback) {
      proto::Agq f = h;
      f.type = proto::AgqType::FallbackData;
      out.push_back({0, f});
      return out;
    }
    if (!seen) {
      const int d = h.req_width - s.width;
      const uint32_t mask = uint32_t((uint64_t(1) << (s.width - g_)) - 1);
      for (int k = 0; k < kAgqLanes; ++k) s.lanes[k] += (h.lanes[k] >> d) & mask;
      if (s.count == job_.num_workers)
        for (unsigned w = 0; w < job_.num_workers; ++w) out.push_back({uint16_t(1 + w), result(s, w)});
    } else if (s.count == job_.num_workers) {
      out.push_back({uint16_t(1 + h.worker_id), result(s, h.worker_id)});
      ++resent;
    }
    return out;
  }
  uint64_t resent = 0;
  bool ignore_min_width = false;
  std::vector<int> min_widths;  // the width byte of every first DATA of a use

 private:
  struct S {
    uint32_t bitmap = 0;
    unsigned count = 0;
    int width = 0;
    bool fallback = false, overflow = false;
    std::array<uint32_t, kAgqLanes> lanes{};
    proto::Agq hdr;
  };
  proto::Agq result(const S& s, unsigned w) const {
    proto::Agq r = s.hdr;
    r.type = proto::AgqType::Result;
    r.flags = uint8_t(s.hdr.version_bit() | (s.overflow ? proto::kAgqFlagOverflow : 0));
    r.worker_id = uint8_t(w);
    r.width = uint8_t(s.width);
    r.pos = uint8_t((32 - s.width) / 4);
    r.guard = uint8_t(g_);
    for (int k = 0; k < kAgqLanes; ++k) r.lanes[k] = s.lanes[k];
    return r;
  }
  proto::Agq as_result(const proto::Agq& h, unsigned w) const {
    proto::Agq r = h;
    r.type = proto::AgqType::Result;
    r.worker_id = uint8_t(w);
    return r;
  }
  AgqJobSpec job_;
  int cap_, g_;
  std::vector<S> st_;
};

struct Rig {
  struct Sink final : TxSink {
    std::deque<std::vector<uint8_t>> q;
    bool send(uint16_t, std::span<const uint8_t> f) override {
      q.emplace_back(f.begin(), f.end());
      return true;
    }
  };
  Rig(const AgqJobSpec& job, int cap, std::string source = "normal") : sw(job, cap) {
    AgqPsConfig pc;
    pc.job = job;
    std::string err;
    EXPECT_TRUE(ps.init(pc, err)) << err;
    for (unsigned w = 0; w < job.num_workers; ++w) {
      AgqWorkerConfig c;
      c.job = job;
      c.source = source;
      c.ids = {w};
      c.ports = {0};
      c.log = stdout;
      cfgs.push_back(c);
    }
    sinks.resize(job.num_workers + 1);
  }
  void start() {
    for (auto& c : cfgs) {
      workers.push_back(std::make_unique<AgqWorkerEngine>());
      std::string err;
      ASSERT_TRUE(workers.back()->init(c, err)) << err;
    }
  }
  void step() {
    ps.tick(now, sinks[0]);
    for (size_t w = 0; w < workers.size(); ++w) workers[w]->tick(now, sinks[1 + w]);
    for (uint16_t p = 0; p < sinks.size(); ++p)
      while (!sinks[p].q.empty()) {
        auto f = std::move(sinks[p].q.front());
        sinks[p].q.pop_front();
        const auto h = parse_agq(f);
        ASSERT_TRUE(h.has_value());
        if (drop && drop(p, *h)) continue;
        for (auto& [to, o] : sw.process(p, *h)) {
          if (drop && drop(to, o)) continue;
          std::vector<uint8_t> buf(kAgqDataFrameLen);
          agq_frame_template(agq_ps_endpoint(1), agq_worker_endpoint(1, 0)).write(o, buf.data());
          if (to == 0)
            ps.on_frame(0, buf, now);
          else
            workers[to - 1]->on_frame(0, buf, now);
          if (dup && dup(to, o)) {  // deliver twice
            if (to == 0) ps.on_frame(0, buf, now); else workers[to - 1]->on_frame(0, buf, now);
          }
        }
      }
    now += 1'000'000;  // 1 ms per step
  }
  bool run(unsigned max_steps) {
    for (unsigned i = 0; i < max_steps; ++i) {
      bool all = true, any_fail = false;
      for (auto& w : workers) {
        all &= w->finished();
        any_fail |= w->failed();
      }
      if (all || any_fail) return all;
      step();
    }
    return false;
  }
  ModelSwitch sw;
  AgqPsEngine ps;
  std::vector<AgqWorkerConfig> cfgs;
  std::vector<std::unique_ptr<AgqWorkerEngine>> workers;
  std::vector<Sink> sinks;
  std::function<bool(uint16_t, const proto::Agq&)> drop, dup;
  uint64_t now = 1'000'000'000ull;
};

AgqJobSpec job(unsigned n, uint64_t elements, uint32_t slots, uint32_t rounds) {
  AgqJobSpec j;
  j.num_workers = uint8_t(n);
  j.elements = elements;
  j.slots = slots;
  j.rounds = rounds;
  j.rows = slots / 4;
  return j;
}

void expect_all_exact(const Rig& r, uint64_t chunks_per_worker) {
  for (auto& w : r.workers) {
    EXPECT_FALSE(w->failed()) << w->diagnostic();
    EXPECT_TRUE(w->finished());
    EXPECT_EQ(w->stats().mismatches, 0u);
    EXPECT_EQ(w->stats().bad_header, 0u);
    EXPECT_EQ(w->counters().chunks_done, chunks_per_worker);
    EXPECT_LE(w->stats().error.max_over_bound, 1.0 + 1e-9);
  }
}

}  // namespace

TEST(AgqWorkerEngine, ExactOverRoundsWithAdaptiveWidths) {
  for (unsigned n : {2u, 3u, 4u}) {
    Rig r(job(n, 32 * 100 + 5, 16, 3), 32);
    r.start();
    ASSERT_TRUE(r.run(5000)) << r.workers[0]->diagnostic();
    expect_all_exact(r, 101 * 3);
    const AgqStats& s = r.workers[0]->stats();
    EXPECT_EQ(s.rounds_done, 3u);
    EXPECT_EQ(s.retransmissions, 0u);
    EXPECT_EQ(s.fallbacks, 0u);
    // Round 0 asked for --init-width (16) everywhere; later rounds chose by
    // the error budget (normal data, 1e-3: mostly 16 bits, some 12).
    EXPECT_EQ(s.round_granted_sum[0], 16u * 101);
    EXPECT_GT(s.round_seqs[1], 0u);
    // Every worker holds the same aggregate.
    for (auto& w : r.workers) EXPECT_EQ(w->aggregate(), r.workers[0]->aggregate());
  }
}

TEST(AgqWorkerEngine, BudgetDrivesWidth) {
  Rig loose(job(2, 32 * 64, 16, 2), 32), tight(job(2, 32 * 64, 16, 2), 32);
  for (auto& c : loose.cfgs) c.error_budget = 1e-2;
  for (auto& c : tight.cfgs) c.error_budget = 1e-5;
  loose.start();
  tight.start();
  ASSERT_TRUE(loose.run(3000));
  ASSERT_TRUE(tight.run(3000));
  expect_all_exact(loose, 128);
  expect_all_exact(tight, 128);
  const auto avg1 = [](const AgqStats& s) { return double(s.round_granted_sum[1]) / double(s.round_seqs[1]); };
  EXPECT_LT(avg1(loose.workers[0]->stats()), 12.5);
  EXPECT_GT(avg1(tight.workers[0]->stats()), 20.0);
}

TEST(AgqWorkerEngine, LossOfEveryKindIsRecovered) {
  Rig r(job(3, 32 * 200, 32, 2), 32);
  std::mt19937 rng(3);
  std::bernoulli_distribution lose(0.1);
  r.drop = [&](uint16_t, const proto::Agq&) { return lose(rng); };
  r.start();
  ASSERT_TRUE(r.run(60000)) << r.workers[0]->diagnostic();
  expect_all_exact(r, 400);
  uint64_t retx = 0;
  for (auto& w : r.workers) retx += w->stats().retransmissions;
  EXPECT_GT(retx, 0u);
  EXPECT_GT(r.sw.resent, 0u);  // a lost RESULT came back from the kept copy
}

TEST(AgqWorkerEngine, DuplicatesAreHarmless) {
  Rig r(job(2, 32 * 50, 8, 2), 32);
  r.dup = [](uint16_t, const proto::Agq&) { return true; };
  r.start();
  ASSERT_TRUE(r.run(5000));
  expect_all_exact(r, 100);
  EXPECT_GT(r.workers[0]->stats().duplicate_results, 0u);
}

TEST(AgqWorkerEngine, PartialGrantDecodesExactly) {
  Rig r(job(4, 32 * 40, 8, 2), 8);  // the switch grants at most 8 bits
  for (auto& c : r.cfgs) c.min_width_slack = 8;  // ... which min_width = 16 - 8 accepts
  r.start();
  ASSERT_TRUE(r.run(5000));
  expect_all_exact(r, 80);
  EXPECT_DOUBLE_EQ(r.workers[0]->stats().avg_granted_bits(), 8.0);
  EXPECT_GT(r.workers[0]->stats().error.max_abs, 0.0);
}

TEST(AgqWorkerEngine, FallbackThroughThePsWithLoss) {
  Rig r(job(3, 32 * 60, 8, 2), 0);  // no memory at all: everything goes to the PS
  std::mt19937 rng(5);
  std::bernoulli_distribution lose(0.05);
  r.drop = [&](uint16_t, const proto::Agq&) { return lose(rng); };
  r.start();
  ASSERT_TRUE(r.run(60000)) << r.workers[0]->diagnostic();
  expect_all_exact(r, 120);
  // Every sequence (120 chunks, plus any OVERFLOW redo) was summed by the PS.
  EXPECT_EQ(r.workers[0]->stats().fallbacks, r.workers[0]->stats().seqs);
  EXPECT_EQ(r.ps.stats().sequences, r.workers[0]->stats().seqs);
  EXPECT_EQ(r.workers[0]->stats().seqs, 120u + r.workers[0]->stats().redos);
  EXPECT_GT(r.ps.stats().resent + r.ps.stats().duplicates, 0u);
}

TEST(AgqWorkerEngine, OverflowIsRedoneWithALargerExponent) {
  Rig r(job(2, 32 * 30, 8, 1), 32);
  for (auto& c : r.cfgs) c.init_scale = 0.25;  // normal(1) data clips at first
  r.start();
  ASSERT_TRUE(r.run(5000));
  expect_all_exact(r, 30);
  const AgqStats& s = r.workers[0]->stats();
  EXPECT_GT(s.overflow_results, 0u);
  EXPECT_GT(s.redos, 0u);
  EXPECT_EQ(s.error.clipped, 0u);  // the final results are unclipped
}

TEST(AgqWorkerEngine, NoSwitchFailsWithADiagnostic) {
  Rig r(job(2, 320, 4, 1), 32);
  for (auto& c : r.cfgs) {
    c.max_retries = 3;
    c.reply_timeout_ns = 50'000'000ull;
  }
  r.drop = [](uint16_t, const proto::Agq&) { return true; };
  r.start();
  EXPECT_FALSE(r.run(2000));
  EXPECT_TRUE(r.workers[0]->failed());
  EXPECT_EQ(r.workers[0]->failure_code(), 3);
  EXPECT_NE(r.workers[0]->diagnostic().find("no reply"), std::string::npos) << r.workers[0]->diagnostic();
}

TEST(AgqWorkerEngine, MemoryReport) {
  Rig r(job(2, 32 * 64, 16, 2), 32);
  r.start();
  ASSERT_TRUE(r.run(5000));
  const AgqStats& s = r.workers[0]->stats();
  EXPECT_EQ(s.seqs, 128u);
  EXPECT_GT(s.avg_granted_bits(), 7.9);
  EXPECT_LE(s.avg_granted_bits(), 32.0);
  EXPECT_GT(s.row_samples, 0u);
  EXPECT_GE(s.row_seqs_max, 2u);  // 4 slots per row share its cells
}

TEST(AgqWorkerEngine, DataCarriesMinWidth) {
  // Default: min_width = R (every grant is R or the PS's). With a slack of
  // 8: R - 8, never below min_width(g) (N = 4: g = 2, 4 bits); fixed width:
  // R = min_width = W on every chunk.
  for (int slack : {0, 8, 28}) {
    Rig r(job(4, 32 * 40, 8, 2), 32);
    for (auto& c : r.cfgs) c.min_width_slack = slack;
    r.start();
    ASSERT_TRUE(r.run(5000)) << r.workers[0]->diagnostic();
    expect_all_exact(r, 80);
    ASSERT_FALSE(r.sw.min_widths.empty());
    for (int m : r.sw.min_widths) {
      EXPECT_EQ(m % 4, 0);
      EXPECT_GE(m, agqc::min_width(2));
    }
    if (slack == 0) EXPECT_EQ(r.sw.min_widths.front(), 16);  // round 0: init_width 16
    if (slack == 8) EXPECT_EQ(r.sw.min_widths.front(), 8);
    if (slack == 28) EXPECT_EQ(r.sw.min_widths.front(), 4);
  }
  Rig f(job(2, 32 * 40, 8, 3), 32);
  for (auto& c : f.cfgs) c.fixed_width = 32;
  f.start();
  ASSERT_TRUE(f.run(5000)) << f.workers[0]->diagnostic();
  expect_all_exact(f, 120);
  for (int m : f.sw.min_widths) EXPECT_EQ(m, 32);
  const AgqStats& s = f.workers[0]->stats();
  EXPECT_EQ(s.req_hist[8], s.seqs);  // every chunk asked for 32 bits
  EXPECT_EQ(s.granted_hist[8], s.seqs_aggregated);
}

TEST(AgqWorkerEngine, BudgetThatFitsNowhereGetsExactPsResults) {
  // The switch can give 8 bits at most; the budget asks for 16 on every
  // chunk (min_width = R): every sequence is summed by the PS, at d = 0,
  // exactly, within the d = 0 bound -- never decoded from a narrow window.
  Rig r(job(3, 32 * 50, 8, 3), 8);
  r.start();
  ASSERT_TRUE(r.run(20000)) << r.workers[0]->diagnostic();
  expect_all_exact(r, 150);
  const AgqStats& s = r.workers[0]->stats();
  EXPECT_EQ(s.fallbacks, s.results);
  EXPECT_EQ(s.seqs_aggregated, 0u);
  EXPECT_EQ(r.workers[0]->engine_stats().below_min_width, 0u);
  EXPECT_EQ(r.ps.stats().bad, 0u);
}

TEST(AgqWorkerEngine, GrantBelowMinWidthIsRefused) {
  // A switch that ignores min_width and grants 8 bits of a 16-bit request:
  // the RESULT is counted and not decoded (nothing is written, no chunk
  // completes), the worker retransmits and, after its retries, fails.
  Rig r(job(2, 32 * 4, 4, 1), 8);
  r.sw.ignore_min_width = true;
  for (auto& c : r.cfgs) c.max_retries = 3, c.retry_time_ns = 50'000'000, c.rto_ns = 2'000'000;
  r.start();
  EXPECT_FALSE(r.run(5000));
  for (auto& w : r.workers) {
    EXPECT_GT(w->engine_stats().below_min_width, 0u);
    EXPECT_EQ(w->engine_stats().below_min_width, w->engine_stats().bad_results);
    EXPECT_EQ(w->counters().chunks_done, 0u);
    EXPECT_EQ(w->stats().results, 0u);
    EXPECT_TRUE(w->failed());
  }
}

TEST(AgqWorkerEngine, PsRefusesABadMinWidth) {
  // FALLBACK_DATA whose width byte (the worker's min_width) is not a
  // multiple of 4 in min_width(g)..R is malformed at the PS too.
  AgqPsEngine ps;
  AgqPsConfig pc;
  pc.job = job(2, 64, 4, 1);
  std::string err;
  ASSERT_TRUE(ps.init(pc, err)) << err;
  auto data = [](int req, int minw) {
    proto::Agq h;
    h.type = proto::AgqType::FallbackData;
    h.job_id = 1;
    h.num_workers = 2;
    h.req_width = uint8_t(req);
    h.width = uint8_t(minw);
    std::vector<uint8_t> buf(kAgqDataFrameLen);
    agq_frame_template(agq_worker_endpoint(1, 0), agq_ps_endpoint(1)).write(h, buf.data());
    return buf;
  };
  for (int minw : {2, 6, 20}) ps.on_frame(0, data(16, minw), 0);
  EXPECT_EQ(ps.stats().bad, 3u);
  for (int minw : {0, 4, 16}) ps.on_frame(0, data(16, minw), 0);
  EXPECT_EQ(ps.stats().bad, 3u);
}
