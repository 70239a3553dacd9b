#include "lib/agq_fast_codec.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lib/agq_codec.hpp"

#ifdef __AVX2__
#include <immintrin.h>
#endif

namespace agq::worker::fastc {

namespace {
// One lane of residual_be, the reference the AVX2 path equals bit for bit.
inline float residual_one(uint32_t u, float x, float r, int width, int guard, int exponent, int d) {
  const float xp = x + r;
  const float v = float(double(xp) - agqc::decoded_contribution(u, width, guard, exponent, d));
  return std::isfinite(v) ? v : 0.0f;
}
inline uint32_t ld_be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}
}  // namespace

#ifdef __AVX2__
namespace {

// Byte order of each 32-bit lane reversed (host <-> network).
inline __m256i bswap32(__m256i v) {
  const __m256i m = _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12,  //
                                     3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
  return _mm256_shuffle_epi8(v, m);
}

// 4 doubles -> q in [lo, hi] as agqc::encode rounds and clips; returns the
// clip mask (all-ones lanes where the value clipped or was not finite).
inline __m256d quantise4(__m256d s, __m256d lo, __m256d hi, __m256d& clip) {
  const __m256d sign = _mm256_set1_pd(-0.0), half = _mm256_set1_pd(0.5);
  // round half away from zero (llround): trunc(s + copysign(0.5, s)); exact for |s| < 2^52
  const __m256d t = _mm256_round_pd(_mm256_add_pd(s, _mm256_or_pd(_mm256_and_pd(s, sign), half)),
                                    _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256d gt = _mm256_cmp_pd(s, hi, _CMP_GT_OQ), lt = _mm256_cmp_pd(s, lo, _CMP_LT_OQ);
  const __m256d ok = _mm256_and_pd(_mm256_cmp_pd(s, lo, _CMP_GE_OQ), _mm256_cmp_pd(s, hi, _CMP_LE_OQ));
  clip = _mm256_andnot_pd(ok, _mm256_castsi256_pd(_mm256_set1_epi64x(-1)));
  // ok -> t; > hi (or +Inf) -> hi; < lo (or -Inf) -> lo; NaN -> 0 (the value zero)
  __m256d q = _mm256_and_pd(ok, t);
  q = _mm256_blendv_pd(q, hi, gt);
  q = _mm256_blendv_pd(q, lo, lt);
  return q;
}

}  // namespace

bool encode_be(const float* x, unsigned n_valid, unsigned n_lanes, int width, int guard, int exponent,
               uint8_t* out) {
  alignas(32) float pad[kMaxLanes];
  const float* src = x;
  if (n_valid < n_lanes) {
    std::memset(pad, 0, sizeof pad);
    std::memcpy(pad, x, n_valid * sizeof(float));
    src = pad;
  }
  const int b = width - guard;
  const double lo_i = -std::ldexp(1.0, b - 1);
  const __m256d lo = _mm256_set1_pd(lo_i), hi = _mm256_set1_pd(-lo_i - 1.0);
  const __m256d scale = _mm256_set1_pd(std::ldexp(1.0, -exponent));  // exact power of two
  // u = q - lo in [0, 2^b) <= 2^32 - 1: shifted by -2^31 it fits int32 exactly, then xor back.
  const __m256d shift = _mm256_set1_pd(-lo_i - 2147483648.0);
  const __m256i flip = _mm256_set1_epi32(int(0x80000000u));
  __m256d any = _mm256_setzero_pd();
  for (unsigned k = 0; k < n_lanes; k += 8) {
    const __m256 v = _mm256_loadu_ps(src + k);
    __m256d c0, c1;
    const __m256d q0 = quantise4(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), scale), lo, hi, c0);
    const __m256d q1 = quantise4(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), scale), lo, hi, c1);
    any = _mm256_or_pd(any, _mm256_or_pd(c0, c1));
    const __m128i i0 = _mm256_cvttpd_epi32(_mm256_add_pd(q0, shift));
    const __m128i i1 = _mm256_cvttpd_epi32(_mm256_add_pd(q1, shift));
    const __m256i u = _mm256_xor_si256(_mm256_set_m128i(i1, i0), flip);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 4 * k), bswap32(u));
  }
  return _mm256_movemask_pd(any) != 0;
}

