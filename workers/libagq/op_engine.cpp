#include "libagq/op_engine.hpp"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>

namespace agq::libagq {

namespace {
constexpr size_t kUdpSrcPortOff = 14 + 20;           // untagged Ethernet + IPv4 (IHL 5)
constexpr size_t kAgqFlagsOff = 14 + 20 + 8 + 1;     // agq header byte 1
constexpr int kLanes = worker::kAgqLanes;
}  // namespace

uint32_t JobParams::row_shift() const {
  if (row_shift_hint >= 0) return uint32_t(row_shift_hint);
  if (!rows) return 31;  // unknown: every slot in "row 0", shard = job_id
  uint32_t s = 0;
  while (s < 31 && ((uint64_t(slots) + (1ull << s) - 1) >> s) > rows) ++s;
  return s;
}

std::string JobParams::validate() const {
  if (job_id == 0) return "job id 0 is invalid (PROTOCOL.md §1)";
  if (num_workers < 1 || num_workers > 32) return "job " + std::to_string(job_id) + ": workers must be 1..32";
  if (worker_id >= num_workers)
    return "job " + std::to_string(job_id) + ": worker id " + std::to_string(worker_id) + " is not below N = " +
           std::to_string(num_workers);
  if (slots < 1 || slots > 65535) return "job " + std::to_string(job_id) + ": slots must be 1..65535";
  if (lanes != kLanes)
    return "job " + std::to_string(job_id) + " has lanes = " + std::to_string(lanes) +
           "; this libagq speaks the 32-lane profile only";
  if (max_width < 4 || max_width > 32 || max_width % 4)
    return "job " + std::to_string(job_id) + ": max_width must be 4..32, a multiple of 4";
  return {};
}

bool OpEngine::init(const EngineConfig& cfg, std::string& err) {
  cfg_ = cfg;
  if (err = cfg.job.validate(); !err.empty()) return false;
  guard_ = agqc::guard_bits(cfg.job.num_workers);
  if (cfg.job.max_width - guard_ < 2) {
    err = "job " + std::to_string(cfg.job.job_id) + ": max_width " + std::to_string(cfg.job.max_width) +
          " leaves fewer than 2 value bits for N = " + std::to_string(cfg.job.num_workers);
    return false;
  }
  if (cfg.init_width < agqc::min_width(guard_) || cfg.init_width > 32 || cfg.init_width % 4) {
    err = "init_width must be " + std::to_string(agqc::min_width(guard_)) + "..32, a multiple of 4";
    return false;
  }
  if (!(cfg.init_scale > 0) || !(cfg.error_budget > 0) || !(cfg.margin >= 1)) {
    err = "init_scale and error_budget must be > 0, margin >= 1";
    return false;
  }
  row_shift_ = cfg.job.row_shift();
  const bool default_ids = cfg.job.self.ip == 0;
  frame_ = std::make_unique<worker::AgqFrameTemplate>(
      default_ids ? worker::agq_worker_endpoint(cfg.job.job_id, cfg.job.worker_id) : cfg.job.self,
      cfg.job.ps.ip ? cfg.job.ps : worker::agq_ps_endpoint(cfg.job.job_id));
  slots_.assign(cfg.job.slots, Slot{});
  return true;
}

void OpEngine::fail(const std::string& d) {
  if (diagnostic_.empty()) diagnostic_ = d;
  for (auto& o : ops_) done_.push_back({o->op.cookie, false, diagnostic_, o->st});
  ops_.clear();
  for (auto& sl : slots_) {
    sl.st = St::Idle;
    sl.op = nullptr;
  }
  resend_.clear();
  in_flight_ = 0;
}

void OpEngine::plan(OpState& o) {
  const int g = guard_, cap = cfg_.job.max_width;
  auto clamp_cap = [&](agqc::ChunkParams p, double range) {
    // Asking above the switch's cap only gets truncated (d > 0): ask for the
    // cap with an exponent sized for it instead.
    if (p.width > cap) p = {cap, agqc::exponent_for(range, cap - g)};
    return p;
  };
  o.params.resize(o.chunks);
  auto it = tags_.find(o.op.tag);
  if (it != tags_.end() && it->second.n == o.op.n) {
    // Depends only on the tag's previous aggregate, identical in every
    // worker: all workers choose alike.
    const TagHistory& h = it->second;
    for (uint64_t c = 0; c < o.chunks; ++c)
      o.params[c] = clamp_cap(agqc::choose_params(h.chunk_max[c], h.tensor_max, cfg_.error_budget, cfg_.margin, g),
                              h.chunk_max[c] * cfg_.margin);
  } else {
    const auto p0 = clamp_cap(agqc::initial_params(cfg_.init_width, cfg_.init_scale, g), cfg_.init_scale);
    std::fill(o.params.begin(), o.params.end(), p0);
  }
}

void OpEngine::submit(const Op& op, uint64_t now_ns) {
  auto o = std::make_unique<OpState>();
  o->op = op;
  o->st.submit_ns = now_ns;
  o->st.elements = op.n;
  if (failed()) {
    done_.push_back({op.cookie, false, diagnostic_, o->st});
    return;
  }
  o->chunks = o->left = (op.n + kLanes - 1) / kLanes;
  o->st.chunks = o->chunks;
  o->base = assigned_end_;
  assigned_end_ += o->chunks;
  o->chunk_max.assign(o->chunks, 0.0);
  plan(*o);
  ops_.push_back(std::move(o));
  complete_front(now_ns);  // a zero-length operation is done at once (if nothing precedes it)
}

void OpEngine::encode(Slot& sl, uint32_t s, bool) {
  const OpState& o = *sl.op;
  const uint64_t c = sl.g - o.base;
  proto::Agq h;
  h.type = proto::AgqType::Data;
  h.job_id = cfg_.job.job_id;
  h.worker_id = cfg_.job.worker_id;
  h.num_workers = cfg_.job.num_workers;
  h.slot = uint16_t(s);
  h.seq = uint32_t(sl.g);
  h.req_width = uint8_t(sl.p.width);
  h.exponent = int8_t(sl.p.exponent);
  bool clipped = false;
  const uint64_t i0 = c * kLanes;
  for (int k = 0; k < kLanes; ++k) {
    const float x = i0 + k < o.op.n ? o.op.in[i0 + k] : 0.0f;  // padding past the end is 0
    const auto e = agqc::encode(x, sl.p.width, guard_, sl.p.exponent);
    h.lanes[k] = e.u;
    clipped |= e.clipped;
  }
  h.flags = uint8_t((sl.uses & 1) ? proto::kAgqFlagVersion : 0);
  if (clipped) h.flags |= proto::kAgqFlagOverflow;
  frame_->write(h, sl.frame.data());
  // PROTOCOL.md §10: the shard in the UDP source port (a steering hint).
  const uint16_t shard = uint16_t((cfg_.job.job_id + (row_shift_ >= 31 ? 0 : (s >> row_shift_))) & 0x0FFF);
  const uint16_t sport = uint16_t(0xC000 | shard);
  sl.frame[kUdpSrcPortOff] = uint8_t(sport >> 8);
  sl.frame[kUdpSrcPortOff + 1] = uint8_t(sport);
}

bool OpEngine::transmit(Slot& sl, bool retransmit, uint64_t now_ns, TxSink& tx, uint16_t port) {
  if (retransmit)
    sl.frame[kAgqFlagsOff] |= proto::kAgqFlagRetransmit;
  else
    sl.frame[kAgqFlagsOff] &= uint8_t(~proto::kAgqFlagRetransmit);
  if (!tx.send(port, sl.frame)) return false;
  ++sl.op->st.packets;
  if (!first_send_ns_) first_send_ns_ = now_ns;
  return true;
}

unsigned OpEngine::tick(uint64_t now_ns, TxSink& tx, uint16_t port) {
  if (!last_timer_scan_) last_timer_scan_ = now_ns;
  unsigned sent = 0;
  // Redos first: they hold up their operation.
  while (!resend_.empty()) {
    Slot& sl = slots_[resend_.front()];
    if (!transmit(sl, false, now_ns, tx, port)) break;
    sl.tries = 0;
    sl.rto = cfg_.rto_ns;
    sl.deadline = now_ns + sl.rto;
    resend_.pop_front();
    ++sent;
  }
  const uint32_t window = cfg_.window ? cfg_.window : uint32_t(slots_.size());
  auto op_it = ops_.begin();
  for (unsigned b = 0; b < cfg_.burst && next_g_ < assigned_end_ && in_flight_ < window; ++b) {
    const uint32_t s = uint32_t(next_g_ % slots_.size());
    Slot& sl = slots_[s];
    if (sl.st != St::Idle) break;  // its previous use has no RESULT yet
    while (op_it != ops_.end() && (*op_it)->base + (*op_it)->chunks <= next_g_) ++op_it;
    if (op_it == ops_.end()) break;  // cannot happen: assigned_end_ covers submitted ops
    OpState& o = **op_it;
    sl.g = next_g_;
    sl.op = &o;
    sl.p = o.params[next_g_ - o.base];
    sl.redos = 0;
    encode(sl, s, false);
    if (!transmit(sl, false, now_ns, tx, port)) break;
    sl.st = St::Sent;
    sl.tries = 0;
    sl.rto = cfg_.rto_ns;
    sl.sent_ns = now_ns;
    sl.deadline = now_ns + sl.rto;
    ++in_flight_;
    ++next_g_;
    ++sent;
  }
  // Timers, scanned every millisecond (RTOs are tens of ms).
  if (in_flight_ && now_ns - last_timer_scan_ >= 1'000'000ull) {
    last_timer_scan_ = now_ns;
    for (uint32_t s = 0; s < slots_.size() && !failed(); ++s) {
      Slot& sl = slots_[s];
      if (sl.st != St::Sent || now_ns < sl.deadline) continue;
      if (sl.tries >= cfg_.max_retries) {
        char b[640];
        std::snprintf(b, sizeof b,
                      "job %u worker %u: slot %u (chunk %" PRIu64 ", version %u) got no RESULT after %u "
                      "retransmissions over %.1f s: the switch (or the PS, for a fallback) does not answer; "
                      "did another worker of the job stop or submit different operations?",
                      cfg_.job.job_id, cfg_.job.worker_id, s, sl.g, sl.uses & 1, sl.tries,
                      double(now_ns - sl.sent_ns) * 1e-9);
        fail(b);
        break;
      }
      if (!transmit(sl, true, now_ns, tx, port)) break;  // TX full: next scan
      ++sl.tries;
      ++sl.op->st.retransmissions;
      sl.rto = std::min(sl.rto * 2, cfg_.rto_max_ns);
      sl.deadline = now_ns + sl.rto;
    }
  }
  if (!got_reply_ && first_send_ns_ && now_ns - first_send_ns_ > cfg_.reply_timeout_ns && !failed()) {
    char b[640];
    std::snprintf(b, sizeof b,
                  "no reply from the switch after %.1f s: is agq-switch running the agq pipeline with job %u "
                  "registered (workers = %u, slots = %u) and worker %u's port, MAC and IPv4 in it?",
                  double(now_ns - first_send_ns_) * 1e-9, cfg_.job.job_id, cfg_.job.num_workers, cfg_.job.slots,
                  cfg_.job.worker_id);
    fail(b);
  }
  return sent;
}

void OpEngine::on_frame(std::span<const uint8_t> frame, uint64_t now_ns) {
  const auto h = worker::parse_agq(frame);
  if (!h || h->type != proto::AgqType::Result || h->job_id != cfg_.job.job_id ||
      h->worker_id != cfg_.job.worker_id)
    return;  // not ours (ARP, another job's traffic, a flood)
  on_result(*h, now_ns);
}

void OpEngine::on_result(const proto::Agq& h, uint64_t now_ns) {
  got_reply_ = true;
  if (h.slot >= slots_.size()) return;
  Slot& sl = slots_[h.slot];
  // (seq, version) alone is not unique: OVERFLOW redos reuse the seq on
  // alternating versions, each with a larger exponent.
  if (sl.st != St::Sent || h.version_bit() != (sl.uses & 1) || h.seq != uint32_t(sl.g) ||
      h.exponent != sl.p.exponent)
    return;  // a copy of a RESULT we hold (multicast + resend), harmless
  const bool fallback = h.flags & proto::kAgqFlagFallback;
  const int width = fallback && h.width == 0 ? sl.p.width : h.width;
  if (width > sl.p.width || width % 4 || width - guard_ < 2 || (!fallback && h.pos + width / 4 > 8) ||
      h.guard != guard_ || h.req_width != sl.p.width)
    return;  // not decodable: the timer resends and the switch answers again
  OpState& o = *sl.op;
  const bool overflow = h.flags & proto::kAgqFlagOverflow;
  ++sl.uses;
  if (overflow && sl.redos < cfg_.max_redos) {
    // Some worker clipped: go again on the slot's next use with 4x the range.
    ++sl.redos;
    ++o.st.redos;
    sl.p.exponent = std::min(sl.p.exponent + 2, agqc::kMaxExponent);
    encode(sl, h.slot, true);
    resend_.push_back(h.slot);
    return;
  }
  const int d = sl.p.width - width;
  const uint64_t c = sl.g - o.base, i0 = c * kLanes;
  const unsigned n = cfg_.job.num_workers;
  const double bound = overflow ? std::numeric_limits<double>::infinity()
                                : agqc::error_bound(n, sl.p.exponent, d) * double(o.op.scale);
  double cmax = 0;
  for (int k = 0; k < kLanes; ++k) {
    const double sum = agqc::decode_sum(h.lanes[k], n, width, guard_, sl.p.exponent, d);
    cmax = std::max(cmax, std::fabs(sum) / n);
    if (i0 + k < o.op.n) {
      o.op.out[i0 + k] = float(sum * double(o.op.scale));
      if (o.op.bound) o.op.bound[i0 + k] = float(bound);
    }
  }
  o.chunk_max[c] = cmax;
  o.st.max_bound = std::max(o.st.max_bound, bound);
  if (overflow) ++o.st.overflow_accepted;
  if (fallback) {
    ++o.st.fallbacks;
    ++o.st.granted_hist[0];
  } else {
    o.st.req_bits_sum += sl.p.width;
    o.st.granted_bits_sum += width;
    ++o.st.granted_hist[width / 4];
  }
  sl.st = St::Idle;
  sl.op = nullptr;
  --in_flight_;
  --o.left;
  complete_front(now_ns);
}

void OpEngine::complete_front(uint64_t now_ns) {
  while (!ops_.empty() && ops_.front()->left == 0) {
    OpState& o = *ops_.front();
    if (o.chunks) {
      TagHistory& h = tags_[o.op.tag];
      h.n = o.op.n;
      h.chunk_max = std::move(o.chunk_max);
      h.tensor_max = h.chunk_max.empty() ? 0 : *std::max_element(h.chunk_max.begin(), h.chunk_max.end());
    }
    o.st.done_ns = now_ns;
    done_.push_back({o.op.cookie, true, {}, o.st});
    ops_.pop_front();
  }
}

}  // namespace agq::libagq
