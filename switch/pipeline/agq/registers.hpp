// The registers of the agq pipeline (docs/PROTOCOL.md §3) and their register
// actions (stateful-ALU programs).
//
// Every register is a Tofino *paired* register: one index holds two halves,
// lo = version 0 and hi = version 1, and one stateful ALU reads/updates both
// in a single access. So a packet touches each register at most once per
// pass whichever version it belongs to (checked under AGQ_CHECK_TNA_RULES).
//
// An action that works on half v exists as two P4 RegisterActions, `_v0`
// and `_v1` (the half is a constant of the SALU program); the factories take
// v and name the variant. Register actions per register (Tofino allows 4):
//   slot_bitmap    slot_bitmap_add_v0/_v1                            2
//   slot_count     slot_count_inc_v0/_v1, slot_count_read_v0/_v1      4
//   slot_window    slot_window_merge_v0/_v1, slot_window_write_v0/_v1 4
//   row_occupancy  row_occupancy_read_v0/_v1, row_occupancy_cas_v0/_v1 4
//   lane00..31     lane_clear_v0/_v1, lane_add_v0/_v1                 4
#pragma once

#include <array>
#include <cstdint>

#include "pipeline/agq/agq_program.hpp"
#include "pipeline/agq/salu.hpp"
#include "proto/agq.hpp"
#include "tna/register.hpp"

namespace agq::pipeline::agq {

struct Registers {
  Registers(uint32_t slots, uint32_t rows)
      : slot_bitmap("slot_bitmap", slots),
        slot_count("slot_count", slots),
        slot_window("slot_window", slots),
        row_occupancy("row_occupancy", rows),
        lanes(make_lanes(rows)) {}

  void clear() {
    slot_bitmap.clear();
    slot_count.clear();
    slot_window.clear();
    row_occupancy.clear();
    for (auto& l : lanes) l.clear();
  }

  // Per job slot (index slot_base + slot).
  tna::Register<Pair<uint32_t>> slot_bitmap;  // workers that contributed to (slot, v)
  tna::Register<Pair<uint8_t>> slot_count;    // contributions counted, N = complete
  tna::Register<Pair<uint16_t>> slot_window;  // pack_window(): (pos, w, FALLBACK, OVERFLOW, PENDING)
  // Per job row (index row_base + (slot >> row_shift)).
  tna::Register<Pair<uint8_t>> row_occupancy;  // bit (7 - u): unit u is in a live window
  std::array<tna::Register<Pair<uint32_t>>, proto::kAgqLanes> lanes;  // lane00..lane31

  // The cells through the program-independent view.
  class View final : public RegisterCells {
   public:
    explicit View(const Registers& r) : r_(r) {}
    Pair<uint32_t> slot_bitmap(uint32_t i) const override { return r_.slot_bitmap.read(i); }
    Pair<uint8_t> slot_count(uint32_t i) const override { return r_.slot_count.read(i); }
    Pair<uint16_t> slot_window(uint32_t i) const override { return r_.slot_window.read(i); }
    Pair<uint8_t> row_occupancy(uint32_t row) const override { return r_.row_occupancy.read(row); }
    Pair<uint32_t> lane(uint32_t row, unsigned k) const override { return r_.lanes[k].read(row); }

   private:
    const Registers& r_;
  };

 private:
  static std::array<tna::Register<Pair<uint32_t>>, proto::kAgqLanes> make_lanes(uint32_t rows) {
    return make_lanes(rows, std::make_index_sequence<proto::kAgqLanes>{});
  }
  template <std::size_t... K>
  static std::array<tna::Register<Pair<uint32_t>>, proto::kAgqLanes> make_lanes(uint32_t rows,
                                                                                std::index_sequence<K...>) {
    return {tna::Register<Pair<uint32_t>>(lane_name(K), rows)...};
  }

