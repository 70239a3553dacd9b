// The allreduce engine's API (what agq-worker and libagq build on), through
// a small frame-level switch written from docs/PROTOCOL.md §4 (bitmap
// dedup, count, kept result resent to a retransmitting worker, epoch): many
// ops in flight on different keys, ops of one key adapting from each other,
// empty and odd-sized tensors, output aliasing input, both lane profiles,
// loss, a switch restart mid-op, a dead peer, RTO from the measured RTT.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <random>

#include "lib/agq_codec.hpp"
#include "lib/allreduce_engine.hpp"
#include "lib/buffer_frame_io.hpp"
#include "proto/agq.hpp"

using namespace agq;
using namespace agq::worker;

namespace {

uint32_t rd32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }
void wr32(uint8_t* p, uint32_t v) { p[0] = uint8_t(v >> 24), p[1] = uint8_t(v >> 16), p[2] = uint8_t(v >> 8), p[3] = uint8_t(v); }

// Aggregates DATA frames per (slot, version); grants every request in full.
class MiniSwitch {
 public:
  MiniSwitch(unsigned n, uint32_t slots) : n_(n), g_(agqc::guard_bits(n)), st_(size_t(slots) * 2) {}
  // Frames to deliver: (worker id, frame).
  std::vector<std::pair<unsigned, std::vector<uint8_t>>> process(std::vector<uint8_t> f) {
    std::vector<std::pair<unsigned, std::vector<uint8_t>>> out;
    uint8_t* h = f.data() + kAgqHdrOffset;
    const unsigned w = h[4], v = h[1] & 1, lanes = h[17];
    const uint16_t slot = uint16_t(h[6] << 8 | h[7]);
    S& s = st_[size_t(slot) * 2 + v];
    S& other = st_[size_t(slot) * 2 + (v ^ 1)];
    const uint32_t bit = 1u << w;
    const bool seen = s.bitmap & bit;
    s.bitmap |= bit;
    other.bitmap &= ~bit;
    if (!seen) {
      s.count = s.count == n_ ? 1 : s.count + 1;
      if (s.count == 1) {
        s.frame = f;
        s.bitmap = bit;
        s.overflow = false;
        std::fill(s.sum, s.sum + 32, 0u);
      }
      s.overflow |= (h[1] & proto::kAgqFlagOverflow) != 0;
      for (unsigned k = 0; k < lanes; ++k) s.sum[k] += rd32(h + 20 + 4 * k);
      if (s.count == n_)
        for (unsigned x = 0; x < n_; ++x) out.push_back({x, result(s, x)});
    } else if (s.count == n_) {
      out.push_back({w, result(s, w)});
      ++resent;
    }
    return out;
  }
  void restart() {
    for (S& s : st_) s = S{};
    epoch = uint16_t(epoch + 17);
  }
  uint16_t epoch = 0x1234;
  uint64_t resent = 0;

 private:
  struct S {
    uint32_t bitmap = 0;
    unsigned count = 0;
    bool overflow = false;
    uint32_t sum[32] = {};
    std::vector<uint8_t> frame;
  };
  std::vector<uint8_t> result(const S& s, unsigned w) const {
    std::vector<uint8_t> f = s.frame;
    uint8_t* h = f.data() + kAgqHdrOffset;
    h[0] = uint8_t(proto::kAgqVersion << 4 | uint8_t(proto::AgqType::Result));
    h[1] = uint8_t((h[1] & proto::kAgqFlagVersion) | (s.overflow ? proto::kAgqFlagOverflow : 0));
    h[4] = uint8_t(w);
    h[13] = h[12];  // full grant
    h[14] = 0;
    h[15] = uint8_t(g_);
    h[18] = uint8_t(epoch >> 8), h[19] = uint8_t(epoch);
    for (unsigned k = 0; k < h[17]; ++k) wr32(h + 20 + 4 * k, s.sum[k]);
    return f;
  }
  unsigned n_;
  int g_;
  std::vector<S> st_;
};

