// The reference classic pipeline (see classic_reference.hpp).
#include "pipeline/reference/classic_reference.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include "pipeline/classic/ingress.hpp"
#include "tna/pass.hpp"

namespace agq::pipeline::reference {

using namespace agq::pipeline::classic;

namespace {

constexpr std::size_t kDropReasons = std::size_t(DropReason::Count);

// Brackets one ingress pass for the TNA rule check, also when a register
// throws (the Debug build's rule violation).
struct PassScope {
  PassScope() { tna::PassClock::begin_pass(); }
  ~PassScope() { tna::PassClock::end_pass(); }
  PassScope(const PassScope&) = delete;
  PassScope& operator=(const PassScope&) = delete;
};

// The traffic manager: what leaves for this pass's intrinsic metadata.
tna::Decision tm_decision(const Metadata& md, const tna::IngressIntrinsicMdForTm& tm,
                          const tna::IngressIntrinsicMdForDeparser& dprsr) {
  if (dprsr.drop_ctl & 1) return tna::Decision::drop(uint16_t(md.drop_reason));
  if (tm.mcast_grp_a != 0) return tna::Decision::multicast(tm.mcast_grp_a);
  if (tm.ucast_egress_port != tna::kNoPort) return tna::Decision::unicast(tm.ucast_egress_port);
  return tna::Decision::drop(uint16_t(DropReason::None));  // no port assigned
}

// "reg[index]". Built by appends: GCC 12's -Wrestrict misfires on
// operator+ chains of std::string.
std::string indexed_name(const char* reg, uint32_t index) {
  std::string s = reg;
  s += '[';
  s += std::to_string(index);
  s += ']';
  return s;
}

}  // namespace

struct ClassicReference::Impl {
  explicit Impl(const ClassicConfig& cfg) : ingress(cfg) {}

  tna::Decision count(tna::Decision d) {
    if (d.kind == tna::Decision::Kind::Drop && d.drop_reason < kDropReasons) ++drops[d.drop_reason];
    return d;
  }

  Ingress ingress;
  uint64_t agq_packets = 0;
  uint64_t resubmits = 0;
  uint64_t parser_errors = 0;
  std::array<uint64_t, kDropReasons> drops{};
};

ClassicReference::ClassicReference(ClassicConfig cfg, ForwardingConfig fwd_cfg, tna::ReplicationEngine& pre)
    : forwarding_(fwd_cfg), cfg_(std::move(cfg)), impl_(std::make_unique<Impl>(cfg_)) {
  pre.set_group(kWorkerGroup, cfg_.worker_ports);
}

ClassicReference::~ClassicReference() = default;

tna::Decision ClassicReference::process(std::span<uint8_t> bytes, const tna::IngressIntrinsicMd& md) {
  Impl& s = *impl_;
  Headers hdr;
  if (parse(bytes, hdr) != ParserError::None) {
    ++s.parser_errors;
    return s.count(tna::Decision::drop(uint16_t(DropReason::ParserError)));
  }
  if (!hdr.agq_classic_valid) {
    const tna::Decision d = forwarding().apply(hdr, md);
    if (d.kind != tna::Decision::Kind::Drop) deparse(hdr, bytes);
    return s.count(d);
  }

  ++s.agq_packets;
  tna::IngressIntrinsicMd ig_intr_md = md;
  for (;;) {
    Metadata meta;  // parser initialisation: ina_action 2, the rest 0
    tna::IngressIntrinsicMdForTm ig_tm_md;
    tna::IngressIntrinsicMdForDeparser ig_dprsr_md;
    {
      PassScope pass;
      s.ingress.apply(hdr, meta, ig_intr_md, ig_tm_md, ig_dprsr_md);
    }
    // drop_ctl cancels a resubmit; a resubmitted packet is not resubmitted again.
    if (ig_dprsr_md.resubmit && !(ig_dprsr_md.drop_ctl & 1) && !ig_intr_md.resubmit_flag) {
      ++s.resubmits;
      ig_intr_md.resubmit_flag = true;
      // The deparser did not emit the packet: the second pass parses the
      // original bytes, not this pass's PHV.
      parse(bytes, hdr);
      continue;
    }
    const tna::Decision d = tm_decision(meta, ig_tm_md, ig_dprsr_md);
    if (d.kind != tna::Decision::Kind::Drop) deparse(hdr, bytes);
    return s.count(d);
  }
}

void ClassicReference::visit_counters(const tna::CounterVisitor& visit) const {
  const Impl& s = *impl_;
  const IngressCounters& c = s.ingress.counters();
  visit("agq_packets", s.agq_packets);
  visit("contributions", c.contributions);
  visit("allocations", c.allocations);
  visit("resubmits", s.resubmits);
  visit("completions", c.completions);
  visit("absorbed", c.absorbed);
  visit("collisions", c.collisions);
  visit("acks", c.acks);
  visit("acks_released", c.acks_released);
  visit("acks_no_owner", c.acks_no_owner);
  visit("parser_errors", s.parser_errors);
  for (std::size_t r = 1; r < kDropReasons; ++r)
    visit(std::string("drops_") + to_string(DropReason(r)), s.drops[r]);
  forwarding().visit_counters(visit);
}

void ClassicReference::clear_counters() {
  Impl& s = *impl_;
  s.ingress.counters() = IngressCounters{};
  s.agq_packets = s.resubmits = s.parser_errors = 0;
  s.drops.fill(0);
  forwarding().clear_counters();
}

void ClassicReference::clear_state() { impl_->ingress.registers().clear(); }

uint32_t ClassicReference::aggregator_count() const {
  // hash1 is 13 bits: only 8192 rows are addressable (reference §2).
  return std::min<uint32_t>(cfg_.register_capacity, 1u << 13);
}

ClassicReference::NamedCells ClassicReference::dump_aggregator(uint32_t index) const {
  NamedCells out;
  if (index >= aggregator_count()) return out;
  const Registers& r = impl_->ingress.registers();
  out.emplace_back("insert_posi", r.insert_posi.read(index));
  out.emplace_back("data_isEmpty", r.data_isEmpty.read(index));
  for (int k = 0; k < 4; ++k) out.emplace_back(r.reg[k].name(), r.reg[k].read(index));
  // The aggregator's 8 seq slots (hashID = 8a + hash2).
  for (uint32_t h = 8 * index; h < 8 * index + 8 && h < cfg_.register_capacity; ++h) {
    out.emplace_back(indexed_name("job_and_seq_reg", h), r.job_and_seq_reg.read(h));
    out.emplace_back(indexed_name("start_posi", h), r.start_posi.read(h));
    out.emplace_back(indexed_name("worker_agg", h), r.worker_agg.read(h));
  }
  return out;
}

ClassicReference::SeqSlot ClassicReference::seq_slot(uint32_t hash_id) const {
  const Registers& r = impl_->ingress.registers();
  return {r.job_and_seq_reg.read(hash_id), r.start_posi.read(hash_id), r.worker_agg.read(hash_id)};
}

ClassicReference::Aggregator ClassicReference::aggregator(uint32_t hash1) const {
  const Registers& r = impl_->ingress.registers();
  return {r.insert_posi.read(hash1), r.data_isEmpty.read(hash1),
          {r.reg[0].read(hash1), r.reg[1].read(hash1), r.reg[2].read(hash1), r.reg[3].read(hash1)}};
}

}  // namespace agq::pipeline::reference
