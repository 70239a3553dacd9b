// The agq protocol's value encoding (docs/PROTOCOL.md §2) and the workers'
// width/exponent choice (§5), without DPDK or packets: pure functions that
// the worker, the PS, the verifier and the tests share, so every process
// derives bit-identical parameters from bit-identical inputs.
//
//   g = ceil(log2 N); b = R - g value bits;
//   q = clamp(round(x / 2^e), -2^(b-1), 2^(b-1) - 1); u = q + 2^(b-1)
//   the switch grants min_width <= W <= R, d = R - W, adds u >> d into a
//   W-bit window; a result lane s decodes (unbiased, §2) to
//   ((s - N * 2^(W-g-1)) * 2^d + N * (2^d - 1) / 2) * 2^e.
#pragma once

#include <cstdint>
#include <span>

namespace agq::worker::agqc {

inline constexpr int kMinWidth = 4;   // req_width range of the protocol, multiples of 4
inline constexpr int kMaxWidth = 32;
inline constexpr int kMinExponent = -120;  // the header's int8 exponent, with headroom for e + 2 redos
inline constexpr int kMaxExponent = 120;

// Guard bits of a job of N workers: N additions of W-g bit values fit in W bits.
int guard_bits(unsigned n);
// The narrowest request that leaves at least 2 value bits (PROTOCOL.md §2, w_min).
inline int min_width(int guard) { return ((guard + 2 + 3) / 4) * 4 < kMinWidth ? kMinWidth : ((guard + 2 + 3) / 4) * 4; }

struct Encoded {
  uint32_t u = 0;
  bool clipped = false;
};
// Encodes x for a request of `width` bits R with g guard bits at exponent e.
Encoded encode(float x, int width, int guard, int exponent);

// The window sum the switch must return for contributions us[] when it
// granted `granted` bits of a `width` request: sum(u >> d), d = width - granted.
uint64_t expected_sum(std::span<const uint32_t> us, int width, int granted);

// A result lane (right-aligned window sum) back to the float sum of N values.
// Unbiased (PROTOCOL.md §2): truncation drops r_i = u_i mod 2^d of every
// contribution, so the mean of what it removed, N (2^d - 1) / 2 steps, is
// added back. Computed as ldexp(s - bias, e + d) + ldexp(N (2^d - 1), e - 1):
// two exact terms, one rounding (the fast codec does the same operations).
double decode_sum(uint32_t s, unsigned n, int granted, int guard, int exponent, int d);

// What the switch counted of one contribution u (section 5's x_hat): its
// truncated value with the same offset, (u >> d) * 2^d + (2^d - 1) / 2, less
// the bias 2^(b-1), in steps of 2^e. Exact in double.
double decoded_contribution(uint32_t u, int width, int guard, int exponent, int d);

// Largest |error| of one decoded sum element (unclipped inputs): each of the
// N values loses at most half a step to rounding and, the truncation
// centred, (2^d - 1) / 2 steps to it: N * 2^(e+d-1).
double error_bound(unsigned n, int exponent, int d);

// min_width of a chunk requesting `width` (PROTOCOL.md §5): width less
// `slack` bits, never below min_width(guard), never above width.
inline int min_width_for(int width, int slack, int guard) {
  const int m = width - slack, lo = min_width(guard);
  return m < lo ? (lo < width ? lo : width) : m;
}

struct ChunkParams {
  int width = 16;    // req_width R
  int exponent = 0;  // e
  bool operator==(const ChunkParams&) const = default;
};

// Round 0: no aggregate yet. Exponent so that |x| <= init_scale is not clipped at init_width.
ChunkParams initial_params(int init_width, double init_scale, int guard);

// §5: from m = max |aggregate / N| over the chunk (previous round), the
// tensor-wide max M of the same, the relative error budget and a safety
// margin: the smallest R in min_width(guard)..32 whose step 2^e, with e sized so that
// m * margin is not clipped, is <= budget * M. A chunk that was all zero
// gets the narrowest width. Deterministic: same inputs, same answer in
// every process.
ChunkParams choose_params(double chunk_max, double tensor_max, double budget, double margin, int guard);

// Exponent that represents |x| <= range without clipping with b value bits.
int exponent_for(double range, int value_bits);

}  // namespace agq::worker::agqc
