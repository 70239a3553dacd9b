// Whole exchanges through AgqProgram with simulated workers and PS on a
// lossy network: every single-packet loss (and duplicate) of a small
// exchange, and a random property test (jobs, slots, widths, losses,
// duplicates) against the model "every result lane = sum of the
// contributions at the granted width", plus the register invariants.
#include <deque>
#include <functional>
#include <map>
#include <random>

#include "agq_test_util.hpp"
#include "pipeline/agq/tables.hpp"

using namespace agq;
using namespace agq::agq_test;

namespace {

struct ChunkData {
  uint8_t req = 16;
  std::vector<std::vector<uint32_t>> u;  // [worker][lane]
  std::vector<bool> overflow;            // worker sets OVERFLOW
};

struct SimJob {
  JobSpec spec;
  std::vector<ChunkData> chunks;  // chunk c uses slot c % slots, version (c / slots) % 2
};

class Sim {
 public:
  Sim(AgqHarness& f, std::vector<SimJob> jobs) : f_(f), jobs_(std::move(jobs)) {
    for (std::size_t j = 0; j < jobs_.size(); ++j) {
      f_.add(jobs_[j].spec);
      for (uint8_t w = 0; w < jobs_[j].spec.num_workers; ++w) {
        host_[jobs_[j].spec.workers[w].port] = {j, w};
        state_[{j, w}] = std::vector<int>(jobs_[j].chunks.size(), 0);
      }
    }
  }

  std::function<bool(uint64_t)> drop = [](uint64_t) { return false; };
  std::function<bool(uint64_t)> dup = [](uint64_t) { return false; };
  uint64_t packets = 0;  // indices handed out
  std::vector<std::string> errors;

  // Runs to completion; false if some worker gave up (no progress).
  bool run(int max_timeouts = 400) {
    for (auto& [key, st] : state_) {
      const SimJob& j = jobs_[key.first];
      for (std::size_t c = 0; c < std::min<std::size_t>(j.spec.slots, st.size()); ++c) send_chunk(key, c, false);
    }
    for (int timeouts = 0;; ++timeouts) {
      while (!q_.empty()) {
        Pkt p = std::move(q_.front());
        q_.pop_front();
        const uint64_t idx = packets++;
        if (drop(idx)) continue;
        if (dup(idx)) deliver(p);
        deliver(p);
      }
      if (all_done()) return true;
      if (timeouts == max_timeouts) return false;
      // Timer expiry: every outstanding chunk is retransmitted.
      for (auto& [key, st] : state_)
        for (std::size_t c = 0; c < st.size(); ++c)
          if (st[c] == 1) send_chunk(key, c, true);
    }
  }

 private:
  using Key = std::pair<std::size_t, uint8_t>;  // (job, worker)
  struct Pkt {
    bool to_switch;
    tna::PortId port;
    std::vector<uint8_t> bytes;
  };
  struct PsSeq {
    uint32_t bitmap = 0;
    std::array<uint32_t, 32> sum{};
    bool done = false;
    Agq result;
  };

  void fail(std::string s) {
    if (errors.size() < 20) errors.push_back(std::move(s));
  }

  bool all_done() const {
    for (const auto& [key, st] : state_)
      for (int s : st)
        if (s != 2) return false;
    return true;
  }

  void send_chunk(const Key& key, std::size_t c, bool retransmit) {
    const SimJob& j = jobs_[key.first];
    const ChunkData& ch = j.chunks[c];
    const uint16_t slot = uint16_t(c % j.spec.slots);
    const uint8_t v = uint8_t((c / j.spec.slots) % 2);
    uint8_t flags = retransmit ? proto::kAgqFlagRetransmit : 0;
    if (ch.overflow[key.second]) flags |= proto::kAgqFlagOverflow;
    const Agq a = data_pkt(j.spec, key.second, slot, v, ch.req, ch.u[key.second], uint32_t(c), flags);
    state_[key][c] = 1;
    q_.push_back({true, j.spec.workers[key.second].port, worker_frame(j.spec, key.second, a)});
  }

