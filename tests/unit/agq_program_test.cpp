// SwitchML-style scenarios through AgqProgram::process() with real frames:
// reduction, retransmission, slot reuse, two jobs, shared rows, fallback,
// width caps, overflow, and multicast replicas through egress().
#include <random>

#include "agq_test_util.hpp"
#include "pipeline/agq/registers.hpp"
#include "tna/pass.hpp"

using namespace agq;
using namespace agq::agq_test;

namespace {

using AgqScenario = AgqFixture;

std::vector<uint32_t> rand_lanes(std::mt19937& rng, unsigned bits) {
  std::vector<uint32_t> v(32);
  for (auto& x : v) x = uint32_t(rng()) & low_mask(bits);
  return v;
}

// Each worker's lanes for one chunk, and the expected result lanes.
struct Chunk {
  std::vector<std::vector<uint32_t>> u;  // [worker][lane]
  std::vector<uint32_t> expect(unsigned req, unsigned width, unsigned g) const {
    std::vector<uint32_t> out(32);
    for (int k = 0; k < 32; ++k) {
      std::vector<uint32_t> col;
      for (const auto& w : u) col.push_back(w[k]);
      out[k] = expected_lane(col, req, width, g);
    }
    return out;
  }
};
Chunk make_chunk(std::mt19937& rng, unsigned n, unsigned req) {
  Chunk c;
  for (unsigned i = 0; i < n; ++i) c.u.push_back(rand_lanes(rng, req - guard_bits(n)));
  return c;
}
std::vector<uint32_t> lanes_of(const pipeline::Headers& h) { return {h.agq.lanes.begin(), h.agq.lanes.end()}; }

// Sends chunk `c` of every worker; checks the last one completes and returns it.
Out reduce(AgqHarness& f, const JobSpec& j, uint16_t slot, uint8_t v, uint8_t req, const Chunk& c,
           uint32_t seq = 0) {
  for (uint8_t w = 0; w + 1 < j.num_workers; ++w) {
    const Out o = f.send(j, data_pkt(j, w, slot, v, req, c.u[w], seq));
    EXPECT_TRUE(is_drop(o.decision, AgqDrop::Absorbed)) << "worker " << int(w);
  }
  const uint8_t last = uint8_t(j.num_workers - 1);
  return f.send(j, data_pkt(j, last, slot, v, req, c.u[last], seq));
}

void check_replicas(AgqHarness& f, const JobSpec& j, const Out& o, const std::vector<uint32_t>& expect,
                    unsigned width) {
  ASSERT_EQ(o.decision.kind, Decision::Kind::Multicast);
  const auto reps = f.replicas(o);
  ASSERT_EQ(reps.size(), j.num_workers);
  for (const Replica& r : reps) {
    const WorkerSpec& ws = j.workers.at(r.rid);
    EXPECT_EQ(r.port, ws.port);
    EXPECT_EQ(r.hdr.ethernet.dst, ws.mac);
    EXPECT_EQ(r.hdr.ipv4.dst, ws.ipv4);
    EXPECT_EQ(r.hdr.ipv4.hdr_checksum, r.hdr.ipv4.compute_checksum());
    EXPECT_EQ(r.hdr.agq.worker_id, r.rid);
    EXPECT_EQ(r.hdr.agq.type, AgqType::Result);
    EXPECT_EQ(r.hdr.agq.width, width);
    EXPECT_EQ(r.hdr.agq.guard, guard_bits(j.num_workers));
    EXPECT_EQ(lanes_of(r.hdr), expect);
  }
}

}  // namespace

TEST_F(AgqScenario, BasicReductionTwoWorkers) {
  const JobSpec j = job_spec(1, 2, 4, 4);
  add(j);
  std::mt19937 rng(1);
  const Chunk c = make_chunk(rng, 2, 16);
  const Out o = reduce(*this, j, 0, 0, 16, c, 77);
  ASSERT_TRUE(o.parsed);
  EXPECT_EQ(o.decision.group, prog.placement(1)->mcast_grp);
  EXPECT_EQ(o.hdr.agq.seq, 77u);
  EXPECT_EQ(o.hdr.agq.pos, 0);
  check_replicas(*this, j, o, c.expect(16, 16, 1), 16);
  // decode: the sum of the q's
  for (int k = 0; k < 32; ++k) {
    const int64_t q = int64_t(c.u[0][k]) + int64_t(c.u[1][k]) - 2 * (1 << 14);
    EXPECT_EQ(decode_sum_q(o.hdr.agq.lanes[k], 2, 16, 1), q);
  }
  EXPECT_EQ(counter("agq_packets"), 2u);
  EXPECT_EQ(counter("agq_contributions"), 2u);
  EXPECT_EQ(counter("agq_first"), 1u);
  EXPECT_EQ(counter("agq_resubmits"), 1u);
  EXPECT_EQ(counter("agq_absorbed"), 1u);
  EXPECT_EQ(counter("agq_results"), 1u);
}

