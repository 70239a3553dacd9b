// The agq constant tables and encoding formulas: alloc_t exhaustively against
// an independent model, window/grant/shift tables, encode/decode round trips.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "pipeline/agq/registers.hpp"
#include "pipeline/agq/tables.hpp"

using namespace agq::pipeline::agq;

namespace {

bool unit_free(uint8_t occ, unsigned u) { return !(occ & (0x80u >> u)); }

// Independent model: the length of the maximal free run around unit u.
unsigned run_len_at(uint8_t occ, unsigned u) {
  if (!unit_free(occ, u)) return 0;
  unsigned lo = u, hi = u;
  while (lo > 0 && unit_free(occ, lo - 1)) --lo;
  while (hi + 1 < kUnits && unit_free(occ, hi + 1)) ++hi;
  return hi - lo + 1;
}
bool run_starts_at(uint8_t occ, unsigned u) { return unit_free(occ, u) && (u == 0 || !unit_free(occ, u - 1)); }

}  // namespace

TEST(AgqTables, AllocExhaustive) {
  const ConstTables& t = const_tables();
  EXPECT_EQ(t.alloc_t.size(), 2048u);
  for (unsigned occ = 0; occ < 256; ++occ) {
    unsigned widest = 0, best_fit = 0;  // best_fit: smallest run >= req, per req below
    for (unsigned u = 0; u < kUnits; ++u) widest = std::max(widest, run_len_at(uint8_t(occ), u));
    for (unsigned req = 1; req <= kUnits; ++req) {
      SCOPED_TRACE(testing::Message() << "occ=" << occ << " req=" << req);
      const AllocAction& a = t.alloc_t.apply(alloc_key(uint8_t(occ), req));
      ASSERT_TRUE(t.alloc_t.hit(alloc_key(uint8_t(occ), req)));
      EXPECT_LE(a.w, req);                                    // never more than asked
      EXPECT_LE(a.pos + a.w, kUnits);
      EXPECT_EQ(a.occ_mask, window_occ_mask(a.pos, a.w));
      EXPECT_EQ(a.occ_mask & occ, 0u) << "overlaps a live window";
      best_fit = 0;
      for (unsigned u = 0; u < kUnits; ++u) {
        const unsigned len = run_len_at(uint8_t(occ), u);
        if (len >= req && (best_fit == 0 || len < best_fit)) best_fit = len;
      }
      if (best_fit != 0) {
        EXPECT_EQ(a.w, req);
        EXPECT_TRUE(run_starts_at(uint8_t(occ), a.pos));
        EXPECT_EQ(run_len_at(uint8_t(occ), a.pos), best_fit) << "not the best fit";
        // lowest position among equally good runs
        for (unsigned u = 0; u < a.pos; ++u)
          EXPECT_FALSE(run_starts_at(uint8_t(occ), u) && run_len_at(uint8_t(occ), u) == best_fit);
      } else {
        EXPECT_EQ(a.w, widest) << "not the widest run";
        if (widest) {
          EXPECT_TRUE(run_starts_at(uint8_t(occ), a.pos));
        }
      }
    }
  }
}

TEST(AgqTables, AllocFullRowGrantsNothing) {
  for (unsigned req = 1; req <= 8; ++req) EXPECT_EQ(const_tables().alloc_t.apply(alloc_key(0xFF, req)).w, 0);
}

TEST(AgqTables, WindowMasks) {
  EXPECT_EQ(window_cell_mask(0, 8), 0xFFFFFFFFu);
  EXPECT_EQ(window_cell_mask(0, 1), 0xF0000000u);
  EXPECT_EQ(window_cell_mask(7, 1), 0x0000000Fu);
  EXPECT_EQ(window_cell_mask(2, 3), 0x00FFF000u);
  EXPECT_EQ(window_occ_mask(2, 3), 0x38);
  EXPECT_EQ(window_occ_mask(0, 8), 0xFF);
  const ConstTables& t = const_tables();
  for (unsigned pos = 0; pos < 8; ++pos)
    for (unsigned w = 1; pos + w <= 8; ++w) {
      EXPECT_EQ(t.window_t.apply(window_key(pos, w)).cell_mask, window_cell_mask(pos, w));
      EXPECT_EQ(t.window_t.apply(window_key(pos, w)).occ_mask, window_occ_mask(pos, w));
    }
  EXPECT_EQ(t.window_t.apply(window_key(0, 0)).cell_mask, 0u);  // no window: miss, clears nothing
}