  void deliver(const Pkt& p) {
    if (!p.to_switch) return p.port == kPsPort ? ps_receive(p) : worker_receive(p);
    std::vector<uint8_t> b = p.bytes;
    tna::IngressIntrinsicMd md;
    md.ingress_port = p.port;
    const Decision d = f_.prog.process(b, md);
    if (d.kind == Decision::Kind::Unicast) q_.push_back({false, d.port, std::move(b)});
    if (d.kind == Decision::Kind::Multicast)
      for (const tna::Replica& r : f_.pre.members(d.group)) {
        std::vector<uint8_t> copy = b;
        f_.prog.egress(copy, r.port, r.rid);
        q_.push_back({false, r.port, std::move(copy)});
      }
  }

  void worker_receive(const Pkt& p) {
    const auto it = host_.find(p.port);
    if (it == host_.end()) return fail("packet to unknown port " + std::to_string(p.port));
    const auto [ji, w] = it->second;
    const SimJob& j = jobs_[ji];
    pipeline::Headers h;
    if (pipeline::parse(p.bytes, h) != pipeline::ParserError::None || !h.agq_valid)
      return fail("unparsable packet to a worker");
    const Agq& a = h.agq;
    const WorkerSpec& ws = j.spec.workers[w];
    if (a.type != AgqType::Result || a.job_id != j.spec.job_id || a.worker_id != w ||
        h.ethernet.dst != ws.mac || h.ipv4.dst != ws.ipv4 || h.ipv4.hdr_checksum != h.ipv4.compute_checksum())
      return fail("misaddressed result to job " + std::to_string(j.spec.job_id) + " worker " + std::to_string(w));
    const std::size_t c = a.seq;
    if (c >= j.chunks.size() || a.slot != c % j.spec.slots || a.version_bit() != (c / j.spec.slots) % 2)
      return fail("result for a chunk that does not exist");
    auto& st = state_[{ji, w}];
    if (st[c] != 1) return;  // duplicate result
    const ChunkData& ch = j.chunks[c];
    const unsigned g = guard_bits(j.spec.num_workers);
    const bool fallback = a.flags & proto::kAgqFlagFallback;
    const unsigned W = a.width;
    if (fallback ? W != ch.req
                 : (W > ch.req || W > j.spec.max_width || W < 4 * min_grant_units(g) || W % 4 || a.pos * 4 + W > 32))
      return fail("bad width " + std::to_string(W));
    if (a.guard != g) return fail("bad guard");
    bool ovf = false;
    for (bool o : ch.overflow) ovf |= o;
    if (!fallback && bool(a.flags & proto::kAgqFlagOverflow) != ovf) return fail("overflow flag");
    for (int k = 0; k < 32; ++k) {
      std::vector<uint32_t> col;
      for (const auto& uw : ch.u) col.push_back(uw[k]);
      if (a.lanes[k] != expected_lane(col, ch.req, W, g)) {
        return fail("job " + std::to_string(j.spec.job_id) + " chunk " + std::to_string(c) + " lane " +
                    std::to_string(k) + " wrong");
      }
    }
    st[c] = 2;
    if (c + j.spec.slots < st.size()) send_chunk({ji, w}, c + j.spec.slots, false);
  }

  // The PS: dedups FALLBACK_DATA by worker, sums at W = R, answers.
  void ps_receive(const Pkt& p) {
    pipeline::Headers h;
    if (pipeline::parse(p.bytes, h) != pipeline::ParserError::None || !h.agq_valid ||
        h.agq.type != AgqType::FallbackData)
      return fail("unexpected packet to the PS");
    const Agq& a = h.agq;
    std::size_t ji = 0;
    while (ji < jobs_.size() && jobs_[ji].spec.job_id != a.job_id) ++ji;
    if (ji == jobs_.size()) return fail("PS: unknown job");
    const JobSpec& spec = jobs_[ji].spec;
    const unsigned g = guard_bits(spec.num_workers);
    PsSeq& s = ps_[{a.job_id, a.seq}];
    if (s.done) {
      Agq r = s.result;
      r.flags |= proto::kAgqFlagRetransmit;
      r.worker_id = a.worker_id;
      q_.push_back({true, kPsPort, ps_frame(r)});
      return;
    }
    const uint32_t bit = 1u << a.worker_id;
    if (s.bitmap & bit) return;
    s.bitmap |= bit;
    for (int k = 0; k < 32; ++k) s.sum[k] += contribution(a.lanes[k], a.req_width, a.req_width, g);
    if (s.bitmap != low_mask(spec.num_workers)) return;
    s.done = true;
    Agq& r = s.result;
    r.type = AgqType::PsResult;
    r.flags = a.version_bit();
    r.job_id = a.job_id;
    r.num_workers = a.num_workers;
    r.slot = a.slot;
    r.seq = a.seq;
    r.req_width = r.width = a.req_width;
    r.guard = uint8_t(g);
    r.lanes = s.sum;
    q_.push_back({true, kPsPort, ps_frame(r)});
  }

