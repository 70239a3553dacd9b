// AgqProgram, data plane: parser -> ingress (1 pass, 2 for a first
// contribution, more only after a lost CAS on Tofino) -> deparser -> traffic
// manager decision; egress rewrites each multicast replica. Non-agq traffic
// goes through the shared Forwarding control. Nothing here allocates per
// packet: headers and metadata live on the stack, tables are hash lookups.
#include "pipeline/agq/agq_program.hpp"

#include <algorithm>
#include <string>

#include "pipeline/agq/ordinary.hpp"
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
  ProgramCounters& pc = s.counters;
  Headers hdr;
  if (auto d = ordinary_traffic(forwarding(), bytes, md, hdr, pc)) return *d;

  ++pc.agq_packets;
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
      ++pc.resubmits;
      // realloc: a recirculation back to pass 1; otherwise pass 2.
      ig_intr_md.resubmit_flag = !resub.realloc;
      parse(bytes, hdr);  // the resubmitted packet is the original bytes
      continue;
    }
    const tna::Decision d = tm_decision(meta, ig_tm_md, ig_dprsr_md);
    if (d.kind != tna::Decision::Kind::Drop) {
      deparse(hdr, bytes);
    } else {
      pc.count_drop(meta.drop);
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
  ProgramCounters c = impl_->counters;
  c.ingress = impl_->ingress.counters();
  visit_program_counters(c, forwarding(), visit);
}

void AgqProgram::clear_counters() {
  impl_->ingress.counters() = IngressCounters{};
  impl_->counters = ProgramCounters{};
  forwarding().clear_counters();
}

void AgqProgram::clear_state() { impl_->ingress.registers().clear(); }

void AgqProgram::set_epoch(uint16_t epoch) { impl_->ingress.set_epoch(epoch); }

const Registers& AgqProgram::registers() const { return impl_->ingress.registers(); }

const AgqConfig& AgqProgram::config() const { return impl_->cfg; }
const RegisterCells& AgqProgram::cells() const { return impl_->cells; }
const JobBook& AgqProgram::book() const { return impl_->book; }

// ---- shared by both agq programs
uint32_t AgqSwitchProgram::aggregator_count() const { return config().total_rows; }

SwitchProgram::NamedCells AgqSwitchProgram::dump_aggregator(uint32_t row) const {
  NamedCells out;
  if (row >= config().total_rows) return out;
  const RegisterCells& r = cells();
  // Names built by appends: GCC 12's -Wrestrict misfires on operator+ chains.
  auto pair = [&out](const char* reg, const std::string& idx, auto cell) {
    std::string name = reg;
    name += idx;
    out.emplace_back(name + ".v0", uint64_t(cell.lo()));
    name += ".v1";
    out.emplace_back(std::move(name), uint64_t(cell.hi()));
  };
  pair("row_occupancy", "", r.row_occupancy(row));
  for (unsigned k = 0; k < unsigned(proto::kAgqLanes); ++k) pair(Registers::lane_name(k), "", r.lane(row, k));
  // The slots of the job that owns this row, if any.
  for (const auto& [id, job] : book().records()) {
    const JobPlacement& p = job.place;
    if (row < p.row_base || row >= p.row_base + p.rows) continue;
    const uint32_t first = (row - p.row_base) << p.row_shift;
    const uint32_t last = std::min<uint32_t>(p.slots, (row - p.row_base + 1) << p.row_shift);
    for (uint32_t sl = first; sl < last; ++sl) {
      const uint32_t i = p.slot_base + sl;
      std::string idx = "[";
      idx += std::to_string(i);
      idx += ']';
      pair("slot_bitmap", idx, r.slot_bitmap(i));
      pair("slot_count", idx, r.slot_count(i));
      pair("slot_window", idx, r.slot_window(i));
    }
  }
  return out;
}

}  // namespace agq::pipeline::agq