float decode_be(const uint8_t* in, unsigned n_valid, unsigned n, int granted, int guard, int exponent, int d,
                float* out) {
  // d = 0: s - bias = (s ^ 2^31 as int32) + (2^31 - bias): every term an
  // exact double. d > 0, the unbiased decode (agqc::decode_sum): + N (2^d -
  // 1) / 2 steps of 2^e, i.e. c = N (2^d - 1) / 2^(d+1) steps of 2^(e+d).
  // Then the window sum s < 2^W <= 2^(32-d) is a non-negative int32 as it
  // is (no flip), bias < 2^W too, and s + (c - bias) needs at most
  // (33 - d) + (d + 1) bits: exact in double, as the reference's sum of its
  // two exact terms is -- the same value, the same rounding to float, and
  // no extra operation per lane.
  const double bias = std::ldexp(double(n), granted - guard - 1);
  const double c = d > 0 ? std::ldexp(double(uint64_t(n) * ((uint64_t(1) << d) - 1)), -(d + 1)) : 0.0;
  const __m256d off = _mm256_set1_pd(d > 0 ? c - bias : 2147483648.0 - bias);
  const __m256d scale = _mm256_set1_pd(std::ldexp(1.0, exponent + d));
  const __m256i flip = _mm256_set1_epi32(d > 0 ? 0 : int(0x80000000u));
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 mx = _mm256_setzero_ps();
  alignas(32) float tmp[8];
  for (unsigned k = 0; k < n_valid; k += 8) {
    __m256i s = bswap32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + 4 * k)));
    s = _mm256_xor_si256(s, flip);
    const __m256d d0 = _mm256_mul_pd(_mm256_add_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(s)), off), scale);
    const __m256d d1 = _mm256_mul_pd(_mm256_add_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(s, 1)), off), scale);
    __m256 f = _mm256_set_m128(_mm256_cvtpd_ps(d1), _mm256_cvtpd_ps(d0));
    if (n_valid - k >= 8) {
      _mm256_storeu_ps(out + k, f);
    } else {
      _mm256_store_ps(tmp, f);
      std::memcpy(out + k, tmp, (n_valid - k) * sizeof(float));
      // lanes past the tensor's end do not count towards the chunk's max
      const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n_valid - k)), idx);
      f = _mm256_and_ps(f, _mm256_castsi256_ps(keep));
    }
    mx = _mm256_max_ps(mx, _mm256_and_ps(f, absmask));
  }
  alignas(32) float m8[8];
  _mm256_store_ps(m8, mx);
  return *std::max_element(m8, m8 + 8);
}


void residual_be(const uint8_t* sent, const float* x, float* r, unsigned n_valid, int width, int guard, int exponent,
                 int d) {
  // x_hat = ((u >> d << d) - 2^(b-1) + (2^d - 1) / 2) * 2^e, every term exact in double;
  // (u >> d << d) ^ 2^31 as int32 + 2^31 is the unsigned value.
  const int dd = d > 0 ? d : 0;
  const double off_i = 2147483648.0 - std::ldexp(1.0, width - guard - 1) + (dd ? double((uint64_t(1) << dd) - 1) * 0.5 : 0.0);
  const __m256d off = _mm256_set1_pd(off_i);
  const __m256d scale = _mm256_set1_pd(std::ldexp(1.0, exponent));
  const __m256i flip = _mm256_set1_epi32(int(0x80000000u));
  const __m128i cnt = _mm_cvtsi32_si128(dd);
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 inf = _mm256_set1_ps(INFINITY);
  unsigned k = 0;
  for (; k + 8 <= n_valid; k += 8) {
    __m256i u = bswap32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sent + 4 * k)));
    u = _mm256_xor_si256(_mm256_sll_epi32(_mm256_srl_epi32(u, cnt), cnt), flip);
    const __m256d h0 = _mm256_mul_pd(_mm256_add_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(u)), off), scale);
    const __m256d h1 = _mm256_mul_pd(_mm256_add_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(u, 1)), off), scale);
    const __m256 xp = _mm256_add_ps(_mm256_loadu_ps(x + k), _mm256_loadu_ps(r + k));
    const __m256d e0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(xp)), h0);
    const __m256d e1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(xp, 1)), h1);
    const __m256 v = _mm256_set_m128(_mm256_cvtpd_ps(e1), _mm256_cvtpd_ps(e0));
    // finite: |v| < Inf (false for NaN too)
    _mm256_storeu_ps(r + k, _mm256_and_ps(v, _mm256_cmp_ps(_mm256_and_ps(v, absmask), inf, _CMP_LT_OQ)));
  }
  for (; k < n_valid; ++k) r[k] = residual_one(ld_be32(sent + 4 * k), x[k], r[k], width, guard, exponent, d);
}

#else  // portable fallback: the scalar reference, lane by lane

bool encode_be(const float* x, unsigned n_valid, unsigned n_lanes, int width, int guard, int exponent,
               uint8_t* out) {
  bool clipped = false;
  for (unsigned k = 0; k < n_lanes; ++k) {
    const auto e = agqc::encode(k < n_valid ? x[k] : 0.0f, width, guard, exponent);
    clipped |= e.clipped;
    out[4 * k] = uint8_t(e.u >> 24);
    out[4 * k + 1] = uint8_t(e.u >> 16);
    out[4 * k + 2] = uint8_t(e.u >> 8);
    out[4 * k + 3] = uint8_t(e.u);
  }
  return clipped;
}

float decode_be(const uint8_t* in, unsigned n_valid, unsigned n, int granted, int guard, int exponent, int d,
                float* out) {
  float mx = 0;
  for (unsigned k = 0; k < n_valid; ++k) {
    const uint32_t s = uint32_t(in[4 * k]) << 24 | uint32_t(in[4 * k + 1]) << 16 | uint32_t(in[4 * k + 2]) << 8 |
                       in[4 * k + 3];
    out[k] = float(agqc::decode_sum(s, n, granted, guard, exponent, d));
    mx = std::max(mx, std::fabs(out[k]));
  }
  return mx;
}

void residual_be(const uint8_t* sent, const float* x, float* r, unsigned n_valid, int width, int guard, int exponent,
                 int d) {
  for (unsigned k = 0; k < n_valid; ++k) r[k] = residual_one(ld_be32(sent + 4 * k), x[k], r[k], width, guard, exponent, d);
}

#endif

}  // namespace agq::worker::fastc
