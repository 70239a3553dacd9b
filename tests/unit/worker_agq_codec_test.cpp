// The agq encoding (docs/PROTOCOL.md §2) and width choice (§5) as the
// workers implement them: guard bits, bias, clipping, truncation to the
// granted width, exact decode, error bound, and the error-budget width choice.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "lib/agq_codec.hpp"
#include "lib/agq_job.hpp"

using namespace agq::worker;
using namespace agq::worker::agqc;

TEST(AgqCodec, GuardBits) {
  EXPECT_EQ(guard_bits(1), 0);
  EXPECT_EQ(guard_bits(2), 1);
  EXPECT_EQ(guard_bits(3), 2);
  EXPECT_EQ(guard_bits(4), 2);
  EXPECT_EQ(guard_bits(5), 3);
  EXPECT_EQ(guard_bits(32), 5);
}

TEST(AgqCodec, EncodeBiasAndClip) {
  // R = 8, g = 1: b = 7, q in [-64, 63], u = q + 64.
  EXPECT_EQ(encode(0.0f, 8, 1, 0).u, 64u);
  EXPECT_EQ(encode(3.0f, 8, 1, 0).u, 67u);
  EXPECT_EQ(encode(-3.0f, 8, 1, 0).u, 61u);
  EXPECT_EQ(encode(63.0f, 8, 1, 0).u, 127u);
  EXPECT_FALSE(encode(63.0f, 8, 1, 0).clipped);
  EXPECT_EQ(encode(63.6f, 8, 1, 0).u, 127u);
  EXPECT_TRUE(encode(63.6f, 8, 1, 0).clipped);
  EXPECT_EQ(encode(-64.0f, 8, 1, 0).u, 0u);
  EXPECT_FALSE(encode(-64.0f, 8, 1, 0).clipped);
  EXPECT_TRUE(encode(-65.0f, 8, 1, 0).clipped);
  EXPECT_TRUE(encode(INFINITY, 8, 1, 0).clipped);
  // Block floating point: e = -3 makes the step 1/8.
  EXPECT_EQ(encode(0.375f, 8, 1, -3).u, 64u + 3);
  EXPECT_EQ(encode(6.0f, 8, 1, 1).u, 64u + 3);
  // Full width, N = 1: b = 32.
  EXPECT_EQ(encode(-2147483648.0f, 32, 0, 0).u, 0u);
  EXPECT_EQ(encode(0.0f, 32, 0, 0).u, 0x80000000u);
}

// Round trips: N workers, every (R, W <= R) with W - g >= 2; the exact sum
// fits the window and decodes within the documented bound.
TEST(AgqCodec, RoundTripEveryWidth) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (unsigned n : {1u, 2u, 3u, 4u, 7u, 32u}) {
    const int g = guard_bits(n);
    for (int r = min_width(g); r <= kMaxWidth; r += 4) {
      const int e = exponent_for(4.0, r - g);
      for (int w = 4; w <= r; w += 4) {
        if (w - g < 2) continue;
        const int d = r - w;
        for (int trial = 0; trial < 50; ++trial) {
          std::vector<uint32_t> us;
          double fsum = 0;
          bool clipped = false;
          for (unsigned i = 0; i < n; ++i) {
            const float x = std::clamp(nd(rng), -4.0f, 4.0f);
            const auto enc = encode(x, r, g, e);
            clipped |= enc.clipped;
            us.push_back(enc.u);
            fsum += x;
          }
          ASSERT_FALSE(clipped);
          const uint64_t s = expected_sum(us, r, w);
          ASSERT_LT(s, uint64_t(1) << w) << "n " << n << " R " << r << " W " << w;  // no carry leaves the window
          const double got = decode_sum(uint32_t(s), n, w, g, e, d);
          ASSERT_LE(std::fabs(got - fsum), error_bound(n, e, d) + 1e-12)
              << "n " << n << " R " << r << " W " << w << " e " << e;
        }
      }
    }
  }
}

TEST(AgqCodec, ExtremeValuesStillFitTheWindow) {
  // Every worker at the top of the range: the worst case for carries.
  for (unsigned n : {2u, 3u, 4u, 5u, 16u, 32u}) {
    const int g = guard_bits(n);
    for (int r = 8; r <= 32; r += 4)
      for (int w = 4; w <= r; w += 4) {
        if (w - g < 2) continue;
        std::vector<uint32_t> hi(n, encode(1e30f, r, g, 0).u), lo(n, encode(-1e30f, r, g, 0).u);
        EXPECT_LT(expected_sum(hi, r, w), uint64_t(1) << w);
        EXPECT_EQ(expected_sum(lo, r, w), 0u);
        // All-minimum decodes to n * -2^(b-1) steps plus the unbiased
        // decode's n (2^d - 1) / 2 (what truncation removed, on average).
        const int d = r - w;
        EXPECT_DOUBLE_EQ(decode_sum(0, n, w, g, 0, d),
                         -double(n) * std::ldexp(1.0, r - g - 1) + double(n) * (std::ldexp(1.0, d) - 1) / 2);
      }
  }
}

