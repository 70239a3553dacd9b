// The ingress control of the published AGQ program (reference §3), one pass.
// Resubmission is driven by ClassicProgram::process(), which runs apply()
// a second time on the re-parsed original bytes.
#pragma once

#include <cstdint>

#include "pipeline/classic/classic_program.hpp"
#include "pipeline/classic/registers.hpp"
#include "pipeline/classic/tables.hpp"
#include "pipeline/drop_reason.hpp"
#include "pipeline/parser.hpp"
#include "tna/intrinsic.hpp"

namespace agq::pipeline::classic {

// The P4 user metadata, with the values the P4 parser initialises it to
// (ina_action = 2 "drop", everything else 0).
struct Metadata {
  uint8_t ina_action = 2;
  uint8_t ID = 0;           // job_and_seq_detect: 0 collision, 1 new seq, 2 aggregate
  uint8_t insert_len = 0;   // overloaded by the ACK path: job_and_seq_clear result
  uint8_t posi = 0;         // start position p of the seq
  uint8_t insert_bitmap = 0;
  uint8_t bitmap = 0;       // data_isEmpty as read (B or B_old)
  uint8_t worker_num = 0;   // worker_agg after the increment
  uint8_t L = 0;
  uint32_t mask_clear = 0, mask_extract = 0, mask_compress = 0;
  // Software only (not in the P4): why ina_action stayed 2, for the counters.
  DropReason drop_reason = DropReason::None;
};

// Per-event counters of the AGQ path (names as reported by visit_counters).
struct IngressCounters {
  uint64_t contributions = 0;  // data packets aggregated into their slot (once per packet)
  uint64_t allocations = 0;    // first packets of a sequence (ID == 1)
  uint64_t completions = 0;    // contributions that reached total_workers (sent to PS)
  uint64_t absorbed = 0;       // contributions that did not (dropped)
  uint64_t collisions = 0;     // ID == 0
  uint64_t acks = 0;           // isACK != 0
  uint64_t acks_released = 0;  // ACK that owned the slot
  uint64_t acks_no_owner = 0;  // ACK that did not (dropped)
};

class Ingress {
 public:
  Ingress(const ClassicConfig& cfg);

  // One ingress pass over a packet whose agq_classic header is valid.
  void apply(Headers& hdr, Metadata& md, const tna::IngressIntrinsicMd& ig_intr_md,
             tna::IngressIntrinsicMdForTm& ig_tm_md, tna::IngressIntrinsicMdForDeparser& ig_dprsr_md);

  Registers& registers() { return regs_; }
  const Registers& registers() const { return regs_; }
  IngressCounters& counters() { return c_; }
  const IngressCounters& counters() const { return c_; }

 private:
  uint32_t capacity_;
  Registers regs_;
  const ConstTables& tables_;
  tna::ConstTable<InaForward> ina_send_or_drop_;
  IngressCounters c_;
};

}  // namespace agq::pipeline::classic