TEST_F(AgqScenario, BasicReductionFourWorkersAllWidths) {
  const JobSpec j = job_spec(3, 4, 8, 8);
  add(j);
  std::mt19937 rng(4);
  for (uint8_t req = 8; req <= 32; req += 4) {
    const uint16_t slot = uint16_t((req - 8) / 4);
    const Chunk c = make_chunk(rng, 4, req);
    const Out o = reduce(*this, j, slot, 0, req, c);
    check_replicas(*this, j, o, c.expect(req, req, 2), req);
  }
}

TEST_F(AgqScenario, SingleWorkerJobCompletesInOnePacket) {
  const JobSpec j = job_spec(2, 1, 1, 1);
  add(j);
  const Out o = send(j, data_pkt(j, 0, 0, 0, 32, {0xDEADBEEF, 1}));
  check_replicas(*this, j, o, [] { std::vector<uint32_t> v(32); v[0] = 0xDEADBEEF; v[1] = 1; return v; }(), 32);
}

TEST_F(AgqScenario, RetransmitAfterReductionUnicastsKeptCopy) {
  const JobSpec j = job_spec(1, 2, 2, 2);
  add(j);
  std::mt19937 rng(2);
  const Chunk c = make_chunk(rng, 2, 20);
  reduce(*this, j, 1, 0, 20, c, 5);
  const auto before = dump_all();
  const Out o = send(j, data_pkt(j, 0, 1, 0, 20, c.u[0], 5, proto::kAgqFlagRetransmit));
  ASSERT_TRUE(is_unicast(o.decision, j.workers[0].port));
  EXPECT_EQ(o.hdr.agq.type, AgqType::Result);
  EXPECT_EQ(o.hdr.ethernet.dst, j.workers[0].mac);
  EXPECT_EQ(o.hdr.ipv4.dst, j.workers[0].ipv4);
  EXPECT_EQ(o.hdr.ipv4.src, kPsIp);
  EXPECT_EQ(o.hdr.ipv4.hdr_checksum, o.hdr.ipv4.compute_checksum());
  EXPECT_EQ(o.hdr.agq.width, 20);
  EXPECT_TRUE(o.hdr.agq.flags & proto::kAgqFlagRetransmit);
  EXPECT_EQ(lanes_of(o.hdr), c.expect(20, 20, 1));
  EXPECT_EQ(dump_all(), before);
  EXPECT_EQ(counter("agq_result_resent"), 1u);
  EXPECT_EQ(counter("agq_contributions"), 2u);
}

TEST_F(AgqScenario, SlotReuseAlternatesVersionsAndZeroesOldWindow) {
  const JobSpec j = job_spec(1, 2, 1, 1);
  add(j);
  const uint32_t row = prog.placement(1)->row_base;
  std::mt19937 rng(3);
  const Chunk c0 = make_chunk(rng, 2, 32), c1 = make_chunk(rng, 2, 24), c2 = make_chunk(rng, 2, 12);
  check_replicas(*this, j, reduce(*this, j, 0, 0, 32, c0), c0.expect(32, 32, 1), 32);
  EXPECT_EQ(cell(row, "row_occupancy.v0"), 0xFFu);
  check_replicas(*this, j, reduce(*this, j, 0, 1, 24, c1), c1.expect(24, 24, 1), 24);
  EXPECT_EQ(cell(row, "row_occupancy.v1"), 0xFCu);
  EXPECT_EQ(cell(row, "row_occupancy.v0"), 0xFFu);  // v0's result is kept
  // Third use: v0 again. Its first contribution frees and zeroes the old
  // 32-bit window and takes 12 bits.
  const Out first = send(j, data_pkt(j, 0, 0, 0, 12, c2.u[0]));
  EXPECT_TRUE(is_drop(first.decision, AgqDrop::Absorbed));
  EXPECT_EQ(cell(row, "row_occupancy.v0"), 0xE0u);
  for (int k = 0; k < 32; ++k) {
    char name[16];
    std::snprintf(name, sizeof name, "lane%02d.v0", k);
    EXPECT_EQ(cell(row, name), uint64_t(contribution(c2.u[0][k], 12, 12, 1)) << 20) << name;
  }
  const Out o = send(j, data_pkt(j, 1, 0, 0, 12, c2.u[1]));
  check_replicas(*this, j, o, c2.expect(12, 12, 1), 12);
  EXPECT_EQ(cell(row, "row_occupancy.v1"), 0xFCu);
}

