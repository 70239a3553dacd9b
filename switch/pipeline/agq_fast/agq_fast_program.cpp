// AgqFastProgram, data plane. Stage names and numbers are those of
// pipeline/agq/ingress.cpp and docs/PIPELINE.md; every register action is a
// salu:: program shared with the model.
#include "pipeline/agq_fast/agq_fast_program.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "pipeline/agq/salu.hpp"
#include "pipeline/agq_fast/wire.hpp"
#include "proto/bytes.hpp"

namespace agq::pipeline::agq::fast {

using proto::AgqType;
using proto::load_be16;
using proto::load_be32;

namespace {
const WorkerAction kWorkerMiss{};
const JobEntry kNoJob{};  // a verdict without a job (a malformed frame) reads the defaults
constexpr uint8_t kTypeData = uint8_t(AgqType::Data), kTypePsResult = uint8_t(AgqType::PsResult);
}  // namespace

// The P4 metadata of one packet, carried from admission to the register
// stages of a burst. Trivial (no member initializers): a burst's array
// costs nothing to declare. admit() sets what a later stage may read
// (frame, ip, h, flags, job, worker, slot, drop; verdict when admission
// decides the packet, slot null; v, req_units, occ, cells with a slot).
// What the register stages produce for agq_forward_t is a Pass.
// One cache line: the burst's array is indexed by a shift, and the IPv4
// and agq headers are offsets from the frame (locate_agq(): agq = l3 +
// kIpToAgq) rather than two more pointers to store and load.
struct alignas(64) AgqFastProgram::Meta {
  uint8_t* frame;  // null: decided at admission (not agq traffic)
  const JobEntry* job;
  const WorkerAction* worker;
  SlotRecord* slot;  // null: no register stage (invalid, PS_RESULT, not agq)
  Pair<uint8_t>* occ;
  uint32_t* cells;  // the row's lane cells, half v
  uint8_t l3;       // the IPv4 header's offset in frame (14, or 18 tagged)
  uint8_t v, req_units, flags;
  uint8_t min_units;  // min_width / 4 (grant_alloc_t key)
  uint8_t trunc_row;  // trunc_t's key without w: (req_width >> 2) << 4 (trunc_key)
  Verdict verdict;  // set at admission only when it decides (no slot)
  AgqDrop drop;     // zero: AgqDrop::None
  uint8_t* ip() const { return frame + l3; }
  uint8_t* h() const { return frame + l3 + kIpToAgq; }
};
// What the register stages of one packet produce for agq_forward_t and its
// header writes: a local of the stage loop, so it stays in registers.
struct AgqFastProgram::Pass {
  uint16_t window;  // slot_window's half v: pos | w << 3 in bits 0-6 (pack_window)
  bool seen, complete;
  Verdict verdict;
  AgqDrop drop;
};
static_assert(Verdict::Drop == Verdict{} && AgqDrop::None == AgqDrop{});

AgqFastProgram::AgqFastProgram(AgqConfig cfg, ForwardingConfig fwd_cfg, tna::ReplicationEngine& pre)
    : AgqSwitchProgram(fwd_cfg, pre),
      book_(cfg),
      t_(fast_tables()),
      simd_(best_simd()),
      job_slot_(65536, 0) {
  // forward() decides Absorb without the table: it must say drop_absorbed.
  for (ResultDelivery d : {ResultDelivery::Multicast, ResultDelivery::Ps})
    if (t_.agq_forward_t[forward_key(Verdict::Absorb, d)].kind != ForwardAction::Kind::Drop)
      throw std::logic_error("agq_forward_t: Absorb is not a drop");
}

AgqFastProgram::~AgqFastProgram() = default;

bool AgqFastProgram::set_simd(Simd s) {
  if (!simd_supported(s)) return false;
  simd_ = s;
  return true;
}

tna::Decision AgqFastProgram::process(std::span<uint8_t> bytes, const tna::IngressIntrinsicMd& md) {
  tna::BurstPacket p{bytes.data(), uint16_t(bytes.size()), md, {}};
  process_burst(&p, 1);
  return p.decision;
}

void AgqFastProgram::process_burst(tna::BurstPacket* pkts, unsigned n) {
#if defined(__x86_64__)
  if (simd_ == Simd::Avx512) return burst_avx512(pkts, n);
  if (simd_ == Simd::Avx2) return burst_avx2(pkts, n);
#endif
  burst_scalar(pkts, n);
}

void AgqFastProgram::burst_scalar(tna::BurstPacket* pkts, unsigned n) { run_burst<LanesScalar>(pkts, n); }
#if defined(__x86_64__)
AGQ_TARGET_AVX2 void AgqFastProgram::burst_avx2(tna::BurstPacket* pkts, unsigned n) { run_burst<LanesAvx2>(pkts, n); }
AGQ_TARGET_AVX512 void AgqFastProgram::burst_avx512(tna::BurstPacket* pkts, unsigned n) {
  run_burst<LanesAvx512>(pkts, n);
}
#endif

template <class Lanes>
inline void AgqFastProgram::run_burst(tna::BurstPacket* pkts, unsigned n) {
  static_assert(kChunk <= Forwarding::kBurstMax);
  static_assert(sizeof(Meta) == 64, "Meta: one cache line, indexed by a shift");
  Meta meta[kChunk];
  FrameView* views = views_;  // filled for frames that are not agq traffic (scratch)
  JobMemo memo;              // job_t's last hit: a burst is mostly one job's DATA
  uint8_t ordinary[kChunk];  // their burst indices, in arrival order, for Forwarding
  uint8_t admitted[kChunk];  // the agq frames' burst indices, in arrival order
  for (unsigned base = 0; base < n; base += kChunk) {
    tna::BurstPacket* p = pkts + base;
    const unsigned m = std::min(kChunk, n - base);
    // Stage 0: parser, validation, job_t, worker_t, slot_row_t; prefetch
    // the slot records and rows the register stages will touch. A frame
    // that is not agq traffic is parsed (view only) and listed for the
    // forwarding stage, or dropped on a parser error.
    unsigned k = 0, na = 0;
    // Frames are prefetched ahead of the parser: the first line (headers,
    // all an ordinary frame needs) 4 packets ahead, the agq lanes' second
    // line 2 ahead.
    for (unsigned i = 0; i < m && i < 4; ++i) __builtin_prefetch(p[i].bytes);
    // An ordinary frame shaped like the last one parsed takes its view
    // without a parse (same_parse: exact); `run`: every frame so far is
    // ordinary, shaped like frame 0 and with its forwarding inputs (a
    // vector of one flow: decided once, Forwarding::apply_run), as in the
    // classic program.
    const FrameView* model = nullptr;
    unsigned model_i = 0;
    bool run = true;
    for (unsigned i = 0; i < m; ++i) {
      if (i + 4 < m) [[likely]] {  // one test for both, but near a chunk's end
        __builtin_prefetch(p[i + 4].bytes);
        __builtin_prefetch(p[i + 2].bytes + 64);
      } else if (i + 2 < m) {
        __builtin_prefetch(p[i + 2].bytes + 64);
      }
      // A frame shaped like the last parsed one (never agq traffic: see
      // below) parses as it did, so it is not agq traffic either (same_parse
      // is exact). agq traffic is found at fixed offsets (locate_agq()
      // accepts exactly the frames parse() accepts with a valid agq header)
      // and admitted there; only other frames take the generic parse
      // (parse_view() agrees with parse(), which the model runs) and its
      // FrameView.
      // A DATA shaped like the memo's (JobMemo::frame): admitted without
      // locate_agq() or the header checks the template stands for.
      if (memo.frame_len != 0 && p[i].len == memo.frame_len &&
          Lanes::frame_matches(p[i].bytes, memo.frame, JobMemo::kFrameBytes)) {
        static constexpr AgqFrame kUntagged{14, 14 + kIpToAgq};
        if (admit<true>(p[i], kUntagged, meta[i], memo)) admitted[na++] = uint8_t(i);
        run = false;
        continue;
      }
      if (model && same_parse(p[model_i].bytes, p[model_i].len, *model, p[i].bytes, p[i].len)) {
        views[i] = *model;
      } else {
        AgqFrame f;
        if (locate_agq(p[i].bytes, p[i].len, f)) {
          if (admit<false>(p[i], f, meta[i], memo)) admitted[na++] = uint8_t(i);
          run = false;
          continue;
        }
        parse_view(p[i].bytes, p[i].len, views[i]);
        model = &views[i];
        model_i = i;
      }
      if (model->error != ParserError::None) {
        run = false;
        ++c_.parser_errors;
        ++c_.fwd_drops[std::size_t(DropReason::ParserError)];
        p[i].decision = tna::Decision::drop(uint16_t(DropReason::ParserError));
        continue;
      }
      ordinary[k++] = uint8_t(i);
      if (run && i > 0) run = model_i == 0 && forwarding().same_inputs(p[0], views[0], p[i], views[0]);
    }
    // Every admitted frame is agq traffic this instance counts (a row of
    // another instance is not admitted: its owner counts it).
    c_.agq_packets += na;
    if (run) {  // every frame ordinary: one flow
      forwarding().apply_run(p, views[0], m);
      const tna::Decision& d = p[0].decision;
      if (d.kind == tna::Decision::Kind::Drop && d.drop_reason < c_.fwd_drops.size()) c_.fwd_drops[d.drop_reason] += m;
      continue;
    }
    // Stages 2-17, the registers, packet by packet in arrival order, each
    // packet's agq_forward_t and header writes right after its own: they
    // read only its metadata and the constant tables, and write only its
    // frame, so running them here or after the burst's last register
    // stage gives the same bytes. Only admitted frames have a meta (an
    // ordinary frame writes none).
    for (unsigned j = 0; j < na; ++j) {
      Meta& mj = meta[admitted[j]];
      Pass r;  // the register stages' results, in registers rather than in meta
      r.drop = mj.drop;
      if (mj.slot)
        registers<Lanes>(mj, r);
      else
        r.verdict = mj.verdict;  // decided at admission
      forward(p[admitted[j]], mj, r);
    }
    // Ordinary forwarding (L2, host routes, ARP proxy) over its own
    // sub-vector: its tables are not the registers, so running it after the
    // agq packets of the burst changes no result.
    if (k != 0) {
      forwarding().apply_burst(p, views, ordinary, k);
      for (unsigned j = 0; j < k; ++j) {
        const tna::Decision& d = p[ordinary[j]].decision;
        if (d.kind == tna::Decision::Kind::Drop && d.drop_reason < c_.fwd_drops.size()) ++c_.fwd_drops[d.drop_reason];
      }
    }
  }
}

bool AgqFastProgram::process_run(tna::BurstPacket& first, unsigned n) {
  // locate_agq() accepts exactly the frames parse_view() finds a valid agq
  // header in; those (and parser errors, ARP) go through process_burst().
  FrameView v;
  parse_view(first.bytes, first.len, v);
  if (v.error != ParserError::None || v.agq_valid) return false;
  if (!forwarding().decide_run(first, v, n)) return false;
  const tna::Decision& d = first.decision;
  if (d.kind == tna::Decision::Kind::Drop && d.drop_reason < c_.fwd_drops.size()) c_.fwd_drops[d.drop_reason] += n;
  return true;
}

// ---- stage 0: parser, header sanity, job_t, worker_t (Ingress::validate);
// stages 1-2: slot and row indices. Nothing of any job is touched here.
// `v`: the frame's parse, with a valid agq header.
template <bool kKnown>
inline bool AgqFastProgram::admit(tna::BurstPacket& p, const AgqFrame& f, Meta& m, JobMemo& memo) {
  // locate_agq() found the agq header: Ethernet, at most one tag, IPv4 IHL
  // 5 not a fragment, UDP to 50100, the whole header present.
  m.frame = p.bytes;
  m.l3 = uint8_t(f.l3);
  uint8_t* const ip = p.bytes + f.l3;
  uint8_t* h = p.bytes + f.agq;
  m.flags = h[kFlags];
  auto reject = [&m](AgqDrop why) {
    m.slot = nullptr;
    m.drop = why;
    m.verdict = Verdict::Drop;
    return true;
  };
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);
  uint64_t head, tail;
  std::memcpy(&head, h, sizeof head);
  std::memcpy(&tail, h + kReqWidth, sizeof tail);
  static_assert(kNLanes - kReqWidth == 5, "JobMemo::kTailMask: n_lanes is byte 5 of the tail word");
  static_assert(kWidth - kReqWidth == 1, "JobMemo::kTailMask: min_width is byte 1 of the tail word");
  const uint8_t wid = h[kWorkerId];
  const uint32_t src = load_be32(ip + kIpSrc);
  const uint16_t slot = load_be16(h + kSlot);
  if (kKnown || ((head & JobMemo::kDataMask) == memo.data && (tail & JobMemo::kTailMask) == memo.tail)) [[likely]] {
    // A DATA of the memo's job, its num_workers, lane profile and a
    // req_width and min_width already found valid: of the checks below
    // only worker_t's (hit, port, address) and the slot's remain (JobMemo).
    const JobEntry* job = m.job = memo.job;
    uint32_t src_wire;
    std::memcpy(&src_wire, ip + kIpSrc, sizeof src_wire);
    m.worker = wid < kMaxWorkers ? &job->worker[wid] : &kWorkerMiss;
    if (wid >= kMaxWorkers || job->worker_check[wid] != (uint64_t(p.md.ingress_port) << 32 | src_wire))
      return reject(AgqDrop::BadWorker);
    if (slot >= job->job.slots) return reject(AgqDrop::BadSlot);
    m.req_units = memo.req_units;
    m.min_units = memo.min_units;
    m.trunc_row = memo.trunc_row;
  } else {
    m.worker = &kWorkerMiss;
    m.job = nullptr;
    const uint8_t type = h[kVerType] & 0x0F;
    const uint8_t n_lanes = h[kNLanes];
    if ((h[kVerType] >> 4) != proto::kAgqVersion || (n_lanes != proto::kAgqLanes && n_lanes != proto::kAgqLanesT1) ||
        (type != kTypeData && type != kTypePsResult))
      return reject(AgqDrop::Malformed);
    // job_t, through the burst's one-entry memo: the job table's two
    // dependent loads (id -> index -> entry) once per run of one job's
    // frames instead of once per frame. Jobs change only between bursts.
    const uint16_t job_id = load_be16(h + kJobId);
    if (job_id != memo.id) {
      memo.id = job_id;
      memo.job = job_of(job_id);
      memo.data = JobMemo::kNoData;
      memo.tail = JobMemo::kNoTail;
      memo.frame_len = 0;
      if (memo.job)
        memo.data = uint64_t(proto::kAgqVersion << 4 | kTypeData) | uint64_t(job_id >> 8) << 16 |
                    uint64_t(job_id & 0xFF) << 24 | uint64_t(memo.job->job.num_workers) << 40;
    }
    m.job = memo.job;
    if (!m.job) return reject(AgqDrop::UnknownJob);
    if (n_lanes != m.job->job.lanes) return reject(AgqDrop::Malformed);
    const JobAction& job = m.job->job;
    if (wid < kMaxWorkers) m.worker = &m.job->worker[wid];
    if (type == kTypeData) {
      if (!m.worker->hit || m.worker->port != p.md.ingress_port || m.worker->ipv4 != src ||
          h[kNumWorkers] != job.num_workers)
        return reject(AgqDrop::BadWorker);
    } else {
      const bool unicast = (m.flags & proto::kAgqFlagRetransmit) != 0;
      if (p.md.ingress_port != job.ps_port || src != job.ps_ipv4 || (unicast && !m.worker->hit))
        return reject(AgqDrop::BadWorker);
    }
    if (slot >= job.slots) return reject(AgqDrop::BadSlot);
    if (type == kTypePsResult) {  // stateless: straight to agq_forward_t
      ++c_.ingress.ps_results;
      m.slot = nullptr;
      m.drop = AgqDrop::None;
      m.verdict = (m.flags & proto::kAgqFlagRetransmit) ? Verdict::PsResultUnicast : Verdict::PsResult;
      return true;
    }
    const uint8_t req = h[kReqWidth];
    const uint8_t min_width = h[kWidth];  // a DATA's width byte: min_width (PROTOCOL §1)
    if (req % 4 != 0 || req < 4 || req > 32 || !min_width_valid(min_width, req, job.guard))
      return reject(AgqDrop::BadWidth);
    m.req_units = std::min<uint8_t>(uint8_t(req >> 2), job.max_units);
    m.min_units = uint8_t(min_width >> 2);
    m.trunc_row = uint8_t(trunc_key(req >> 2, 0));
    // This DATA passed every check the memo stands for: the next ones
    // with its req_width and min_width (and, untagged, its first 64
    // bytes' fixed fields) skip them.
    memo.tail = uint64_t(req) | uint64_t(min_width) << 8 | uint64_t(n_lanes) << 40;
    memo.req_units = m.req_units;
    memo.min_units = m.min_units;
    memo.trunc_row = m.trunc_row;
    // The template must stand for the same req_units: replaced, or
    // dropped when this frame cannot be one (tagged, or short).
    memo.frame_len = 0;
    if (f.l3 == 14 && p.len >= sizeof memo.frame) {
      std::memcpy(memo.frame, p.bytes, sizeof memo.frame);
      memo.frame_len = p.len;
    }
  }
  const JobAction& job = m.job->job;
  m.drop = AgqDrop::None;
  m.v = m.flags & proto::kAgqFlagVersion;
  // slot_row_t, then the owner-major layout (row_layout.hpp): the row's
  // index among the rows of the job this instance holds.
  const JobRows& rows = m.job->rows;
  SlotRecord* rec;
  const uint32_t lr = rows.find(slot, rec);
  if (lr == JobRows::kNotHere) {
    // Another instance's row (docs/PROTOCOL.md section 10): back to the
    // dataplane for its owner, before any register or counter of this
    // instance is touched -- the owner counts it.
    p.decision = tna::Decision::handoff((uint32_t(load_be16(h + kJobId)) + (uint32_t(slot) >> job.row_shift)) & 0xFFFu);
    return false;
  }
  m.slot = rec;
  m.occ = rows.occupancy(lr);
  m.cells = rows.lanes(lr)->half[m.v];
  __builtin_prefetch(m.slot, 1);
  // Both lines of the half: a 16-lane job's second is the other lanes of
  // its row's half, a prefetch that costs less than the test.
  __builtin_prefetch(m.cells, 1);
  __builtin_prefetch(m.cells + 16, 1);
  return true;
}

