// Grants that honour a DATA's min_width (docs/PROTOCOL.md §1, §2, §4):
// the switch grants min_width <= W <= min(R, max_width) or no window (the
// PS sums exactly), never less; a min_width that is not a multiple of 4,
// below g + 2 or above R makes the DATA malformed (drops_agq_bad_width,
// nothing of any job touched). Every frame goes through the fast program
// and the TNA model side by side (AgqHarness compares decisions, bytes,
// replicas and register dumps), so each case covers both.
#include <random>

#include "agq_test_util.hpp"

using namespace agq;
using namespace agq::agq_test;

namespace {

using AgqMinWidth = AgqFixture;

std::vector<uint32_t> rand_lanes(std::mt19937& rng, unsigned bits) {
  std::vector<uint32_t> v(32);
  for (auto& x : v) x = uint32_t(rng()) & low_mask(bits);
  return v;
}
std::vector<uint32_t> lanes_of(const pipeline::Headers& h) { return {h.agq.lanes.begin(), h.agq.lanes.end()}; }
std::vector<uint32_t> expect_sum(const std::vector<std::vector<uint32_t>>& u, unsigned req, unsigned width,
                                 unsigned g) {
  std::vector<uint32_t> out(32);
  for (int k = 0; k < 32; ++k) {
    std::vector<uint32_t> col;
    for (const auto& w : u) col.push_back(w[k]);
    out[k] = expected_lane(col, req, width, g);
  }
  return out;
}

}  // namespace

TEST(AgqMinWidthTables, GrantAllocHonoursMinWidthAndMinWidthValid) {
  const ConstTables& t = const_tables();
  for (unsigned w = 0; w <= kUnits; ++w)
    for (unsigned m = 1; m <= kUnits; ++m)
      EXPECT_EQ(t.grant_alloc_t.apply(grant_alloc_key(w, m)).ok, w > 0 && w >= m) << w << " " << m;
  for (unsigned g = 0; g <= guard_bits(kMaxWorkers); ++g)
    for (unsigned r = 4; r <= 32; r += 4)
      for (unsigned m = 0; m < 256; ++m)
        EXPECT_EQ(min_width_valid(m, r, g), m % 4 == 0 && m >= g + 2 && m <= r) << m << " " << r << " " << g;
  // The narrowest valid min_width is w_min: every grant honouring it leaves W - g >= 2.
  for (unsigned g = 0; g <= guard_bits(kMaxWorkers); ++g) {
    EXPECT_TRUE(min_width_valid(kUnitBits * min_grant_units(g), 32, g));
    EXPECT_FALSE(min_width_valid(kUnitBits * min_grant_units(g) - kUnitBits, 32, g));
    EXPECT_GE(kUnitBits * min_grant_units(g), g + 2);
  }
}

