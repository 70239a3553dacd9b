#include "lib/ps_engine.hpp"

#include <cinttypes>
#include <cstdio>

namespace agq::worker {

bool PsEngine::init(const PsConfig& cfg, std::string& err) {
  cfg_ = cfg;
  if (err = cfg.job.validate(); !err.empty()) return false;
  if (!verifier_.init(cfg.job, cfg.source, cfg.seed, cfg.range, err)) return false;
  if (cfg.assume_fresh_switch) verifier_.assume_fresh();
  const Endpoint ps = ps_endpoint(cfg.job.job_id);
  // ACKs go to every worker (the switch multicasts them): broadcast addresses.
  frame_ = std::make_unique<FrameTemplate>(
      classic_frame_template(ps, Endpoint{proto::Mac{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, ps.ip | 0xFF}));
  const uint64_t slots = std::min<uint64_t>(cfg.job.window, cfg.job.chunks());
  expected_.resize(slots);
  for (uint64_t s = 0; s < slots; ++s) expected_[s] = s;
  last_ns_.assign(slots, 0);
  done_frame_ = build_done_frame(ps, cfg.job.job_id, cfg.job.chunks());
  if (cfg.record) recorded_.reserve(cfg.job.chunks());
  return true;
}

uint64_t PsEngine::outstanding() const {
  uint64_t n = 0;
  for (uint64_t c : expected_) n += c < cfg_.job.chunks();
  return n;
}

void PsEngine::queue_ack(uint64_t chunk, const Lanes& lanes, Kind kind) {
  const JobSpec& job = cfg_.job;
  txq_.push_back(make_agq(job.job_and_seq(chunk), 0xFF, job.total_workers, job.hash_id_of_slot(job.slot_of(chunk)),
                          1, chunk, kind, lanes));
}

void PsEngine::on_frame(uint16_t, std::span<const uint8_t> frame, uint64_t now_ns) {
  ++counters_.rx_pkts;
  const RxPacket rx = classify(frame);
  if (rx.type != RxPacket::Type::Agq) {
    ++counters_.other;
    return;
  }
  const auto& h = rx.agq;
  const JobSpec& job = cfg_.job;
  if (!rx.ours || h.is_ack != 0 || (h.job_and_seq >> 11) != job.job_id) {
    ++counters_.foreign;
    return;
  }
  const int64_t slot = job.slot_of_hash_id(h.hash_id);
  const uint64_t chunk = rx.chunk;
  if (slot < 0 || chunk >= job.chunks() || job.slot_of(chunk) != uint32_t(slot) ||
      job.job_and_seq(chunk) != h.job_and_seq) {
    ++counters_.malformed;
    return;
  }
  Lanes got;
  for (int k = 0; k < kLanes; ++k) got[k] = h.data[k];
  const uint64_t want = expected_[slot];
  if (chunk < want) {  // already recorded: the slot may still be held, ACK again
    ++counters_.duplicates;
    queue_ack(chunk, got, Kind::Ack);
    return;
  }
  if (chunk > want) {  // a chunk cannot complete before its predecessor in the slot was ACKed
    ++counters_.malformed;
    return;
  }
  record(chunk, h);
  expected_[slot] = chunk + job.window;
  last_ns_[slot] = now_ns;
  last_progress_ns_ = now_ns;
  queue_ack(chunk, got, Kind::Ack);
  if (counters_.chunks_done == job.chunks() && !done_ns_) done_ns_ = now_ns;
}

void PsEngine::record(uint64_t chunk, const proto::AgqClassic& h) {
  Lanes got;
  for (int k = 0; k < kLanes; ++k) got[k] = h.data[k];
  const VerifyResult r = verifier_.verify(chunk, got);
  ++counters_.chunks_done;
  if (cfg_.record) recorded_.push_back({chunk, got});
  if (r.check.verdict != Verdict::Mismatch) return;
  ++counters_.errors;
  if (counters_.errors > cfg_.max_print) return;
  const JobSpec& job = cfg_.job;
  const uint32_t slot = job.slot_of(chunk);
  std::fprintf(cfg_.log,
               "MISMATCH chunk %" PRIu64 " slot %u hashID %u jobAndSeq 0x%04x last worker %u:"
               " got [%08x %08x %08x %08x] expected [%08x %08x %08x %08x] (p %s)"
               " float sum [%.6g %.6g %.6g %.6g] dequantized [%.6g %.6g %.6g %.6g]\n",
               chunk, slot, job.hash_id_of_slot(slot), job.job_and_seq(chunk), h.worker_id, got[0], got[1], got[2],
               got[3], r.check.expected[0], r.check.expected[1], r.check.expected[2], r.check.expected[3],
               r.check.p >= 0 ? std::to_string(r.check.p).c_str() : "unknown", r.exact_sum[0], r.exact_sum[1],
               r.exact_sum[2], r.exact_sum[3], r.dequantized[0], r.dequantized[1], r.dequantized[2],
               r.dequantized[3]);
  if (counters_.errors == cfg_.max_print) std::fprintf(cfg_.log, "(further mismatches are counted, not printed)\n");
}

unsigned PsEngine::tick(uint64_t now_ns, TxSink& tx) {
  if (!start_ns_) {
    start_ns_ = last_progress_ns_ = last_retry_scan_ = now_ns;
    for (auto& t : last_ns_) t = now_ns;
  }
  unsigned sent = 0;
  uint8_t buf[kAgqFrameLen];
  while (!txq_.empty()) {
    frame_->write(txq_.front(), buf, classic_src_port(txq_.front()));
    if (!tx.send(cfg_.port, buf)) {
      ++counters_.tx_refused;
      break;
    }
    if ((txq_.front().data[5] & 0xFF) == uint8_t(Kind::Retry))
      ++counters_.retries;
    else
      ++counters_.acks;
    txq_.pop_front();
    ++counters_.tx_pkts;
    ++sent;
  }
  const JobSpec& job = cfg_.job;
  if (done_ns_) {
    // Announce the end a few times (a worker that joined late or missed ACKs
    // learns it is done), then stop.
    if (now_ns - last_done_tx_ > cfg_.linger_ns / 4 && tx.send(cfg_.port, done_frame_)) {
      last_done_tx_ = now_ns;
      ++counters_.tx_pkts;
    }
    if (now_ns - done_ns_ >= cfg_.linger_ns) finished_ = true;
    return sent;
  }
  // Retry scan, at most every 10 ms: cheap even with thousands of slots.
  if (now_ns - last_retry_scan_ > 10'000'000ull) {
    last_retry_scan_ = now_ns;
    for (uint32_t s = 0; s < expected_.size(); ++s) {
      if (expected_[s] >= job.chunks() || now_ns - last_ns_[s] < cfg_.retry_ns) continue;
      queue_ack(expected_[s], Lanes{}, Kind::Retry);
      verifier_.forget(expected_[s]);  // a released partial seq advanced the cursor unseen
      last_ns_[s] = now_ns;
    }
  }
  if (now_ns - last_progress_ns_ > cfg_.stall_timeout_ns && diagnostic_.empty()) {
    char b[768];
    std::snprintf(b, sizeof b,
                  "no aggregate from the switch on port %u%s for %.1f s (%" PRIu64 " of %" PRIu64
                  " chunks recorded): check that agq-switch runs with this port as its classic ps_port, that "
                  "all %u workers (--workers) run with the same job flags, and that nothing else uses hashIDs "
                  "%u..%u",
                  cfg_.port, cfg_.port_name.empty() ? "" : (" (" + cfg_.port_name + ")").c_str(),
                  double(now_ns - last_progress_ns_) * 1e-9, counters_.chunks_done, job.chunks(),
                  job.total_workers, job.hash_id_of_slot(0), job.hash_id_of_slot(uint32_t(expected_.size() - 1)));
    diagnostic_ = b;
  }
  return sent;
}

}  // namespace agq::worker