TEST(AgqTables, GrantNeedsTwoValueBits) {
  const ConstTables& t = const_tables();
  for (unsigned g = 0; g <= 5; ++g)
    for (unsigned w = 0; w <= 8; ++w) {
      const GrantAction& e = t.grant_t.apply(grant_key(w, g));
      EXPECT_EQ(e.ok, 4 * w >= g + 2) << w << " " << g;
      EXPECT_EQ(e.ok, w >= min_grant_units(g));
      if (e.ok) {
        EXPECT_EQ(e.value_mask, low_mask(4 * w - g));
        EXPECT_EQ(e.result_mask, low_mask(4 * w));
      }
    }
}

TEST(AgqTables, ShiftTablesAreConstantShifts) {
  const ConstTables& t = const_tables();
  for (unsigned end = 1; end <= 8; ++end) {
    uint32_t lanes[32];
    for (auto& x : lanes) x = 0x1;
    if (auto run = t.align_t.apply(end).run) run(lanes);
    EXPECT_EQ(lanes[31], uint32_t(uint64_t(1) << (4 * (8 - end))));
    if (auto run = t.extract_t.apply(end).run) run(lanes);
    EXPECT_EQ(lanes[0], 1u);
  }
  for (unsigned r = 2; r <= 8; ++r)
    for (unsigned w = 1; w <= 8; ++w) {  // w = 0: no window, no lane path
      uint32_t lanes[32];
      for (auto& x : lanes) x = 0xFFFFFFFFu;
      if (auto run = t.trunc_t.apply(trunc_key(r, w)).run) run(lanes);
      EXPECT_EQ(lanes[5], uint32_t(0xFFFFFFFFull >> (4 * (r > w ? r - w : 0)))) << r << " " << w;
    }
  for (unsigned s = 0; s <= kMaxRowShift; ++s) EXPECT_EQ(t.slot_row_t.apply(s).run(0xFFFF), 0xFFFFu >> s);
}

TEST(AgqTables, ForwardTableNamesEveryVerdict) {
  const ConstTables& t = const_tables();
  for (unsigned v = 0; v < unsigned(Verdict::Count); ++v)
    for (auto d : {ResultDelivery::Multicast, ResultDelivery::Ps})
      EXPECT_TRUE(t.agq_forward_t.hit(forward_key(Verdict(v), d)));
  EXPECT_STREQ(t.agq_forward_t.apply(forward_key(Verdict::Result, ResultDelivery::Ps)).name, "result_to_ps");
  EXPECT_STREQ(t.agq_forward_t.apply(forward_key(Verdict::Result, ResultDelivery::Multicast)).name,
               "result_multicast");
}

TEST(AgqTables, SlotWindowPacking) {
  const uint16_t c = pack_window(5, 3, false, true);
  EXPECT_EQ(window_pos(c), 5u);
  EXPECT_EQ(window_units(c), 3u);
  EXPECT_TRUE(c & kWinOverflow);
  EXPECT_FALSE(c & kWinFallback);
  EXPECT_EQ(window_units(pack_window(0, 8, false, false)), 8u);
}

TEST(AgqEncoding, GuardBits) {
  EXPECT_EQ(guard_bits(1), 0u);
  EXPECT_EQ(guard_bits(2), 1u);
  EXPECT_EQ(guard_bits(3), 2u);
  EXPECT_EQ(guard_bits(4), 2u);
  EXPECT_EQ(guard_bits(5), 3u);
  EXPECT_EQ(guard_bits(32), 5u);
  EXPECT_EQ(min_grant_units(0), 1u);
  EXPECT_EQ(min_grant_units(2), 1u);
  EXPECT_EQ(min_grant_units(3), 2u);
  EXPECT_EQ(min_grant_units(5), 2u);
}

