#include "lib/allreduce_engine.hpp"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <deque>

#include "lib/agq_fast_codec.hpp"
#include "proto/agq.hpp"

namespace agq::worker {

namespace {

constexpr uint8_t kTypeData = uint8_t(proto::kAgqVersion << 4 | uint8_t(proto::AgqType::Data));
constexpr uint8_t kTypeResult = uint8_t(proto::kAgqVersion << 4 | uint8_t(proto::AgqType::Result));

inline void be16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v >> 8);
  p[1] = uint8_t(v);
}
inline void be32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 24);
  p[1] = uint8_t(v >> 16);
  p[2] = uint8_t(v >> 8);
  p[3] = uint8_t(v);
}
// The cache lines of n floats at p (a chunk: 16 or 32 lanes, 1-3 lines).
inline void prefetch_chunk(const float* p, unsigned n, bool write) {
  const uintptr_t e = reinterpret_cast<uintptr_t>(p + n);
  for (uintptr_t x = reinterpret_cast<uintptr_t>(p) & ~uintptr_t(63); x < e; x += 64)
    write ? __builtin_prefetch(reinterpret_cast<const void*>(x), 1, 3)
          : __builtin_prefetch(reinterpret_cast<const void*>(x), 0, 3);
}
inline uint16_t rd16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }
inline uint32_t rd32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

}  // namespace

std::string AllreduceJob::validate() const {
  if (job_id < 1) return "job id must be 1..65535 (0 is invalid in the agq header)";
  if (num_workers < 1 || num_workers > 32) return "workers (N) must be 1..32 (the switch's slot bitmap has 32 bits)";
  if (slots < 1 || slots > 65536) return "slots must be 1..65536 (16-bit slot field)";
  if (window > slots) return "window (outstanding slots) must be <= slots";
  if (lanes != 32 && lanes != 16) return "lanes must be 32 or 16 (PROTOCOL.md §10 lane profiles)";
  if (row_shift > 16) return "row_shift must be 0..16";
  if (max_width < agqc::min_width(agqc::guard_bits(num_workers)) || max_width > 32 || max_width % 4)
    return "max_width must be a multiple of 4 in " + std::to_string(agqc::min_width(agqc::guard_bits(num_workers))) +
           "..32";
  return {};
}

uint8_t AllreduceJob::row_shift_for(uint32_t slots, uint32_t rows) {
  if (!rows) return 0;
  uint8_t sh = 0;
  while (sh < 16 && (uint64_t(slots) + (uint64_t(1) << sh) - 1) >> sh > rows) ++sh;
  return sh;
}

WorkerIdentity WorkerIdentity::defaults(uint16_t job_id, unsigned id, uint16_t port) {
  WorkerIdentity w;
  w.id = id;
  w.port = port;
  w.self = agq_worker_endpoint(job_id, id);
  w.dst = agq_ps_endpoint(job_id);
  return w;
}

void OpStats::add(const OpStats& o) {
  chunks += o.chunks;
  results += o.results;
  fallbacks += o.fallbacks;
  overflows += o.overflows;
  redos += o.redos;
  clipped_chunks += o.clipped_chunks;
  retransmissions += o.retransmissions;
  duplicates += o.duplicates;
  for (size_t i = 0; i < req_hist.size(); ++i) {
    req_hist[i] += o.req_hist[i];
    granted_hist[i] += o.granted_hist[i];
  }
  granted_bits_sum += o.granted_bits_sum;
  aggregated += o.aggregated;
  error_bound = std::max(error_bound, o.error_bound);
}

OpPtr make_op(uint64_t key, std::span<const float> input, std::span<float> output,
              std::function<void(AllreduceOp&)> done, unsigned worker, unsigned parts) {
  auto op = std::make_shared<AllreduceOp>();
  op->key = key;
  op->worker = worker;
  op->input = input;
  op->output = output;
  op->done = std::move(done);
  op->parts_left.store(parts);
  op->part_stats.resize(parts);
  return op;
}

void prepare_op(const OpPtr& op, const std::shared_ptr<TensorState>& state, unsigned lanes, bool error_feedback) {
  if (op->linked) return;
  op->linked = true;
  op->state = state;
  const uint64_t chunks = (op->input.size() + lanes - 1) / lanes;
  op->chunk_max.assign(chunks, 0.0f);
  op->prev = state->last;
  // Same shape: adapt from the previous op (and wait for it); a new shape starts over.
  if (op->prev && op->prev->input.size() == op->input.size())
    op->round = op->prev->round + 1;
  else
    op->prev.reset(), op->round = 0;
  state->last = op;
  if (error_feedback) {
    // The residual is read by this op's encodes only after the previous op
    // of the key completed (its chunks park until then), so one buffer per
    // size serves them all. A new size starts from zero in a new buffer.
    if (!state->residual || state->residual->size() != op->input.size())
      state->residual = std::make_shared<std::vector<float>>(op->input.size(), 0.0f);
    op->residual = state->residual;
  } else {
    state->residual.reset();
  }
}

// ---------------------------------------------------------------------------

struct AllreduceEngine::Impl {
  enum class St : uint8_t { Idle, Parked, Ready, Sent };
  struct OpEntry {
    OpPtr op;
    uint64_t first = 0, end = 0;  // global chunks [first, end)
    uint64_t left = 0;            // chunks this engine owns that have no final result yet
    OpStats st;
    bool part_done = false;
    uint64_t submit_ns = 0;
    std::array<uint64_t, 4> progress_ns{};  // EngineStats::last_op_progress_ns
  };
  struct Slot {
    uint64_t g = 0;          // global chunk it carries (or will carry)
    uint64_t op_serial = 0;  // entry of g
    uint32_t uses = 0;       // completed uses: version of the current one = uses & 1
    St st = St::Idle;
    agqc::ChunkParams p;
    uint8_t min_w = 0;       // min_width of its DATA (PROTOCOL.md §5)
    uint8_t redos = 0;
    bool retransmitted = false, renewed = false;
    uint64_t send_seq = 0;   // order of its last transmission among the logical worker's
    unsigned tries = 0;
    uint64_t deadline = 0, rto = 0, sent_ns = 0;
    uint64_t xmit_ns = 0;    // its last transmission
    // The use completed last: a RESULT resent for it after we retransmitted
    // means the retransmission was not needed (spurious).
    uint64_t prev_g = UINT64_MAX;
    uint8_t prev_v = 0;
    bool prev_retx = false, prev_flagged = false;
    bool marked = false, prev_marked = false;  // resent because RACK found it lost
    int8_t first_why = -1;   // cause of the current use's first retransmission (EngineStats::recovered)
  };
  // RACK per switch lcore (PROTOCOL.md §10: it serves its shards in arrival
  // order): our transmissions in order, and the newest one (by send order)
  // whose RESULT came back, with its round trip.
  struct Lane {
    std::deque<std::pair<uint32_t, uint64_t>> order;  // (slot, send_seq)
    uint64_t rack_seq = 0, rack_rtt = 0;
  };
  struct Rtt {
    double srtt = 0, rttvar = 0, peak = 0;
    uint64_t samples = 0, rto = 0;
    unsigned outliers = 0;  // samples ignored in a row
  };
  struct Logical {
    WorkerIdentity id;
    Rtt rtt;
    std::unique_ptr<FrameTemplate> tmpl;
    uint64_t next_global = 0;            // first global chunk of the next op
    std::deque<std::unique_ptr<OpEntry>> ops;
    uint64_t ops_base = 0;               // serial of ops.front()
    std::vector<Slot> slots;
    std::deque<uint32_t> ready;
    std::vector<uint32_t> parked;
    uint32_t in_flight = 0;
    std::vector<Lane> lanes;  // per switch lcore
    uint64_t send_seq = 0;
    uint64_t sent_end = 0;          // 1 + the highest chunk sent: the tail when it reaches next_global
    uint64_t last_progress_ns = 0;  // last RESULT or first transmission
    bool probed = false;            // the tail probe went since then
    std::unordered_map<uint64_t, std::shared_ptr<TensorState>> states;  // one part: by key
  };

