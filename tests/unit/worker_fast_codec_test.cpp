// The packet path's vectorised codec against the scalar reference
// (agqc::encode / decode_sum), bit for bit: random values at every width,
// guard and exponent, the values that round half away from zero, clip
// edges, NaN/Inf, tails shorter than the lane profile, both profiles.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "lib/agq_codec.hpp"
#include "lib/agq_fast_codec.hpp"

using namespace agq::worker;

namespace {

uint32_t rd32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

void expect_same_encoding(const float* x, unsigned n_valid, unsigned lanes, int width, int guard, int e) {
  uint8_t out[4 * 32 + 4];
  std::memset(out, 0xAB, sizeof out);
  const bool clipped = fastc::encode_be(x, n_valid, lanes, width, guard, e, out + 1);  // unaligned on purpose
  bool ref_clipped = false;
  for (unsigned k = 0; k < lanes; ++k) {
    const auto r = agqc::encode(k < n_valid ? x[k] : 0.0f, width, guard, e);
    ref_clipped |= r.clipped;
    ASSERT_EQ(rd32(out + 1 + 4 * k), r.u) << "lane " << k << " x " << (k < n_valid ? x[k] : 0.0f) << " R " << width
                                          << " g " << guard << " e " << e;
  }
  EXPECT_EQ(clipped, ref_clipped);
  EXPECT_EQ(out[0], 0xAB);
  EXPECT_EQ(out[1 + 4 * lanes], 0xAB);  // nothing written past the lanes
}

}  // namespace

TEST(FastCodec, EncodeMatchesReferenceRandom) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0, 1);
  std::uniform_int_distribution<int> ed(-20, 20);
  for (int guard : {0, 1, 3, 5}) {
    for (int width = agqc::min_width(guard); width <= 32; width += 4) {
      for (int t = 0; t < 200; ++t) {
        float x[32];
        const float scale = std::ldexp(1.0f, ed(rng));
        for (float& v : x) v = nd(rng) * scale;
        const int e = agqc::exponent_for(4.0 * scale, width - guard) + (t % 3) - 1;  // some clip
        expect_same_encoding(x, 32, 32, width, guard, e);
        expect_same_encoding(x, 16, 16, width, guard, e);
        expect_same_encoding(x, unsigned(t % 32), 32, width, guard, e);  // a tensor's tail
      }
    }
  }
}

TEST(FastCodec, EncodeEdges) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int width : {4, 8, 16, 28, 32}) {
    for (int guard : {0, 2}) {
      if (width - guard < 2) continue;
      const double hi = std::ldexp(1.0, width - guard - 1) - 1;
      float x[32] = {0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f, 0.49999997f, -0.49999997f,
                     float(hi), float(hi) + 0.5f, float(-hi - 1), float(-hi - 1) - 0.5f, inf, -inf, nan, -0.0f,
                     float(hi + 0.25), float(-hi - 1.25), 1e-40f, -1e-40f, 3.4e38f, -3.4e38f, 1.0f, -1.0f};
      expect_same_encoding(x, 32, 32, width, guard, 0);
      expect_same_encoding(x, 32, 32, width, guard, -3);
      expect_same_encoding(x, 32, 32, width, guard, 5);
      expect_same_encoding(x, 32, 32, width, guard, agqc::kMinExponent);
      expect_same_encoding(x, 32, 32, width, guard, agqc::kMaxExponent);
    }
  }
}

TEST(FastCodec, DecodeMatchesReference) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> ud;
  for (unsigned n : {1u, 2u, 3u, 8u, 32u}) {
    const int g = agqc::guard_bits(n);
    for (int granted = agqc::min_width(g); granted <= 32; granted += 4) {
      for (int d : {0, 4, 12, 28}) {
        if (granted + d > 32) continue;  // R = granted + d <= 32: the window sum is below 2^(32-d)
        for (int e : {-100, -8, 0, 7, 100}) {
          uint8_t in[128];
          uint32_t s[32];
          for (unsigned k = 0; k < 32; ++k) {
            s[k] = granted == 32 ? ud(rng) : ud(rng) & uint32_t((uint64_t(1) << granted) - 1);
            in[4 * k] = uint8_t(s[k] >> 24), in[4 * k + 1] = uint8_t(s[k] >> 16);
            in[4 * k + 2] = uint8_t(s[k] >> 8), in[4 * k + 3] = uint8_t(s[k]);
          }
          for (unsigned n_valid : {32u, 16u, 5u}) {
            float out[32];
            std::fill(out, out + 32, -7.0f);
            const float mx = fastc::decode_be(in, n_valid, n, granted, g, e, d, out);
            float ref_mx = 0;
            for (unsigned k = 0; k < n_valid; ++k) {
              const float ref = float(agqc::decode_sum(s[k], n, granted, g, e, d));
              ASSERT_EQ(std::memcmp(&out[k], &ref, 4), 0) << k << " " << out[k] << " vs " << ref << " n " << n << " W " << granted << " d " << d << " e " << e << " s " << s[k];
              ref_mx = std::max(ref_mx, std::fabs(ref));
            }
            for (unsigned k = n_valid; k < 32; ++k) EXPECT_EQ(out[k], -7.0f);  // nothing past the tensor
            EXPECT_EQ(mx, ref_mx);
          }
        }
      }
    }
  }
}

TEST(FastCodec, ResidualMatchesReference) {
  // r := (x + r) - x_hat(u), x_hat = agqc::decoded_contribution, for the
  // lanes a worker sent: bit for bit the scalar formula; not finite -> 0.
  std::mt19937 rng(13);
  std::normal_distribution<float> nd(0, 1);
  for (unsigned n : {2u, 8u}) {
    const int g = agqc::guard_bits(n);
    for (int width : {8, 16, 32})
      for (int d : {0, 4}) {
        if (width - d - g < 2) continue;
        const int e = agqc::exponent_for(2.0, width - g);
        for (unsigned n_valid : {32u, 13u}) {
          float x[32], r[32], ref[32];
          uint8_t sent[128];
          for (unsigned k = 0; k < 32; ++k) {
            x[k] = nd(rng), r[k] = 0.01f * nd(rng);
            if (k == 3) x[k] = INFINITY;
            const uint32_t u = agqc::encode(x[k] + r[k], width, g, e).u;
            sent[4 * k] = uint8_t(u >> 24), sent[4 * k + 1] = uint8_t(u >> 16);
            sent[4 * k + 2] = uint8_t(u >> 8), sent[4 * k + 3] = uint8_t(u);
            const float v = float(double(x[k] + r[k]) - agqc::decoded_contribution(u, width, g, e, d));
            ref[k] = k < n_valid ? (std::isfinite(v) ? v : 0.0f) : r[k];
          }
          fastc::residual_be(sent, x, r, n_valid, width, g, e, d);
          for (unsigned k = 0; k < 32; ++k)
            ASSERT_EQ(std::memcmp(&r[k], &ref[k], 4), 0) << k << " " << r[k] << " vs " << ref[k];
          EXPECT_EQ(r[3], 0.0f);  // Inf input: no residual carried
        }
      }
  }
}