struct Net {
  struct Sink final : TxSink {
    std::deque<std::vector<uint8_t>> q;
    bool send(uint16_t, std::span<const uint8_t> f) override {
      q.emplace_back(f.begin(), f.end());
      return true;
    }
  };
  Net(unsigned n, uint32_t slots, uint8_t lanes = 32, uint32_t window = 0) : sw(n, slots) {
    for (unsigned w = 0; w < n; ++w) {
      EngineConfig c;
      c.job.num_workers = uint8_t(n);
      c.job.slots = slots;
      c.job.window = window;
      c.job.lanes = lanes;
      c.tuning.rto_init_ns = 20'000'000;
      c.tuning.rto_min_ns = 2'000'000;
      c.workers = {WorkerIdentity::defaults(1, w)};
      cfgs.push_back(c);
    }
    sinks.resize(n);
  }
  void start() {
    for (auto& c : cfgs) {
      ios.push_back(std::make_unique<BufferFrameIo>(c.job.slots, agq_frame_len(c.job.lanes)));
      engines.push_back(std::make_unique<AllreduceEngine>());
      std::string err;
      ASSERT_TRUE(engines.back()->init(c, *ios.back(), err)) << err;
      ios.back()->set_sink(&sinks[engines.size() - 1]);
    }
  }
  // One step = 1 ms; frames travel `delay_steps` steps each way.
  // Per step like a poll loop: rx drained first, then the engines' timers and sends.
  void step() {
    while (!pending_rx.empty() && pending_rx.front().at <= now) {
      Pkt p = std::move(pending_rx.front());
      pending_rx.pop_front();
      if (!dead[p.to]) engines[p.to]->on_frame(p.f, now);
    }
    for (size_t w = 0; w < engines.size(); ++w)
      if (!dead[w]) engines[w]->tick(now);
    for (size_t w = 0; w < sinks.size(); ++w)
      while (!sinks[w].q.empty()) {
        auto f = std::move(sinks[w].q.front());
        sinks[w].q.pop_front();
        if (drop && drop()) continue;
        in_flight.push_back({now + delay_ns, 0, std::move(f), true});
      }
    while (!in_flight.empty() && in_flight.front().at <= now) {
      Pkt p = std::move(in_flight.front());
      in_flight.pop_front();
      if (p.to_switch) {
        for (auto& [to, r] : sw.process(std::move(p.f))) {
          if (drop && drop()) continue;
          pending_rx.push_back({now + delay_ns, to, std::move(r), false});
        }
      }
    }
    now += 1'000'000;
  }
  bool run_until(const std::function<bool()>& done, unsigned max_steps) {
    for (unsigned i = 0; i < max_steps; ++i) {
      if (done()) return true;
      step();
    }
    return done();
  }
  bool all_idle() const {
    for (size_t w = 0; w < engines.size(); ++w)
      if (!dead[w] && !engines[w]->idle()) return false;
    return true;
  }
  struct Pkt {
    uint64_t at;
    unsigned to;
    std::vector<uint8_t> f;
    bool to_switch;
  };
  MiniSwitch sw;
  std::vector<EngineConfig> cfgs;
  std::vector<std::unique_ptr<BufferFrameIo>> ios;
  std::vector<std::unique_ptr<AllreduceEngine>> engines;
  std::vector<Sink> sinks;
  std::deque<Pkt> in_flight, pending_rx;
  mutable std::map<size_t, bool> dead;
  std::function<bool()> drop;
  uint64_t delay_ns = 0;
  uint64_t now = 1'000'000'000ull;
};

std::vector<float> gradient(unsigned w, size_t n, uint32_t seed) {
  std::mt19937 rng(seed * 131 + w);
  std::normal_distribution<float> nd(0, 1);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

// Each worker's output equals the others' bit for bit and the float sum within the op's bound.
void expect_sum(const std::vector<std::vector<float>>& in, const std::vector<std::vector<float>>& out,
                const AllreduceOp& op) {
  ASSERT_FALSE(op.failed) << op.error;
  for (size_t i = 0; i < out[0].size(); ++i) {
    double s = 0;
    for (const auto& v : in) s += v[i];
    ASSERT_LE(std::fabs(out[0][i] - s), op.stats.error_bound + std::fabs(s) * 1e-6) << i;
    for (const auto& o : out) ASSERT_EQ(std::memcmp(&o[i], &out[0][i], 4), 0);
  }
}

}  // namespace