  AllreduceEngine& e;
  FrameIo* io = nullptr;
  int guard = 0;
  std::vector<Logical> lws;
  std::array<int8_t, 256> lw_of_id{};  // worker_id -> index in lws, -1 = not ours
  std::vector<uint32_t> owned;         // slots this engine serves
  std::vector<uint16_t> lane_of;       // slot -> switch lcore serving it
  unsigned reo_mult = 1;               // RACK window multiplier (spurious retransmissions double it)
  uint64_t next_deadline = UINT64_MAX;
  bool link_down = false;
  uint64_t restart_ns = 0, now = 0;
  uint16_t restart_from = 0;
  bool redo_all = false;      // the next timer scan resends every expired slot (restart, link back)
  uint64_t last_tick = 0;     // the caller's previous tick

  explicit Impl(AllreduceEngine& eng) : e(eng) {}

  OpEntry* entry(Logical& lw, uint64_t serial) {
    return serial >= lw.ops_base && serial - lw.ops_base < lw.ops.size() ? lw.ops[serial - lw.ops_base].get()
                                                                          : nullptr;
  }

  // The slot carries g next: find its op, park it if the op's parameters
  // are not known yet, else make it ready.
  void take(Logical& lw, uint32_t s) {
    Slot& sl = lw.slots[s];
    if (sl.g >= lw.next_global) {
      sl.st = St::Idle;
      return;
    }
    uint64_t serial = std::max(sl.op_serial, lw.ops_base);
    OpEntry* en = entry(lw, serial);
    while (en && sl.g >= en->end) en = entry(lw, ++serial);
    sl.op_serial = serial;
    AllreduceOp& op = *en->op;
    if (op.prev && !op.prev->complete.load(std::memory_order_acquire)) {
      sl.st = St::Parked;
      lw.parked.push_back(s);
      return;
    }
    sl.p = params(op, sl.g - en->first);
    const AllreduceTuning& t = e.cfg_.tuning;
    sl.min_w = uint8_t(t.fixed_width ? sl.p.width : agqc::min_width_for(sl.p.width, t.min_width_slack, guard));
    sl.redos = 0;
    sl.st = St::Ready;
    lw.ready.push_back(s);
  }

  agqc::ChunkParams params(const AllreduceOp& op, uint64_t c) const {
    const AllreduceTuning& t = e.cfg_.tuning;
    const int cap = e.cfg_.job.max_width;
    agqc::ChunkParams p;
    if (t.fixed_width) {
      // R = W for every chunk; the exponent adapts as with adaptive widths.
      const int w = t.fixed_width;
      if (op.round == 0) return agqc::initial_params(w, t.init_scale, guard);
      return {w, agqc::exponent_for(double(op.prev->chunk_max[c]) * t.margin, w - guard)};
    }
    if (op.round == 0) {
      const int w = std::min(t.init_width, cap);
      p = agqc::initial_params(w, t.init_scale, guard);
    } else {
      // Only the previous op's aggregate, identical in every worker: all choose alike.
      const AllreduceOp& pr = *op.prev;
      p = agqc::choose_params(pr.chunk_max[c], pr.tensor_max, t.error_budget, t.margin, guard);
      if (p.width > cap) p = {cap, agqc::exponent_for(double(pr.chunk_max[c]) * t.margin, cap - guard)};
    }
    return p;
  }

  void write_data(Logical& lw, uint32_t s, uint32_t b) {
    Slot& sl = lw.slots[s];
    OpEntry& en = *entry(lw, sl.op_serial);
    const AllreduceJob& job = e.cfg_.job;
    const unsigned lanes = job.lanes;
    uint8_t* f = io->frame(b);
    lw.tmpl->write_l2l4(f, agq_shard_port(job.shard_of(s)));
    uint8_t* h = f + kAgqHdrOffset;
    const uint64_t c = sl.g - en.first;
    const uint64_t n_el = en.op->input.size();
    const unsigned n_valid = unsigned(std::min<uint64_t>(lanes, n_el - c * lanes));
    const float* x = en.op->input.data() + c * lanes;
    alignas(32) float xr[fastc::kMaxLanes];
    if (en.op->residual) {
      // Error feedback: x' = x + residual (an OVERFLOW redo encodes the
      // same x': the residual changes only with the final result).
      const float* r = en.op->residual->data() + c * lanes;
      for (unsigned k = 0; k < n_valid; ++k) xr[k] = x[k] + r[k];
      x = xr;
    }
    const bool clipped = fastc::encode_be(x, n_valid, lanes, sl.p.width, guard, sl.p.exponent, h + 20);
    // Loss desynchronises the slots (at 1% loss, N = 2, 16 MB, the slot
    // furthest ahead is 13-24 uses ahead of the one furthest behind at half
    // time), so consecutive chunks we touch are no longer neighbours in
    // memory: every encode and decode became a cache (and TLB) miss and the
    // worker's CPU time per chunk doubled. Prefetch what this slot touches
    // next, a round trip ahead: the output of this chunk (its RESULT's
    // decode, its maximum) and the input of the slot's next chunk (and
    // the previous op's maximum of it, which sets its width).
    prefetch_chunk(en.op->output.data() + c * lanes, n_valid, true);
    __builtin_prefetch(en.op->chunk_max.data() + c, 1, 3);
    if (sl.g + job.slots < en.end) {
      prefetch_chunk(en.op->input.data() + (c + job.slots) * lanes,
                     unsigned(std::min<uint64_t>(lanes, n_el - (c + job.slots) * lanes)), false);
      if (en.op->prev) __builtin_prefetch(en.op->prev->chunk_max.data() + c + job.slots, 0, 3);
      if (en.op->residual)
        prefetch_chunk(en.op->residual->data() + (c + job.slots) * lanes,
                       unsigned(std::min<uint64_t>(lanes, n_el - (c + job.slots) * lanes)), true);
    }
    h[0] = kTypeData;
    h[1] = uint8_t(((sl.uses & 1) ? proto::kAgqFlagVersion : 0) | (clipped ? proto::kAgqFlagOverflow : 0));
    be16(h + 2, job.job_id);
    h[4] = uint8_t(lw.id.id);
    h[5] = job.num_workers;
    be16(h + 6, uint16_t(s));
    be32(h + 8, uint32_t(sl.g));
    h[12] = uint8_t(sl.p.width);
    h[13] = sl.min_w;  // min_width (PROTOCOL.md §1, §5): no narrower grant, the PS's exact sum instead
    h[14] = h[15] = 0;
    h[16] = uint8_t(int8_t(sl.p.exponent));
    h[17] = uint8_t(lanes);
    be16(h + 18, e.stats_.epoch);
  }