TEST(AgqEncoding, EncodeBiasClip) {
  // R = 8, g = 1: b = 7, q in [-64, 63], u = q + 64.
  EXPECT_EQ(encode_value(0.0, 0, 8, 1).u, 64u);
  EXPECT_EQ(encode_value(-64.0, 0, 8, 1).u, 0u);
  EXPECT_EQ(encode_value(63.0, 0, 8, 1).u, 127u);
  EXPECT_FALSE(encode_value(63.0, 0, 8, 1).clipped);
  EXPECT_TRUE(encode_value(64.0, 0, 8, 1).clipped);
  EXPECT_EQ(encode_value(64.0, 0, 8, 1).u, 127u);
  EXPECT_TRUE(encode_value(-1000.0, 0, 8, 1).clipped);
  EXPECT_EQ(encode_value(-1000.0, 0, 8, 1).u, 0u);
  // block floating point: 0.75 at e = -2 is q = 3
  EXPECT_EQ(encode_value(0.75, -2, 16, 1).u, 3u + (1u << 14));
  // R = 32, g = 0 uses all 32 bits
  EXPECT_EQ(encode_value(-1.0, 0, 32, 0).u, 0x7FFFFFFFu);
}

TEST(AgqEncoding, ContributionMasksToValueBits) {
  // R = 16, W = 8, g = 2: d = 8, 6 value bits
  EXPECT_EQ(contribution(0xABCD, 16, 8, 2), (0xABCDu >> 8) & 0x3F);
  EXPECT_EQ(contribution(0xFFFFFFFFu, 32, 32, 0), 0xFFFFFFFFu);
  EXPECT_EQ(contribution(0xFFFFFFFFu, 32, 32, 1), 0x7FFFFFFFu);
}

TEST(AgqEncoding, DecodeRoundTripRandom) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 2000; ++iter) {
    const unsigned n = 1 + rng() % 32, g = guard_bits(n);
    const unsigned R = 8 + 4 * (rng() % 7);
    const unsigned W = std::max<unsigned>(4 * min_grant_units(g), R - 4 * (rng() % 4));
    if (W > R) continue;
    const int e = int(rng() % 9) - 4;
    std::vector<double> xs(n);
    std::vector<uint32_t> us(n);
    int64_t qsum = 0;
    const unsigned b = R - g;
    for (unsigned i = 0; i < n; ++i) {
      const int64_t q = int64_t(rng() % (1u << std::min(b, 20u))) - (int64_t(1) << (std::min(b, 20u) - 1));
      xs[i] = std::ldexp(double(q), e);
      const Encoded enc = encode_value(xs[i], e, R, g);
      ASSERT_FALSE(enc.clipped);
      us[i] = enc.u;
      qsum += (int64_t(enc.u) >> (R - W)) - (int64_t(1) << (W - g - 1));
    }
    uint32_t s = 0;
    for (uint32_t u : us) s += contribution(u, R, W, g);
    ASSERT_LT(uint64_t(s), uint64_t(1) << W) << "sum leaves the window";
    EXPECT_EQ(decode_sum_q(s, n, W, g), qsum);
    // Truncation error per element <= 2^(e+d); N of them.
    double x = 0;
    for (double v : xs) x += v;
    EXPECT_LE(std::fabs(decode_sum(s, n, W, g, e, R) - x), n * std::ldexp(1.0, e + int(R - W)) + 1e-9);
  }
}

TEST(AgqRegisters, PairedActionsTouchOneHalf) {
  agq::tna::Register<Pair<uint32_t>> r("lane00", 4);
  EXPECT_EQ(lane_add(r, 1, 5).execute(2), 5u);
  EXPECT_EQ(r.read(2).lo(), 0u);
  EXPECT_EQ(lane_clear(r, 1, ~0xFu).execute(2), 0u);
  agq::tna::Register<Pair<uint32_t>> bm("slot_bitmap", 1);
  bm.write(0, {0x0, 0x3});
  EXPECT_EQ(slot_bitmap_add(bm, 0, 0x2).execute(0), 0u);
  EXPECT_EQ(bm.read(0).lo(), 0x2u);
  EXPECT_EQ(bm.read(0).hi(), 0x1u);  // worker 1 moved on from version 1
  agq::tna::Register<Pair<uint8_t>> cnt("slot_count", 1);
  cnt.write(0, {2, 0});
  EXPECT_EQ(slot_count_inc(cnt, 0, 2).execute(0), 1);  // N -> 1: a new use
  agq::tna::Register<Pair<uint8_t>> occ("row_occupancy", 1);
  EXPECT_EQ(row_occupancy_cas(occ, 0, 0x00, 0xF0).execute(0), 1);
  EXPECT_EQ(row_occupancy_cas(occ, 0, 0x00, 0x0F).execute(0), 0);
  EXPECT_EQ(occ.read(0).lo(), 0xF0);
}
