#include "lib/agq_worker_engine.hpp"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace agq::worker {

bool AgqWorkerEngine::init(const AgqWorkerConfig& cfg, std::string& err) {
  cfg_ = cfg;
  const AgqJobSpec& job = cfg.job;
  if (err = job.validate(); !err.empty()) return false;
  guard_ = agqc::guard_bits(job.num_workers);
  if (cfg.init_width < agqc::kMinWidth || cfg.init_width > agqc::kMaxWidth || cfg.init_width % 4) {
    err = "--init-width must be 8..32, a multiple of 4";
    return false;
  }
  if (!(cfg.init_scale > 0) || !(cfg.error_budget > 0) || !(cfg.margin >= 1)) {
    err = "--init-scale and --error-budget must be > 0, --margin >= 1";
    return false;
  }
  if (cfg.ids.empty() || cfg.ids.size() != cfg.ports.size()) {
    err = "one port per logical worker id";
    return false;
  }
  grads_ = std::make_unique<AgqGradients>();
  if (!grads_->init(job, cfg.source, cfg.seed, err)) return false;
  verifier_ = std::make_unique<AgqVerifier>(*grads_, job);
  const Endpoint ps = agq_ps_endpoint(job.job_id);
  lws_.clear();
  for (size_t i = 0; i < cfg.ids.size(); ++i) {
    if (cfg.ids[i] >= job.num_workers) {
      err = "worker id " + std::to_string(cfg.ids[i]) + " is not below --workers " + std::to_string(job.num_workers);
      return false;
    }
    Logical lw;
    lw.id = cfg.ids[i];
    lw.port = cfg.ports[i];
    lw.frame = std::make_unique<AgqFrameTemplate>(agq_worker_endpoint(job.job_id, lw.id), ps);
    lw.slots.resize(job.slots);
    lw.cur.assign(job.chunks() * kAgqLanes, 0.0f);
    lws_.push_back(std::move(lw));
  }
  window_of_.assign(job.slots, {0, 0});
  stats_.round_granted_sum.assign(job.rounds, 0);
  stats_.round_seqs.assign(job.rounds, 0);
  for (auto& lw : lws_) start_round(lw, 0);
  return true;
}

uint64_t AgqWorkerEngine::outstanding() const {
  uint64_t n = 0;
  for (const auto& lw : lws_) n += lw.in_flight;
  return n;
}

void AgqWorkerEngine::start_round(Logical& lw, uint32_t round) {
  const AgqJobSpec& job = cfg_.job;
  const uint64_t chunks = job.chunks();
  lw.round = round;
  lw.left = chunks;
  lw.params.assign(chunks, agqc::initial_params(cfg_.init_width, cfg_.init_scale, guard_));
  if (round > 0) {
    // Everything below depends only on the previous aggregate, which every
    // worker decoded from the same result bits: all workers choose alike.
    const double n = job.num_workers;
    double tensor_max = 0;
    for (float v : lw.prev) tensor_max = std::max(tensor_max, std::fabs(double(v)) / n);
    for (uint64_t c = 0; c < chunks; ++c) {
      double m = 0;
      for (int k = 0; k < kAgqLanes; ++k) m = std::max(m, std::fabs(double(lw.prev[c * kAgqLanes + k])) / n);
      lw.params[c] = agqc::choose_params(m, tensor_max, cfg_.error_budget, cfg_.margin, guard_);
    }
  }
  lw.ready.clear();
  // Slots in the order of their first chunk, so low chunks go first.
  for (uint64_t c = 0; c < std::min<uint64_t>(chunks, job.slots); ++c) {
    const uint32_t s = job.slot_of(round, c);
    Slot& sl = lw.slots[s];
    sl.chunk = c;
    sl.st = St::Ready;
    sl.p = lw.params[c];
    sl.redos = 0;
    lw.ready.push_back(s);
  }
  if (&lw == &lws_[0]) grads_->release_before(round > 0 ? round - 1 : 0);
}

bool AgqWorkerEngine::send(Logical& lw, uint32_t s, bool retransmit, TxSink& tx) {
  Slot& sl = lw.slots[s];
  proto::Agq h;
  h.type = proto::AgqType::Data;
  h.job_id = cfg_.job.job_id;
  h.worker_id = uint8_t(lw.id);
  h.num_workers = cfg_.job.num_workers;
  h.slot = uint16_t(s);
  h.seq = uint32_t(cfg_.job.global(lw.round, sl.chunk));
  h.req_width = uint8_t(sl.p.width);
  h.exponent = int8_t(sl.p.exponent);
  bool clipped = false;
  h.lanes = grads_->encode(lw.id, lw.round, sl.chunk, sl.p, clipped);
  h.flags = uint8_t((sl.uses & 1) ? proto::kAgqFlagVersion : 0);
  if (retransmit) h.flags |= proto::kAgqFlagRetransmit;
  if (clipped) h.flags |= proto::kAgqFlagOverflow;
  uint8_t buf[kAgqDataFrameLen];
  lw.frame->write(h, buf);
  if (!tx.send(lw.port, buf)) {
    ++counters_.tx_refused;
    return false;
  }
  ++counters_.tx_pkts;
  return true;
}

