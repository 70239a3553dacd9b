// The tables of the agq pipeline (docs/PIPELINE.md) and their action data.
//
// Runtime tables (control plane):  job_t, worker_t, egress_worker_t
// Constant tables (one formula each, the source of truth for the P4
// generator too):  alloc_t, window_t, grant_t, grant_alloc_t, slot_row_t,
// trunc_t, align_t, extract_t, agq_forward_t; the min_width admission
// check is min_width_valid() (encoding.hpp), the P4 min_width_t's formula
//
// A shift amount on Tofino must be a constant, so every data-dependent shift
// is a table whose entries are one action per constant amount.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pipeline/agq/agq_program.hpp"
#include "pipeline/agq/encoding.hpp"
#include "tna/intrinsic.hpp"
#include "tna/table.hpp"

namespace agq::pipeline::agq {

// --- slot_window cell (16 bits of each half) ----------------------------------
//   bits 0..2 pos, 3..6 w (units), 7 FALLBACK, 8 OVERFLOW, 9 PENDING
// PENDING: set by a first contribution's pass 1, cleared by its pass 2 (the
// window is being replaced; see docs/PIPELINE.md "concurrency on Tofino").
inline constexpr uint16_t kWinFallback = 1u << 7;
inline constexpr uint16_t kWinOverflow = 1u << 8;
inline constexpr uint16_t kWinPending = 1u << 9;
constexpr uint16_t pack_window(unsigned pos, unsigned w, bool fallback, bool overflow) {
  return uint16_t((pos & 7) | (w & 15) << 3 | (fallback ? kWinFallback : 0) |
                  (overflow ? kWinOverflow : 0));
}
constexpr unsigned window_pos(uint16_t c) { return c & 7; }
constexpr unsigned window_units(uint16_t c) { return (c >> 3) & 15; }

// --- job_t: key job_id (exact) -> set_job ------------------------------------
struct JobAction {
  bool hit = false;  // default action: job_miss
  uint16_t job_index = 0;
  uint8_t num_workers = 0;
  uint8_t guard = 0;
  uint8_t w_min_units = 0;  // narrowest min_width a DATA may carry, in units (>= g + 2 bits)
  uint8_t max_units = 0;    // max_width / 4
  uint8_t lanes = 32;       // the job's lane profile: n_lanes of its packets, lanes touched
  uint32_t slots = 0;
  uint32_t slot_base = 0;   // first slot register index of the job
  uint32_t row_base = 0;    // first row of the job
  uint8_t row_shift = 0;    // row = row_base + (slot >> row_shift)
  ResultDelivery delivery = ResultDelivery::Multicast;
  tna::PortId ps_port = tna::kNoPort;
  uint32_t ps_ipv4 = 0;
  proto::Mac ps_mac{};
  tna::McastGroupId mcast_grp = 0;
};

// --- worker_t / egress_worker_t: key (job_id, worker_id) -> set_worker --------
constexpr uint32_t worker_key(uint16_t job_id, uint8_t worker_id) {
  return uint32_t(job_id) << 8 | worker_id;
}
struct WorkerAction {
  bool hit = false;          // default action: worker_miss
  uint32_t worker_bit = 0;   // 1 << worker_id, as action data (no variable shift)
  tna::PortId port = tna::kNoPort;
  uint32_t ipv4 = 0;
  proto::Mac mac{};
};

// --- alloc_t: key (occupancy without the slot's old window, requested units) --
struct AllocAction {
  uint8_t pos = 0;
  uint8_t w = 0;         // granted units, 0 = nothing free
  uint8_t occ_mask = 0;  // window_occ_mask(pos, w)
  bool operator==(const AllocAction&) const = default;
};
constexpr std::size_t alloc_key(uint8_t occ, unsigned req_units) {
  return std::size_t(occ) << 3 | ((req_units - 1) & 7);
}
// The formula: among the maximal free runs, the smallest one that holds
// req_units (best fit, lowest position on ties), window at its start;
// if none does, the widest run (lowest position on ties), all of it.
AllocAction alloc_entry(uint8_t occ, unsigned req_units);

// --- window_t: key (pos, w) -> masks of a window -------------------------------
struct WindowAction {
  uint32_t cell_mask = 0;
  uint8_t occ_mask = 0;
};
constexpr std::size_t window_key(unsigned pos, unsigned w) { return (pos & 7) << 4 | (w & 15); }

// --- grant_t: key (w, g) -> is the grant usable, its masks -------------------
struct GrantAction {
  bool ok = false;           // W - g >= 2
  uint32_t value_mask = 0;   // low W - g bits: what a contribution may set
  uint32_t result_mask = 0;  // low W bits: the right-aligned window
};
constexpr std::size_t grant_key(unsigned w, unsigned g) { return (w & 15) << 3 | (g & 7); }

// --- grant_alloc_t: key (w, min_units) -> does alloc_t's window honour the DATA's
// min_width (PROTOCOL §2, §4 step 4): w > 0 and w >= min_width / 4. A valid
// min_width is >= g + 2 (validate()), so every accepted window leaves W - g
// >= 2; the table needs no guard. min_units is 1..8 (key: min_units - 1).
struct GrantAllocAction {
  bool ok = false;
};
constexpr std::size_t grant_alloc_key(unsigned w, unsigned min_units) {
  return (w & 15) << 3 | ((min_units - 1) & 7);
}
constexpr bool grant_alloc_ok(unsigned w, unsigned min_units) { return w > 0 && w >= min_units; }
constexpr std::size_t trunc_key(unsigned r_units, unsigned w) { return (r_units & 15) << 4 | (w & 15); }

// --- constant shifts -------------------------------------------------------
// trunc_t (key (R units, w): u >> 4d with d = max(R/4 - w, 0)), align_t (key end: << 4(8 - end)),
// extract_t (key end: >> 4(8 - end)). The action body runs on all 32 lanes
// (32 parallel PHV ALUs). Null run = NoAction (shift by 0).
struct ShiftAction {
  const char* name = "NoAction";
  void (*run)(uint32_t* lanes) = nullptr;
  uint8_t bits = 0;  // the constant amount `run` shifts by (the fast program shifts by it directly)
};
// slot_row_t (key row_shift): slot >> row_shift.
struct RowShiftAction {
  const char* name = "NoAction";
  uint32_t (*run)(uint32_t slot) = nullptr;
  uint8_t shift = 0;  // the constant amount `run` shifts by
};
inline constexpr unsigned kMaxRowShift = 16;

// --- agq_forward_t: key (verdict, delivery) ------------------------------------
enum class Verdict : uint8_t {
  Drop = 0,         // invalid packet (drop reason in metadata)
  Absorb,           // contribution that did not complete its sequence
  Duplicate,        // retransmission of a pending contribution
  Result,           // sequence complete
  Resend,           // retransmission after completion
  FallbackData,     // contribution of a FALLBACK sequence
  PsResult,         // PS answer -> every worker
  PsResultUnicast,  // PS answer to one worker's retransmission
  Count
};
struct ForwardAction {
  enum class Kind : uint8_t {
    Drop,            // drop_ctl = 1
    MulticastJob,    // mcast_grp_a = job's group; egress rewrites each replica
    UnicastPs,       // to the job's PS, destination rewritten
    SendBack,        // back out of the ingress port, addresses swapped
    UnicastWorker,   // to worker_t(job, worker_id)
  };
  const char* name = "drop_invalid";
  Kind kind = Kind::Drop;
  proto::AgqType type = proto::AgqType::Data;  // header type written
  uint8_t set_flags = 0;                        // OR-ed into the flags
};
constexpr std::size_t forward_key(Verdict v, ResultDelivery d) {
  return std::size_t(v) << 1 | (d == ResultDelivery::Ps ? 1 : 0);
}

struct ConstTables {
  tna::ConstTable<AllocAction> alloc_t{"alloc_t", 2048, AllocAction{}};
  tna::ConstTable<WindowAction> window_t{"window_t", 128, WindowAction{}};
  tna::ConstTable<GrantAction> grant_t{"grant_t", 128, GrantAction{}};
  tna::ConstTable<GrantAllocAction> grant_alloc_t{"grant_alloc_t", 128, GrantAllocAction{}};
  tna::ConstTable<RowShiftAction> slot_row_t{"slot_row_t", kMaxRowShift + 1, RowShiftAction{}};
  tna::ConstTable<ShiftAction> trunc_t{"trunc_t", 256, ShiftAction{}};
  tna::ConstTable<ShiftAction> align_t{"align_t", 16, ShiftAction{}};
  tna::ConstTable<ShiftAction> extract_t{"extract_t", 16, ShiftAction{}};
  tna::ConstTable<ForwardAction> agq_forward_t{"agq_forward_t", 2 * std::size_t(Verdict::Count),
                                               ForwardAction{}};
};

// Built once, immutable afterwards.
const ConstTables& const_tables();

}  // namespace agq::pipeline::agq
