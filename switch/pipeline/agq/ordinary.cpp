#include "pipeline/agq/ordinary.hpp"

#include <string>

namespace agq::pipeline::agq {

std::optional<tna::Decision> ordinary_traffic(Forwarding& fwd, std::span<uint8_t> bytes,
                                              const tna::IngressIntrinsicMd& md, Headers& hdr,
                                              ProgramCounters& c) {
  if (parse(bytes, hdr) != ParserError::None) {
    ++c.parser_errors;
    ++c.fwd_drops[std::size_t(DropReason::ParserError)];
    return tna::Decision::drop(uint16_t(DropReason::ParserError));
  }
  if (hdr.agq_valid) return std::nullopt;
  const tna::Decision d = fwd.apply(hdr, md);
  if (d.kind != tna::Decision::Kind::Drop) deparse(hdr, bytes);
  else if (d.drop_reason < c.fwd_drops.size()) ++c.fwd_drops[d.drop_reason];
  return d;
}

void visit_program_counters(const ProgramCounters& s, const Forwarding& fwd, const tna::CounterVisitor& visit) {
  const IngressCounters& c = s.ingress;
  visit("agq_packets", s.agq_packets);
  visit("agq_contributions", c.contributions);
  visit("agq_first", c.first);
  visit("agq_resubmits", s.resubmits);
  visit("agq_results", c.results);
  visit("agq_result_resent", c.result_resent);
  visit("agq_absorbed", c.absorbed);
  visit("agq_duplicate", c.duplicate);
  visit("agq_fallback", c.fallback);
  visit("agq_fallback_data", c.fallback_data);
  visit("agq_ps_results", c.ps_results);
  visit("agq_overflow", c.overflow);
  visit("agq_cas_retries", c.cas_retries);
  visit("drops_agq_malformed", s.drops_malformed);
  visit("drops_agq_unknown_job", s.drops_unknown_job);
  visit("drops_agq_bad_worker", s.drops_bad_worker);
  visit("drops_agq_bad_slot", s.drops_bad_slot);
  visit("drops_agq_bad_width", s.drops_bad_width);
  visit("parser_errors", s.parser_errors);
  for (DropReason r : {DropReason::L2SamePort, DropReason::L2NoPorts})
    visit(std::string("drops_") + to_string(r), s.fwd_drops[std::size_t(r)]);
  fwd.visit_counters(visit);
}

}  // namespace agq::pipeline::agq