// ---- stages 2-17 for one DATA packet: Ingress::apply, first_pass1 and
// first_pass2 of the model, on the slot record and the row.
template <class Lanes>
inline void AgqFastProgram::registers(Meta& m, Pass& r) {
  const JobAction& job = m.job->job;
  SlotRecord& s = *m.slot;
  const bool ovf = (m.flags & proto::kAgqFlagOverflow) != 0;
  const uint32_t bit = m.worker->worker_bit;
  // stage 2: slot_bitmap; stage 3: seen
  r.seen = (salu::slot_bitmap_add(s.slot_bitmap, m.v, bit) & bit) != 0;
  // stage 4: slot_count
  const uint8_t count = r.seen ? salu::slot_count_read(s.slot_count, m.v)
                               : salu::slot_count_inc(s.slot_count, m.v, job.num_workers);
  const bool first = !r.seen && count == 1;
  r.complete = count == job.num_workers;
  if (!r.seen) {
    ++c_.ingress.contributions;
    if (ovf) ++c_.ingress.overflow;
  }

  if (first) {
    // Pass 1: release the slot's previous window of this version, choose the new one.
    ++c_.ingress.first;
    // stage 5: row_occupancy (read); stage 6: slot_window (old window, PENDING)
    const uint8_t occ = salu::row_occupancy_read(*m.occ, m.v);
    const uint16_t old = salu::slot_window_merge(s.slot_window, m.v, kWinPending);
    const unsigned old_w = (old & kWinFallback) ? 0 : window_units(old);
    // stage 7: window_t; stage 8: free = occ & ~old; stage 9: alloc_t; stage 10: grant_alloc_t
    const WindowAction& oldw = t_.window_t[window_key(window_pos(old), old_w)];
    const uint8_t free_occ = uint8_t(occ & ~oldw.occ_mask);
    const AllocAction& al = t_.alloc_t[alloc_key(free_occ, m.req_units)];
    const bool ok = t_.grant_alloc_t[grant_alloc_key(al.w, m.min_units)].ok;
    const uint8_t occ_new = ok ? uint8_t(free_occ | al.occ_mask) : free_occ;
    const uint16_t window = ok ? pack_window(al.pos, al.w, false, ovf) : pack_window(0, 0, true, ovf);
    // Resubmit. Pass 2 follows at once, as in the model: nothing ran in
    // between, so the compare-and-set finds the occupancy pass 1 read.
    ++c_.resubmits;
    // stage 5: row_occupancy_cas; stage 6: slot_window_write (clears PENDING)
    salu::row_occupancy_cas(*m.occ, m.v, occ, occ_new);
    r.window = salu::slot_window_write(s.slot_window, m.v, window);
    // stages 10-17: lane_clear of the released window (a free unit is
    // zero), in pass 1 on Tofino. Nothing reads the cells before pass 2's
    // lane_add, so with a window granted the clear rides in the add's
    // read-modify-write (LaneOp::keep): one pass over the row, not two.
    if (r.window & kWinFallback) {
      if (oldw.cell_mask != 0) Lanes::clear(m.cells, ~oldw.cell_mask, job.lanes);
      ++c_.ingress.fallback;
      ++c_.ingress.fallback_data;
      r.verdict = Verdict::FallbackData;
      return;
    }
    lanes<Lanes>(m, r, /*add=*/true, /*extract=*/r.complete, ~oldw.cell_mask);
    r.verdict = r.complete ? Verdict::Result : Verdict::Absorb;
    return;
  }

  // stage 6: slot_window (a new contribution merges its OVERFLOW)
  r.window = salu::slot_window_merge(s.slot_window, m.v, !r.seen && ovf ? kWinOverflow : 0);
  if (r.window & kWinFallback) {
    ++c_.ingress.fallback_data;
    r.verdict = Verdict::FallbackData;
    return;
  }
  if (!r.seen) {
    lanes<Lanes>(m, r, /*add=*/true, /*extract=*/r.complete);
    r.verdict = r.complete ? Verdict::Result : Verdict::Absorb;
  } else if (r.complete) {
    lanes<Lanes>(m, r, /*add=*/false, /*extract=*/true);  // read the kept result
    r.verdict = Verdict::Resend;
  } else {
    r.verdict = Verdict::Duplicate;
  }
}