TEST_F(AgqScenario, IgnoresRetransmittedPendingContribution) {
  const JobSpec j = job_spec(1, 3, 1, 1);
  add(j);
  std::mt19937 rng(5);
  const Chunk c = make_chunk(rng, 3, 16);
  send(j, data_pkt(j, 0, 0, 0, 16, c.u[0]));
  const auto before = dump_all();
  const Out dup = send(j, data_pkt(j, 0, 0, 0, 16, c.u[0], 0, proto::kAgqFlagRetransmit));
  EXPECT_TRUE(is_drop(dup.decision, AgqDrop::Duplicate));
  EXPECT_EQ(dump_all(), before);
  send(j, data_pkt(j, 1, 0, 0, 16, c.u[1]));
  const Out o = send(j, data_pkt(j, 2, 0, 0, 16, c.u[2]));
  check_replicas(*this, j, o, c.expect(16, 16, 2), 16);
  EXPECT_EQ(counter("agq_duplicate"), 1u);
  EXPECT_EQ(counter("agq_contributions"), 3u);
}

TEST_F(AgqScenario, RetransmitFromThePreviousSet) {
  const JobSpec j = job_spec(1, 2, 1, 1);
  add(j);
  std::mt19937 rng(6);
  const Chunk c0 = make_chunk(rng, 2, 16), c1 = make_chunk(rng, 2, 16);
  reduce(*this, j, 0, 0, 16, c0);  // worker 0's copy of the result is lost
  // Worker 1 has it and moves on to version 1.
  EXPECT_TRUE(is_drop(send(j, data_pkt(j, 1, 0, 1, 16, c1.u[1])).decision, AgqDrop::Absorbed));
  // Worker 0 retransmits version 0: the kept copy answers.
  const Out r = send(j, data_pkt(j, 0, 0, 0, 16, c0.u[0], 0, proto::kAgqFlagRetransmit));
  ASSERT_TRUE(is_unicast(r.decision, j.workers[0].port));
  EXPECT_EQ(lanes_of(r.hdr), c0.expect(16, 16, 1));
  const Out o = send(j, data_pkt(j, 0, 0, 1, 16, c1.u[0]));
  check_replicas(*this, j, o, c1.expect(16, 16, 1), 16);
}

TEST_F(AgqScenario, TwoJobsOnTheSameSwitchAreIsolated) {
  const JobSpec a = job_spec(10, 2, 2, 2), b = job_spec(11, 3, 2, 2);
  add(a);
  add(b);
  EXPECT_NE(prog.placement(10)->row_base, prog.placement(11)->row_base);
  EXPECT_NE(prog.placement(10)->slot_base, prog.placement(11)->slot_base);
  std::mt19937 rng(8);
  const Chunk ca = make_chunk(rng, 2, 32), cb = make_chunk(rng, 3, 32);
  // interleaved, same slot numbers
  send(a, data_pkt(a, 0, 1, 0, 32, ca.u[0]));
  send(b, data_pkt(b, 0, 1, 0, 32, cb.u[0]));
  send(b, data_pkt(b, 1, 1, 0, 32, cb.u[1]));
  // Job A's worker cannot speak for job B, nor for B's workers.
  const auto before = dump_all();
  Agq spoof = data_pkt(b, 2, 1, 0, 32, ca.u[1]);
  EXPECT_TRUE(is_drop(send_frame(worker_frame(a, 1, [&] { Agq x = spoof; x.worker_id = 1; return x; }()),
                                 a.workers[1].port).decision,
                      AgqDrop::BadWorker));
  EXPECT_TRUE(is_drop(send_frame(worker_frame(b, 2, spoof), a.workers[1].port).decision, AgqDrop::BadWorker));
  EXPECT_EQ(dump_all(), before);
  check_replicas(*this, a, send(a, data_pkt(a, 1, 1, 0, 32, ca.u[1])), ca.expect(32, 32, 1), 32);
  check_replicas(*this, b, send(b, data_pkt(b, 2, 1, 0, 32, cb.u[2])), cb.expect(32, 32, 2), 32);
  EXPECT_EQ(counter("drops_agq_bad_worker"), 2u);
}