TEST(AllreduceEngine, ManyOpsInFlightOnDifferentKeys) {
  const unsigned n = 3;
  Net net(n, 16);
  net.start();
  const std::vector<size_t> sizes = {0, 1, 31, 33, 1000, 4096};
  std::vector<std::vector<std::vector<float>>> in(sizes.size()), out(sizes.size());
  std::vector<std::vector<OpPtr>> ops(sizes.size());
  std::vector<int> calls(sizes.size() * n, 0);
  for (size_t k = 0; k < sizes.size(); ++k)
    for (unsigned w = 0; w < n; ++w) {
      in[k].push_back(gradient(w, sizes[k], uint32_t(k)));
      out[k].emplace_back(sizes[k], -1.0f);
    }
  for (size_t k = 0; k < sizes.size(); ++k)
    for (unsigned w = 0; w < n; ++w) {
      auto op = make_op(100 + k, in[k][w], out[k][w], [&calls, k, w, n](AllreduceOp&) { ++calls[k * n + w]; });
      ops[k].push_back(op);
      EXPECT_TRUE(net.engines[w]->submit(op));
    }
  ASSERT_TRUE(net.run_until([&] { return net.all_idle(); }, 5000));
  for (size_t k = 0; k < sizes.size(); ++k) {
    for (unsigned w = 0; w < n; ++w) EXPECT_EQ(calls[k * n + w], 1);
    expect_sum(in[k], out[k], *ops[k][0]);
    EXPECT_EQ(ops[k][0]->stats.chunks, (sizes[k] + 31) / 32);
  }
  EXPECT_EQ(net.engines[0]->counters().retransmissions, 0u);
}

TEST(AllreduceEngine, OpsOfOneKeyAdaptInOrderAndMayAliasOutput) {
  const unsigned n = 2;
  Net net(n, 8);
  for (auto& c : net.cfgs) {
    c.tuning.error_budget = 1e-2;  // narrower than the 16-bit start
    c.tuning.error_feedback = false;  // each op's sum within its own bound (ErrorFeedback* below: on)
  }
  net.start();
  const size_t len = 32 * 20 + 7;
  std::vector<std::vector<std::vector<float>>> in(3), buf(3);
  std::vector<std::vector<OpPtr>> ops(3);
  for (int r = 0; r < 3; ++r)
    for (unsigned w = 0; w < n; ++w) {
      in[r].push_back(gradient(w, len, 50 + r));
      buf[r].push_back(in[r].back());  // output = input memory
    }
  // All three submitted at once: the 2nd and 3rd wait for their predecessor's aggregate.
  for (int r = 0; r < 3; ++r)
    for (unsigned w = 0; w < n; ++w) {
      ops[r].push_back(make_op(7, buf[r][w], buf[r][w]));
      net.engines[w]->submit(ops[r][w]);
    }
  ASSERT_TRUE(net.run_until([&] { return net.all_idle(); }, 5000));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(ops[r][0]->round, uint32_t(r));
    expect_sum(in[r], buf[r], *ops[r][0]);
  }
  EXPECT_EQ(ops[0][0]->stats.req_hist[16 / 4], 21u);  // init width everywhere
  EXPECT_LT(ops[2][0]->stats.avg_granted_bits(), 16.0);  // adapted to the looser budget
  EXPECT_EQ(ops[1][1]->stats.req_hist, ops[1][0]->stats.req_hist);  // both workers chose alike
}

TEST(AllreduceEngine, SixteenLaneProfile) {
  Net net(4, 8, 16);
  net.start();
  std::vector<std::vector<float>> in, out;
  std::vector<OpPtr> ops;
  for (unsigned w = 0; w < 4; ++w) {
    in.push_back(gradient(w, 16 * 30 + 3, 9));
    out.emplace_back(in.back().size());
  }
  for (unsigned w = 0; w < 4; ++w) {
    ops.push_back(make_op(1, in[w], out[w]));
    net.engines[w]->submit(ops.back());
  }
  ASSERT_TRUE(net.run_until([&] { return net.all_idle(); }, 5000));
  expect_sum(in, out, *ops[0]);
  EXPECT_EQ(ops[0]->stats.chunks, 31u);
  EXPECT_EQ(net.engines[0]->frame_len(), 126u);
}

