// The agq ingress control (docs/PIPELINE.md), one pass. AgqProgram::process()
// runs it once, or twice when the pass arms a resubmit (a first contribution),
// carrying ResubmitMd from pass 1 to pass 2 as Tofino's resubmit header does.
#pragma once

#include <cstdint>

#include "pipeline/agq/registers.hpp"
#include "pipeline/agq/tables.hpp"
#include "pipeline/parser.hpp"
#include "tna/intrinsic.hpp"

namespace agq::pipeline::agq {


// The resubmit header (<= 64 bits on Tofino 1): what pass 2 needs from pass 1.
struct ResubmitMd {
  uint8_t occ_old = 0;     // row_occupancy half v as pass 1 read it
  uint8_t occ_new = 0;     // ... with the old window released and the new one taken
  uint16_t window = 0;     // new slot_window half (pos, w, FALLBACK, OVERFLOW)
  bool complete = false;   // the first contribution is also the last (N = 1)
  bool realloc = false;    // recirculated after a failed CAS: no lane clear
};
static_assert(sizeof(ResubmitMd) <= 8);

// The P4 user metadata of one pass.
struct Metadata {
  JobAction job;            // job_t
  WorkerAction worker;      // worker_t
  uint8_t v = 0;            // slot version
  uint32_t slot_idx = 0;    // slot register index
  uint32_t row = 0;         // row register index
  uint8_t req_units = 0;    // min(req_width, max_width) / 4
  uint8_t min_units = 0;    // min_width / 4 (the DATA's width byte; grant_alloc_t key)
  bool seen = false, first = false, complete = false;
  uint8_t count = 0;
  uint16_t window = 0;      // slot_window half v
  uint8_t pos = 0, w = 0;   // the window
  GrantAction grant;        // grant_t(w, g)
  Verdict verdict = Verdict::Drop;
  AgqDrop drop = AgqDrop::None;
};

// Per-event counters (PROTOCOL §9 names, reported by AgqProgram).
struct IngressCounters {
  uint64_t contributions = 0, first = 0, results = 0, result_resent = 0, absorbed = 0,
           duplicate = 0, fallback = 0, fallback_data = 0, ps_results = 0, overflow = 0,
           cas_retries = 0;
};

class Ingress {
 public:
  Ingress(uint32_t slots, uint32_t rows);

  // One pass over a packet whose agq header is valid. `resub` is read on a
  // resubmitted pass and written when this pass arms a resubmit.
  void apply(Headers& hdr, Metadata& md, ResubmitMd& resub, const tna::IngressIntrinsicMd& ig_intr_md,
             tna::IngressIntrinsicMdForTm& ig_tm_md, tna::IngressIntrinsicMdForDeparser& ig_dprsr_md);

  Registers& registers() { return regs_; }
  const Registers& registers() const { return regs_; }
  IngressCounters& counters() { return c_; }
  // The boot epoch written into every frame this control makes (PROTOCOL §11).
  void set_epoch(uint16_t epoch) { epoch_ = epoch; }
  const IngressCounters& counters() const { return c_; }

  // Control plane: runtime tables.
  tna::ExactTable<uint16_t, JobAction> job_t;
  tna::ExactTable<uint32_t, WorkerAction> worker_t;

 private:
  bool validate(const proto::Agq& a, Metadata& md, const tna::IngressIntrinsicMd& ig_intr_md,
                const proto::Ipv4& ip);
  void first_pass1(proto::Agq& a, Metadata& md, ResubmitMd& resub);
  void first_pass2(proto::Agq& a, Metadata& md, ResubmitMd& resub, bool& retry);
  void lanes(proto::Agq& a, const Metadata& md, bool add, bool extract);
  void forward(Headers& hdr, Metadata& md, const tna::IngressIntrinsicMd& ig_intr_md,
               tna::IngressIntrinsicMdForTm& ig_tm_md, tna::IngressIntrinsicMdForDeparser& ig_dprsr_md);

  Registers regs_;
  const ConstTables& tables_;
  IngressCounters c_;
  uint16_t epoch_ = 0;
};

}  // namespace agq::pipeline::agq