// ---- stages 7-17, E0-E1: grant_t, trunc_t, value mask, align_t, lane_add,
// extract_t, result mask -- all lanes in one kernel call.
template <class Lanes>
inline void AgqFastProgram::lanes(Meta& m, const Pass& r, bool add, bool extract, uint32_t keep) {
  // The window's pos | w << 3 is its low 7 bits (pack_window), the index
  // of window_op, and trunc_key's w their top 4.
  static_assert(pack_window(7, 15, false, false) == 0x7F);
  const unsigned win = r.window & 0x7Fu;
  LaneOp op = m.job->window_op[win];  // grant_t, align_t, extract_t
  op.trunc = t_.trunc_t[m.trunc_row | win >> 3];
  op.keep = keep;
  if (!add) op.value_mask = 0;
  op.extract_on = extract;
  Lanes::add(m.cells, m.h() + kLane0, m.job->job.lanes, op);
}

// ---- agq_forward_t (verdict, delivery): where the packet goes, and the
// header of what leaves, written in place.
inline void AgqFastProgram::forward(tna::BurstPacket& p, Meta& m, Pass& r) {
  // N-1 of every N contributions end here: agq_forward_t's drop_absorbed
  // for every delivery (checked in the constructor), no header written.
  if (r.verdict == Verdict::Absorb) {
    ++c_.ingress.absorbed;
    p.decision = tna::Decision::drop(uint16_t(AgqDrop::Absorbed));
    return;
  }
  const JobAction& job = (m.job ? m.job : &kNoJob)->job;
  const ForwardAction& fa = t_.agq_forward_t[forward_key(r.verdict, job.delivery)];
  IngressCounters& c = c_.ingress;
  switch (r.verdict) {
    case Verdict::Duplicate: ++c.duplicate; r.drop = AgqDrop::Duplicate; break;
    case Verdict::Result: ++c.results; break;
    case Verdict::Resend: ++c.result_resent; break;
    default: break;
  }
  tna::PortId port = tna::kNoPort;
  switch (fa.kind) {
    case ForwardAction::Kind::Drop: break;
    case ForwardAction::Kind::MulticastJob: p.decision = tna::Decision::multicast(job.mcast_grp); break;
    case ForwardAction::Kind::UnicastPs: port = job.ps_port; break;
    case ForwardAction::Kind::SendBack: port = p.md.ingress_port; break;
    case ForwardAction::Kind::UnicastWorker: port = m.worker->port; break;
  }
  if (fa.kind != ForwardAction::Kind::MulticastJob) {
    if (port == tna::kNoPort) {  // drop_ctl, or nowhere to go: the frame stays as it came
      p.decision = tna::Decision::drop(uint16_t(r.drop));
      c_.count_drop(r.drop);
      return;
    }
    p.decision = tna::Decision::unicast(port);
  }

  uint8_t* const h = m.h();
  uint8_t* const ip = m.ip();
  uint8_t flags = m.flags;
  if (r.verdict == Verdict::Result || r.verdict == Verdict::Resend) {
    h[kWidth] = uint8_t(window_units(r.window) * kUnitBits);
    h[kPos] = uint8_t(window_pos(r.window));
    h[kGuard] = job.guard;
    flags = uint8_t(m.v | ((r.window & kWinOverflow) ? proto::kAgqFlagOverflow : 0));
  } else if (r.verdict == Verdict::FallbackData) {
    h[kWidth] = 0;
    h[kPos] = 0;
    h[kGuard] = job.guard;
  } else if (r.verdict == Verdict::PsResult) {
    flags &= uint8_t(~proto::kAgqFlagRetransmit);
  }
  h[kVerType] = uint8_t(proto::kAgqVersion << 4 | uint8_t(fa.type));
  h[kFlags] = uint8_t(flags | fa.set_flags);
  proto::store_be16(h + kEpoch, epoch_);  // every frame the switch makes carries its boot epoch
  proto::store_be16(ip + kIpToUdp + 6, 0);  // UDP checksum: payload rewritten
  switch (fa.kind) {
    case ForwardAction::Kind::UnicastPs:
      set_dst_mac(m.frame, job.ps_mac);
      ipv4_replace32(ip, kIpDst, job.ps_ipv4);
      break;
    case ForwardAction::Kind::SendBack: swap_addresses(m.frame, ip); break;
    case ForwardAction::Kind::UnicastWorker:
      set_dst_mac(m.frame, m.worker->mac);
      ipv4_replace32(ip, kIpDst, m.worker->ipv4);
      break;
    default: break;  // multicast: egress rewrites each replica
  }
}