TEST_F(AgqScenario, TwoWidthsShareARowWithoutOverlap) {
  const JobSpec j = job_spec(1, 2, 2, 1);  // slots 0 and 1 share row 0
  add(j);
  EXPECT_EQ(prog.placement(1)->row_shift, 1);
  // Extreme values: every value bit set, the sum is the largest possible.
  const Chunk c16{{std::vector<uint32_t>(32, low_mask(15)), std::vector<uint32_t>(32, low_mask(15))}};
  const Chunk c8{{std::vector<uint32_t>(32, low_mask(7)), std::vector<uint32_t>(32, low_mask(7))}};
  send(j, data_pkt(j, 0, 0, 0, 16, c16.u[0]));
  send(j, data_pkt(j, 0, 1, 0, 8, c8.u[0]));
  const Out o16 = send(j, data_pkt(j, 1, 0, 0, 16, c16.u[1]));
  const Out o8 = send(j, data_pkt(j, 1, 1, 0, 8, c8.u[1]));
  check_replicas(*this, j, o16, c16.expect(16, 16, 1), 16);
  check_replicas(*this, j, o8, c8.expect(8, 8, 1), 8);
  const unsigned p16 = o16.hdr.agq.pos, p8 = o8.hdr.agq.pos;
  EXPECT_EQ(window_occ_mask(p16, 4) & window_occ_mask(p8, 2), 0);
  EXPECT_EQ(cell(0, "row_occupancy.v0"), uint64_t(window_occ_mask(p16, 4) | window_occ_mask(p8, 2)));
}

TEST_F(AgqScenario, ValuesBeyondTheValueBitsCannotReachANeighbour) {
  const JobSpec j = job_spec(1, 2, 2, 1);
  add(j);
  std::mt19937 rng(9);
  const Chunk good = make_chunk(rng, 2, 16);
  const Chunk evil{{std::vector<uint32_t>(32, 0xFFFFFFFFu), std::vector<uint32_t>(32, 0xFFFFFFFFu)}};
  send(j, data_pkt(j, 0, 0, 0, 16, good.u[0]));
  send(j, data_pkt(j, 0, 1, 0, 16, evil.u[0]));
  send(j, data_pkt(j, 1, 1, 0, 16, evil.u[1]));  // slot 1 completes with masked values
  const Out o = send(j, data_pkt(j, 1, 0, 0, 16, good.u[1]));
  check_replicas(*this, j, o, good.expect(16, 16, 1), 16);
}