  AgqHarness& f_;
  std::vector<SimJob> jobs_;
  std::map<tna::PortId, Key> host_;
  std::map<Key, std::vector<int>> state_;  // per chunk: 0 unsent, 1 outstanding, 2 result held
  std::map<std::pair<uint16_t, uint32_t>, PsSeq> ps_;
  std::deque<Pkt> q_;
};

SimJob make_job(std::mt19937& rng, JobSpec spec, std::size_t chunks, std::vector<uint8_t> widths) {
  SimJob j{std::move(spec), {}};
  const unsigned g = guard_bits(j.spec.num_workers);
  for (std::size_t c = 0; c < chunks; ++c) {
    ChunkData ch;
    ch.req = widths[c % widths.size()];
    for (unsigned w = 0; w < j.spec.num_workers; ++w) {
      std::vector<uint32_t> lanes(32);
      for (auto& x : lanes) x = uint32_t(rng()) & low_mask(ch.req - g);
      ch.u.push_back(std::move(lanes));
      ch.overflow.push_back(false);
    }
    j.chunks.push_back(std::move(ch));
  }
  return j;
}

// At rest: a unit outside every live window is zero, and each row half's
// occupancy is exactly the union of its slots' windows of that version.
void check_invariants(const AgqHarness& f, const std::vector<SimJob>& jobs) {
  for (const SimJob& j : jobs) {
    const JobPlacement p = *f.prog.placement(j.spec.job_id);
    for (uint32_t row = p.row_base; row < p.row_base + p.rows; ++row) {
      std::map<std::string, uint64_t> cells;
      for (auto& [n, v] : f.prog.dump_aggregator(row)) cells[n] = v;
      for (const char* half : {".v0", ".v1"}) {
        uint8_t occ = 0;
        for (uint32_t s = (row - p.row_base) << p.row_shift;
             s < std::min(p.slots, (row - p.row_base + 1) << p.row_shift); ++s) {
          const uint16_t win = uint16_t(cells["slot_window[" + std::to_string(p.slot_base + s) + "]" + half]);
          EXPECT_FALSE(win & kWinPending);
          if (win & kWinFallback) continue;
          const uint8_t m = window_occ_mask(window_pos(win), window_units(win));
          EXPECT_EQ(occ & m, 0) << "overlapping windows in row " << row;
          occ |= m;
        }
        EXPECT_EQ(cells[std::string("row_occupancy") + half], occ) << "row " << row << half;
        uint32_t live = 0;
        for (unsigned u = 0; u < 8; ++u)
          if (occ & (0x80u >> u)) live |= window_cell_mask(u, 1);
        for (int k = 0; k < 32; ++k) {
          char name[16];
          std::snprintf(name, sizeof name, "lane%02d%s", k, half);
          EXPECT_EQ(cells[name] & ~uint64_t(live), 0u) << "row " << row << " " << name << " dirty outside windows";
        }
      }
    }
  }
}

void expect_clean(const Sim& sim, bool done) {
  EXPECT_TRUE(done) << "exchange did not complete";
  for (const auto& e : sim.errors) ADD_FAILURE() << e;
}

// A 2-worker exchange reusing one slot 3 times (versions 0, 1, 0); with
// `pressure`, a second slot shares the row and falls back to the PS.
std::vector<SimJob> small_exchange(bool pressure) {
  std::mt19937 rng(21);
  if (!pressure) return {make_job(rng, job_spec(1, 2, 1, 1), 3, {16, 32, 12})};
  return {make_job(rng, job_spec(1, 2, 2, 1), 6, {32})};
}

uint64_t lossless_packets(bool pressure) {
  AgqHarness f;
  Sim sim(f, small_exchange(pressure));
  expect_clean(sim, sim.run());
  return sim.packets;
}

}  // namespace