// ---- egress_worker_t (job_id, rid): a replica's destination and worker_id.
void AgqFastProgram::egress(std::span<uint8_t> bytes, tna::PortId egress_port, uint16_t rid) {
  uint8_t* out = bytes.data();
  const tna::Replica r{egress_port, rid};
  egress_replicas(bytes.data(), uint16_t(bytes.size()), &r, &out, 1);
}

void AgqFastProgram::egress_replicas(const uint8_t* src, uint16_t len, const tna::Replica* reps,
                                     uint8_t* const* out, unsigned n) {
  const ReplicaGroup g{src, len, n, reps, out};
  egress_groups(&g, 1);
}

// Group by group: the RESULT's header is found, its job looked up (once
// for consecutive RESULTs of one job) and the IPv4 checksum's unchanging
// part summed once; each replica is then a copy plus its worker's rewrite
// (destination MAC and IPv4, checksum, worker_id): for an untagged RESULT
// the first 32 bytes blended with the worker's ReplicaPatch, the checksum
// from its addend, and the worker_id byte.
void AgqFastProgram::egress_groups(const ReplicaGroup* groups, unsigned count) {
  uint32_t memo_id = 0x10000;
  const JobEntry* memo = nullptr;
  for (unsigned gi = 0; gi < count; ++gi) {
    const ReplicaGroup& g = groups[gi];
    const uint8_t* const src = g.src;
    const uint16_t len = g.len;
    uint8_t* const* const out = g.out;
    const unsigned n = g.n;
    AgqFrame f;
    const JobEntry* j = nullptr;
    if (locate_agq(src, len, f) && (src[f.agq + kVerType] & 0x0F) == uint8_t(AgqType::Result)) {
      const uint16_t id = load_be16(src + f.agq + kJobId);
      if (id != memo_id) {
        memo_id = id;
        memo = job_of(id);
      }
      j = memo;
    }
    if (!j) {  // floods and other traffic pass unchanged
      for (unsigned i = 0; i < n; ++i)
        if (out[i] != src) copy_frame(out[i], src, len);
      continue;
    }
    // Read before the loop: out[n-1] may be src itself.
    const uint32_t sum = ipv4_sum_without(src + f.l3, kIpDst);
    const unsigned wid_at = f.agq + kWorkerId;
#if defined(__AVX2__)
    if (f.l3 == 14 && len >= 64) {
      static_assert(14 + kIpToAgq + kWorkerId == 46, "ReplicaPatch::kBytes: worker_id of an untagged frame");
      const __m256i head0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
      const __m256i head1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 32));
      alignas(32) static constexpr auto kBlend = [] {
        std::array<uint8_t, 64> b{};
        for (unsigned i = 0; i < 64; ++i) b[i] = (ReplicaPatch::kBytes >> i & 1) ? 0x80 : 0;
        return b;
      }();
      const __m256i blend0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(kBlend.data()));
      const __m256i blend1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(kBlend.data() + 32));
      for (unsigned i = 0; i < n; ++i) {
        uint8_t* d = out[i];
        // Bytes 64.. first: for a short frame the last move overlaps the
        // first 64, which the rewrite then writes whole.
        if (d != src) copy_frame_from64(d, src, len);
        const uint16_t rid = g.reps[i].rid;
        if (rid >= kMaxWorkers || !j->worker[rid].hit) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), head0);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 32), head1);
          continue;
        }
        const ReplicaPatch& p = j->patch[rid];
        const __m256i* line = reinterpret_cast<const __m256i*>(p.line);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), _mm256_blendv_epi8(head0, _mm256_load_si256(line), blend0));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 32),
                            _mm256_blendv_epi8(head1, _mm256_load_si256(line + 1), blend1));
        proto::store_be16(d + 14 + kIpChecksum, ipv4_checksum_add(sum, p.dst_sum));
      }
      continue;
    }