TEST_F(AgqScenario, MemoryExhaustionFallsBackToThePs) {
  const JobSpec j = job_spec(1, 2, 4, 1);  // 4 slots in one row
  add(j);
  std::mt19937 rng(10);
  const Chunk c0 = make_chunk(rng, 2, 32), c1 = make_chunk(rng, 2, 16);
  send(j, data_pkt(j, 0, 0, 0, 32, c0.u[0]));  // takes all 8 units of half 0
  const Out f0 = send(j, data_pkt(j, 0, 1, 0, 16, c1.u[0], 9));
  ASSERT_TRUE(is_unicast(f0.decision, kPsPort));
  EXPECT_EQ(f0.hdr.agq.type, AgqType::FallbackData);
  EXPECT_EQ(f0.hdr.agq.width, 0);
  EXPECT_EQ(f0.hdr.ethernet.dst, kPsMac);
  EXPECT_EQ(f0.hdr.ipv4.dst, kPsIp);
  EXPECT_EQ(f0.hdr.agq.worker_id, 0);
  EXPECT_EQ(lanes_of(f0.hdr), c1.u[0]);  // unaggregated
  const Out f1 = send(j, data_pkt(j, 1, 1, 0, 16, c1.u[1], 9));
  ASSERT_TRUE(is_unicast(f1.decision, kPsPort));
  const Out f1r = send(j, data_pkt(j, 1, 1, 0, 16, c1.u[1], 9, proto::kAgqFlagRetransmit));
  ASSERT_TRUE(is_unicast(f1r.decision, kPsPort));  // retransmissions go to the PS too
  EXPECT_EQ(counter("agq_fallback"), 1u);
  EXPECT_EQ(counter("agq_fallback_data"), 3u);
  // The PS answers: multicast RESULT with FALLBACK.
  Agq ps;
  ps.type = AgqType::PsResult;
  ps.job_id = 1;
  ps.slot = 1;
  ps.seq = 9;
  ps.num_workers = 2;
  ps.req_width = ps.width = 16;
  ps.guard = 1;
  const auto expect = c1.expect(16, 16, 1);
  std::copy(expect.begin(), expect.end(), ps.lanes.begin());
  const Out r = send_ps(ps);
  check_replicas(*this, j, r, expect, 16);
  for (const Replica& rep : replicas(r)) EXPECT_TRUE(rep.hdr.agq.flags & proto::kAgqFlagFallback);
  // Unicast answer to one worker's retransmission.
  Agq again = ps;
  again.flags = proto::kAgqFlagRetransmit;
  again.worker_id = 1;
  const Out u = send_ps(again);
  ASSERT_TRUE(is_unicast(u.decision, j.workers[1].port));
  EXPECT_EQ(u.hdr.ethernet.dst, j.workers[1].mac);
  EXPECT_EQ(u.hdr.agq.type, AgqType::Result);
  EXPECT_TRUE(u.hdr.agq.flags & proto::kAgqFlagFallback);
  EXPECT_EQ(counter("agq_ps_results"), 2u);
  // A PS_RESULT from a worker's port is not the PS.
  EXPECT_TRUE(is_drop(send_frame(ps_frame(ps), j.workers[0].port).decision, AgqDrop::BadWorker));
  // Next use of slot 1, version 0 again after v1: the fallback had no window.
  EXPECT_EQ(cell(0, "row_occupancy.v0"), 0xFFu);
}

TEST_F(AgqScenario, GrantsLessUnderPressureAndMaxWidthCaps) {
  const JobSpec j = job_spec(1, 2, 2, 1);
  add(j);
  std::mt19937 rng(11);
  const Chunk big = make_chunk(rng, 2, 24), c = make_chunk(rng, 2, 32);
  send(j, data_pkt(j, 0, 0, 0, 24, big.u[0]));  // 6 units
  send(j, data_pkt(j, 0, 1, 0, 32, c.u[0]));    // only 2 units left: 8 bits, d = 24
  const Out o = send(j, data_pkt(j, 1, 1, 0, 32, c.u[1]));
  EXPECT_EQ(o.hdr.agq.width, 8);
  EXPECT_EQ(o.hdr.agq.req_width, 32);
  check_replicas(*this, j, o, c.expect(32, 8, 1), 8);

  const JobSpec capped = job_spec(2, 2, 1, 1, ResultDelivery::Multicast, 16);
  add(capped);
  const Chunk cc = make_chunk(rng, 2, 32);
  const Out oc = reduce(*this, capped, 0, 0, 32, cc);
  EXPECT_EQ(oc.hdr.agq.width, 16);
  check_replicas(*this, capped, oc, cc.expect(32, 16, 1), 16);
}

TEST_F(AgqScenario, OverflowFlagPropagates) {
  const JobSpec j = job_spec(1, 2, 1, 1);
  add(j);
  std::mt19937 rng(12);
  const Chunk c = make_chunk(rng, 2, 16);
  send(j, data_pkt(j, 0, 0, 0, 16, c.u[0], 0, proto::kAgqFlagOverflow));
  const Out o = send(j, data_pkt(j, 1, 0, 0, 16, c.u[1]));
  EXPECT_TRUE(o.hdr.agq.flags & proto::kAgqFlagOverflow);
  EXPECT_EQ(counter("agq_overflow"), 1u);
  // Next use (v1): overflow on the last contribution only.
  send(j, data_pkt(j, 0, 0, 1, 16, c.u[0]));
  const Out o1 = send(j, data_pkt(j, 1, 0, 1, 16, c.u[1], 0, proto::kAgqFlagOverflow));
  EXPECT_TRUE(o1.hdr.agq.flags & proto::kAgqFlagOverflow);
  // And a clean use after it carries no flag.
  send(j, data_pkt(j, 0, 0, 0, 16, c.u[0]));
  const Out o2 = send(j, data_pkt(j, 1, 0, 0, 16, c.u[1]));
  EXPECT_FALSE(o2.hdr.agq.flags & proto::kAgqFlagOverflow);
  EXPECT_EQ(lanes_of(o2.hdr), c.expect(16, 16, 1));
}