  void arm(Slot& sl, uint64_t now, uint64_t rto) {
    sl.rto = rto;
    sl.deadline = now + rto;
    next_deadline = std::min(next_deadline, sl.deadline);
  }

  uint64_t base_rto(const Logical& lw) const { return lw.rtt.samples ? lw.rtt.rto : e.cfg_.tuning.rto_init_ns; }

  // One RTT sample of logical worker lw (its own estimator: in a process
  // hosting several, the one that sends a chunk first waits for all the
  // others and sees round trips of ms, the last one µs).
  void rtt_sample(Logical& lw, uint64_t r) {
    Rtt& st = lw.rtt;
    const double x = double(r);
    const AllreduceTuning& tu = e.cfg_.tuning;
    EngineStats& es = e.stats_;
    if (!es.min_rtt_ns || x < es.min_rtt_ns) es.min_rtt_ns = x;
    ++es.rtt_samples;
    // The recent peak of the accepted samples (slow decay, ~4096 samples):
    // the RTO's floor. A deep window on a loaded host has real round trips
    // of tens of ms, and an RTO below them retransmits every sequence that
    // waits in the queue; those come in runs and pass the filter below. The
    // outliers it drops (a peer's loss and recovery) must not feed the peak
    // either: at 10% loss they did (peak ~1 s), which held the RTO at 4x its
    // base and every timer recovery waited that long.
    st.peak -= st.peak / 4096;
    // A RESULT completes when the slowest worker's DATA arrived: a sample
    // far above srtt is usually another worker's loss and retransmission,
    // not our path. Counting those would feed the RTO with the RTO (at 10%
    // loss it climbs to the cap); a run of 8 such samples is a real change.
    if (st.samples && x > 2 * st.srtt + double(tu.rto_min_ns) && ++st.outliers < 8) {
      st.rto = rto_of(st);
    } else {
      st.outliers = 0;
      st.peak = std::max(st.peak, x);
      if (!st.samples) {
        st.srtt = x;
        st.rttvar = x / 2;
      } else {
        st.rttvar = 0.75 * st.rttvar + 0.25 * std::fabs(st.srtt - x);
        st.srtt = 0.875 * st.srtt + 0.125 * x;
      }
      ++st.samples;
      st.rto = rto_of(st);
    }
    if (&lw == &lws.front()) {  // the summary shows the first logical worker's estimator
      es.srtt_ns = st.srtt;
      es.rttvar_ns = st.rttvar;
      es.rto_ns = st.rto;
      es.rtt_peak_ns = st.peak;
    }
  }

  // srtt + 4 rttvar, the variance term floored (as TCP's clock granularity
  // G: a perfectly steady RTT must not leave the RTO at srtt); at least 5/4
  // of the recent peak round trip, but that term at most 4x the first (a
  // peak made by a recovery that needed the RTO must not ratchet the RTO up
  // to its cap); capped. Loss is found by RACK and the tail probe: the RTO
  // is the last resort and may be long.
  uint64_t rto_of(const Rtt& st) const {
    const AllreduceTuning& t = e.cfg_.tuning;
    const double base = st.srtt + std::max(4 * st.rttvar, double(t.rto_min_ns));
    return std::min<uint64_t>(uint64_t(std::max(base, std::min(1.25 * st.peak, 4 * base))), t.rto_max_ns);
  }

  // RACK's reorder window: a quarter of the smallest round trip (a memif
  // round trip is tens of µs), at least reo_min, widened by spurious
  // retransmissions, never above srtt.
  uint64_t reo_wnd(const Logical& lw) const {
    const uint64_t base =
        std::max<uint64_t>(e.cfg_.tuning.reo_min_ns, uint64_t(e.stats_.min_rtt_ns / 4)) * reo_mult;
    return std::min<uint64_t>(base, std::max<uint64_t>(uint64_t(lw.rtt.srtt), e.cfg_.tuning.reo_min_ns));
  }

  // Tail loss probe timeout: two smoothed round trips (an RTT and the
  // reorder slack of the last ones), at least pto_min.
  uint64_t pto(const Logical& lw) const {
    return std::max<uint64_t>(uint64_t(2 * lw.rtt.srtt), e.cfg_.tuning.pto_min_ns);
  }
  // The timer of a sequence resent because it was lost: a probe timeout
  // plus the round trip's variance.
  uint64_t short_rto(const Logical& lw) const { return pto(lw) + uint64_t(4 * lw.rtt.rttvar); }

  void part_done(OpEntry& en, uint64_t now) {
    en.part_done = true;
    AllreduceOp& op = *en.op;
    op.part_stats[e.cfg_.part] = en.st;
    e.stats_.total.add(en.st);
    if (op.parts_left.fetch_sub(1, std::memory_order_acq_rel) == 1) finish(op, now);
  }

  // Entries at the front that are done here and that no slot points at.
  void gc(Logical& lw) {
    while (!lw.ops.empty() && lw.ops.front()->part_done) {
      for (uint32_t s : owned)
        if (lw.slots[s].st != St::Idle && lw.slots[s].op_serial == lw.ops_base) return;
      lw.ops.pop_front();
      ++lw.ops_base;
    }
  }