TEST(AllreduceEngine, LossIsRecoveredExactly) {
  Net net(3, 16);
  net.start();
  std::mt19937 rng(5);
  std::bernoulli_distribution lose(0.05);
  net.drop = [&] { return lose(rng); };
  std::vector<std::vector<float>> in, out;
  std::vector<OpPtr> ops;
  for (unsigned w = 0; w < 3; ++w) {
    in.push_back(gradient(w, 32 * 300, 3));
    out.emplace_back(in.back().size());
  }
  for (unsigned w = 0; w < 3; ++w) {
    ops.push_back(make_op(1, in[w], out[w]));
    net.engines[w]->submit(ops.back());
  }
  ASSERT_TRUE(net.run_until([&] { return net.all_idle(); }, 60000)) << net.engines[0]->diagnostic();
  expect_sum(in, out, *ops[0]);
  EXPECT_GT(net.engines[0]->counters().retransmissions, 0u);
}

TEST(AllreduceEngine, SwitchRestartMidOpIsDetectedAndRedone) {
  Net net(2, 16);
  net.start();
  std::vector<std::vector<float>> in, out;
  std::vector<OpPtr> ops;
  for (unsigned w = 0; w < 2; ++w) {
    in.push_back(gradient(w, 32 * 400, 4));
    out.emplace_back(in.back().size());
  }
  for (unsigned w = 0; w < 2; ++w) {
    ops.push_back(make_op(1, in[w], out[w]));
    net.engines[w]->submit(ops.back());
  }
  for (int i = 0; i < 5; ++i) net.step();
  // Worker 1's DATA are lost on the way, then the switch loses all state.
  net.drop = [] { return true; };
  for (int i = 0; i < 2; ++i) net.step();
  net.sw.restart();
  net.drop = nullptr;
  ASSERT_TRUE(net.run_until([&] { return net.all_idle(); }, 20000)) << net.engines[0]->diagnostic();
  expect_sum(in, out, *ops[0]);
  EXPECT_GE(net.engines[0]->stats().switch_restarts, 1u);
  EXPECT_EQ(net.engines[0]->stats().epoch, net.sw.epoch);
}

// A peer that stops for 2 s (a process descheduled on a loaded host) and
// comes back: its peers use up max_retries long before it returns, but the
// retries are also bounded below in time (retry_time_ns, 5 s), so the job
// waits for it and completes exactly. Without the time bound every engine
// fails within ~1 s of the stall (CI: 10% loss, 25 tries in 50 ms).
// Three engines with max_retries 4, one op each submitted and three steps
// run; then worker 2 stops (net.dead[2]).
struct ThreeWithAStoppedPeer {
  explicit ThreeWithAStoppedPeer(uint32_t seed) : net(3, 8) {
    for (auto& c : net.cfgs) c.tuning.max_retries = 4;
    net.start();
    for (unsigned w = 0; w < 3; ++w) {
      in.push_back(gradient(w, 32 * 100, seed));
      out.emplace_back(in.back().size());
    }
    for (unsigned w = 0; w < 3; ++w) {
      ops.push_back(make_op(1, in[w], out[w]));
      net.engines[w]->submit(ops.back());
    }
    for (int i = 0; i < 3; ++i) net.step();
    net.dead[2] = true;
  }
  Net net;
  std::vector<std::vector<float>> in, out;
  std::vector<OpPtr> ops;
};

TEST(AllreduceEngine, APeerStalledShorterThanTheRetryTimeIsWaitedFor) {
  ThreeWithAStoppedPeer t(7);
  auto& [net, in, out, ops] = t;
  for (int i = 0; i < 2000; ++i) net.step();
  EXPECT_FALSE(net.engines[0]->failed()) << net.engines[0]->diagnostic();
  EXPECT_GE(net.engines[0]->stats().max_retries_seen, 4u);  // the count bound alone would have failed it
  net.dead[2] = false;
  ASSERT_TRUE(net.run_until([&] { return net.all_idle(); }, 20000)) << net.engines[0]->diagnostic();
  for (unsigned w = 0; w < 3; ++w) EXPECT_FALSE(net.engines[w]->failed()) << net.engines[w]->diagnostic();
  expect_sum(in, out, *ops[0]);
  EXPECT_EQ(out[0], out[1]);
  EXPECT_EQ(out[0], out[2]);
}