// 2 slots per row: slot 0 takes 24 bits, 8 stay free. Slot 1 asks 32 with
// min_width 16: the best run (8 bits) is narrower than its minimum, so it
// falls back -- no unit taken, every DATA of the sequence to the PS. Its
// next use (v1, an empty half) gets all 32; the use after (v0 again) asks
// min_width 8 and gets the 8 free bits.
TEST_F(AgqMinWidth, BestRunNarrowerThanMinWidthFallsBack) {
  const JobSpec j = job_spec(1, 2, 2, 1);
  add(j);
  std::mt19937 rng(1);
  const auto a0 = rand_lanes(rng, 23), a1 = rand_lanes(rng, 23);
  EXPECT_TRUE(is_drop(send(j, data_pkt(j, 0, 0, 0, 24, a0, 0, 0, 24)).decision, AgqDrop::Absorbed));
  EXPECT_EQ(cell(0, "row_occupancy.v0"), 0xFCu);
  const auto b0 = rand_lanes(rng, 31), b1 = rand_lanes(rng, 31);
  const Out f0 = send(j, data_pkt(j, 0, 1, 0, 32, b0, 5, 0, 16));
  ASSERT_TRUE(is_unicast(f0.decision, kPsPort));
  EXPECT_EQ(f0.hdr.agq.type, AgqType::FallbackData);
  EXPECT_EQ(f0.hdr.agq.width, 0);
  EXPECT_EQ(lanes_of(f0.hdr), b0);  // unaggregated: the PS sums exactly
  EXPECT_EQ(cell(0, "row_occupancy.v0"), 0xFCu) << "a fallback takes no unit";
  const Out f1 = send(j, data_pkt(j, 1, 1, 0, 32, b1, 5, 0, 16));
  ASSERT_TRUE(is_unicast(f1.decision, kPsPort));
  EXPECT_EQ(f1.hdr.agq.type, AgqType::FallbackData);
  EXPECT_EQ(counter("agq_fallback"), 1u);
  EXPECT_EQ(counter("agq_fallback_data"), 2u);
  // Slot 0 completes at its 24 bits, untouched by the fallback.
  const Out r0 = send(j, data_pkt(j, 1, 0, 0, 24, a1, 0, 0, 24));
  ASSERT_EQ(r0.decision.kind, Decision::Kind::Multicast);
  EXPECT_EQ(r0.hdr.agq.width, 24);
  EXPECT_EQ(lanes_of(r0.hdr), expect_sum({a0, a1}, 24, 24, 1));
  // Slot 1's next use (v1: an empty half) is granted its whole request.
  const auto c0 = rand_lanes(rng, 31), c1 = rand_lanes(rng, 31);
  send(j, data_pkt(j, 0, 1, 1, 32, c0, 6, 0, 16));
  const Out r1 = send(j, data_pkt(j, 1, 1, 1, 32, c1, 6, 0, 16));
  ASSERT_EQ(r1.decision.kind, Decision::Kind::Multicast);
  EXPECT_EQ(r1.hdr.agq.width, 32);
  // Slot 1 on v0 again, min_width 8: the 8 free bits honour it (d = 24).
  const auto e0 = rand_lanes(rng, 31), e1 = rand_lanes(rng, 31);
  send(j, data_pkt(j, 0, 1, 0, 32, e0, 7, 0, 8));
  const Out r2 = send(j, data_pkt(j, 1, 1, 0, 32, e1, 7, 0, 8));
  ASSERT_EQ(r2.decision.kind, Decision::Kind::Multicast);
  EXPECT_EQ(r2.hdr.agq.width, 8);
  EXPECT_EQ(r2.hdr.agq.pos, 6);
  EXPECT_EQ(lanes_of(r2.hdr), expect_sum({e0, e1}, 32, 8, 1));
  EXPECT_EQ(counter("agq_fallback"), 1u);
}

// min_width = g + 2 rounded up to a unit is the narrowest valid one: N = 4
// (g = 2) -> 4 bits (2 value bits), N = 8 (g = 3) -> 8 bits; one unit
// below is malformed.
TEST_F(AgqMinWidth, MinWidthAtTheBoundaryIsGranted) {
  const JobSpec j4 = job_spec(1, 4, 2, 1);
  add(j4);
  std::mt19937 rng(2);
  send(j4, data_pkt(j4, 0, 0, 0, 28, rand_lanes(rng, 26), 0, 0, 28));  // 7 units: 1 left
  std::vector<std::vector<uint32_t>> u;
  for (uint8_t w = 0; w < 4; ++w) u.push_back(rand_lanes(rng, 14));
  Out o;
  for (uint8_t w = 0; w < 4; ++w) o = send(j4, data_pkt(j4, w, 1, 0, 16, u[w], 3, 0, 4));
  ASSERT_EQ(o.decision.kind, Decision::Kind::Multicast);
  EXPECT_EQ(o.hdr.agq.width, 4);
  EXPECT_EQ(o.hdr.agq.pos, 7);
  EXPECT_EQ(lanes_of(o.hdr), expect_sum(u, 16, 4, 2));

  const JobSpec j8 = job_spec(2, 8, 2, 1);
  add(j8);
  send(j8, data_pkt(j8, 0, 0, 0, 24, rand_lanes(rng, 21), 0, 0, 24));  // 6 units: 2 left
  EXPECT_TRUE(is_drop(send(j8, data_pkt(j8, 0, 1, 0, 16, rand_lanes(rng, 13), 3, 0, 4)).decision, AgqDrop::BadWidth))
      << "min_width 4 < g + 2 = 5";
  u.clear();
  for (uint8_t w = 0; w < 8; ++w) u.push_back(rand_lanes(rng, 13));
  for (uint8_t w = 0; w < 8; ++w) o = send(j8, data_pkt(j8, w, 1, 0, 16, u[w], 3, 0, 8));
  ASSERT_EQ(o.decision.kind, Decision::Kind::Multicast);
  EXPECT_EQ(o.hdr.agq.width, 8);
  EXPECT_EQ(lanes_of(o.hdr), expect_sum(u, 16, 8, 3));
}

