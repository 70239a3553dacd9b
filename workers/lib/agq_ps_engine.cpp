#include "lib/agq_ps_engine.hpp"

namespace agq::worker {

bool AgqPsEngine::init(const AgqPsConfig& cfg, std::string& err) {
  cfg_ = cfg;
  if (err = cfg.job.validate(); !err.empty()) return false;
  guard_ = agqc::guard_bits(cfg.job.num_workers);
  if (cfg.lanes != 32 && cfg.lanes != 16) {
    err = "lanes must be 32 or 16";
    return false;
  }
  const Endpoint ps = cfg.have_self ? cfg.self : agq_ps_endpoint(cfg.job.job_id);
  // PS_RESULTs go to the switch, which multicasts them to the job (its PRE
  // group and per-replica rewrite decide the real destinations): address
  // them to the job's broadcast, the natural "every worker" address.
  Endpoint all{{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, ps.ip | 0xFF};
  frame_ = std::make_unique<FrameTemplate>(agq_frame_template(ps, all, cfg.lanes));
  seqs_.assign(size_t(cfg.job.slots) * 2, Seq{});
  return true;
}

void AgqPsEngine::on_frame(uint16_t, std::span<const uint8_t> frame, uint64_t) {
  ++counters_.rx_pkts;
  const auto h = parse_agq(frame);
  if (!h) {
    ++counters_.other;
    return;
  }
  if (h->job_id != cfg_.job.job_id) {
    ++counters_.foreign;
    return;
  }
  if (h->type == proto::AgqType::FallbackData) {
    on_fallback(*h);
  } else if (h->type == proto::AgqType::Result) {
    proto::Agq r = *h;  // delivery = ps: hand the switch's result back for the workers
    r.type = proto::AgqType::PsResult;
    txq_.push_back(r);
    ++stats_.relayed;
  } else {
    ++counters_.foreign;
  }
}

// The width byte of a FALLBACK_DATA is the worker's min_width (PROTOCOL.md
// §1), or 0 where the switch cleared it. The PS sums at d = 0, a grant of R
// that honours any min_width, so the value only has to be one a worker may
// send: a multiple of 4 in min_width(g)..R (the switch drops any other DATA).
bool AgqPsEngine::min_width_ok(int min_width, int req_width) const {
  return min_width == 0 || (min_width % 4 == 0 && min_width >= agqc::min_width(guard_) && min_width <= req_width);
}

void AgqPsEngine::on_fallback(const proto::Agq& h) {
  ++stats_.fallback_data;
  const AgqJobSpec& job = cfg_.job;
  const int r = h.req_width;
  if (h.slot >= job.slots || h.worker_id >= job.num_workers || h.num_workers != job.num_workers ||
      r < agqc::kMinWidth || r > agqc::kMaxWidth || r % 4 || !min_width_ok(h.width, r)) {
    ++stats_.bad;
    ++counters_.malformed;
    return;
  }
  Seq& s = seqs_[size_t(h.slot) * 2 + h.version_bit()];
  if (!s.valid || s.seq != h.seq || h.exponent != s.first.exponent) {
    // A new use of (slot, v): every worker has moved past the old one (it
    // sent (slot, 1-v) first), so the kept result is no longer needed. An
    // OVERFLOW redo keeps the chunk's seq but raises the exponent, so the
    // exponent tells its uses apart.
    if (s.valid && !s.complete) --pending_;
    s = Seq{};
    s.valid = true;
    s.seq = h.seq;
    s.first = h;
    ++pending_;
  } else if (h.req_width != s.first.req_width) {
    ++stats_.bad;  // workers must agree on (R, e) of a sequence
    ++counters_.malformed;
    return;
  }
  const uint32_t bit = 1u << h.worker_id;
  if (s.bitmap & bit) {
    if (s.complete) {
      ++stats_.resent;  // its RESULT was lost on the way to that worker
      queue_result(s, h.worker_id);
    } else {
      ++stats_.duplicates;
      ++counters_.duplicates;
    }
    return;
  }
  s.bitmap |= bit;
  ++s.count;
  s.overflow |= (h.flags & proto::kAgqFlagOverflow) != 0;
  // d = 0: the contributions are added as sent; N * 2^(R-g) <= 2^R fits 32 bits.
  for (unsigned k = 0; k < cfg_.lanes; ++k) s.sum[k] += h.lanes[k] & uint32_t((uint64_t(1) << (r - guard_)) - 1);
  if (s.count == job.num_workers) {
    s.complete = true;
    --pending_;
    ++stats_.sequences;
    ++counters_.chunks_done;
    if (s.overflow) ++stats_.overflow;
    ++stats_.ps_results;
    queue_result(s, -1);
  }
}

void AgqPsEngine::queue_result(const Seq& s, int to_worker) {
  proto::Agq r = s.first;
  r.type = proto::AgqType::PsResult;
  r.flags = uint8_t(s.first.version_bit() | proto::kAgqFlagFallback | (s.overflow ? proto::kAgqFlagOverflow : 0) |
                    (to_worker >= 0 ? proto::kAgqFlagRetransmit : 0));
  r.worker_id = uint8_t(to_worker >= 0 ? to_worker : 0);
  r.width = r.req_width;  // summed at d = 0
  r.pos = 0;
  r.guard = uint8_t(guard_);
  for (int k = 0; k < kAgqLanes; ++k) r.lanes[k] = uint32_t(s.sum[k]);
  txq_.push_back(r);
}

unsigned AgqPsEngine::tick(uint64_t, TxSink& tx) {
  unsigned sent = 0;
  uint8_t buf[kAgqDataFrameLen];
  while (!txq_.empty()) {
    // The slot's shard in the source port, as the workers' DATA carry it.
    const uint32_t shard = (uint32_t(cfg_.job.job_id) + (uint32_t(txq_.front().slot) >> cfg_.row_shift)) & 0x0FFF;
    frame_->write(txq_.front(), buf, agq_shard_port(shard));
    if (!tx.send(cfg_.port, std::span<const uint8_t>(buf, frame_->frame_len()))) {
      ++counters_.tx_refused;
      break;
    }
    txq_.pop_front();
    ++counters_.tx_pkts;
    ++counters_.acks;
    ++sent;
  }
  return sent;
}

}  // namespace agq::worker
