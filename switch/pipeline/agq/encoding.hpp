// The agq value encoding (docs/PROTOCOL.md §2) and the cell geometry, as
// constexpr formulas shared by the pipeline's table generator, the workers,
// the PS and the tests. No state, no allocation.
//
// Geometry: a 32-bit cell is 8 units of 4 bits, unit 0 the most significant.
// A window (pos, w) covers units pos..pos+w-1; end = pos + w. A right-aligned
// window value sits in the cell shifted left by 4 * (8 - end) bits.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace agq::pipeline::agq {

inline constexpr unsigned kUnits = 8;      // units per cell
inline constexpr unsigned kUnitBits = 4;
inline constexpr unsigned kMaxWorkers = 32;

// g = ceil(log2 N), N = 1 -> 0: N contributions of W - g bits sum below 2^W.
constexpr unsigned guard_bits(unsigned n) {
  unsigned g = 0;
  while ((1u << g) < n) ++g;
  return g;
}

// The narrowest grant (units) that leaves >= 2 value bits (PROTOCOL §2 w_min).
constexpr unsigned min_grant_units(unsigned g) { return (g + 2 + kUnitBits - 1) / kUnitBits; }

// A DATA's min_width (PROTOCOL §1, §2): a multiple of 4 with
// g + 2 <= min_width <= req_width (req_width itself valid: 4..32, a
// multiple of 4). Every grant W >= min_width then leaves W - g >= 2.
constexpr bool min_width_valid(unsigned min_width, unsigned req_width, unsigned g) {
  return min_width % kUnitBits == 0 && min_width >= g + 2 && min_width <= req_width;
}

// Low `bits` bits set, bits 0..32.
constexpr uint32_t low_mask(unsigned bits) { return uint32_t((uint64_t(1) << bits) - 1); }

// Cell bits of window (pos, w): 64-bit arithmetic so w = 8 is defined.
constexpr uint32_t window_cell_mask(unsigned pos, unsigned w) {
  if (w == 0) return 0;
  return uint32_t(uint64_t(low_mask(kUnitBits * w)) << (kUnitBits * (kUnits - pos - w)));
}
// row_occupancy bits of window (pos, w): bit (7 - u) for every unit u.
constexpr uint8_t window_occ_mask(unsigned pos, unsigned w) {
  if (w == 0) return 0;
  return uint8_t(low_mask(w) << (kUnits - pos - w));
}

// What the switch adds for a worker's encoded value u: the top W - g of its
// R - g value bits (d = R - W dropped), masked so that no worker can reach
// beyond its window.
constexpr uint32_t contribution(uint32_t u, unsigned req_bits, unsigned width_bits, unsigned g) {
  const unsigned d = req_bits > width_bits ? req_bits - width_bits : 0;
  return (u >> d) & low_mask(width_bits - g);
}

// Worker side: x -> u (biased, b = R - g value bits). `clipped` is the
// OVERFLOW flag of the DATA packet.
struct Encoded {
  uint32_t u = 0;
  bool clipped = false;
};
inline Encoded encode_value(double x, int exponent, unsigned req_bits, unsigned g) {
  const unsigned b = req_bits - g;
  const int64_t lo = -(int64_t(1) << (b - 1)), hi = (int64_t(1) << (b - 1)) - 1;
  const double scaled = std::nearbyint(std::ldexp(x, -exponent));
  Encoded e;
  int64_t q;
  if (!(scaled >= double(lo))) { q = lo; e.clipped = true; }       // also NaN
  else if (scaled > double(hi)) { q = hi; e.clipped = true; }
  else q = int64_t(scaled);
  e.u = uint32_t(q - lo);
  return e;
}

// RESULT lane s of a window of width W -> the sum of the workers' q >> d
// (the N biases removed), and its value in gradient units.
constexpr int64_t decode_sum_q(uint32_t s, unsigned n, unsigned width_bits, unsigned g) {
  return int64_t(s) - int64_t(n) * (int64_t(1) << (width_bits - g - 1));
}
inline double decode_sum(uint32_t s, unsigned n, unsigned width_bits, unsigned g, int exponent,
                         unsigned req_bits) {
  const int d = int(req_bits) - int(width_bits);
  return std::ldexp(double(decode_sum_q(s, n, width_bits, g)), exponent + std::max(d, 0));
}

}  // namespace agq::pipeline::agq