 public:
  static const char* lane_name(std::size_t k) {
    static constexpr const char* kNames[] = {
        "lane00", "lane01", "lane02", "lane03", "lane04", "lane05", "lane06", "lane07",
        "lane08", "lane09", "lane10", "lane11", "lane12", "lane13", "lane14", "lane15",
        "lane16", "lane17", "lane18", "lane19", "lane20", "lane21", "lane22", "lane23",
        "lane24", "lane25", "lane26", "lane27", "lane28", "lane29", "lane30", "lane31"};
    return kNames[k];
  }
};

inline const char* variant(unsigned v, const char* v0, const char* v1) { return v ? v1 : v0; }

// --- slot_bitmap --------------------------------------------------------------
// Worker i contributes to (s, v): set bit i of half v, clear it in half 1-v
// (worker i holds the result of (s, 1-v)'s previous use). Returns half v as
// it was, so the next stage tests `seen`.
inline auto slot_bitmap_add(tna::Register<Pair<uint32_t>>& r, unsigned v, uint32_t bit) {
  return tna::RegisterAction(r, variant(v, "slot_bitmap_add_v0", "slot_bitmap_add_v1"),
                             [v, bit](Pair<uint32_t>& c) { return salu::slot_bitmap_add(c, v, bit); });
}

// --- slot_count -----------------------------------------------------------------
// A new contribution: N -> 1 (first of a new use), else +1. Returns the new count.
inline auto slot_count_inc(tna::Register<Pair<uint8_t>>& r, unsigned v, uint8_t n) {
  return tna::RegisterAction(r, variant(v, "slot_count_inc_v0", "slot_count_inc_v1"),
                             [v, n](Pair<uint8_t>& c) { return salu::slot_count_inc(c, v, n); });
}
inline auto slot_count_read(tna::Register<Pair<uint8_t>>& r, unsigned v) {
  return tna::RegisterAction(r, variant(v, "slot_count_read_v0", "slot_count_read_v1"),
                             [v](Pair<uint8_t>& c) { return salu::slot_count_read(c, v); });
}

// --- slot_window ------------------------------------------------------------------
// OR flag bits into half v and return the new half: a contribution merges its
// OVERFLOW, a first contribution's pass 1 sets PENDING and reads the old window.
inline auto slot_window_merge(tna::Register<Pair<uint16_t>>& r, unsigned v, uint16_t bits) {
  return tna::RegisterAction(r, variant(v, "slot_window_merge_v0", "slot_window_merge_v1"),
                             [v, bits](Pair<uint16_t>& c) { return salu::slot_window_merge(c, v, bits); });
}
// Pass 2 of a first contribution: the new window (PENDING clear).
inline auto slot_window_write(tna::Register<Pair<uint16_t>>& r, unsigned v, uint16_t window) {
  return tna::RegisterAction(r, variant(v, "slot_window_write_v0", "slot_window_write_v1"),
                             [v, window](Pair<uint16_t>& c) { return salu::slot_window_write(c, v, window); });
}

// --- row_occupancy -------------------------------------------------------------------
inline auto row_occupancy_read(tna::Register<Pair<uint8_t>>& r, unsigned v) {
  return tna::RegisterAction(r, variant(v, "row_occupancy_read_v0", "row_occupancy_read_v1"),
                             [v](Pair<uint8_t>& c) { return salu::row_occupancy_read(c, v); });
}
// Compare-and-set old -> new; returns 1 on success. On Tofino another first
// contribution of the same row may have moved the occupancy between pass 1
// and pass 2; then the packet recirculates to allocate again.
inline auto row_occupancy_cas(tna::Register<Pair<uint8_t>>& r, unsigned v, uint8_t expect,
                              uint8_t desired) {
  return tna::RegisterAction(r, variant(v, "row_occupancy_cas_v0", "row_occupancy_cas_v1"),
                             [v, expect, desired](Pair<uint8_t>& c) {
                               return salu::row_occupancy_cas(c, v, expect, desired);
                             });
}

// --- lane00..lane31 ---------------------------------------------------------------------
// Zero a released window: half v &= keep.
inline auto lane_clear(tna::Register<Pair<uint32_t>>& r, unsigned v, uint32_t keep) {
  return tna::RegisterAction(r, variant(v, "lane_clear_v0", "lane_clear_v1"),
                             [v, keep](Pair<uint32_t>& c) { return salu::lane_clear(c.half(v), keep); });
}
// Add an aligned, masked contribution (0 = read) and return the new half v.
// The sum of a window cannot carry out of it (PROTOCOL §2), so a plain add is exact.
inline auto lane_add(tna::Register<Pair<uint32_t>>& r, unsigned v, uint32_t x) {
  return tna::RegisterAction(r, variant(v, "lane_add_v0", "lane_add_v1"),
                             [v, x](Pair<uint32_t>& c) { return salu::lane_add(c.half(v), x); });
}

}  // namespace agq::pipeline::agq