#endif
    for (unsigned i = 0; i < n; ++i) {
      uint8_t* d = out[i];
      if (d != src) copy_frame(d, src, len);
      const uint16_t rid = g.reps[i].rid;
      if (rid >= kMaxWorkers || !j->worker[rid].hit) continue;
      const WorkerAction& w = j->worker[rid];
      set_dst_mac(d, w.mac);
      proto::store_be16(d + f.l3 + kIpChecksum, ipv4_checksum_add(sum, j->patch[rid].dst_sum));
      proto::store_be32(d + f.l3 + kIpDst, w.ipv4);
      d[wid_at] = uint8_t(rid);
    }
  }
}

// One member's replicas from the frames themselves (the dataplane's
// replicate_in_place): each frame's RESULT header found and its job looked
// up once for all members (plan_), then per member the rewrite of
// egress_groups on the frame in place -- the 64-byte blend and the
// checksum from the plan's part for an untagged RESULT. A member that is
// no worker of the job gets the frame's original fields back, as
// egress_replicas would leave it (a plan made over another member's
// rewrite, after the dataplane dropped a frame it could not copy, has
// those fields as the original ones).
void AgqFastProgram::egress_member(uint8_t* const* frames, const uint16_t* lens, unsigned n, const tna::Replica& r,
                                   bool same_frames) {
  if (!same_frames) {
    uint32_t memo_id = 0x10000;
    const JobEntry* memo = nullptr;
    for (unsigned j = 0; j < n; ++j) {
      MemberPlan& p = plan_[j];
      const uint8_t* src = frames[j];
      AgqFrame f;
      p.job = nullptr;
      if (!locate_agq(src, lens[j], f) || (src[f.agq + kVerType] & 0x0F) != uint8_t(AgqType::Result)) continue;
      const uint16_t id = load_be16(src + f.agq + kJobId);
      if (id != memo_id) {
        memo_id = id;
        memo = job_of(id);
      }
      p.job = memo;
      p.l3 = f.l3;
      p.sum = ipv4_sum_without(src + f.l3, kIpDst);
      p.blend = f.l3 == 14 && lens[j] >= 64;
      p.wid = src[f.agq + kWorkerId];
      std::memcpy(p.mac, src, 6);
      std::memcpy(p.ip, src + f.l3 + kIpDst, 4);
      std::memcpy(p.csum, src + f.l3 + kIpChecksum, 2);
    }
  }
  const uint16_t rid = r.rid;
  for (unsigned j = 0; j < n; ++j) {
    const MemberPlan& p = plan_[j];
    const JobEntry* jb = p.job;
    if (!jb) continue;  // floods and other traffic pass unchanged
    uint8_t* d = frames[j];
    uint8_t* ip = d + p.l3;
    if (rid >= kMaxWorkers || !jb->worker[rid].hit) {
      std::memcpy(d, p.mac, 6);
      std::memcpy(ip + kIpDst, p.ip, 4);
      std::memcpy(ip + kIpChecksum, p.csum, 2);
      ip[kIpToAgq + kWorkerId] = p.wid;
      continue;
    }
    const ReplicaPatch& rp = jb->patch[rid];
    if (p.blend) {
      // ReplicaPatch::kBytes: bytes 0-5, 30-33 and 46, each its own store
      // here (the frame is rewritten in place, nothing to blend it with).
      std::memcpy(d, rp.line, 6);
      std::memcpy(d + 30, rp.line + 30, 4);
      d[46] = rp.line[46];
      proto::store_be16(d + 14 + kIpChecksum, ipv4_checksum_add(p.sum, rp.dst_sum));
      continue;
    }
    const WorkerAction& w = jb->worker[rid];
    set_dst_mac(d, w.mac);
    proto::store_be16(ip + kIpChecksum, ipv4_checksum_add(p.sum, rp.dst_sum));
    proto::store_be32(ip + kIpDst, w.ipv4);
    ip[kIpToAgq + kWorkerId] = uint8_t(rid);
  }
}

