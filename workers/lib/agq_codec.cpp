#include "lib/agq_codec.hpp"

#include <algorithm>
#include <cmath>

namespace agq::worker::agqc {

int guard_bits(unsigned n) {
  int g = 0;
  while ((1ull << g) < n) ++g;
  return g;
}

Encoded encode(float x, int width, int guard, int exponent) {
  const int b = width - guard;
  const int64_t hi = (int64_t(1) << (b - 1)) - 1, lo = -(int64_t(1) << (b - 1));
  // ldexp is exact (a power-of-two scaling), so every process rounds the same value.
  const double scaled = std::ldexp(double(x), -exponent);
  Encoded r;
  int64_t q;
  if (std::isnan(scaled)) {
    q = 0;  // NaN is reported like a clip: the value is lost
    r.clipped = true;
  } else if (scaled > double(hi)) {  // +Inf too
    q = hi;
    r.clipped = true;
  } else if (scaled < double(lo)) {  // -Inf too
    q = lo;
    r.clipped = true;
  } else {
    q = std::llround(scaled);
    if (q > hi) { q = hi; r.clipped = true; }  // x just below hi + 0.5 rounds up
  }
  r.u = uint32_t(q - lo);  // bias 2^(b-1)
  return r;
}

uint64_t expected_sum(std::span<const uint32_t> us, int width, int granted) {
  const int d = width - granted;
  uint64_t s = 0;
  for (uint32_t u : us) s += u >> d;
  return s;
}

double decode_sum(uint32_t s, unsigned n, int granted, int guard, int exponent, int d) {
  const int64_t bias = int64_t(n) << (granted - guard - 1);
  const double v = std::ldexp(double(int64_t(s) - bias), exponent + d);
  if (d <= 0) return v;
  return v + std::ldexp(double(uint64_t(n) * ((uint64_t(1) << d) - 1)), exponent - 1);
}

double decoded_contribution(uint32_t u, int width, int guard, int exponent, int d) {
  const int64_t t = d > 0 ? int64_t(u >> d) << d : int64_t(u);
  const double half = d > 0 ? double((uint64_t(1) << d) - 1) * 0.5 : 0.0;
  return std::ldexp(double(t - (int64_t(1) << (width - guard - 1))) + half, exponent);
}

double error_bound(unsigned n, int exponent, int d) {
  return double(n) * std::ldexp(1.0, exponent + d - 1);
}

int exponent_for(double range, int value_bits) {
  if (value_bits < 2) return kMaxExponent;  // no representable magnitude (callers use min_width)
  if (!(range > 0) || !std::isfinite(range)) return kMinExponent;
  // Smallest e with range <= top * 2^e, top = 2^(b-1) - 1 (rounding up to top + 0.5 would clip).
  // range = m * 2^k, m in [0.5, 1): top * 2^(k-b+1) = 2^k (1 - 2^(1-b)) holds range iff
  // m <= 1 - 2^(1-b); one exponent less never does (it is below 2^(k-1) <= range). Exact,
  // no log2 rounding, a few ns: it runs once per chunk on the packet path.
  int k;
  const double m = std::frexp(range, &k);
  int e = k - (value_bits - 1);
  if (m > 1.0 - std::ldexp(1.0, 1 - value_bits)) ++e;
  return std::clamp(e, kMinExponent, kMaxExponent);
}

ChunkParams initial_params(int init_width, double init_scale, int guard) {
  return {init_width, exponent_for(init_scale, init_width - guard)};
}

ChunkParams choose_params(double chunk_max, double tensor_max, double budget, double margin, int guard) {
  if (!(tensor_max > 0)) return {min_width(guard), kMinExponent};  // the whole tensor summed to zero
  const double step = budget * tensor_max;
  if (!(chunk_max > 0)) {
    // Nothing to represent: the narrowest width, at a step within budget.
    return {min_width(guard), std::clamp(int(std::floor(std::log2(step))), kMinExponent, kMaxExponent)};
  }
  ChunkParams p{kMaxWidth, exponent_for(chunk_max * margin, kMaxWidth - guard)};
  for (int r = min_width(guard); r <= kMaxWidth; r += 4) {
    const int e = exponent_for(chunk_max * margin, r - guard);
    if (std::ldexp(1.0, e) <= step) return {r, e};
  }
  return p;
}

}  // namespace agq::worker::agqc
