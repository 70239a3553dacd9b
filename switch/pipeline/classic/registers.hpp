// The registers of the published AGQ program (reference §2) and their
// register actions (the stateful-ALU programs, reference §3.1/§3.2/§3.4).
//
// Each action is a small factory that binds a register and the packet
// operands the SALU reads from the PHV, and returns a tna::RegisterAction;
// the ingress calls .execute(index) once per register per pass. The lambdas
// are captured by value and inline away: nothing is allocated per packet.
//
// SALU programs per register (Tofino 1 allows 4):
//   job_and_seq_reg  job_and_seq_detect, job_and_seq_clear
//   insert_posi      insert_posi_advance
//   start_posi       start_posi_write, start_posi_read, start_posi_read_clear
//   worker_agg       worker_agg_count, worker_agg_clear
//   data_isEmpty     data_isEmpty_set, data_isEmpty_remove, data_isEmpty_read
//   reg0..reg3       reg_clear, reg_agg
#pragma once

#include <array>
#include <cstdint>

#include "tna/register.hpp"

namespace agq::pipeline::classic {

struct Registers {
  explicit Registers(uint32_t capacity)
      : job_and_seq_reg("job_and_seq_reg", capacity),
        start_posi("start_posi", capacity),
        worker_agg("worker_agg", capacity),
        insert_posi("insert_posi", capacity),
        data_isEmpty("data_isEmpty", capacity),
        reg{tna::Register<uint32_t>("reg0", capacity), tna::Register<uint32_t>("reg1", capacity),
            tna::Register<uint32_t>("reg2", capacity), tna::Register<uint32_t>("reg3", capacity)} {}

  void clear() {
    job_and_seq_reg.clear();
    start_posi.clear();
    worker_agg.clear();
    insert_posi.clear();
    data_isEmpty.clear();
    for (auto& r : reg) r.clear();
  }

  // Per sequence slot, indexed by hashID.
  tna::Register<uint16_t> job_and_seq_reg;  // owner jobAndSeq, 0 = free
  tna::Register<uint8_t> start_posi;        // start nibble p of the seq
  tna::Register<uint8_t> worker_agg;        // contributions so far (8-bit, wraps)
  // Per aggregator, indexed by hash1.
  tna::Register<uint8_t> insert_posi;       // rotating next-start cursor
  tna::Register<uint8_t> data_isEmpty;      // start bitmap (despite its name)
  std::array<tna::Register<uint32_t>, 4> reg;  // reg0..reg3: packed lanes data0..3
};

// --- job_and_seq_reg --------------------------------------------------------

// Data packet: 1 = slot was free, now owned by jas (first packet);
// 2 = owned by jas (aggregate); 0 = owned by another jas (collision).
inline auto job_and_seq_detect(tna::Register<uint16_t>& r, uint16_t jas) {
  return tna::RegisterAction(r, "job_and_seq_detect", [jas](uint16_t& v) -> uint8_t {
    if (v == 0) { v = jas; return 1; }
    return v == jas ? 2 : 0;
  });
}

// ACK: 1 = jas owned the slot, now free; 0 = not the owner (nothing changes).
inline auto job_and_seq_clear(tna::Register<uint16_t>& r, uint16_t jas) {
  return tna::RegisterAction(r, "job_and_seq_clear", [jas](uint16_t& v) -> uint8_t {
    if (v == jas) { v = 0; return 1; }
    return 0;
  });
}

// --- insert_posi --------------------------------------------------------------

// Returns the cursor and advances it by 3 mod 8, written as the P4 does it
// (p > 4 ? p - 5 : p + 3): starts cycle 0,3,6,1,4,7,2,5 whatever is live.
inline auto insert_posi_advance(tna::Register<uint8_t>& r) {
  return tna::RegisterAction(r, "insert_posi_advance", [](uint8_t& v) -> uint8_t {
    const uint8_t p = v;
    v = p > 4 ? uint8_t(p - 5) : uint8_t(p + 3);
    return p;
  });
}

// --- start_posi ---------------------------------------------------------------

inline auto start_posi_write(tna::Register<uint8_t>& r, uint8_t p) {
  return tna::RegisterAction(r, "start_posi_write", [p](uint8_t& v) -> uint8_t {
    v = p;
    return p;
  });
}
inline auto start_posi_read(tna::Register<uint8_t>& r) {
  return tna::RegisterAction(r, "start_posi_read", [](uint8_t& v) -> uint8_t { return v; });
}
inline auto start_posi_read_clear(tna::Register<uint8_t>& r) {
  return tna::RegisterAction(r, "start_posi_read_clear", [](uint8_t& v) -> uint8_t {
    const uint8_t p = v;
    v = 0;
    return p;
  });
}

// --- worker_agg -----------------------------------------------------------------

// Returns the new count; 8-bit, so 255 + 1 wraps to 0 (quirk).
inline auto worker_agg_count(tna::Register<uint8_t>& r) {
  return tna::RegisterAction(r, "worker_agg_count", [](uint8_t& v) -> uint8_t {
    v = uint8_t(v + 1);
    return v;
  });
}
inline auto worker_agg_clear(tna::Register<uint8_t>& r) {
  return tna::RegisterAction(r, "worker_agg_clear", [](uint8_t& v) -> uint8_t {
    v = 0;
    return 0;
  });
}

// --- data_isEmpty -----------------------------------------------------------------

// First packet: B |= bit, returns B_old.
inline auto data_isEmpty_set(tna::Register<uint8_t>& r, uint8_t insert_bitmap) {
  return tna::RegisterAction(r, "data_isEmpty_set", [insert_bitmap](uint8_t& v) -> uint8_t {
    const uint8_t old = v;
    v = uint8_t(old | insert_bitmap);
    return old;
  });
}
// ACK: B -= bit (arithmetic, not AND-NOT: an absent bit borrows, quirk §5.1),
// returns B_old.
inline auto data_isEmpty_remove(tna::Register<uint8_t>& r, uint8_t insert_bitmap) {
  return tna::RegisterAction(r, "data_isEmpty_remove", [insert_bitmap](uint8_t& v) -> uint8_t {
    const uint8_t old = v;
    v = uint8_t(old - insert_bitmap);
    return old;
  });
}
inline auto data_isEmpty_read(tna::Register<uint8_t>& r) {
  return tna::RegisterAction(r, "data_isEmpty_read", [](uint8_t& v) -> uint8_t { return v; });
}

// --- reg0..reg3 ---------------------------------------------------------------------

// Zeroes a window: cell &= mask_clear.
inline auto reg_clear(tna::Register<uint32_t>& r, uint32_t mask_clear) {
  return tna::RegisterAction(r, "reg_clear", [mask_clear](uint32_t& v) -> uint32_t {
    v &= mask_clear;
    return v;
  });
}
// Adds an aligned value (plain 32-bit wrap: a carry leaves the window into the
// neighbour's LSB, quirk §5.2) and returns the new cell.
inline auto reg_agg(tna::Register<uint32_t>& r, uint32_t x) {
  return tna::RegisterAction(r, "reg_agg", [x](uint32_t& v) -> uint32_t {
    v += x;
    return v;
  });
}

}  // namespace agq::pipeline::classic