// docs/PROTOCOL.md §10: (job_id + (slot >> row_shift)) & 0xFFF for a DATA of
// a known job with its lane profile; anything else has no shard state.
uint32_t AgqFastProgram::shard_of(std::span<const uint8_t> bytes) const {
  AgqFrame f;
  if (!locate_agq(bytes.data(), bytes.size(), f)) return tna::kAnyShard;
  const uint8_t* h = bytes.data() + f.agq;
  if (h[kVerType] != (proto::kAgqVersion << 4 | kTypeData)) return tna::kAnyShard;
  const uint16_t job_id = load_be16(h + kJobId);
  const JobEntry* j = job_of(job_id);
  if (!j || h[kNLanes] != j->job.lanes) return tna::kAnyShard;
  return (uint32_t(job_id) + (uint32_t(load_be16(h + kSlot)) >> j->job.row_shift)) & 0xFFFu;
}

void AgqFastProgram::visit_counters(const tna::CounterVisitor& visit) const {
  visit_program_counters(c_, forwarding(), visit);
}

void AgqFastProgram::clear_counters() {
  c_ = ProgramCounters{};
  forwarding().clear_counters();
}

void AgqFastProgram::clear_state() {
  for (JobEntry& e : jobs_) e.rows.clear();
}

void AgqFastProgram::own_shards(unsigned index, unsigned count) {
  owner_ = ShardOwner{index, count == 0 ? 1u : count};
  for (const auto& [id, rec] : book_.records())
    jobs_[rec.place.job_index].rows = JobRows(owner_, id, rec.place.rows, rec.place.row_shift);
}

