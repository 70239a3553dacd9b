// The stateful-ALU programs of the agq registers, written once as plain
// functions of a paired cell: the TNA model runs them through
// tna::RegisterAction (registers.hpp), the fast program on its compact slot
// and row records (pipeline/agq_fast/). One body per P4 RegisterAction pair
// (_v0/_v1: the half v is a constant of the SALU program on Tofino).
#pragma once

#include <cstdint>

#include "pipeline/agq/agq_program.hpp"

namespace agq::pipeline::agq::salu {

// slot_bitmap_add: worker bit into half v, out of half 1-v; returns half v as it was.
inline uint32_t slot_bitmap_add(Pair<uint32_t>& c, unsigned v, uint32_t bit) {
  const uint32_t old = c.half(v);
  c.half(v) = old | bit;
  c.other(v) &= ~bit;
  return old;
}
// slot_count_inc: a new contribution, N -> 1 (first of a new use), else +1.
inline uint8_t slot_count_inc(Pair<uint8_t>& c, unsigned v, uint8_t n) {
  uint8_t& h = c.half(v);
  h = h == n ? 1 : uint8_t(h + 1);
  return h;
}
inline uint8_t slot_count_read(Pair<uint8_t>& c, unsigned v) { return c.half(v); }
// slot_window_merge: OR flag bits into half v, return the new half.
inline uint16_t slot_window_merge(Pair<uint16_t>& c, unsigned v, uint16_t bits) {
  c.half(v) |= bits;
  return c.half(v);
}
inline uint16_t slot_window_write(Pair<uint16_t>& c, unsigned v, uint16_t window) {
  c.half(v) = window;
  return window;
}
inline uint8_t row_occupancy_read(Pair<uint8_t>& c, unsigned v) { return c.half(v); }
// row_occupancy_cas: old -> new; 1 on success.
inline uint8_t row_occupancy_cas(Pair<uint8_t>& c, unsigned v, uint8_t expect, uint8_t desired) {
  if (c.half(v) != expect) return 0;
  c.half(v) = desired;
  return 1;
}
// lane_clear / lane_add on one lane cell's half (the fast program runs
// these on 8 or 16 lanes at once: pipeline/agq_fast/lanes_simd.hpp).
inline uint32_t lane_clear(uint32_t& half, uint32_t keep) { return half &= keep; }
inline uint32_t lane_add(uint32_t& half, uint32_t x) { return half += x; }

}  // namespace agq::pipeline::agq::salu