TEST(AllreduceEngine, DeadPeerFailsWithTheStalledSlots) {
  ThreeWithAStoppedPeer t(4);  // kill -9 of worker 2
  auto& [net, in, out, ops] = t;
  ASSERT_TRUE(net.run_until([&] { return net.engines[0]->failed() && net.engines[1]->failed(); }, 60000));
  const std::string& d = net.engines[0]->diagnostic();
  EXPECT_NE(d.find("stalled"), std::string::npos) << d;
  EXPECT_NE(d.find("slot"), std::string::npos) << d;
  EXPECT_TRUE(ops[0]->failed);
  EXPECT_TRUE(ops[0]->complete.load());
  // A later op fails at once.
  std::vector<float> x(10), y(10);
  bool called = false;
  EXPECT_FALSE(net.engines[0]->submit(make_op(2, x, y, [&](AllreduceOp& o) { called = o.failed; })));
  EXPECT_TRUE(called);
}

TEST(AllreduceEngine, RtoFollowsTheMeasuredRoundTrip) {
  Net net(2, 8, 32, 8);
  net.delay_ns = 15'000'000;  // 30 ms round trip, above the 20 ms initial RTO
  net.start();
  std::vector<std::vector<float>> in, out;
  std::vector<OpPtr> ops;
  for (unsigned w = 0; w < 2; ++w) {
    in.push_back(gradient(w, 32 * 400, 4));
    out.emplace_back(in.back().size());
  }
  for (unsigned w = 0; w < 2; ++w) {
    ops.push_back(make_op(1, in[w], out[w]));
    net.engines[w]->submit(ops.back());
  }
  ASSERT_TRUE(net.run_until([&] { return net.all_idle(); }, 20000));
  expect_sum(in, out, *ops[0]);
  // Before the first sample only one slot probes; afterwards srtt + 4 rttvar covers the delay.
  EXPECT_LE(net.engines[0]->counters().retransmissions, 2u);
  EXPECT_NEAR(net.engines[0]->stats().srtt_ns, 30e6, 3e6);
}

TEST(AllreduceEngine, RejectsBadOpsAndJobs) {
  Net net(2, 8);
  net.start();
  std::vector<float> x(10), y(9);
  std::string why;
  EXPECT_FALSE(net.engines[0]->submit(make_op(1, x, y, [&](AllreduceOp& o) { why = o.error; })));
  EXPECT_NE(why.find("output"), std::string::npos);
  AllreduceJob j;
  j.lanes = 24;
  EXPECT_NE(j.validate().find("lanes"), std::string::npos);
  j.lanes = 32;
  j.num_workers = 33;
  EXPECT_NE(j.validate().find("N"), std::string::npos);
  EXPECT_EQ(AllreduceJob::row_shift_for(64, 16), 2);
  EXPECT_EQ(AllreduceJob::row_shift_for(100, 16), 3);
}

namespace {

// Steps (1 ms each) until every engine is idle, with the `k`-th frame on the
// wire (DATA or RESULT, counted from 1) lost; the engines' tuning as given.
struct LossRun {
  uint64_t steps = 0, retransmissions = 0, fast = 0, probes = 0, spurious = 0;
};
LossRun run_with_one_loss(unsigned n, size_t chunks, int lose_k, uint64_t reo_min_ns, bool tail_probe) {
  Net net(n, 16);
  for (auto& c : net.cfgs) {
    c.tuning.reo_min_ns = reo_min_ns;
    c.tuning.tail_probe = tail_probe;
    c.tuning.rto_min_ns = 20'000'000;  // an RTO far above the round trip: what a loaded host needs
  }
  net.start();
  int k = 0;
  net.drop = [&] { return ++k == lose_k; };
  std::vector<std::vector<float>> in, out;
  std::vector<OpPtr> ops;
  for (unsigned w = 0; w < n; ++w) {
    in.push_back(gradient(w, 32 * chunks, 11));
    out.emplace_back(in.back().size());
  }
  for (unsigned w = 0; w < n; ++w) {
    ops.push_back(make_op(1, in[w], out[w]));
    net.engines[w]->submit(ops.back());
  }
  LossRun r;
  const uint64_t t0 = net.now;
  EXPECT_TRUE(net.run_until([&] { return net.all_idle(); }, 60000)) << net.engines[0]->diagnostic();
  expect_sum(in, out, *ops[0]);
  r.steps = (net.now - t0) / 1'000'000;
  for (auto& e : net.engines) {
    r.retransmissions += e->counters().retransmissions;
    r.fast += e->stats().fast_retransmissions;
    r.probes += e->stats().tail_probes;
    r.spurious += e->stats().spurious;
  }
  return r;
}

}  // namespace