  // The last part of an op: stats, the tensor state for the next op of the key, done.
  void finish(AllreduceOp& op, uint64_t now) {
    op.stats = OpStats{};
    for (const auto& ps : op.part_stats) op.stats.add(ps);
    if (!op.failed) {
      double m = 0;
      for (float v : op.chunk_max) m = std::max(m, double(v));
      op.tensor_max = m;
    }
    op.prev.reset();  // the next op of the key reads this one's maxima, nobody reads prev's any more
    op.done_ns = now;
    ++e.stats_.ops_done;
    if (op.failed) ++e.stats_.ops_failed;
    op.complete.store(true, std::memory_order_release);
    if (op.done) op.done(op);
  }

  void unpark(Logical& lw) {
    if (lw.parked.empty()) return;
    // Parked slots wait for the previous op of a key; look again only once
    // the first one's has completed.
    if (const OpEntry* en = entry(lw, lw.slots[lw.parked.front()].op_serial))
      if (en->op->prev && !en->op->prev->complete.load(std::memory_order_acquire)) return;
    std::vector<uint32_t> p;
    p.swap(lw.parked);
    for (uint32_t s : p) take(lw, s);  // re-parks those still waiting
  }

  void redo_in_flight(uint64_t now) {
    redo_all = true;
    for (auto& lw : lws)
      for (uint32_t s : owned) {
        Slot& sl = lw.slots[s];
        if (sl.st == St::Sent) {
          sl.deadline = now;
          next_deadline = now;
        }
      }
  }

  std::string stalled_report(uint64_t now) const {
    std::string r;
    unsigned n = 0, shown = 0;
    for (const auto& lw : lws)
      for (uint32_t s : owned) {
        const Slot& sl = lw.slots[s];
        if (sl.st != St::Sent) continue;
        ++n;
        if (shown < 12) {
          const OpEntry* en = nullptr;
          for (const auto& x : lw.ops)
            if (sl.g >= x->first && sl.g < x->end) en = x.get();
          char b[160];
          std::snprintf(b, sizeof b, "%sworker %u slot %u v%u (op key %" PRIu64 " chunk %" PRIu64 ", %u tries, %.1f s)",
                        shown ? ", " : "", lw.id.id, s, sl.uses & 1, en ? en->op->key : 0,
                        en ? sl.g - en->first : sl.g, sl.tries, double(now - sl.sent_ns) * 1e-9);
          r += b;
          ++shown;
        }
      }
    if (n > shown) r += ", ... (" + std::to_string(n - shown) + " more)";
    return std::to_string(n) + " stalled sequence" + (n == 1 ? "" : "s") + ": " + r;
  }
};

AllreduceEngine::AllreduceEngine() = default;
AllreduceEngine::~AllreduceEngine() = default;

bool AllreduceEngine::init(const EngineConfig& cfg, FrameIo& io, std::string& err) {
  cfg_ = cfg;
  if (err = cfg.job.validate(); !err.empty()) return false;
  const AllreduceTuning& t = cfg.tuning;
  if (t.init_width < agqc::kMinWidth || t.init_width > agqc::kMaxWidth || t.init_width % 4) {
    err = "init width must be 4..32, a multiple of 4";
    return false;
  }
  if (!(t.init_scale > 0) || !(t.error_budget > 0) || !(t.margin >= 1)) {
    err = "init scale and error budget must be > 0, margin >= 1";
    return false;
  }
  if (cfg.workers.empty() || cfg.parts < 1 || cfg.part >= cfg.parts || cfg.queues < 1) {
    err = "an engine needs at least one logical worker and part < parts";
    return false;
  }
  im_ = std::make_unique<Impl>(*this);
  Impl& m = *im_;
  m.io = &io;
  m.guard = agqc::guard_bits(cfg.job.num_workers);
  if (std::max(t.init_width, int(cfg.job.max_width)) - m.guard < 2) {
    err = "init width leaves fewer than 2 value bits for N = " + std::to_string(cfg.job.num_workers);
    return false;
  }
  if (t.min_width_slack < 0 || t.min_width_slack > 28 || t.min_width_slack % 4) {
    err = "min width slack must be a multiple of 4 in 0..28 (bits a grant may fall below the request)";
    return false;
  }
  const int w_min = agqc::min_width(m.guard);
  if (t.fixed_width &&
      (t.fixed_width % 4 || t.fixed_width < w_min || t.fixed_width > int(cfg.job.max_width))) {
    err = "fixed width must be a multiple of 4 in " + std::to_string(w_min) + ".." +
          std::to_string(cfg.job.max_width) + " (the job's max_width) for N = " + std::to_string(cfg.job.num_workers);
    return false;
  }
  m.lw_of_id.fill(-1);
  const unsigned n_lanes = std::max<unsigned>(1, cfg.job.switch_lcores);
  m.lane_of.resize(cfg.job.slots);
  for (uint32_t s = 0; s < cfg.job.slots; ++s) {
    if (cfg.owns(s)) m.owned.push_back(s);
    m.lane_of[s] = uint16_t(cfg.job.shard_of(s) % n_lanes);
  }
  for (size_t i = 0; i < cfg.workers.size(); ++i) {
    const WorkerIdentity& w = cfg.workers[i];
    if (w.id >= cfg.job.num_workers) {
      err = "worker id " + std::to_string(w.id) + " is not below N = " + std::to_string(cfg.job.num_workers);
      return false;
    }
    if (m.lw_of_id[w.id] >= 0) {
      err = "worker id " + std::to_string(w.id) + " given twice";
      return false;
    }
    m.lw_of_id[w.id] = int8_t(i);
    Impl::Logical lw;
    lw.id = w;
    lw.tmpl = std::make_unique<FrameTemplate>(agq_frame_template(w.self, w.dst, cfg.job.lanes));
    lw.slots.resize(cfg.job.slots);
    lw.lanes.resize(n_lanes);
    for (uint32_t s = 0; s < cfg.job.slots; ++s) lw.slots[s].g = s;
    m.lws.push_back(std::move(lw));
  }
  return true;
}