TEST(AgqSim, EverySingleLossOrDuplicateRecovers) {
  for (bool pressure : {false, true}) {
    const uint64_t total = lossless_packets(pressure);
    ASSERT_GT(total, 10u);
    std::printf("%s exchange: %lu packets, each dropped and duplicated in turn\n",
                pressure ? "fallback" : "plain", (unsigned long)total);
    for (uint64_t i = 0; i < total; ++i) {
      for (bool duplicate : {false, true}) {
        SCOPED_TRACE(testing::Message() << (pressure ? "fallback " : "") << (duplicate ? "dup " : "drop ")
                                        << "packet " << i << " of " << total);
        AgqHarness f;
        const auto jobs = small_exchange(pressure);
        Sim sim(f, jobs);
        (duplicate ? sim.dup : sim.drop) = [i](uint64_t idx) { return idx == i; };
        expect_clean(sim, sim.run());
        check_invariants(f, jobs);
        if (!pressure) {
          EXPECT_EQ(f.counter("agq_contributions"), 6u);
          EXPECT_EQ(f.counter("agq_results"), 3u);
        }
        if (HasFailure()) return;
      }
    }
  }
}

TEST(AgqSim, FallbackPathIsUsed) {
  AgqHarness f;
  const auto jobs = small_exchange(true);
  Sim sim(f, jobs);
  expect_clean(sim, sim.run());
  EXPECT_EQ(f.counter("agq_fallback"), 3u);
  EXPECT_EQ(f.counter("agq_results"), 3u);
  EXPECT_EQ(f.counter("agq_ps_results"), 3u);
}

TEST(AgqSim, RandomJobsLossesDuplicatesMatchTheModel) {
  uint64_t resent = 0, duplicate = 0, fallback = 0, results = 0, overflow = 0;
  for (uint32_t seed = 1; seed <= 25; ++seed) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    std::mt19937 rng(seed);
    AgqHarness f(AgqConfig{12, 64});
    std::vector<SimJob> jobs;
    const unsigned njobs = 1 + rng() % 4;
    for (unsigned j = 0; j < njobs; ++j) {
      const uint8_t n = uint8_t(1 + rng() % 6);
      const uint32_t slots = 1 + rng() % 6, rows = 1 + rng() % 3;
      const uint8_t max_width = uint8_t(8 + 4 * (rng() % 7));
      std::vector<uint8_t> widths;
      for (int k = 0; k < 5; ++k) widths.push_back(uint8_t(8 + 4 * (rng() % 7)));
      SimJob sj = make_job(rng, job_spec(uint16_t(j + 1), n, slots, rows, ResultDelivery::Multicast, max_width),
                           slots * (2 + rng() % 5), widths);
      for (auto& ch : sj.chunks)
        for (std::size_t w = 0; w < ch.overflow.size(); ++w) ch.overflow[w] = rng() % 20 == 0;
      jobs.push_back(std::move(sj));
    }
    Sim sim(f, jobs);
    std::mt19937 net(seed * 7919);
    sim.drop = [&net](uint64_t) { return net() % 100 < 5; };
    sim.dup = [&net](uint64_t) { return net() % 100 < 5; };
    expect_clean(sim, sim.run(2000));
    check_invariants(f, jobs);
    EXPECT_EQ(f.counter("agq_cas_retries"), 0u);  // software passes are atomic
    resent += f.counter("agq_result_resent");
    duplicate += f.counter("agq_duplicate");
    fallback += f.counter("agq_fallback");
    results += f.counter("agq_results");
    overflow += f.counter("agq_overflow");
    if (HasFailure()) return;
  }
  // The random runs did exercise every recovery path.
  EXPECT_GT(resent, 0u);
  EXPECT_GT(duplicate, 0u);
  EXPECT_GT(fallback, 0u);
  EXPECT_GT(overflow, 0u);
  std::printf("random: %lu results, %lu resent, %lu duplicates, %lu fallbacks, %lu overflows\n",
              (unsigned long)results, (unsigned long)resent, (unsigned long)duplicate,
              (unsigned long)fallback, (unsigned long)overflow);
}