TEST(AllreduceEngine, LossMidStreamIsFoundByOrderNotByTheRto) {
  // 400 chunks over 16 slots; frame 300 is lost somewhere in the middle.
  const LossRun rack = run_with_one_loss(2, 400, 300, 20'000, true);
  const LossRun rto = run_with_one_loss(2, 400, 300, 0, false);
  EXPECT_GE(rack.fast, 1u);
  EXPECT_EQ(rack.probes, 0u);
  EXPECT_EQ(rto.fast, 0u);
  EXPECT_GE(rto.retransmissions, 1u);
  // The RTO (>= 20 ms) is paid without RACK only: a deterministic step count, not a timing.
  EXPECT_LE(rack.steps + 15, rto.steps) << rack.steps << " vs " << rto.steps;
}

TEST(AllreduceEngine, LossInTheTailIsFoundByTheProbe) {
  // 2 workers x 40 chunks: frames 1..80 are the first transmissions of DATA
  // and RESULTs interleaved; losing one of the last ones leaves no later
  // sequence to reveal it, so the tail probe finds it.
  unsigned probed = 0;
  for (int lose = 150; lose <= 160; ++lose) {
    const LossRun tlp = run_with_one_loss(2, 40, lose, 20'000, true);
    const LossRun rto = run_with_one_loss(2, 40, lose, 20'000, false);
    EXPECT_LE(tlp.steps, rto.steps) << lose;
    if (tlp.probes) {
      ++probed;
      EXPECT_LT(tlp.steps + 10, rto.steps) << lose;
    }
  }
  EXPECT_GE(probed, 1u);
}

TEST(AllreduceEngine, NoLossNoRetransmissionAndEveryLaneKeepsItsOrder) {
  // The switch serves shards on 3 lcores (only order within one matters): no
  // loss, no retransmission, nothing spurious.
  Net net(3, 32);
  for (auto& c : net.cfgs) c.job.switch_lcores = 3, c.job.row_shift = 1;
  net.start();
  std::vector<std::vector<float>> in, out;
  std::vector<OpPtr> ops;
  for (unsigned w = 0; w < 3; ++w) {
    in.push_back(gradient(w, 32 * 1000 + 5, 12));
    out.emplace_back(in.back().size());
  }
  for (unsigned w = 0; w < 3; ++w) {
    ops.push_back(make_op(1, in[w], out[w]));
    net.engines[w]->submit(ops.back());
  }
  ASSERT_TRUE(net.run_until([&] { return net.all_idle(); }, 20000));
  expect_sum(in, out, *ops[0]);
  for (auto& e : net.engines) {
    EXPECT_EQ(e->counters().retransmissions, 0u);
    EXPECT_EQ(e->stats().spurious, 0u);
  }
}

namespace {

// Error feedback from outside the engine: per worker, x' = x + residual as
// it was when the op was submitted (ops of the key run one after the
// other); every DATA's lanes must be the scalar encoding of x' (a redo's
// too: it re-encodes x' unchanged), and the final result of each chunk
// gives the residual x' - x_hat the engine must hold afterwards.
struct EfCheck final : ChunkObserver {
  int guard = 0;
  std::vector<float> xprime, expect;  // of the op in flight
  uint64_t chunks = 0, redos = 0, bad_sent = 0, decoded_any_d = 0;
  void on_chunk(const ChunkResult& r) override {
    const int d = r.p.width - r.width;
    for (unsigned k = 0; k < r.n_valid; ++k) {
      const size_t i = r.chunk * r.n_lanes + k;
      const uint32_t u = rd32(r.sent_be + 4 * k);
      if (u != agqc::encode(xprime[i], r.p.width, guard, r.p.exponent).u) ++bad_sent;
      if (!r.redo) {
        const float v = float(double(xprime[i]) - agqc::decoded_contribution(u, r.p.width, guard, r.p.exponent, d));
        expect[i] = std::isfinite(v) ? v : 0.0f;
      }
    }
    if (r.redo) ++redos; else ++chunks;
    if (d > 0) ++decoded_any_d;
  }
};

// Runs `rounds` ops of key 7 per worker, one after the other, through net
// (already started), checking the residuals after each.
void run_ef_rounds(Net& net, const std::vector<std::vector<std::vector<float>>>& in, std::vector<EfCheck>& ck,
                   const std::vector<std::shared_ptr<TensorState>>& st, std::vector<std::vector<std::vector<float>>>& out) {
  const size_t n = net.engines.size();
  for (size_t r = 0; r < in.size(); ++r) {
    std::vector<OpPtr> ops;
    out.emplace_back();
    for (size_t w = 0; w < n; ++w) {
      const auto& x = in[r][w];
      const auto* res = st[w]->residual && st[w]->residual->size() == x.size() ? st[w]->residual.get() : nullptr;
      ck[w].xprime.resize(x.size());
      for (size_t i = 0; i < x.size(); ++i) ck[w].xprime[i] = res ? x[i] + (*res)[i] : x[i];
      ck[w].expect.assign(x.size(), NAN);
      out.back().emplace_back(x.size(), 0.0f);
    }
    for (size_t w = 0; w < n; ++w) {
      ops.push_back(make_op(7, in[r][w], out.back()[w]));
      prepare_op(ops.back(), st[w], 32, net.cfgs[w].tuning.error_feedback);
      ASSERT_TRUE(net.engines[w]->submit(ops.back()));
    }
    ASSERT_TRUE(net.run_until([&] { return net.all_idle(); }, 5000));
    for (size_t w = 0; w < n; ++w) {
      ASSERT_FALSE(ops[w]->failed) << ops[w]->error;
      EXPECT_EQ(ck[w].bad_sent, 0u) << "round " << r << " worker " << w << ": a DATA did not carry x + residual";
      if (!net.cfgs[w].tuning.error_feedback) {
        EXPECT_FALSE(st[w]->residual);
        continue;
      }
      ASSERT_TRUE(st[w]->residual);
      ASSERT_EQ(st[w]->residual->size(), in[r][w].size());
      for (size_t i = 0; i < in[r][w].size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>((*st[w]->residual)[i]), std::bit_cast<uint32_t>(ck[w].expect[i]))
            << "round " << r << " worker " << w << " element " << i << ": " << (*st[w]->residual)[i] << " vs "
            << ck[w].expect[i];
    }
  }
}

}  // namespace

TEST(AllreduceEngine, ErrorFeedbackResidualIsWhatTheResultDidNotCount) {
  // Coarse widths (budget 5e-2) so the residuals are large; N = 3.
  const unsigned n = 3;
  Net net(n, 8);
  for (auto& c : net.cfgs) c.tuning.error_budget = 5e-2;
  net.start();
  std::vector<EfCheck> ck(n);
  std::vector<std::shared_ptr<TensorState>> st;
  for (unsigned w = 0; w < n; ++w) {
    ck[w].guard = agqc::guard_bits(n);
    net.engines[w]->set_observer(&ck[w]);
    st.push_back(std::make_shared<TensorState>());
  }
  const size_t len = 32 * 12 + 5;
  std::vector<std::vector<std::vector<float>>> in(4), out;
  for (int r = 0; r < 4; ++r)
    for (unsigned w = 0; w < n; ++w) in[r].push_back(gradient(w, len, 70 + r));
  run_ef_rounds(net, in, ck, st, out);
  // Every worker holds the same sum; it is sum over workers of x' - residual.
  for (int r = 0; r < 4; ++r)
    for (unsigned w = 1; w < n; ++w) ASSERT_EQ(std::memcmp(out[r][w].data(), out[r][0].data(), len * 4), 0);
  double max_res = 0;
  for (unsigned w = 0; w < n; ++w)
    for (float v : *st[w]->residual) max_res = std::max(max_res, double(std::fabs(v)));
  EXPECT_GT(max_res, 0.0);
}

TEST(AllreduceEngine, ErrorFeedbackRedoKeepsTheResidualAndSizeChangeResets) {
  const unsigned n = 2;
  Net net(n, 8);
  for (auto& c : net.cfgs) c.tuning.init_scale = 0.25;  // normal(1) data clips in round 0: OVERFLOW redos
  net.start();
  std::vector<EfCheck> ck(n);
  std::vector<std::shared_ptr<TensorState>> st;
  for (unsigned w = 0; w < n; ++w) {
    ck[w].guard = agqc::guard_bits(n);
    net.engines[w]->set_observer(&ck[w]);
    st.push_back(std::make_shared<TensorState>());
  }
  std::vector<std::vector<std::vector<float>>> in(3), out;
  for (int r = 0; r < 3; ++r)
    for (unsigned w = 0; w < n; ++w) in[r].push_back(gradient(w, r < 2 ? 32 * 6 : 32 * 9 + 1, 90 + r));
  // Round 2 has another size: it starts from a zero residual (x' = x).
  run_ef_rounds(net, {in[0], in[1]}, ck, st, out);
  EXPECT_GT(ck[0].redos, 0u) << "no OVERFLOW redo happened";
  const auto old_buf = st[0]->residual;
  ck[0].bad_sent = ck[1].bad_sent = 0;
  std::vector<std::vector<std::vector<float>>> out2;
  run_ef_rounds(net, {in[2]}, ck, st, out2);
  EXPECT_NE(st[0]->residual, old_buf);  // a new buffer for the new size
  EXPECT_EQ(old_buf->size(), 32u * 6);
}

TEST(AllreduceEngine, ErrorFeedbackOffIsTheOldBehaviourBitForBit) {
  // Off: every DATA carries the encoding of x itself, round after round,
  // and no residual exists. On: the first op of a key (zero residual) is
  // bit-identical to off; later ones differ.
  const unsigned n = 2;
  const size_t len = 32 * 10 + 3;
  std::vector<std::vector<std::vector<float>>> in(3);
  for (int r = 0; r < 3; ++r)
    for (unsigned w = 0; w < n; ++w) in[r].push_back(gradient(w, len, 110 + r));
  std::array<std::vector<std::vector<std::vector<float>>>, 2> out;
  for (int on = 0; on < 2; ++on) {
    Net net(n, 8);
    for (auto& c : net.cfgs) c.tuning.error_feedback = on, c.tuning.error_budget = 2e-2;
    net.start();
    std::vector<EfCheck> ck(n);
    std::vector<std::shared_ptr<TensorState>> st;
    for (unsigned w = 0; w < n; ++w) {
      ck[w].guard = agqc::guard_bits(n);
      net.engines[w]->set_observer(&ck[w]);
      st.push_back(std::make_shared<TensorState>());
    }
    run_ef_rounds(net, in, ck, st, out[on]);
  }
  for (unsigned w = 0; w < n; ++w) {
    EXPECT_EQ(std::memcmp(out[0][0][w].data(), out[1][0][w].data(), len * 4), 0);  // round 0: identical
    EXPECT_NE(std::memcmp(out[0][2][w].data(), out[1][2][w].data(), len * 4), 0);  // round 2: the residuals count
  }
}

TEST(AllreduceEngine, ErrorFeedbackMismatchedPrepareIsRefused) {
  Net net(1, 4);
  net.start();  // error feedback on (the default)
  std::vector<float> x(40, 1.0f), y(40);
  auto op = make_op(3, x, y);
  prepare_op(op, std::make_shared<TensorState>(), 32, false);
  std::string why;
  op->done = [&](AllreduceOp& o) { why = o.error; };
  EXPECT_FALSE(net.engines[0]->submit(op));
  EXPECT_NE(why.find("error feedback"), std::string::npos) << why;
}