TEST(AgqCodec, ExactSumAtPartialGrant) {
  // N = 3 (g = 2), R = 16, W = 8 (d = 8): by hand.
  const int g = 2, r = 16, w = 8, e = 0;
  const uint32_t u0 = encode(1000.0f, r, g, e).u, u1 = encode(-500.0f, r, g, e).u, u2 = encode(7.0f, r, g, e).u;
  EXPECT_EQ(u0, 8192u + 1000);
  const std::vector<uint32_t> us{u0, u1, u2};
  const uint64_t s = expected_sum(us, r, w);
  EXPECT_EQ(s, (u0 >> 8) + (u1 >> 8) + (u2 >> 8));
  // Bias of three workers at W - g = 6 value bits: 3 * 32.
  // ... plus the mean of what truncation removed: 3 * 255 / 2.
  EXPECT_DOUBLE_EQ(decode_sum(uint32_t(s), 3, w, g, e, 8), (double(s) - 96.0) * 256.0 + 382.5);
  EXPECT_LE(std::fabs(decode_sum(uint32_t(s), 3, w, g, e, 8) - 507.0), error_bound(3, e, 8));
}

TEST(AgqCodec, ExponentFor) {
  EXPECT_EQ(exponent_for(127.0, 8), 0);   // top = 127
  EXPECT_EQ(exponent_for(128.0, 8), 1);
  EXPECT_EQ(exponent_for(1.0, 8), -6);    // 1 * 64 = 64 <= 127, * 128 > 127
  EXPECT_EQ(exponent_for(0.0, 8), kMinExponent);
  for (double range : {0.001, 0.37, 1.0, 4.0, 1000.0})
    for (int b = 3; b <= 32; ++b) {
      const int e = exponent_for(range, b);
      const double top = std::ldexp(1.0, b - 1) - 1;
      EXPECT_LE(std::ldexp(range, -e), top) << range << " " << b;
      EXPECT_GT(std::ldexp(range, -(e - 1)), top) << range << " " << b;  // the finest such e
    }
}

TEST(AgqCodec, WidthFromErrorBudget) {
  const int g = 1;  // N = 2
  // Chunk max equals the tensor max: step <= 1e-3 * 1 with 2x margin needs
  // 2 / 2^e <= 2^(b-1) - 1 and 2^e <= 1e-3: e = -10, b - 1 >= 11, b = 12 -> R = 13 -> 16.
  ChunkParams p = choose_params(1.0, 1.0, 1e-3, 2.0, g);
  EXPECT_EQ(p.width, 16);
  EXPECT_LE(std::ldexp(1.0, p.exponent), 1e-3);
  EXPECT_FALSE(encode(2.0f, p.width, g, p.exponent).clipped);
  // A chunk 64x smaller than the tensor max needs 6 bits less: 8 is enough.
  p = choose_params(1.0 / 64, 1.0, 1e-3, 2.0, g);
  EXPECT_EQ(p.width, 8);
  EXPECT_LE(std::ldexp(1.0, p.exponent), 1e-3);
  // A tighter budget asks for more bits, a looser one for fewer.
  EXPECT_GT(choose_params(1.0, 1.0, 1e-6, 2.0, g).width, 16);
  EXPECT_LT(choose_params(1.0, 1.0, 1e-1, 2.0, g).width, 16);
  // 1024x smaller: 3 value bits + 1 guard bit, the narrowest window (8x packing).
  EXPECT_EQ(choose_params(1.0 / 1024, 1.0, 1e-3, 2.0, g).width, 4);
  // Never fewer than 2 value bits: with 8 workers (g = 3) the floor is 8 bits.
  EXPECT_EQ(min_width(guard_bits(8)), 8);
  EXPECT_EQ(choose_params(1.0 / 4096, 1.0, 1e-3, 2.0, guard_bits(8)).width, 8);
  // An all-zero chunk: narrowest width.
  EXPECT_EQ(choose_params(0.0, 1.0, 1e-3, 2.0, g).width, kMinWidth);
  // An unreachable budget saturates at 32 bits.
  EXPECT_EQ(choose_params(1.0, 1.0, 1e-12, 2.0, g).width, kMaxWidth);
  // Deterministic and monotone in the chunk max.
  int last = 0;
  for (double m = 1e-4; m <= 1.0; m *= 1.7) {
    const ChunkParams q = choose_params(m, 1.0, 1e-3, 2.0, g);
    EXPECT_EQ(q, choose_params(m, 1.0, 1e-3, 2.0, g));
    EXPECT_GE(q.width, last);
    last = q.width;
  }
}

TEST(AgqCodec, InitialParams) {
  const ChunkParams p = initial_params(16, 4.0, 2);
  EXPECT_EQ(p.width, 16);
  EXPECT_FALSE(encode(4.0f, 16, 2, p.exponent).clipped);
  EXPECT_FALSE(encode(-4.0f, 16, 2, p.exponent).clipped);
  EXPECT_TRUE(encode(9.0f, 16, 2, p.exponent).clipped);
}

