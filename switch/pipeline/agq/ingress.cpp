// The agq ingress control, stage by stage. Stage numbers are those of the
// Tofino 2 stage map in docs/PIPELINE.md (one pass for all 32 lanes; the
// result extraction is egress E0/E1 there, the end of this pass here). Each register is touched by at most one register action per
// pass, whatever path the packet takes (tna::Register checks it under
// AGQ_CHECK_TNA_RULES); every shift by a data-dependent amount is a table of
// constant-shift actions; the only loop is over the 32 lanes, which are 32
// independent registers and PHV ALUs on Tofino.
#include "pipeline/agq/ingress.hpp"

#include <algorithm>

#include "proto/agq.hpp"

namespace agq::pipeline::agq {

namespace {
constexpr int kLanes = proto::kAgqLanes;
using proto::AgqType;
}  // namespace

Ingress::Ingress(uint32_t slots, uint32_t rows)
    : job_t("job_t", 4096, JobAction{}),
      worker_t("worker_t", 4096 * kMaxWorkers, WorkerAction{}),
      regs_(slots, rows),
      tables_(const_tables()) {}

// ---- stage 0: header sanity, job_t, worker_t -----------------------------------
// Nothing of any job is touched before this returns true.
bool Ingress::validate(const proto::Agq& a, Metadata& md, const tna::IngressIntrinsicMd& ig_intr_md,
                       const proto::Ipv4& ip) {
  if (a.ver != proto::kAgqVersion || (a.n_lanes != kLanes && a.n_lanes != proto::kAgqLanesT1) ||
      (a.type != AgqType::Data && a.type != AgqType::PsResult)) {
    md.drop = AgqDrop::Malformed;
    return false;
  }
  md.job = job_t.apply(a.job_id);
  if (!md.job.hit) {
    md.drop = AgqDrop::UnknownJob;
    return false;
  }
  if (a.n_lanes != md.job.lanes) {  // the job's lane profile (PROTOCOL §10)
    md.drop = AgqDrop::Malformed;
    return false;
  }
  md.worker = worker_t.apply(worker_key(a.job_id, a.worker_id));
  if (a.type == AgqType::Data) {
    // The worker's own port and address, and the job's N: a host cannot
    // speak for another worker or another job.
    if (!md.worker.hit || md.worker.port != ig_intr_md.ingress_port || md.worker.ipv4 != ip.src ||
        a.num_workers != md.job.num_workers) {
      md.drop = AgqDrop::BadWorker;
      return false;
    }
  } else {
    // PS_RESULT: only the job's PS; a unicast answer needs a real worker.
    const bool unicast = (a.flags & proto::kAgqFlagRetransmit) != 0;
    if (ig_intr_md.ingress_port != md.job.ps_port || ip.src != md.job.ps_ipv4 ||
        (unicast && !md.worker.hit)) {
      md.drop = AgqDrop::BadWorker;
      return false;
    }
  }
  if (a.slot >= md.job.slots) {
    md.drop = AgqDrop::BadSlot;
    return false;
  }
  // DATA: req_width 4..32 in units, and min_width (the width byte) a unit
  // multiple with g + 2 <= min_width <= req_width (PROTOCOL §1): every
  // grant that honours it then leaves W - g >= 2.
  if (a.type == AgqType::Data && (a.req_width % 4 != 0 || a.req_width < 4 || a.req_width > 32 ||
                                  !min_width_valid(a.width, a.req_width, md.job.guard))) {
    md.drop = AgqDrop::BadWidth;
    return false;
  }
  return true;
}

void Ingress::apply(Headers& hdr, Metadata& md, ResubmitMd& resub, const tna::IngressIntrinsicMd& ig_intr_md,
                    tna::IngressIntrinsicMdForTm& ig_tm_md, tna::IngressIntrinsicMdForDeparser& ig_dprsr_md) {
  proto::Agq& a = hdr.agq;
  if (!validate(a, md, ig_intr_md, hdr.ipv4)) {
    md.verdict = Verdict::Drop;
    forward(hdr, md, ig_intr_md, ig_tm_md, ig_dprsr_md);
    return;
  }
  if (a.type == AgqType::PsResult) {  // stateless: straight to the forward stage
    ++c_.ps_results;
    md.verdict = (a.flags & proto::kAgqFlagRetransmit) ? Verdict::PsResultUnicast : Verdict::PsResult;
    forward(hdr, md, ig_intr_md, ig_tm_md, ig_dprsr_md);
    return;
  }

  // ---- stages 1-2: indices (slot_row_t: the job's constant shift; the
  // validation above is stage 1's gateway; row = row_base + row_off: stage 2)
  md.v = a.version_bit();
  md.slot_idx = md.job.slot_base + a.slot;
  md.row = md.job.row_base + tables_.slot_row_t.apply(md.job.row_shift).run(a.slot);
  md.req_units = std::min<uint8_t>(uint8_t(a.req_width >> 2), md.job.max_units);
  md.min_units = uint8_t(a.width >> 2);
  const bool ovf = (a.flags & proto::kAgqFlagOverflow) != 0;

  if (ig_intr_md.resubmit_flag) {  // pass 2 of a first contribution
    bool retry = false;
    first_pass2(a, md, resub, retry);
    if (retry) {
      // CAS lost (only possible on Tofino): recirculate to allocate again.
      resub.realloc = true;
      ig_dprsr_md.resubmit = true;
      ++c_.cas_retries;
      return;
    }
    forward(hdr, md, ig_intr_md, ig_tm_md, ig_dprsr_md);
    return;
  }

  if (resub.realloc) {
    // A recirculated first contribution: already counted in slot_bitmap and
    // slot_count, old window already cleared.
    md.first = true;
    md.complete = resub.complete;
  } else {
    // ---- stage 2: slot_bitmap; stage 3: seen = old & bit
    const uint32_t old = slot_bitmap_add(regs_.slot_bitmap, md.v, md.worker.worker_bit).execute(md.slot_idx);
    md.seen = (old & md.worker.worker_bit) != 0;
    // ---- stage 4: slot_count
    md.count = md.seen ? slot_count_read(regs_.slot_count, md.v).execute(md.slot_idx)
                       : slot_count_inc(regs_.slot_count, md.v, md.job.num_workers).execute(md.slot_idx);
    md.first = !md.seen && md.count == 1;
    md.complete = md.count == md.job.num_workers;
    if (!md.seen) {
      ++c_.contributions;
      if (ovf) ++c_.overflow;
    }
  }

  if (md.first) {
    first_pass1(a, md, resub);
    ig_dprsr_md.resubmit = true;  // resubmit_type 1, header = resub
    return;
  }

  // ---- stage 6: slot_window (a new contribution merges its OVERFLOW; one
  // P4 call site: operand = first ? PENDING : (new && OVERFLOW)).
  // Stage 5, row_occupancy, is only for first contributions.
  // On Tofino a window still PENDING here belongs to a first contribution
  // between its passes; such a packet recirculates (docs/PIPELINE.md). The
  // software passes of one packet are atomic, so it is never seen.
  md.window = slot_window_merge(regs_.slot_window, md.v, !md.seen && ovf ? kWinOverflow : 0)
                  .execute(md.slot_idx);
  if (md.window & kWinFallback) {
    ++c_.fallback_data;
    md.verdict = Verdict::FallbackData;
    forward(hdr, md, ig_intr_md, ig_tm_md, ig_dprsr_md);
    return;
  }
  md.pos = uint8_t(window_pos(md.window));
  md.w = uint8_t(window_units(md.window));
  // ---- stage 7: grant_t (trunc_t shares the stage: see lanes())
  md.grant = tables_.grant_t.apply(grant_key(md.w, md.job.guard));

  if (!md.seen) {
    lanes(a, md, /*add=*/true, /*extract=*/md.complete);
    md.verdict = md.complete ? Verdict::Result : Verdict::Absorb;
  } else if (md.complete) {
    lanes(a, md, /*add=*/false, /*extract=*/true);  // read the kept result
    md.verdict = Verdict::Resend;
  } else {
    md.verdict = Verdict::Duplicate;
  }
  forward(hdr, md, ig_intr_md, ig_tm_md, ig_dprsr_md);
}

// Pass 1 of a first contribution: release the slot's previous window of this
// version (every worker has its result: PROTOCOL §8) and choose the new one.
void Ingress::first_pass1(proto::Agq& a, Metadata& md, ResubmitMd& resub) {
  if (!resub.realloc) ++c_.first;
  // ---- stage 5: row_occupancy (read)
  const uint8_t occ = row_occupancy_read(regs_.row_occupancy, md.v).execute(md.row);
  // ---- stage 6: slot_window (read the old window, mark PENDING)
  const uint16_t old = slot_window_merge(regs_.slot_window, md.v, kWinPending).execute(md.slot_idx);
  const unsigned old_w = (old & kWinFallback) ? 0 : window_units(old);
  // ---- stage 7: window_t (masks of the old window; w = 0 misses: masks 0)
  const WindowAction& oldw = tables_.window_t.apply(window_key(window_pos(old), old_w));
  const uint8_t free_occ = uint8_t(occ & ~oldw.occ_mask);
  // ---- stage 8: free = occ & ~old; stage 9: alloc_t
  const AllocAction& al = tables_.alloc_t.apply(alloc_key(free_occ, md.req_units));
  // ---- stage 10: grant_alloc_t (does the window honour the DATA's
  // min_width? alloc_t's window is the widest free run when none holds the
  // request, so a narrower one cannot exist: no grant, FALLBACK; so is
  // max_width < min_width, whose request alloc_t never grants wider).
  const bool ok = tables_.grant_alloc_t.apply(grant_alloc_key(al.w, md.min_units)).ok;
  const bool ovf = (a.flags & proto::kAgqFlagOverflow) != 0;
  resub.occ_old = occ;
  resub.occ_new = ok ? uint8_t(free_occ | al.occ_mask) : free_occ;
  resub.window = ok ? pack_window(al.pos, al.w, false, ovf) : pack_window(0, 0, true, ovf);
  resub.complete = md.complete;
  // ---- stage 11: resubmit header; stages 10-17: lane00..lane31 (the
  // invariant: a free unit is zero)
  if (!resub.realloc && oldw.cell_mask != 0)
    for (int k = 0; k < md.job.lanes; ++k) lane_clear(regs_.lanes[k], md.v, ~oldw.cell_mask).execute(md.row);
  // What this pass arms is a resubmit to pass 2, not another recirculation
  // to pass 1 (else a retried packet would loop through pass 1 until
  // kMaxPasses and be lost).
  resub.realloc = false;
}

// Pass 2: take the window (CAS on the occupancy), write it, aggregate.
void Ingress::first_pass2(proto::Agq& a, Metadata& md, ResubmitMd& resub, bool& retry) {
  md.first = true;
  md.complete = resub.complete;
  // ---- stage 5: row_occupancy (compare-and-set)
  if (!row_occupancy_cas(regs_.row_occupancy, md.v, resub.occ_old, resub.occ_new).execute(md.row)) {
    retry = true;
    return;
  }
  // ---- stage 6: slot_window (write; clears PENDING)
  md.window = slot_window_write(regs_.slot_window, md.v, resub.window).execute(md.slot_idx);
  if (md.window & kWinFallback) {
    ++c_.fallback;
    ++c_.fallback_data;
    md.verdict = Verdict::FallbackData;
    return;
  }
  md.pos = uint8_t(window_pos(md.window));
  md.w = uint8_t(window_units(md.window));
  // ---- stage 7: grant_t
  md.grant = tables_.grant_t.apply(grant_key(md.w, md.job.guard));
  lanes(a, md, /*add=*/true, /*extract=*/md.complete);
  md.verdict = md.complete ? Verdict::Result : Verdict::Absorb;
}

// ---- stages 7-17 and E0-E1: the lane path, 32 lanes side by side.
//   7 trunc_t (>> d), 8 value mask, 9 align_t (<< 4(8-end)), 10-17 lane_add
//   (4 lane registers per stage); E0 extract_t (>> 4(8-end)), E1 result
//   mask (Tofino: egress; here the end of the pass, same bits). `add` =
//   false reads (adds 0). A 16-lane job touches lane00..lane15 only.
void Ingress::lanes(proto::Agq& a, const Metadata& md, bool add, bool extract) {
  uint32_t* x = a.lanes.data();
  const unsigned end = md.pos + md.w;
  // d = R - W; a worker that disagrees with the others on R (R < W) only
  // garbles its own job's window (trunc_t misses: d = 0; the mask applies).
  const uint32_t value_mask = add ? md.grant.value_mask : 0;
  if (auto run = tables_.trunc_t.apply(trunc_key(a.req_width >> 2, md.w)).run) run(x);
  for (int k = 0; k < kLanes; ++k) x[k] &= value_mask;
  if (auto run = tables_.align_t.apply(end).run) run(x);
  for (int k = 0; k < md.job.lanes; ++k) x[k] = lane_add(regs_.lanes[k], md.v, x[k]).execute(md.row);
  if (!extract) return;
  if (auto run = tables_.extract_t.apply(end).run) run(x);
  for (int k = 0; k < kLanes; ++k) x[k] &= md.grant.result_mask;
}

// ---- stages 8-9: agq_forward_t (verdict, delivery) -> where, and the header.
void Ingress::forward(Headers& hdr, Metadata& md, const tna::IngressIntrinsicMd& ig_intr_md,
                      tna::IngressIntrinsicMdForTm& ig_tm_md, tna::IngressIntrinsicMdForDeparser& ig_dprsr_md) {
  proto::Agq& a = hdr.agq;
  const ForwardAction& fa = tables_.agq_forward_t.apply(forward_key(md.verdict, md.job.delivery));
  switch (md.verdict) {
    case Verdict::Absorb: ++c_.absorbed; md.drop = AgqDrop::Absorbed; break;
    case Verdict::Duplicate: ++c_.duplicate; md.drop = AgqDrop::Duplicate; break;
    case Verdict::Result: ++c_.results; break;
    case Verdict::Resend: ++c_.result_resent; break;
    default: break;
  }
  if (fa.kind == ForwardAction::Kind::Drop) {
    ig_dprsr_md.drop_ctl = 1;
    return;
  }

  // Header of what leaves.
  if (md.verdict == Verdict::Result || md.verdict == Verdict::Resend) {
    a.width = uint8_t(md.w * kUnitBits);
    a.pos = md.pos;
    a.guard = md.job.guard;
    a.flags = uint8_t(md.v | ((md.window & kWinOverflow) ? proto::kAgqFlagOverflow : 0));
  } else if (md.verdict == Verdict::FallbackData) {
    a.width = 0;
    a.pos = 0;
    a.guard = md.job.guard;
  } else if (md.verdict == Verdict::PsResult) {
    a.flags &= uint8_t(~proto::kAgqFlagRetransmit);
  }
  a.type = fa.type;
  a.flags |= fa.set_flags;
  a.epoch = epoch_;  // every frame the switch makes carries its boot epoch
  hdr.udp.checksum = 0;  // payload rewritten

  auto set_dst = [&](const proto::Mac& mac, uint32_t ip) {
    hdr.ethernet.dst = mac;
    hdr.ipv4.dst = ip;
  };
  switch (fa.kind) {
    case ForwardAction::Kind::Drop: break;
    case ForwardAction::Kind::MulticastJob:
      ig_tm_md.mcast_grp_a = md.job.mcast_grp;  // egress_worker_t rewrites each replica
      return;
    case ForwardAction::Kind::UnicastPs:
      ig_tm_md.ucast_egress_port = md.job.ps_port;
      set_dst(md.job.ps_mac, md.job.ps_ipv4);
      break;
    case ForwardAction::Kind::SendBack:
      ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port;
      std::swap(hdr.ethernet.dst, hdr.ethernet.src);
      std::swap(hdr.ipv4.dst, hdr.ipv4.src);
      break;
    case ForwardAction::Kind::UnicastWorker:
      ig_tm_md.ucast_egress_port = md.worker.port;
      set_dst(md.worker.mac, md.worker.ipv4);
      break;
  }
  hdr.ipv4.hdr_checksum = hdr.ipv4.compute_checksum();
}

}  // namespace agq::pipeline::agq