bool AllreduceEngine::submit(const OpPtr& opp) {
  AllreduceOp& op = *opp;
  auto reject = [&](const std::string& why) {
    op.failed = true;
    op.error = why;
    op.complete.store(true, std::memory_order_release);
    if (op.done) op.done(op);
    return false;
  };
  if (!im_) return reject("engine not initialised");
  Impl& m = *im_;
  if (failed()) return reject(diagnostic_);
  if (op.worker >= m.lws.size()) return reject("op for logical worker " + std::to_string(op.worker) + " of " +
                                               std::to_string(m.lws.size()));
  if (op.output.size() != op.input.size())
    return reject("output has " + std::to_string(op.output.size()) + " elements, input " +
                  std::to_string(op.input.size()));
  if (cfg_.parts == 1) {
    if (op.part_stats.size() < 1) op.part_stats.resize(1);
    if (op.parts_left.load() == 0) op.parts_left.store(1);
  } else if (op.part_stats.size() != cfg_.parts || !op.linked) {
    return reject("an op for a " + std::to_string(cfg_.parts) + "-part engine needs make_op(..., parts) and a state");
  }
  Impl::Logical& lw = m.lws[op.worker];
  const unsigned lanes = cfg_.job.lanes;
  const uint64_t chunks = (op.input.size() + lanes - 1) / lanes;
  if (!op.linked) {
    if (cfg_.parts > 1) return reject("an op for a multi-part engine must be prepared (prepare_op) first");
    auto& st = lw.states[op.key];
    if (!st) st = std::make_shared<TensorState>();
    prepare_op(opp, st, lanes, cfg_.tuning.error_feedback);
  } else if (bool(op.residual) != cfg_.tuning.error_feedback && !op.input.empty()) {
    return reject(std::string("op prepared with error feedback ") + (op.residual ? "on" : "off") +
                  " for an engine with it " + (cfg_.tuning.error_feedback ? "on" : "off"));
  }
  op.submit_ns = m.now;
  op.first_chunk = lw.next_global;
  auto en = std::make_unique<Impl::OpEntry>();
  en->op = opp;
  en->first = lw.next_global;
  en->end = lw.next_global + chunks;
  if (cfg_.parts == 1) {
    en->left = chunks;
  } else {
    for (uint64_t g = en->first; g < en->end; ++g)
      if (cfg_.owns(uint32_t(g % cfg_.job.slots))) ++en->left;
  }
  en->st.chunks = en->left;
  en->submit_ns = m.now;
  lw.next_global = en->end;
  Impl::OpEntry& ref = *en;
  lw.ops.push_back(std::move(en));
  if (ref.left == 0) {
    // Nothing for this part (an empty tensor, or none of our slots).
    m.part_done(ref, m.now);
    m.gc(lw);
    return true;
  }
  // Idle slots whose next chunk now exists.
  for (uint32_t s : m.owned) {
    Impl::Slot& sl = lw.slots[s];
    if (sl.st == Impl::St::Idle && sl.g < lw.next_global) m.take(lw, s);
  }
  return true;
}

uint64_t AllreduceEngine::outstanding() const {
  uint64_t n = 0;
  if (im_)
    for (const auto& lw : im_->lws) n += lw.in_flight;
  return n;
}

bool AllreduceEngine::idle() const {
  if (!im_) return true;
  for (const auto& lw : im_->lws)
    for (const auto& en : lw.ops)
      if (!en->part_done) return false;
  return true;
}

void AllreduceEngine::fail(const std::string& why) {
  if (!diagnostic_.empty() || !im_) return;
  diagnostic_ = why;
  for (auto& lw : im_->lws)
    for (auto& en : lw.ops)
      if (!en->part_done) {
        en->op->failed = true;
        if (en->op->error.empty()) en->op->error = why;
        im_->part_done(*en, im_->now);
      }
}

bool AllreduceEngine::retransmit(uint32_t li, uint32_t s, uint64_t now_ns, Resend why) {
  Impl& m = *im_;
  Impl::Logical& lw = m.lws[li];
  Impl::Slot& sl = lw.slots[s];
  // Counted even while the link is down (the io takes and drops the
  // frame): retries are bounded in time whatever the link does. A full tx
  // queue is not a try: the frame did not leave, it goes at the next tick,
  // without a back-off (a loaded switch must not stretch our timers).
  const uint32_t b = li * cfg_.job.slots + s;
  uint8_t* f = m.io->frame(b);
  f[kAgqHdrOffset + 1] |= proto::kAgqFlagRetransmit;
  if (!m.io->send(lw.id.port, b, uint16_t(frame_len()))) {
    ++counters_.tx_refused;
    sl.deadline = now_ns;
    m.next_deadline = now_ns;
    return false;
  }
  ++counters_.tx_pkts;
  ++sl.tries;
  sl.retransmitted = true;
  sl.renewed = false;
  sl.send_seq = ++lw.send_seq;
  sl.xmit_ns = now_ns;
  ++counters_.retransmissions;
  if (sl.first_why < 0) sl.first_why = int8_t(why == Resend::Lost ? 0 : why == Resend::Probe ? 1 : 2);
  if (Impl::OpEntry* en = m.entry(lw, sl.op_serial)) ++en->st.retransmissions;
  stats_.max_retries_seen = std::max<uint64_t>(stats_.max_retries_seen, sl.tries);
  // A sequence known to be lost (or probed) was resent into a path that
  // delivers: if this copy is lost too, a short timer (a few round trips,
  // doubling) finds it, not the RTO that must cover scheduling stalls. RACK
  // itself judges first transmissions only: a retransmission that waits for
  // a peer's own recovery would be marked again and again.
  if (why == Resend::Lost) sl.marked = true;
  const uint64_t base = m.base_rto(lw);
  // RESULTs flowing (another sequence completed within half an RTO): every
  // worker is alive and the path delivers, so this one was lost again (or
  // waits for a peer's own recovery), not stalled: the back-off stops at 4
  // RTOs. Beyond that it is for quiet spells (a descheduled peer, a dead
  // worker, a switch gone), which the timer scan already limits to one
  // probing slot; at 10% loss (PS fallback: four lossy hops per use)
  // doubling up to the cap stretched single sequences to seconds and up to
  // the retry limit.
  const bool flowing = got_reply_ && now_ns - last_result_ns_ <= base / 2;
  const uint64_t cap = flowing ? std::min(4 * base, cfg_.tuning.rto_max_ns) : cfg_.tuning.rto_max_ns;
  uint64_t next;
  if (why != Resend::Timer)
    next = std::min(m.short_rto(lw), base);
  else if (sl.rto < base)
    next = std::min(sl.rto * 2, base);
  else
    next = std::max(std::min(sl.rto * 2, cap), base);
  m.arm(sl, now_ns, next);
  return true;
}

void AllreduceEngine::on_link(bool up, uint64_t now_ns) {
  if (!im_) return;
  if (!up) {
    if (!im_->link_down) ++stats_.link_downs;
    im_->link_down = true;
    return;
  }
  if (im_->link_down) {
    // The peer came back: if it is a restarted switch every partial sum is
    // gone; resending every in-flight DATA now is safe either way (the
    // switch dedups by bitmap) and saves a back-off period.
    im_->link_down = false;
    im_->redo_in_flight(now_ns);
  }
}

