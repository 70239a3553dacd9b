// The ingress control, stage by stage as the compiler laid out the published
// program on Tofino 1 (reference §3.4). Within a stage, the data path
// (isACK == 0: first packet / contribution) and the ACK path use different
// register actions of the same register, so every register is touched at
// most once per pass (checked by tna::Register under AGQ_CHECK_TNA_RULES).
#include "pipeline/classic/ingress.hpp"

#include "proto/headers.hpp"

namespace agq::pipeline::classic {

namespace {
constexpr int kLanes = proto::kAgqClassicAggLanes;
}

Ingress::Ingress(const ClassicConfig& cfg)
    : capacity_(cfg.register_capacity),
      regs_(cfg.register_capacity),
      tables_(const_tables()),
      ina_send_or_drop_(make_ina_send_or_drop(cfg)) {}

void Ingress::apply(Headers& hdr, Metadata& md, const tna::IngressIntrinsicMd& ig_intr_md,
                    tna::IngressIntrinsicMdForTm& ig_tm_md,
                    tna::IngressIntrinsicMdForDeparser& ig_dprsr_md) {
  auto& agq = hdr.agq_classic;
  uint32_t* data = agq.data.data();  // data0..3, the aggregated lanes
  const uint32_t h = agq.hash_id;    // per-seq registers
  const uint32_t a = agq.hash1;      // per-aggregator registers

  // Deviation (documented): on Tofino an index past the register size is
  // undefined behaviour; here it is a counted drop.
  if (h >= capacity_ || a >= capacity_) {
    md.drop_reason = DropReason::AgqBadIndex;
    ig_dprsr_md.drop_ctl = 1;
    return;
  }

  // ---- stage 0: job_and_seq_reg (ipv4_host shares the stage; non-AGQ only)
  if (agq.is_ack == 0)
    md.ID = job_and_seq_detect(regs_.job_and_seq_reg, agq.job_and_seq).execute(h);
  else
    md.insert_len = job_and_seq_clear(regs_.job_and_seq_reg, agq.job_and_seq).execute(h);
  const bool first = agq.is_ack == 0 && md.ID == 1;      // new seq, first pass
  const bool aggregate = agq.is_ack == 0 && md.ID == 2;  // contribution (incl. resubmitted first)
  const bool release = agq.is_ack != 0 && md.insert_len == 1;

  // ---- stage 1: insert_posi, worker_agg
  if (first) {
    md.posi = insert_posi_advance(regs_.insert_posi).execute(a);
  }
  if (aggregate) {
    md.worker_num = worker_agg_count(regs_.worker_agg).execute(h);
  } else if (release) {
    worker_agg_clear(regs_.worker_agg).execute(h);
    md.ina_action = 3;
  }

  // ---- stage 2: posi_2_bitmap_t0, start_posi
  if (first) {
    start_posi_write(regs_.start_posi, md.posi).execute(h);
    md.insert_bitmap = tables_.posi_2_bitmap_t0.apply(md.posi & 7).insert_bitmap;
  } else if (aggregate) {
    md.posi = start_posi_read(regs_.start_posi).execute(h);
  } else if (release) {
    md.posi = start_posi_read_clear(regs_.start_posi).execute(h);
  }

  // ---- stage 3: posi_2_bitmap_t1 (a table is applied once per pass, hence
  // the ACK path's shadow copy of t0)
  if (release) md.insert_bitmap = tables_.posi_2_bitmap_t1.apply(md.posi & 7).insert_bitmap;

  // ---- stage 4: data_isEmpty
  if (first)
    md.bitmap = data_isEmpty_set(regs_.data_isEmpty, md.insert_bitmap).execute(a);
  else if (aggregate)
    md.bitmap = data_isEmpty_read(regs_.data_isEmpty).execute(a);
  else if (release)
    md.bitmap = data_isEmpty_remove(regs_.data_isEmpty, md.insert_bitmap).execute(a);

  // ---- stage 5: split_t, get_length_t, ack_t, ina_send_or_drop
  // A miss (get_length_t/ack_t have entries only where p is a start) is
  // NoAction: the metadata keeps its parser value 0, which is exactly what
  // the all-zero default action data writes.
  const std::size_t key = bitmap_position_key(md.bitmap, md.posi);
  if (first) {
    const SplitInfo& e = tables_.split_t.apply(key);
    md.L = e.L;
    md.mask_clear = e.mask_clear;
    md.mask_extract = e.mask_extract;
    md.mask_compress = e.mask_compress;
    // Even with L == 0 (cursor on a live start, quirk §5.1) the seq is
    // taken: owner and start are written and the packet is resubmitted.
    ig_dprsr_md.resubmit = true;  // resubmit_type = 0
    md.ina_action = 1;            // not dropped (drop_ctl would cancel the resubmit)
    ++c_.allocations;
  } else if (aggregate) {
    const LengthInfo& e = tables_.get_length_t.apply(key);
    md.L = e.L;
    md.mask_extract = e.mask_extract;
    md.mask_compress = e.mask_compress;
    ++c_.contributions;
    if (md.worker_num == agq.total_workers) {
      md.ina_action = 1;
      ++c_.completions;
    } else {
      md.drop_reason = DropReason::AgqAbsorbed;
      ++c_.absorbed;
    }
  } else if (release) {
    const AckInfo& e = tables_.ack_t.apply(key);
    md.L = e.L;
    md.mask_clear = e.mask_clear;
    md.mask_compress = e.mask_compress;
  }
  if (agq.is_ack == 0 && md.ID == 0) {
    md.drop_reason = DropReason::AgqCollision;  // no fallback to the PS
    ++c_.collisions;
  }
  if (agq.is_ack != 0) {
    ++c_.acks;
    if (release) {
      ++c_.acks_released;
    } else {
      md.drop_reason = DropReason::AgqAckNoOwner;
      ++c_.acks_no_owner;
    }
  }
  const InaForward& fwd = ina_send_or_drop_.apply(md.ina_action);
  switch (fwd.kind) {
    case InaForward::Kind::SendBack: ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port; break;
    case InaForward::Kind::Send: ig_tm_md.ucast_egress_port = fwd.port; break;
    case InaForward::Kind::Drop: ig_dprsr_md.drop_ctl = 1; break;
    case InaForward::Kind::Multicast: ig_tm_md.mcast_grp_a = fwd.mcast_grp; break;
  }

  // The lane stages run for a data packet whose window has a width, and for
  // every released ACK: on an ack_t miss the masks stay 0, so the ACK clears
  // all four cells and its data becomes 0 (quirk §5.1).
  const bool lanes = ((first || aggregate) && md.L != 0) || release;
  if (!lanes) return;

  // ---- stage 6: compress (truncate to the top L bits)
  for (int k = 0; k < kLanes; ++k) data[k] &= md.mask_compress;

  // ---- stage 7: align_t (>> 4p, constant-shift action per p)
  if (auto run = tables_.align_t.apply(md.posi & 7).run) run(data);

  // ---- stages 8-9: reg0, reg1, reg2 | reg3
  // Clear on a first pass and on an isACK == 1 ACK; add otherwise, also for
  // an ACK with isACK >= 2, which adds its data into the window (quirk §5.7).
  const bool clear = first || (release && agq.is_ack == 1);
  if (clear) {
    for (int k = 0; k < kLanes; ++k) reg_clear(regs_.reg[k], md.mask_clear).execute(a);
    return;  // the clear action returns nothing into the PHV
  }
  for (int k = 0; k < kLanes; ++k) data[k] = reg_agg(regs_.reg[k], data[k]).execute(a);

  // ---- stage 10: extract (the seq's window; 0 on the ACK path, which
  // never sets mask_extract, so an isACK >= 2 ACK leaves with data 0)
  for (int k = 0; k < kLanes; ++k) data[k] &= md.mask_extract;

  // ---- stage 11: data_extract_t (<< 4p: MSB-aligned again)
  if (auto run = tables_.data_extract_t.apply(md.posi & 7).run) run(data);
}

}  // namespace agq::pipeline::classic