std::size_t AgqFastProgram::register_bytes() const {
  std::size_t n = 0;
  for (const JobEntry& e : jobs_) n += e.rows.bytes();
  return n;
}

// ---- register reads by global index (View): the job that holds a row or
// slot, then the layout. Control plane only.
const JobEntry* AgqFastProgram::View::row_job(uint32_t row, uint32_t& local) const {
  auto it = p_.by_row_.upper_bound(row);
  if (it == p_.by_row_.begin()) return nullptr;
  const JobEntry& e = p_.jobs_[(--it)->second];
  if (row - e.job.row_base >= e.rows.rows()) return nullptr;
  local = e.rows.local(row - e.job.row_base);
  return local == JobRows::kNotHere ? nullptr : &e;
}

const SlotRecord* AgqFastProgram::View::slot(uint32_t i) const {
  auto it = p_.by_slot_.upper_bound(i);
  if (it == p_.by_slot_.begin()) return nullptr;
  const JobEntry& e = p_.jobs_[(--it)->second];
  const uint32_t s = i - e.job.slot_base;
  if (s >= e.job.slots) return nullptr;
  const uint32_t lr = e.rows.local(s >> e.job.row_shift);
  return lr == JobRows::kNotHere ? nullptr : e.rows.slot(lr, s);
}

