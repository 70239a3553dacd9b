// AgqProgram, data plane: parser -> ingress (1 pass, 2 for a first
// contribution, more only after a lost CAS on Tofino) -> deparser -> traffic
// manager decision; egress rewrites each multicast replica. Non-agq traffic
// goes through the shared Forwarding control. Nothing here allocates per
// packet: headers and metadata live on the stack, tables are hash lookups.
#include "pipeline/agq/agq_program.hpp"

#include <string>

#include "pipeline/agq/program_impl.hpp"
#include "tna/pass.hpp"

namespace agq::pipeline::agq {

namespace {

// A pass for the TNA rule check, also when a register throws.
struct PassScope {
  PassScope() { tna::PassClock::begin_pass(); }
  ~PassScope() { tna::PassClock::end_pass(); }
  PassScope(const PassScope&) = delete;
  PassScope& operator=(const PassScope&) = delete;
};

// A first contribution takes 2 passes; each lost CAS (Tofino only) one more.
constexpr int kMaxPasses = 8;

tna::Decision tm_decision(const Metadata& md, const tna::IngressIntrinsicMdForTm& tm,
                          const tna::IngressIntrinsicMdForDeparser& dprsr) {
  if (dprsr.drop_ctl & 1) return tna::Decision::drop(uint16_t(md.drop));
  if (tm.mcast_grp_a != 0) return tna::Decision::multicast(tm.mcast_grp_a);
  if (tm.ucast_egress_port != tna::kNoPort) return tna::Decision::unicast(tm.ucast_egress_port);
  return tna::Decision::drop(uint16_t(AgqDrop::None));
}

}  // namespace

AgqProgram::AgqProgram(AgqConfig cfg, ForwardingConfig fwd_cfg, tna::ReplicationEngine& pre)
    : AgqSwitchProgram(fwd_cfg, pre), impl_(std::make_unique<Impl>(cfg)) {}

AgqProgram::~AgqProgram() = default;

tna::Decision AgqProgram::process(std::span<uint8_t> bytes, const tna::IngressIntrinsicMd& md) {
  Impl& s = *impl_;
  Headers hdr;
  if (parse(bytes, hdr) != ParserError::None) {
    ++s.parser_errors;
    ++s.fwd_drops[std::size_t(DropReason::ParserError)];
    return tna::Decision::drop(uint16_t(DropReason::ParserError));
  }
  if (!hdr.agq_valid) {
    const tna::Decision d = forwarding().apply(hdr, md);
    if (d.kind != tna::Decision::Kind::Drop) deparse(hdr, bytes);
    else if (d.drop_reason < s.fwd_drops.size()) ++s.fwd_drops[d.drop_reason];
    return d;
  }

  ++s.agq_packets;
  tna::IngressIntrinsicMd ig_intr_md = md;
  ResubmitMd resub;  // the resubmit header, carried from one pass to the next
  for (int pass = 1;; ++pass) {
    Metadata meta;
    tna::IngressIntrinsicMdForTm ig_tm_md;
    tna::IngressIntrinsicMdForDeparser ig_dprsr_md;
    {
      PassScope scope;
      s.ingress.apply(hdr, meta, resub, ig_intr_md, ig_tm_md, ig_dprsr_md);
    }
    if (ig_dprsr_md.resubmit && !(ig_dprsr_md.drop_ctl & 1) && pass < kMaxPasses) {
      ++s.resubmits;
      // realloc: a recirculation back to pass 1; otherwise pass 2.
      ig_intr_md.resubmit_flag = !resub.realloc;
      parse(bytes, hdr);  // the resubmitted packet is the original bytes
      continue;
    }
    const tna::Decision d = tm_decision(meta, ig_tm_md, ig_dprsr_md);
    if (d.kind != tna::Decision::Kind::Drop) {
      deparse(hdr, bytes);
    } else {
      switch (meta.drop) {
        case AgqDrop::Malformed: ++s.drops_malformed; break;
        case AgqDrop::UnknownJob: ++s.drops_unknown_job; break;
        case AgqDrop::BadWorker: ++s.drops_bad_worker; break;
        case AgqDrop::BadSlot: ++s.drops_bad_slot; break;
        case AgqDrop::BadWidth: ++s.drops_bad_width; break;
        default: break;  // absorbed / duplicate have their own counters
      }
    }
    return d;
  }
}

// ---- egress: egress_worker_t (job_id, rid) -> the replica's destination.
void AgqProgram::egress(std::span<uint8_t> bytes, tna::PortId /*egress_port*/, uint16_t rid) {
  Headers hdr;
  if (parse(bytes, hdr) != ParserError::None || !hdr.agq_valid || hdr.agq.type != proto::AgqType::Result)
    return;  // floods and other traffic pass unchanged
  if (rid > 0xFF) return;
  // get(): egress only reads the table (no hit counters), so it is safe
  // from any lcore while the control plane does not write it.
  const auto w = impl_->egress_worker_t.get(worker_key(hdr.agq.job_id, uint8_t(rid)));
  if (!w) return;
  hdr.ethernet.dst = w->mac;
  hdr.ipv4.dst = w->ipv4;
  hdr.ipv4.hdr_checksum = hdr.ipv4.compute_checksum();
  hdr.agq.worker_id = uint8_t(rid);
  deparse(hdr, bytes);
}

void AgqProgram::visit_counters(const tna::CounterVisitor& visit) const {
  const Impl& s = *impl_;
  const IngressCounters& c = s.ingress.counters();
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
  forwarding().visit_counters(visit);
}

void AgqProgram::clear_counters() {
  Impl& s = *impl_;
  s.ingress.counters() = IngressCounters{};
  s.agq_packets = s.resubmits = s.parser_errors = 0;
  s.fwd_drops.fill(0);
  s.drops_malformed = s.drops_unknown_job = s.drops_bad_worker = s.drops_bad_slot = s.drops_bad_width = 0;
  forwarding().clear_counters();
}

void AgqProgram::clear_state() { impl_->ingress.registers().clear(); }

void AgqProgram::set_epoch(uint16_t epoch) { impl_->ingress.set_epoch(epoch); }

const Registers& AgqProgram::registers() const { return impl_->ingress.registers(); }

uint32_t AgqProgram::aggregator_count() const { return impl_->cfg.total_rows; }

SwitchProgram::NamedCells AgqProgram::dump_aggregator(uint32_t row) const {
  NamedCells out;
  const Impl& s = *impl_;
  if (row >= s.cfg.total_rows) return out;
  const Registers& r = s.ingress.registers();
  // Names built by appends: GCC 12's -Wrestrict misfires on operator+ chains.
  auto pair = [&out](const char* reg, const std::string& idx, auto cell) {
    std::string name = reg;
    name += idx;
    out.emplace_back(name + ".v0", uint64_t(cell.lo));
    name += ".v1";
    out.emplace_back(std::move(name), uint64_t(cell.hi));
  };
  pair("row_occupancy", "", r.row_occupancy.read(row));
  for (const auto& lane : r.lanes) pair(lane.name().c_str(), "", lane.read(row));
  // The slots of the job that owns this row, if any.
  for (const auto& [id, job] : s.book.records()) {
    const JobPlacement& p = job.place;
    if (row < p.row_base || row >= p.row_base + p.rows) continue;
    const uint32_t first = (row - p.row_base) << p.row_shift;
    const uint32_t last = std::min<uint32_t>(p.slots, (row - p.row_base + 1) << p.row_shift);
    for (uint32_t sl = first; sl < last; ++sl) {
      const uint32_t i = p.slot_base + sl;
      std::string idx = "[";
      idx += std::to_string(i);
      idx += ']';
      pair("slot_bitmap", idx, r.slot_bitmap.read(i));
      pair("slot_count", idx, r.slot_count.read(i));
      pair("slot_window", idx, r.slot_window.read(i));
    }
  }
  return out;
}

}  // namespace agq::pipeline::agq