unsigned AgqWorkerEngine::tick(uint64_t now_ns, TxSink& tx) {
  if (!start_ns_) start_ns_ = last_timer_scan_ = now_ns;
  unsigned sent = 0;
  const uint32_t window = cfg_.job.max_outstanding();
  for (auto& lw : lws_) {
    for (unsigned b = 0; b < cfg_.burst && !lw.ready.empty() && lw.in_flight < window; ++b) {
      const uint32_t s = lw.ready.front();
      if (!send(lw, s, false, tx)) break;
      lw.ready.pop_front();
      Slot& sl = lw.slots[s];
      sl.st = St::Sent;
      sl.tries = 0;
      sl.rto = cfg_.rto_ns;
      sl.deadline = now_ns + sl.rto;
      ++lw.in_flight;
      ++sent;
      if (!first_send_ns_) first_send_ns_ = now_ns;
    }
  }
  // Timers: scanned every millisecond (RTOs are tens of ms), cheap for
  // thousands of slots.
  if (now_ns - last_timer_scan_ >= 1'000'000ull) {
    last_timer_scan_ = now_ns;
    check_timers(now_ns, tx);
  }
  if (!got_reply_ && first_send_ns_ && now_ns - first_send_ns_ > cfg_.reply_timeout_ns) {
    char b[512];
    std::snprintf(b, sizeof b,
                  "no reply from the switch after %.1f s: is agq-switch running the agq pipeline with job %u "
                  "registered (N=%u, slots>=%u) and this worker's port/MAC/IPv4 in it?",
                  double(now_ns - first_send_ns_) * 1e-9, cfg_.job.job_id, cfg_.job.num_workers, cfg_.job.slots);
    fail(b);
  }
  finished_ = std::all_of(lws_.begin(), lws_.end(), [](const Logical& l) { return l.done; });
  return sent;
}

void AgqWorkerEngine::check_timers(uint64_t now_ns, TxSink& tx) {
  for (auto& lw : lws_) {
    if (!lw.in_flight) continue;
    for (uint32_t s = 0; s < lw.slots.size(); ++s) {
      Slot& sl = lw.slots[s];
      if (sl.st != St::Sent || now_ns < sl.deadline) continue;
      if (sl.tries >= cfg_.max_retries) {
        char b[512];
        std::snprintf(b, sizeof b,
                      "worker %u: slot %u (round %u chunk %" PRIu64 ", version %u) got no RESULT after %u "
                      "retransmissions: the switch or the PS (fallback) does not answer",
                      lw.id, s, lw.round, sl.chunk, sl.uses & 1, sl.tries);
        fail(b);
        return;
      }
      if (!send(lw, s, true, tx)) return;  // TX full: try again on the next scan
      ++sl.tries;
      ++stats_.retransmissions;
      ++counters_.retransmissions;
      stats_.max_retries_seen = std::max<uint64_t>(stats_.max_retries_seen, sl.tries);
      sl.rto = std::min(sl.rto * 2, cfg_.rto_max_ns);
      sl.deadline = now_ns + sl.rto;
    }
  }
}

void AgqWorkerEngine::on_frame(uint16_t, std::span<const uint8_t> frame, uint64_t now_ns) {
  ++counters_.rx_pkts;
  const auto h = parse_agq(frame);
  if (!h) {
    ++counters_.other;
    return;
  }
  if (h->type != proto::AgqType::Result || h->job_id != cfg_.job.job_id) {
    ++counters_.foreign;
    return;
  }
  for (auto& lw : lws_)
    if (lw.id == h->worker_id) {
      on_result(lw, *h, now_ns);
      return;
    }
  ++counters_.foreign;
}