TEST_F(AgqScenario, InvalidPacketsAreDroppedWithoutTouchingState) {
  const JobSpec j = job_spec(1, 2, 2, 2);
  add(j);
  std::mt19937 rng(13);
  const Chunk c = make_chunk(rng, 2, 16);
  send(j, data_pkt(j, 0, 0, 0, 16, c.u[0]));  // some live state
  const auto before = dump_all();
  auto expect_drop = [&](const Out& o, AgqDrop r, const char* what) {
    EXPECT_TRUE(is_drop(o.decision, r)) << what;
    EXPECT_EQ(dump_all(), before) << what;
  };
  Agq a = data_pkt(j, 1, 0, 0, 16, c.u[1]);
  { Agq x = a; x.ver = 2; expect_drop(send(j, x), AgqDrop::Malformed, "version"); }
  { Agq x = a; x.type = AgqType::Result; expect_drop(send(j, x), AgqDrop::Malformed, "type"); }
  { Agq x = a; x.n_lanes = 16; expect_drop(send(j, x), AgqDrop::Malformed, "n_lanes"); }
  { Agq x = a; x.job_id = 99; expect_drop(send(j, x), AgqDrop::UnknownJob, "job 99"); }
  { Agq x = a; x.job_id = 0; expect_drop(send(j, x), AgqDrop::UnknownJob, "job 0"); }
  { Agq x = a; x.num_workers = 3; expect_drop(send(j, x), AgqDrop::BadWorker, "N"); }
  expect_drop(send_frame(worker_frame(j, 1, a), j.workers[0].port), AgqDrop::BadWorker, "port");
  {
    auto f = worker_frame(j, 1, a);
    f[14 + 12] ^= 1;  // IPv4 source
    expect_drop(send_frame(f, j.workers[1].port), AgqDrop::BadWorker, "src ip");
  }
  {
    Agq x = a;
    x.worker_id = 2;
    expect_drop(send_frame(worker_frame(j, 1, x), j.workers[1].port), AgqDrop::BadWorker, "worker_id >= N");
  }
  { Agq x = a; x.slot = 2; expect_drop(send(j, x), AgqDrop::BadSlot, "slot"); }
  for (uint8_t bad : {0, 2, 6, 10, 36, 255}) {
    Agq x = a;
    x.req_width = bad;
    expect_drop(send(j, x), AgqDrop::BadWidth, "width");
  }
  EXPECT_EQ(counter("drops_agq_malformed"), 3u);
  EXPECT_EQ(counter("drops_agq_unknown_job"), 2u);
  EXPECT_EQ(counter("drops_agq_bad_worker"), 4u);
  EXPECT_EQ(counter("drops_agq_bad_slot"), 1u);
  EXPECT_EQ(counter("drops_agq_bad_width"), 6u);
  // A truncated agq header is a parser error.
  auto f = worker_frame(j, 1, a);
  f.resize(f.size() - 10);
  EXPECT_EQ(send_frame(f, j.workers[1].port).decision.kind, Decision::Kind::Drop);
  EXPECT_EQ(counter("parser_errors"), 1u);
  EXPECT_EQ(dump_all(), before);
  // The job still completes.
  check_replicas(*this, j, send(j, a), c.expect(16, 16, 1), 16);
}

TEST_F(AgqScenario, PsDeliveryUnicastsTheResultToThePs) {
  const JobSpec j = job_spec(1, 2, 1, 1, ResultDelivery::Ps);
  add(j);
  std::mt19937 rng(14);
  const Chunk c = make_chunk(rng, 2, 16);
  const Out o = reduce(*this, j, 0, 0, 16, c);
  ASSERT_TRUE(is_unicast(o.decision, kPsPort));
  EXPECT_EQ(o.hdr.agq.type, AgqType::Result);
  EXPECT_EQ(o.hdr.ethernet.dst, kPsMac);
  EXPECT_EQ(o.hdr.ipv4.hdr_checksum, o.hdr.ipv4.compute_checksum());
  EXPECT_EQ(lanes_of(o.hdr), c.expect(16, 16, 1));
}

