// The counters of an agq program (docs/PROTOCOL.md §9) and the one function
// that reports them, shared by the TNA model and the fast program so both
// name and order them identically.
#pragma once

#include <array>
#include <cstdint>

#include "pipeline/agq/ingress.hpp"
#include "pipeline/drop_reason.hpp"
#include "pipeline/forwarding.hpp"
#include "tna/program.hpp"

namespace agq::pipeline::agq {

struct ProgramCounters {
  IngressCounters ingress;  // per-event counters of the ingress control
  uint64_t agq_packets = 0, resubmits = 0, parser_errors = 0;
  std::array<uint64_t, std::size_t(DropReason::Count)> fwd_drops{};  // Forwarding's reasons
  uint64_t drops_malformed = 0, drops_unknown_job = 0, drops_bad_worker = 0, drops_bad_slot = 0,
           drops_bad_width = 0;

  // A dropped agq packet's reason (absorbed / duplicate have their own counters).
  void count_drop(AgqDrop d) {
    switch (d) {
      case AgqDrop::Malformed: ++drops_malformed; break;
      case AgqDrop::UnknownJob: ++drops_unknown_job; break;
      case AgqDrop::BadWorker: ++drops_bad_worker; break;
      case AgqDrop::BadSlot: ++drops_bad_slot; break;
      case AgqDrop::BadWidth: ++drops_bad_width; break;
      default: break;
    }
  }
};

void visit_program_counters(const ProgramCounters& c, const Forwarding& fwd, const tna::CounterVisitor& visit);

}  // namespace agq::pipeline::agq