void AgqWorkerEngine::on_result(Logical& lw, const proto::Agq& h, uint64_t now_ns) {
  const AgqJobSpec& job = cfg_.job;
  got_reply_ = true;
  if (h.slot >= job.slots || lw.done) {
    ++counters_.stale;
    return;
  }
  Slot& sl = lw.slots[h.slot];
  // (seq, version) alone is not unique: OVERFLOW redos of one chunk reuse
  // its seq on alternating versions, each with a larger exponent.
  const bool current = sl.st == St::Sent && h.version_bit() == (sl.uses & 1) &&
                       h.seq == uint32_t(job.global(lw.round, sl.chunk)) && h.exponent == sl.p.exponent;
  if (!current) {
    // The RESULT of a use we already hold (a multicast and a unicast resend
    // both arrived, or a late copy): harmless.
    ++stats_.duplicate_results;
    ++counters_.stale;
    return;
  }
  const bool fallback = h.flags & proto::kAgqFlagFallback;
  // FALLBACK = handed out by the PS: its own sums are at d = 0 (width = R,
  // or 0 = "the request"); with delivery = ps it hands back the switch's
  // result, whose width and pos are the switch's grant.
  const int width = fallback && h.width == 0 ? sl.p.width : h.width;
  if (width > sl.p.width || width % 4 || width - guard_ < 2 || (!fallback && h.pos + width / 4 > 8) ||
      h.guard != guard_ || h.req_width != sl.p.width) {
    ++stats_.bad_header;
    ++counters_.malformed;
    if (stats_.bad_header <= cfg_.max_print)
      std::fprintf(cfg_.log,
                   "BAD RESULT worker %u slot %u seq %u: width %u pos %u guard %u exp %d req %u (sent req %d exp %d, "
                   "guard %d)\n",
                   lw.id, h.slot, h.seq, h.width, h.pos, h.guard, h.exponent, h.req_width, sl.p.width,
                   sl.p.exponent, guard_);
    return;  // not decodable: the timer resends and the switch answers again
  }
  last_result_ns_ = now_ns;
  ++stats_.results;
  if (fallback) ++stats_.fallbacks;
  const bool overflow = h.flags & proto::kAgqFlagOverflow;
  const bool redo = overflow && sl.redos < cfg_.max_redos;
  const bool first_lw = &lw == &lws_[0];
  AgqLanes got;
  std::copy(h.lanes.begin(), h.lanes.end(), got.begin());
  AgqCheck ck;
  if (cfg_.verify) {
    // The error of a result we will redo says nothing: measure only final ones.
    ck = verifier_->check(lw.round, sl.chunk, sl.p, width, got, stats_.error, first_lw && !redo);
    if (ck.exact) {
      ++stats_.exact;
    } else {
      ++stats_.mismatches;
      ++counters_.errors;
      if (stats_.mismatches <= cfg_.max_print)
        std::fprintf(cfg_.log,
                     "MISMATCH worker %u round %u chunk %" PRIu64 " slot %u v%u: R %d W %d pos %u e %d%s lane %d "
                     "got 0x%08x expected 0x%08x\n",
                     lw.id, lw.round, sl.chunk, h.slot, sl.uses & 1, sl.p.width, width, h.pos, sl.p.exponent,
                     fallback ? " (fallback)" : "", ck.bad_lane, got[ck.bad_lane], ck.expected[ck.bad_lane]);
    }
  } else {
    for (int k = 0; k < kAgqLanes; ++k)
      ck.decoded[k] = agqc::decode_sum(got[k], job.num_workers, width, guard_, sl.p.exponent, sl.p.width - width);
  }
  if (first_lw) {
    ++stats_.seqs;
    stats_.req_bits_sum += sl.p.width;
    ++stats_.req_hist[sl.p.width / 4];
    if (!fallback) {
      ++stats_.seqs_aggregated;
      stats_.granted_bits_sum += width;
      ++stats_.granted_hist[width / 4];
      if (lw.round < stats_.round_seqs.size()) {
        ++stats_.round_seqs[lw.round];
        stats_.round_granted_sum[lw.round] += width;
      }
    }
    account_memory(lw, h.slot, fallback ? 0 : width, h.pos);
    if (overflow) ++stats_.overflow_results;
  }
  --lw.in_flight;
  ++sl.uses;
  sl.st = St::Idle;
  if (redo) {
    if (first_lw) ++stats_.redos;
    ++sl.redos;
    sl.p.exponent = std::min(sl.p.exponent + 2, agqc::kMaxExponent);
    sl.st = St::Ready;
    lw.ready.push_front(h.slot);  // the redo holds up its round: send it first
    return;
  }
  for (int k = 0; k < kAgqLanes; ++k) lw.cur[sl.chunk * kAgqLanes + k] = float(ck.decoded[k]);
  ++counters_.chunks_done;
  --lw.left;
  const uint64_t next = sl.chunk + job.slots;
  if (next < job.chunks()) {
    sl.chunk = next;
    sl.p = lw.params[next];
    sl.redos = 0;
    sl.st = St::Ready;
    lw.ready.push_back(h.slot);
  }
  if (lw.left == 0) {
    if (first_lw) ++stats_.rounds_done;
    std::swap(lw.prev, lw.cur);
    lw.cur.assign(job.chunks() * kAgqLanes, 0.0f);
    if (lw.round + 1 < job.rounds)
      start_round(lw, lw.round + 1);
    else
      lw.done = true;
  }
}

void AgqWorkerEngine::account_memory(const Logical& lw, uint32_t slot, int width, int) {
  const uint32_t spr = cfg_.job.slots_per_row();
  const unsigned v = lw.slots[slot].uses & 1;
  window_of_[slot][v] = uint8_t(width);
  if (!spr) return;
  // Windows of the row's slots in this half as last reported: a slot keeps
  // its window until its next use of the same version starts, so this counts
  // the sequences sharing the row's cells (an estimate: a newer use may have
  // moved since).
  const uint32_t row = slot / spr;
  uint64_t seqs = 0, bits = 0;
  for (uint32_t s = row * spr; s < (row + 1) * spr && s < window_of_.size(); ++s)
    if (window_of_[s][v]) {
      ++seqs;
      bits += window_of_[s][v];
    }
  ++stats_.row_samples;
  stats_.row_seqs_sum += seqs;
  stats_.row_bits_sum += bits;
  stats_.row_seqs_max = std::max(stats_.row_seqs_max, seqs);
  stats_.row_bits_max = std::max(stats_.row_bits_max, bits);
}

}  // namespace agq::worker