int AllreduceEngine::on_frame(std::span<const uint8_t> frame, uint64_t now_ns) {
  ++counters_.rx_pkts;
  if (!im_) return -1;
  Impl& m = *im_;
  m.now = now_ns;
  const uint8_t* h = find_agq_header(frame);
  if (!h) {
    ++counters_.other;
    return -1;
  }
  const AllreduceJob& job = cfg_.job;
  if (h[0] != kTypeResult || rd16(h + 2) != job.job_id) {
    ++counters_.foreign;
    return -1;
  }
  const int li = m.lw_of_id[h[4]];
  const uint16_t s = rd16(h + 6);
  if (li < 0 || s >= job.slots || h[17] != job.lanes) {
    ++counters_.foreign;
    return -1;
  }
  Impl::Logical& lw = m.lws[size_t(li)];
  Impl::Slot& sl = lw.slots[s];
  const bool got_reply_before = got_reply_;
  got_reply_ = true;
  const uint8_t flags = h[1];
  const int exponent = int8_t(h[16]);
  // (seq, version) alone is not unique: OVERFLOW redos of one chunk reuse
  // its seq on alternating versions, each with a larger exponent.
  const bool current = sl.st == Impl::St::Sent && (flags & proto::kAgqFlagVersion) == (sl.uses & 1) &&
                       rd32(h + 8) == uint32_t(sl.g) && exponent == sl.p.exponent && cfg_.owns(s);
  if (!current) {
    ++counters_.stale;
    if (Impl::OpEntry* en = m.entry(lw, sl.op_serial)) ++en->st.duplicates;
    if ((flags & proto::kAgqFlagRetransmit) && sl.prev_retx && !sl.prev_flagged && rd32(h + 8) == uint32_t(sl.prev_g) &&
        (flags & proto::kAgqFlagVersion) == sl.prev_v) {
      // The use completed by the multicast RESULT (our first DATA counted),
      // and the switch resent it for our retransmission: it was not needed.
      // Widen RACK's reorder window (RFC 8985 §6.2's DSACK rule).
      sl.prev_retx = false;
      ++stats_.spurious;
      // Only RACK's own mistakes say the reorder window is too narrow (a
      // timer's or a probe's say the peer was slow).
      if (sl.prev_marked) m.reo_mult = std::min(m.reo_mult * 2, 64u);
    }
    return -1;
  }
  const bool fallback = flags & proto::kAgqFlagFallback;
  const int guard = m.guard;
  // FALLBACK = handed out by the PS: its own sums are at d = 0 (width = R,
  // or 0 = "the request"); with delivery = ps it hands back the switch's
  // result, whose width and pos are the switch's grant.
  const int width = fallback && h[13] == 0 ? sl.p.width : h[13];
  const int pos = h[14];
  if (width > sl.p.width || width % 4 || width - guard < 2 || (!fallback && pos + width / 4 > 8) ||
      h[15] != guard || h[12] != sl.p.width) {
    ++stats_.bad_results;
    ++counters_.malformed;
    return -1;  // not decodable: the timer resends and the switch answers again
  }
  if (!fallback && width < sl.min_w) {
    // The switch must grant at least min_width or hand the sequence to the
    // PS (PROTOCOL.md §2): a narrower window breaks the error budget. Not
    // decoded; the timer resends and the switch answers again.
    ++stats_.bad_results;
    ++stats_.below_min_width;
    ++counters_.malformed;
    return -1;
  }
  const uint16_t epoch = rd16(h + 18);
  if (epoch) {
    if (stats_.epoch && epoch != stats_.epoch) {
      // The switch restarted: every sequence in flight may have lost its
      // partial sums. Resend them all now (this result is the new switch's).
      ++stats_.switch_restarts;
      m.restart_from = stats_.epoch;
      m.restart_ns = now_ns;
      stats_.epoch = epoch;
      m.redo_in_flight(now_ns);
    }
    stats_.epoch = epoch;
  }
  if (!got_reply_before || now_ns - last_result_ns_ > m.base_rto(lw)) {
    // Results flow again after a quiet spell (a late or descheduled peer):
    // the sequences in flight waited for the same peer; give them a full RTO
    // from now instead of retransmitting each one as its old deadline passes.
    // Once per transmission: a lossy, slow job must not starve a lost one.
    for (auto& x : m.lws)
      for (uint32_t t : m.owned) {
        const uint64_t d = now_ns + m.base_rto(x);
        Impl::Slot& y = x.slots[t];
        if (y.st == Impl::St::Sent && !y.renewed && y.deadline < d) y.deadline = d, y.renewed = true;
      }
  }
  last_result_ns_ = now_ns;
  lw.last_progress_ns = now_ns;
  lw.probed = false;
  {
    // Karn: a resent sequence's RESULT says nothing about the round trip,
    // nor (for RACK) which transmission it answers.
    if (!sl.retransmitted) {
      const uint64_t rtt = now_ns - sl.xmit_ns;
      m.rtt_sample(lw, rtt);
      Impl::Lane& ln = lw.lanes[m.lane_of[s]];
      if (sl.send_seq > ln.rack_seq) ln.rack_seq = sl.send_seq, ln.rack_rtt = rtt;
    }
    // Not even the tail probe's RESULT (RFC 8985 §6.2 step 2 would let it
    // advance RACK as the probe's transmission). Tried twice: with every
    // resend's RESULT it doubled RACK's false marks at 1% loss (a resend
    // that waited for a peer's recovery overtakes sequences waiting for the
    // same peer); with the probe's alone it does not move 1% loss (0-40
    // probes a run), and the 10% loss two-job test (PS fallback) failed
    // once in ~20 runs at load 12 with a sequence at max_retries -- the
    // failure 979f1bc fixed, not proven to be caused by it, but not risked.
  }
  sl.prev_g = sl.g;
  sl.prev_v = uint8_t(flags & proto::kAgqFlagVersion);
  sl.prev_retx = sl.retransmitted;
  sl.prev_flagged = flags & proto::kAgqFlagRetransmit;
  sl.prev_marked = sl.marked;
  sl.marked = false;
  Impl::OpEntry& en = *m.entry(lw, sl.op_serial);
  AllreduceOp& op = *en.op;
  OpStats& st = en.st;
  ++st.results;
  const bool overflow = flags & proto::kAgqFlagOverflow;
  const bool redo = overflow && sl.redos < cfg_.tuning.max_redos;
  if (overflow) ++st.overflows;
  const uint64_t c = sl.g - en.first;
  const unsigned lanes = job.lanes;
  const unsigned n_valid = unsigned(std::min<uint64_t>(lanes, op.input.size() - c * lanes));
  const int d = sl.p.width - width;
  const uint32_t b = uint32_t(li) * job.slots + s;
  float* out = op.output.data() + c * lanes;
  if (!redo) {
    // Error feedback, before the output is written (it may be the input):
    // what the result counted of our DATA (its lanes are still the frame's).
    if (op.residual)
      fastc::residual_be(m.io->frame(b) + kAgqHdrOffset + 20, op.input.data() + c * lanes,
                         op.residual->data() + c * lanes, n_valid, sl.p.width, guard, sl.p.exponent, d);
    const float mx = fastc::decode_be(h + 20, n_valid, job.num_workers, width, guard, sl.p.exponent, d, out);
    op.chunk_max[c] = float(double(mx) / job.num_workers);  // widths of the key's next op
    ++st.req_hist[sl.p.width / 4];
    if (fallback) {
      ++st.fallbacks;
    } else {
      ++st.aggregated;
      st.granted_bits_sum += unsigned(width);
      ++st.granted_hist[width / 4];
    }
    if (overflow) ++st.clipped_chunks;
    st.error_bound = std::max(st.error_bound, agqc::error_bound(job.num_workers, sl.p.exponent, d));
  }
  if (observer_) {
    ChunkResult r{&op,    unsigned(li), c,        sl.g,     s,    sl.uses & 1u, sl.p,   width,
                  pos,    sl.min_w,     fallback, overflow, redo, lanes,        n_valid, h + 20,
                  m.io->frame(b) + kAgqHdrOffset + 20, redo ? nullptr : out, epoch};
    observer_->on_chunk(r);
  }
  --lw.in_flight;
  ++sl.uses;
  sl.retransmitted = false;
  if (redo) {
    ++st.redos;
    ++sl.redos;
    sl.p.exponent = std::min(sl.p.exponent + 2, agqc::kMaxExponent);
    sl.st = Impl::St::Ready;
    lw.ready.push_front(s);  // the redo holds up its op: send it first
    return int(b);
  }
  ++counters_.chunks_done;
  {
    const uint64_t age = now_ns - sl.sent_ns;
    if (sl.first_why >= 0) {
      const size_t k = size_t(sl.first_why);
      ++stats_.recovered[k];
      stats_.recovered_ns[k] += age;
      stats_.recovered_max_ns[k] = std::max(stats_.recovered_max_ns[k], age);
    }
    sl.first_why = -1;
    {
      const uint64_t total = en.st.chunks, done = total - (en.left - 1);
      const uint64_t t = now_ns - en.submit_ns;
      if (!en.progress_ns[0] && 2 * done >= total) {
        en.progress_ns[0] = t;
        uint32_t lo = UINT32_MAX, hi = 0;
        for (uint32_t x : m.owned) lo = std::min(lo, lw.slots[x].uses), hi = std::max(hi, lw.slots[x].uses);
        stats_.lag_at_half = hi - lo;
      }
      if (!en.progress_ns[1] && 10 * done >= 9 * total) en.progress_ns[1] = t;
      if (!en.progress_ns[2] && 100 * done >= 99 * total) en.progress_ns[2] = t;
      if (done == total) en.progress_ns[3] = t, stats_.last_op_progress_ns = en.progress_ns;
    }
    stats_.max_chunk_ns = std::max(stats_.max_chunk_ns, age);
    stats_.chunks_over_1ms += age > 1'000'000;
    stats_.chunks_over_5ms += age > 5'000'000;
  }
  sl.g += job.slots;
  sl.st = Impl::St::Idle;
  if (--en.left == 0) m.part_done(en, now_ns);
  m.take(lw, s);
  m.gc(lw);
  return int(b);
}