TEST_F(AgqScenario, OrdinaryTrafficIsForwardedAndEgressLeavesItAlone) {
  proto::UdpFrameSpec f;
  f.src_mac = {0x02, 0, 0, 0, 0, 0x33};
  f.dst_mac = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  f.src_ip = 0x0A000033;
  f.dst_ip = 0x0AFFFFFF;
  f.dst_port = 53;
  const uint8_t payload[8] = {1, 2, 3};
  auto bytes = proto::build_udp_frame(f, payload);
  const auto orig = bytes;
  tna::IngressIntrinsicMd md;
  md.ingress_port = 3;
  const Decision d = prog.process(bytes, md);
  EXPECT_EQ(d.kind, Decision::Kind::Multicast);
  EXPECT_EQ(d.group, pipeline::Forwarding::kFloodGroup);
  prog.egress(bytes, 4, 0);
  EXPECT_EQ(bytes, orig);
  EXPECT_EQ(counter("agq_packets"), 0u);
}

// The 16-lane profile (PROTOCOL §10): 126-byte frames, lane00..lane15 only;
// a packet whose n_lanes is not the job's is malformed. Every frame the
// switch makes carries the boot epoch (§11), the DATA's epoch is ignored.
TEST_F(AgqScenario, SixteenLaneProfileAndBootEpoch) {
  set_epoch(0x1234);
  JobSpec j = job_spec(1, 2, 2, 1);
  j.lanes = 16;
  add(j);
  std::mt19937 rng(15);
  const Chunk c = make_chunk(rng, 2, 16);
  auto pkt = [&](uint8_t w) {
    Agq a = data_pkt(j, w, 0, 0, 16, c.u[w]);
    a.n_lanes = 16;
    a.epoch = 0x7777;
    return a;
  };
  Agq wrong = pkt(0);
  wrong.n_lanes = 32;
  EXPECT_TRUE(is_drop(send(j, wrong).decision, AgqDrop::Malformed));
  const Out o0 = send(j, pkt(0));
  EXPECT_EQ(o0.bytes.size(), 126u);
  EXPECT_TRUE(is_drop(o0.decision, AgqDrop::Absorbed));
  const Out o1 = send(j, pkt(1));
  ASSERT_EQ(o1.decision.kind, Decision::Kind::Multicast);
  ASSERT_TRUE(o1.parsed);
  EXPECT_EQ(o1.bytes.size(), 126u);
  EXPECT_EQ(o1.hdr.agq.epoch, 0x1234);
  EXPECT_EQ(o1.hdr.agq.n_lanes, 16);
  std::vector<uint32_t> expect = c.expect(16, 16, 1);
  std::fill(expect.begin() + 16, expect.end(), 0u);
  EXPECT_EQ(lanes_of(o1.hdr), expect);
  for (const Replica& r : replicas(o1)) {
    EXPECT_EQ(r.bytes.size(), 126u);
    EXPECT_EQ(r.hdr.agq.epoch, 0x1234);
  }
  const uint32_t row = prog.placement(1)->row_base;
  EXPECT_NE(cell(row, "lane15.v0"), 0u);
  for (int k = 16; k < 32; ++k) EXPECT_EQ(cell(row, "lane" + std::to_string(k) + ".v0"), 0u) << k;
  // A retransmission after completion: the resent RESULT carries it too.
  Agq again = pkt(0);
  again.flags |= proto::kAgqFlagRetransmit;
  const Out o2 = send(j, again);
  ASSERT_TRUE(o2.parsed);
  EXPECT_EQ(o2.hdr.agq.epoch, 0x1234);
  EXPECT_EQ(counter("drops_agq_malformed"), 1u);
}

TEST_F(AgqScenario, TnaRuleCheckIsLiveInThisBuild) {
#ifdef AGQ_CHECK_TNA_RULES
  tna::Register<Pair<uint32_t>> r("lane00", 1);
  tna::PassClock::begin_pass();
  lane_add(r, 0, 1).execute(0);
  EXPECT_THROW(lane_add(r, 1, 1).execute(0), std::logic_error);
  tna::PassClock::end_pass();
#else
  GTEST_SKIP() << "built without AGQ_CHECK_TNA_RULES";
#endif
}