TEST(AgqJob, SlotMappingAcrossRounds) {
  AgqJobSpec j;
  j.elements = 32 * 10;  // 10 chunks
  j.slots = 4;
  EXPECT_EQ(j.chunks(), 10u);
  EXPECT_EQ(j.slot_of(0, 0), 0u);
  EXPECT_EQ(j.slot_of(0, 5), 1u);
  EXPECT_EQ(j.slot_of(1, 0), 2u);  // global 10
  EXPECT_EQ(j.first_chunk(1, 2), 0u);
  EXPECT_EQ(j.first_chunk(1, 1), 3u);
  for (uint32_t r = 0; r < 3; ++r)
    for (uint32_t s = 0; s < 4; ++s) EXPECT_EQ(j.slot_of(r, j.first_chunk(r, s)), s);
  EXPECT_TRUE(j.validate().empty());
  j.rows = 3;
  EXPECT_FALSE(j.validate().empty());
  j.rows = 2;
  EXPECT_EQ(j.slots_per_row(), 2u);
  j.num_workers = 33;
  EXPECT_FALSE(j.validate().empty());
}

TEST(AgqCodec, TruncatedSumsDecodeUnbiased) {
  // Many random sums at partial grants: the mean signed error of the
  // decoded sums is ~0 (the plain decode's was -N (2^d - 1) / 2 steps), and
  // every error is within the bound N * 2^(e+d-1).
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
  for (unsigned n : {2u, 3u, 8u, 32u}) {
    const int g = guard_bits(n);
    // R <= 24: the float32 inputs fill the low bits of every u (at R = 32
    // they are zero below the mantissa, and truncation removes nothing).
    for (int r : {12, 16, 24})
      for (int w = min_width(g); w < r; w += 4) {
        const int d = r - w, e = exponent_for(1.0, r - g);
        double sum_err = 0, sum_plain = 0;
        const int trials = 4000;
        for (int t = 0; t < trials; ++t) {
          std::vector<uint32_t> us;
          double fsum = 0;
          for (unsigned i = 0; i < n; ++i) {
            const float x = ud(rng);
            us.push_back(encode(x, r, g, e).u);
            fsum += x;
          }
          const uint32_t s = uint32_t(expected_sum(us, r, w));
          const double got = decode_sum(s, n, w, g, e, d);
          ASSERT_LE(std::fabs(got - fsum), error_bound(n, e, d) * (1 + 1e-12))
              << "n " << n << " R " << r << " W " << w;
          sum_err += got - fsum;
          sum_plain += std::ldexp(double(int64_t(s) - (int64_t(n) << (w - g - 1))), e + d) - fsum;
        }
        const double step = std::ldexp(1.0, e + d), mean = sum_err / trials;
        // The mean of `trials` errors each within +-bound: its standard error
        // is ~bound / sqrt(3 trials); 0.05 bound is > 5 of them.
        EXPECT_LT(std::fabs(mean), 0.05 * error_bound(n, e, d)) << "n " << n << " R " << r << " W " << w;
        // The plain decode is biased by about -N/2 steps of 2^(e+d).
        EXPECT_LT(sum_plain / trials, -0.3 * n * step) << "n " << n << " R " << r << " W " << w;
      }
  }
}

TEST(AgqCodec, ErrorBoundFormula) {
  EXPECT_DOUBLE_EQ(error_bound(2, 0, 0), 1.0);      // N * 2^(e-1)
  EXPECT_DOUBLE_EQ(error_bound(3, -4, 8), 3 * 8.0);  // 3 * 2^(-4+8-1)
  EXPECT_DOUBLE_EQ(error_bound(32, 2, 4), 32 * 32.0);
}

TEST(AgqCodec, MinWidthFor) {
  EXPECT_EQ(min_width_for(16, 0, 1), 16);
  EXPECT_EQ(min_width_for(16, 8, 1), 8);
  EXPECT_EQ(min_width_for(16, 16, 1), 4);   // never below min_width(g)
  EXPECT_EQ(min_width_for(16, 16, 5), 8);   // N = 32: g + 2 = 7 -> 8
  EXPECT_EQ(min_width_for(8, 8, 5), 8);     // never above R
}

TEST(AgqCodec, DecodedContributionIsWhatTheSumCounted) {
  // sum over workers of x_hat_i equals the decoded sum exactly: the
  // residuals of error feedback account for all of the sum's error.
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (unsigned n : {2u, 5u}) {
    const int g = guard_bits(n);
    for (int w : {8, 12, 16}) {
      const int r = 16, d = r - w, e = exponent_for(4.0, r - g);
      std::vector<uint32_t> us;
      double xh = 0;
      for (unsigned i = 0; i < n; ++i) {
        us.push_back(encode(nd(rng), r, g, e).u);
        xh += decoded_contribution(us.back(), r, g, e, d);
      }
      EXPECT_DOUBLE_EQ(decode_sum(uint32_t(expected_sum(us, r, w)), n, w, g, e, d), xh) << n << " " << w;
    }
  }
}