unsigned AllreduceEngine::tick(uint64_t now_ns, bool timers) {
  if (!im_ || failed()) return 0;
  Impl& m = *im_;
  m.now = now_ns;
  unsigned sent = 0;
  if (m.last_tick && cfg_.tuning.away_ns && now_ns - m.last_tick > cfg_.tuning.away_ns) {
    // This process was not running (descheduled on a loaded host): the time
    // it was away says nothing about the network; the timers pause for it.
    const uint64_t gap = now_ns - m.last_tick;
    for (auto& lw : m.lws)
      for (uint32_t s : m.owned)
        if (lw.slots[s].st == Impl::St::Sent) lw.slots[s].deadline += gap;
    if (m.next_deadline != UINT64_MAX) m.next_deadline += gap;
    ++stats_.away;
  }
  m.last_tick = now_ns;
  const uint32_t window = cfg_.job.max_outstanding();
  const uint16_t len = uint16_t(frame_len());
  for (uint32_t li = 0; li < m.lws.size(); ++li) {
    Impl::Logical& lw = m.lws[li];
    m.unpark(lw);
    for (unsigned k = 0; k < cfg_.tuning.burst && !lw.ready.empty() && lw.in_flight < window; ++k) {
      const uint32_t s = lw.ready.front();
      const uint32_t b = li * cfg_.job.slots + s;
      m.write_data(lw, s, b);
      if (!m.io->send(lw.id.port, b, len)) {
        ++counters_.tx_refused;
        break;  // written again next time (same content)
      }
      lw.ready.pop_front();
      ++counters_.tx_pkts;
      Impl::Slot& sl = lw.slots[s];
      sl.st = Impl::St::Sent;
      sl.tries = 0;
      sl.retransmitted = sl.marked = false;
      sl.renewed = false;
      sl.sent_ns = sl.xmit_ns = now_ns;
      lw.sent_end = std::max(lw.sent_end, sl.g + 1);
      sl.send_seq = ++lw.send_seq;
      // An OVERFLOW redo leaves when each worker gets its RESULT, at
      // different times in different processes, so later sequences overtake
      // it without any loss: RACK does not judge it (its timer does).
      if (!sl.redos) lw.lanes[m.lane_of[s]].order.push_back({s, sl.send_seq});
      m.arm(sl, now_ns, m.base_rto(lw));
      if (!lw.in_flight) lw.last_progress_ns = now_ns, lw.probed = false;
      ++lw.in_flight;
      ++sent;
      if (!first_send_ns_) first_send_ns_ = now_ns;
    }
  }
  // RACK (RFC 8985): a sequence still outstanding after one sent later on
  // the same switch lcore came back, plus a reorder window, is lost (our
  // DATA, a peer's DATA or our RESULT): resent at once, without waiting for
  // the RTO, which must cover scheduling stalls.
  // RESULTs still unread in the rx ring (the caller stopped draining to
  // send): no loss detection of any kind until they are read.
  if (!timers) return sent;
  for (uint32_t li = 0; li < m.lws.size() && !failed(); ++li) {
    Impl::Logical& lw = m.lws[li];
    const uint64_t reo = cfg_.tuning.reo_min_ns ? m.reo_wnd(lw) : 0;
    if (li == 0) stats_.reo_wnd_ns = reo;
    for (Impl::Lane& ln : lw.lanes)
      while (reo && !ln.order.empty()) {
        const auto [s, q] = ln.order.front();
        Impl::Slot& sl = lw.slots[s];
        if (sl.st != Impl::St::Sent || sl.send_seq != q) {
          ln.order.pop_front();
          continue;
        }
        if (q >= ln.rack_seq || now_ns < sl.xmit_ns + ln.rack_rtt + reo) break;
        ln.order.pop_front();
        if (retransmit(li, s, now_ns, Resend::Lost)) ++sent;
        ++stats_.fast_retransmissions;
      }
    // The tail: nothing left to send, so a lost sequence may have no later
    // one to reveal it. One probe of the newest sequence after 2 srtt
    // without a RESULT: if the newest itself was lost, its resend recovers
    // it; older ones lost too are found by their short timers or, once
    // more is sent, by RACK. (Its RESULT does not advance RACK: on_frame.)
    if (cfg_.tuning.tail_probe && lw.rtt.samples && lw.in_flight && !lw.probed &&
        lw.sent_end >= lw.next_global && now_ns >= lw.last_progress_ns + m.pto(lw)) {
      uint32_t newest = UINT32_MAX;
      uint64_t q = 0;
      for (uint32_t s : m.owned)
        if (lw.slots[s].st == Impl::St::Sent && lw.slots[s].send_seq >= q) q = lw.slots[s].send_seq, newest = s;
      lw.probed = true;
      if (newest != UINT32_MAX) {
        if (retransmit(li, newest, now_ns, Resend::Probe)) ++sent;
        ++stats_.tail_probes;
      }
    }
  }
  if (now_ns >= m.next_deadline) {
    // Timers, after rx was drained (the caller's loop): a RESULT waiting in
    // the rx ring is never mistaken for a loss.
    m.next_deadline = UINT64_MAX;
    ++stats_.timer_scans;
    const bool redo_all = m.redo_all;
    m.redo_all = false;
    for (uint32_t li = 0; li < m.lws.size() && !failed(); ++li) {
      Impl::Logical& lw = m.lws[li];
      const bool quiet = !redo_all && (!got_reply_ || now_ns - last_result_ns_ > m.base_rto(lw) / 2);
      if (!lw.in_flight) continue;
      uint32_t probe = UINT32_MAX;
      {
        uint64_t oldest = UINT64_MAX;
        for (uint32_t s : m.owned)
          if (lw.slots[s].st == Impl::St::Sent && lw.slots[s].g < oldest) oldest = lw.slots[s].g, probe = s;
      }
      for (uint32_t s : m.owned) {
        Impl::Slot& sl = lw.slots[s];
        if (sl.st != Impl::St::Sent) continue;
        if (now_ns < sl.deadline) {
          m.next_deadline = std::min(m.next_deadline, sl.deadline);
          continue;
        }
        // Quiet (no RESULT for a whole RTO, or none yet): a peer that starts
        // late or is descheduled, a dead worker, a switch that went away --
        // not packet loss, which leaves the other slots' RESULTs flowing.
        // Then only the slot with the oldest chunk probes (its retries count
        // towards max_retries: the failure time stays bounded); the others
        // wait without a retransmission each. The oldest chunk, because every
        // worker numbers chunks alike: the worker that is furthest behind
        // probes a chunk the others have completed (the switch answers with
        // the kept RESULT) or probe themselves, so no two workers wait on
        // each other's probes.
        // Likewise a first transmission that nothing sent after it on its
        // switch lcore has overtaken: had it been lost while the path
        // delivers, RACK would have found it; it waits for a slow peer (or
        // is in the tail, which the probe covers). Results flowing from a
        // peer that is merely slow must not make every such sequence resend.
        // The wait is bounded (4 base RTOs from its transmission): a
        // sequence that waits may be the very contribution another
        // process's probing sequence needs (results coming only from the
        // PS fallback do not advance RACK), and two processes must never
        // wait on each other until max_retries.
        const bool waiting = !redo_all && sl.tries == 0 && lw.lanes[m.lane_of[s]].rack_seq < sl.send_seq &&
                             now_ns - sl.sent_ns < 4 * m.base_rto(lw);
        if ((quiet || waiting) && s != probe) {
          m.arm(sl, now_ns, m.base_rto(lw));
          continue;
        }
        if (sl.tries >= cfg_.tuning.max_retries && now_ns - sl.sent_ns >= cfg_.tuning.retry_time_ns) {
          std::string why = "job " + std::to_string(cfg_.job.job_id) + ": no RESULT after " +
                            std::to_string(sl.tries) + " retransmissions; " + m.stalled_report(now_ns);
          if (stats_.below_min_width)
            why += ". The switch answered " + std::to_string(stats_.below_min_width) +
                   " RESULTs with windows narrower than the DATA's min_width, refused (PROTOCOL.md §2: it "
                   "must grant at least min_width or hand the sequence to the PS): a switch that predates "
                   "min_width grants? (--min-width-slack lets narrower grants through, at a larger error)";
          else if (stats_.switch_restarts)
            why += ". The switch restarted during the job (boot epoch " + std::to_string(m.restart_from) + " -> " +
                   std::to_string(stats_.epoch) +
                   "): sequences that some workers had already completed before the restart cannot be "
                   "redone; reset the job (agqctl job reset ID) and run it again";
          else if (m.link_down)
            why += ". The link to the switch is down (switch gone?)";
          else if (stats_.link_downs)
            why += ". The link to the switch went down and came back during the job (the switch restarted?): "
                   "sequences some workers had completed before cannot be redone; reset the job and run it again";
          else
            why += ". A worker of the job is not contributing (dead or not started?), or the switch/PS does "
                   "not answer; reset the job (agqctl job reset ID) before running it again";
          fail(why);
          return sent;
        }
        if (retransmit(li, s, now_ns, Resend::Timer)) ++sent;
      }
    }
  }
  if (!got_reply_ && first_send_ns_ && now_ns - first_send_ns_ > cfg_.tuning.reply_timeout_ns) {
    char b[512];
    std::snprintf(b, sizeof b,
                  "no reply from the switch after %.1f s: is agq-switch running the agq pipeline with job %u "
                  "registered (N=%u, slots>=%u, lanes %u) and this worker's port/MAC/IPv4 in it?",
                  double(now_ns - first_send_ns_) * 1e-9, cfg_.job.job_id, cfg_.job.num_workers, cfg_.job.slots,
                  cfg_.job.lanes);
    fail(b);
  }
  return sent;
}

}  // namespace agq::worker
