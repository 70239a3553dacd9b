// The constant tables of the published AGQ program (reference §4), generated
// from formulas instead of copied entry lists, plus the formulas themselves.
//
// Notation (reference §2.1): a 32-bit cell holds 8 nibbles, nibble n covers
// bits [31-4n .. 28-4n]. B is the 8-bit start bitmap (data_isEmpty), bit
// (7-p) set = a live sequence starts at nibble p. A sequence starting at p
// owns the window [p, q) with q = next_start(B, p), width L = 4(q-p) bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pipeline/classic/classic_program.hpp"
#include "tna/intrinsic.hpp"
#include "tna/table.hpp"

namespace agq::pipeline::classic {

// --- formulas -------------------------------------------------------------

// Bit of position p in a start bitmap (posi_2_bitmap: MSB = position 0).
constexpr uint8_t position_bit(unsigned p) { return uint8_t(0x80u >> p); }
constexpr bool has_start(uint8_t B, unsigned p) { return (B & position_bit(p)) != 0; }

// The next start after p in B, or 8 when there is none.
constexpr unsigned next_start(uint8_t B, unsigned p) {
  for (unsigned q = p + 1; q < 8; ++q)
    if (has_start(B, q)) return q;
  return 8;
}

// Mask of nibbles p..q-1. Computed in 64 bits so that q = 8 (shift by 32) is
// defined.
constexpr uint32_t W(unsigned p, unsigned q) {
  const uint64_t all = 0xFFFFFFFFull;
  return uint32_t((all >> (4 * p)) & ~(all >> (4 * q)));
}

// The top L bits of a 32-bit value; TOP(0) = 0.
constexpr uint32_t TOP(unsigned L) { return uint32_t(0xFFFFFFFFull << (32 - L)); }

// --- action data (names of the P4 metadata they set) -----------------------

// split_t: first packet of a sequence (B_old = bitmap before the OR).
struct SplitInfo {
  uint8_t L = 0;
  uint32_t mask_clear = 0, mask_extract = 0, mask_compress = 0;
  bool operator==(const SplitInfo&) const = default;
};
// get_length_t: every contribution.
struct LengthInfo {
  uint8_t L = 0;
  uint32_t mask_extract = 0, mask_compress = 0;
  bool operator==(const LengthInfo&) const = default;
};
// ack_t: ACK (B_old = bitmap before the subtraction).
struct AckInfo {
  uint8_t L = 0;
  uint32_t mask_clear = 0, mask_compress = 0;
  bool operator==(const AckInfo&) const = default;
};
// posi_2_bitmap_t0/_t1.
struct InsertBitmap {
  uint8_t insert_bitmap = 0;
};
// align_t / data_extract_t: one action per constant shift, because a Tofino
// shift amount must be a constant. `run` is the action body (a plain function
// pointer, no per-packet std::function); null = NoAction.
struct ShiftAction {
  const char* name = "NoAction";
  void (*run)(uint32_t* lanes) = nullptr;
};
// ina_send_or_drop.
struct InaForward {
  enum class Kind : uint8_t { SendBack, Send, Drop, Multicast };
  Kind kind = Kind::Drop;
  tna::PortId port = tna::kNoPort;   // Send
  tna::McastGroupId mcast_grp = 0;   // Multicast
};

// Keys of the (bitmap, position) tables: B*8 + p.
constexpr std::size_t bitmap_position_key(uint8_t B, unsigned p) { return std::size_t(B) << 3 | (p & 7); }

// --- the tables -------------------------------------------------------------

// The constant tables, identical for every ClassicProgram; built once.
struct ConstTables {
  tna::ConstTable<SplitInfo> split_t{"split_t", 2048, SplitInfo{}};
  tna::ConstTable<LengthInfo> get_length_t{"get_length_t", 2048, LengthInfo{}};
  tna::ConstTable<AckInfo> ack_t{"ack_t", 2048, AckInfo{}};
  tna::ConstTable<InsertBitmap> posi_2_bitmap_t0{"posi_2_bitmap_t0", 8, InsertBitmap{}};
  tna::ConstTable<InsertBitmap> posi_2_bitmap_t1{"posi_2_bitmap_t1", 8, InsertBitmap{}};
  tna::ConstTable<ShiftAction> align_t{"align_t", 8, ShiftAction{}};
  tna::ConstTable<ShiftAction> data_extract_t{"data_extract_t", 8, ShiftAction{}};
};

// The process-wide instance (built on first use, immutable afterwards).
const ConstTables& const_tables();

// Entry formulas, exposed for the generator and the tests.
SplitInfo split_entry(uint8_t B_old, unsigned p);
LengthInfo get_length_entry(uint8_t B, unsigned p);  // only meaningful when has_start(B, p)
AckInfo ack_entry(uint8_t B_old, unsigned p);         // only meaningful when has_start(B_old, p)

// ina_send_or_drop with the configured ports (the only deliberate change from
// the published program): 0 send_back, 1 PS port, 2 drop, 3 worker ports
// (unicast when there is exactly one, else PRE group ClassicProgram::kWorkerGroup).
tna::ConstTable<InaForward> make_ina_send_or_drop(const ClassicConfig& cfg);

}  // namespace agq::pipeline::classic