// max_width caps the grant below the request; a min_width above it has no
// grant anywhere: the sequence goes to the PS even on an empty row.
TEST_F(AgqMinWidth, MaxWidthBelowMinWidthFallsBack) {
  const JobSpec j = job_spec(1, 2, 2, 2, ResultDelivery::Multicast, 16);
  add(j);
  std::mt19937 rng(3);
  const Out f = send(j, data_pkt(j, 0, 0, 0, 32, rand_lanes(rng, 31), 1, 0, 24));
  ASSERT_TRUE(is_unicast(f.decision, kPsPort));
  EXPECT_EQ(f.hdr.agq.type, AgqType::FallbackData);
  EXPECT_EQ(cell(0, "row_occupancy.v0"), 0u);
  // min_width 16 = max_width: granted 16 of the 32 asked.
  const auto a = rand_lanes(rng, 31), b = rand_lanes(rng, 31);
  send(j, data_pkt(j, 0, 1, 0, 32, a, 2, 0, 16));
  const Out o = send(j, data_pkt(j, 1, 1, 0, 32, b, 2, 0, 16));
  ASSERT_EQ(o.decision.kind, Decision::Kind::Multicast);
  EXPECT_EQ(o.hdr.agq.width, 16);
  EXPECT_EQ(lanes_of(o.hdr), expect_sum({a, b}, 32, 16, 1));
}

// Only the first contribution's min_width is used: a later worker that
// disagrees (within what is valid) neither narrows nor widens the window.
TEST_F(AgqMinWidth, OnlyTheFirstContributionsMinWidthCounts) {
  const JobSpec j = job_spec(1, 2, 2, 1);
  add(j);
  std::mt19937 rng(4);
  send(j, data_pkt(j, 0, 0, 0, 24, rand_lanes(rng, 23), 0, 0, 24));  // 8 bits left
  const auto a = rand_lanes(rng, 31), b = rand_lanes(rng, 31);
  send(j, data_pkt(j, 0, 1, 0, 32, a, 1, 0, 8));                     // granted 8
  const Out o = send(j, data_pkt(j, 1, 1, 0, 32, b, 1, 0, 32));      // "min 32": not the first
  ASSERT_EQ(o.decision.kind, Decision::Kind::Multicast);
  EXPECT_EQ(o.hdr.agq.width, 8);
  EXPECT_EQ(lanes_of(o.hdr), expect_sum({a, b}, 32, 8, 1));
}

// Malformed min_width: counted in drops_agq_bad_width, dropped, and no
// register of any job changes -- neither the bitmap nor the count of the
// slot, whether the DATA would have been first, later, or a retransmission.
TEST_F(AgqMinWidth, MalformedMinWidthIsCountedDroppedAndTouchesNothing) {
  const JobSpec j = job_spec(1, 2, 2, 2);  // g = 1
  const JobSpec other = job_spec(2, 8, 2, 2);  // g = 3
  add(j);
  add(other);
  std::mt19937 rng(5);
  const auto a0 = rand_lanes(rng, 15), a1 = rand_lanes(rng, 15);
  send(j, data_pkt(j, 0, 0, 0, 16, a0, 0, 0, 16));  // live state: slot 0 pending
  const auto before = dump_all();
  uint64_t bad = 0;
  auto expect_drop = [&](const JobSpec& job, Agq x, const std::string& what) {
    EXPECT_TRUE(is_drop(send(job, x).decision, AgqDrop::BadWidth)) << what;
    EXPECT_EQ(dump_all(), before) << what;
    ++bad;
  };
  for (int m : {0, 1, 2, 3, 6, 10, 14, 20, 32, 36, 255}) {  // R = 16, g = 1: 4..16 step 4 is valid
    expect_drop(j, data_pkt(j, 1, 0, 0, 16, a1, 0, 0, m), "completing DATA, min_width " + std::to_string(m));
    expect_drop(j, data_pkt(j, 0, 1, 0, 16, a0, 0, 0, m), "first DATA, min_width " + std::to_string(m));
    expect_drop(j, data_pkt(j, 0, 0, 0, 16, a0, 0, proto::kAgqFlagRetransmit, m),
                "retransmission, min_width " + std::to_string(m));
  }
  for (int m : {0, 4}) expect_drop(other, data_pkt(other, 0, 0, 0, 16, a0, 0, 0, m), "g = 3, min_width " + std::to_string(m));
  EXPECT_EQ(counter("drops_agq_bad_width"), bad);
  EXPECT_EQ(counter("agq_contributions"), 1u);
  // The sequence still completes, exactly.
  const Out o = send(j, data_pkt(j, 1, 0, 0, 16, a1, 0, 0, 16));
  ASSERT_EQ(o.decision.kind, Decision::Kind::Multicast);
  EXPECT_EQ(o.hdr.agq.width, 16);
  EXPECT_EQ(lanes_of(o.hdr), expect_sum({a0, a1}, 16, 16, 1));
}