Pair<uint32_t> AgqFastProgram::View::slot_bitmap(uint32_t i) const {
  const SlotRecord* r = slot(i);
  return r ? r->slot_bitmap : Pair<uint32_t>{};
}
Pair<uint8_t> AgqFastProgram::View::slot_count(uint32_t i) const {
  const SlotRecord* r = slot(i);
  return r ? r->slot_count : Pair<uint8_t>{};
}
Pair<uint16_t> AgqFastProgram::View::slot_window(uint32_t i) const {
  const SlotRecord* r = slot(i);
  return r ? r->slot_window : Pair<uint16_t>{};
}
Pair<uint8_t> AgqFastProgram::View::row_occupancy(uint32_t row) const {
  uint32_t lr;
  const JobEntry* e = row_job(row, lr);
  return e ? *e->rows.occupancy(lr) : Pair<uint8_t>{};
}
Pair<uint32_t> AgqFastProgram::View::lane(uint32_t row, unsigned k) const {
  uint32_t lr;
  const JobEntry* e = row_job(row, lr);
  if (!e || k >= unsigned(proto::kAgqLanes)) return {};
  const RowLanes& l = *e->rows.lanes(lr);
  return {l.half[0][k], l.half[1][k]};
}
bool AgqFastProgram::View::owns_row(uint32_t row) const {
  uint32_t lr;
  return row_job(row, lr) != nullptr;
}
bool AgqFastProgram::View::owns_slot(uint32_t i) const { return slot(i) != nullptr; }

// ---- control plane (between bursts, on the lcore that owns the instance).
std::optional<std::string> AgqFastProgram::add_job(const JobSpec& job) {
  auto planned = book_.plan(job);
  if (auto* err = std::get_if<std::string>(&planned)) return *err;
  const JobPlacement p = std::get<JobPlacement>(planned);
  if (jobs_.size() <= p.job_index) jobs_.resize(p.job_index + 1u);
  JobEntry& e = jobs_[p.job_index];
  e = JobEntry{};
  e.job = job_action(job, p);
  for (unsigned pos = 0; pos < 8; ++pos)
    for (unsigned w = 0; w < 16; ++w) {
      const GrantAction& grant = t_.grant_t[grant_key(w, e.job.guard)];
      const unsigned end = (pos + w) & 15;
      LaneOp& op = e.window_op[pos | w << 3];
      op.value_mask = grant.value_mask;
      op.result_mask = grant.result_mask;
      op.align = t_.align_t[end];
      op.extract = t_.extract_t[end];
    }
  std::vector<tna::Replica> replicas;
  for (const WorkerSpec& w : job.workers) {
    e.worker[w.worker_id] = worker_action(w);
    uint32_t src_wire;  // the address as a frame carries it, loaded as admit() loads it
    proto::store_be32(reinterpret_cast<uint8_t*>(&src_wire), w.ipv4);
    e.worker_check[w.worker_id] = uint64_t(w.port) << 32 | src_wire;
    ReplicaPatch& rp = e.patch[w.worker_id];
    std::memcpy(rp.line, w.mac.data(), 6);
    proto::store_be32(rp.line + 14 + kIpDst, w.ipv4);
    rp.line[14 + kIpToAgq + kWorkerId] = w.worker_id;
    rp.dst_sum = (w.ipv4 >> 16) + (w.ipv4 & 0xFFFF);
    replicas.push_back({w.port, w.worker_id});
  }
  e.rows = JobRows(owner_, job.job_id, p.rows, p.row_shift);  // zeroed, on this lcore: first touch is the owner's
  by_row_[p.row_base] = p.job_index;
  by_slot_[p.slot_base] = p.job_index;
  job_slot_[job.job_id] = uint16_t(p.job_index + 1);
  pre().set_group(p.mcast_grp, std::move(replicas));
  book_.commit(job, p);
  return std::nullopt;
}

bool AgqFastProgram::remove_job(uint16_t job_id) {
  const auto rec = book_.erase(job_id);
  if (!rec) return false;
  job_slot_[job_id] = 0;
  jobs_[rec->place.job_index] = JobEntry{};
  pre().remove_group(rec->place.mcast_grp);
  by_row_.erase(rec->place.row_base);  // the job's registers went with its JobEntry
  by_slot_.erase(rec->place.slot_base);
  return true;
}

std::vector<JobSpec> AgqFastProgram::jobs() const {
  std::vector<JobSpec> out;
  for (const auto& [id, rec] : book_.records()) out.push_back(rec.spec);
  return out;
}

std::optional<JobPlacement> AgqFastProgram::placement(uint16_t job_id) const {
  const JobRecord* rec = book_.find(job_id);
  if (!rec) return std::nullopt;
  return rec->place;
}

}  // namespace agq::pipeline::agq::fast
