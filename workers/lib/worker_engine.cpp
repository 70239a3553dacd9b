#include "lib/worker_engine.hpp"

#include <algorithm>
#include <cstdio>

#include "lib/verifier.hpp"

namespace agq::worker {

bool WorkerEngine::init(const WorkerConfig& cfg, std::string& err) {
  cfg_ = cfg;
  if (err = cfg.job.validate(); !err.empty()) return false;
  if (cfg.ids.empty() || cfg.ids.size() != cfg.ports.size()) {
    err = "every logical worker needs a port";
    return false;
  }
  quant_ = std::make_unique<Quantizer>(cfg.range, cfg.job.total_workers);
  const Endpoint ps = ps_endpoint(cfg.job.job_id);
  const uint64_t chunks = cfg.job.chunks();
  const uint32_t slots = uint32_t(std::min<uint64_t>(cfg.job.window, chunks));
  for (size_t i = 0; i < cfg.ids.size(); ++i) {
    if (cfg.ids[i] >= cfg.job.total_workers) {
      err = "worker id " + std::to_string(cfg.ids[i]) + " is not below --workers " +
            std::to_string(cfg.job.total_workers) + " (ids are 0..workers-1, the PS regenerates every id's gradient)";
      return false;
    }
    Logical lw;
    lw.id = cfg.ids[i];
    lw.port = cfg.ports[i];
    lw.source = make_source(cfg.source, cfg.seed, lw.id, cfg.job.elements, err);
    if (!lw.source) return false;
    lw.frame = std::make_unique<FrameTemplate>(classic_frame_template(worker_endpoint(cfg.job.job_id, lw.id), ps));
    lw.cur.assign(slots, kUnknown);
    lw.state.assign(slots, State::Unknown);
    lw.sent_ns.assign(slots, 0);
    lw.remaining = slots;
    if (!cfg.join)
      for (uint32_t s = 0; s < slots; ++s) {
        lw.cur[s] = s;
        lw.state[s] = State::Ready;
        lw.ready.push_back(s);
      }
    lws_.push_back(std::move(lw));
  }
  return true;
}

uint64_t WorkerEngine::outstanding() const {
  uint64_t n = 0;
  for (const auto& lw : lws_) n += uint64_t(std::count(lw.state.begin(), lw.state.end(), State::Sent));
  return n;
}

std::string WorkerEngine::port_name(uint16_t port) const {
  std::string n = std::to_string(port);
  if (port < cfg_.port_names.size() && !cfg_.port_names[port].empty()) n += " (" + cfg_.port_names[port] + ")";
  return n;
}

void WorkerEngine::on_frame(uint16_t port, std::span<const uint8_t> frame, uint64_t now_ns) {
  ++counters_.rx_pkts;
  const RxPacket rx = classify(frame);
  if (rx.type == RxPacket::Type::Other) {
    ++counters_.other;
    return;
  }
  const JobSpec& job = cfg_.job;
  if (rx.type == RxPacket::Type::Done) {
    if (rx.done_job != job.job_id) return;
    // The PS holds every aggregate: whatever ACK we missed, the job is over.
    by_announcement_ = !std::all_of(lws_.begin(), lws_.end(), [](const Logical& l) { return l.remaining == 0; });
    finished_ = true;
    return;
  }
  const auto& h = rx.agq;
  if (!rx.ours || h.is_ack == 0 || (h.job_and_seq >> 11) != job.job_id) {
    ++counters_.foreign;
    return;
  }
  const int64_t slot = job.slot_of_hash_id(h.hash_id);
  const uint64_t chunk = rx.chunk;
  if (slot < 0 || chunk >= job.chunks() || job.slot_of(chunk) != uint32_t(slot) ||
      job.job_and_seq(chunk) != h.job_and_seq || (rx.kind != Kind::Ack && rx.kind != Kind::Retry)) {
    ++counters_.malformed;
    return;
  }
  got_reply_ = true;
  if (rx.kind == Kind::Retry) ++counters_.retries;
  // The switch multicasts one copy per worker port: it is for every logical
  // worker behind that port.
  for (auto& lw : lws_)
    if (lw.port == port && uint32_t(slot) < lw.cur.size()) on_notice(lw, uint32_t(slot), chunk, rx.kind, now_ns);
}

void WorkerEngine::advance(Logical& lw, uint32_t slot, uint64_t next_chunk) {
  if (lw.state[slot] == State::Done) return;
  if (next_chunk >= cfg_.job.chunks()) {
    lw.state[slot] = State::Done;
    lw.cur[slot] = next_chunk;
    --lw.remaining;
    return;
  }
  const bool queued = lw.state[slot] == State::Ready;
  lw.cur[slot] = next_chunk;
  lw.state[slot] = State::Ready;
  if (!queued) lw.ready.push_back(slot);
}

void WorkerEngine::on_notice(Logical& lw, uint32_t slot, uint64_t chunk, Kind kind, uint64_t now_ns) {
  const uint64_t cur = lw.cur[slot];
  const uint32_t W = cfg_.job.window;
  if (kind == Kind::Ack) {
    if (cur == kUnknown || chunk > cur) {
      // Joining (or we missed notices): the slot is past `chunk`.
      advance(lw, slot, chunk + W);
    } else if (chunk == cur && lw.state[slot] != State::Done) {
      ++counters_.acks;
      ++counters_.chunks_done;
      last_progress_ns_ = now_ns;
      advance(lw, slot, chunk + W);
    } else {
      ++counters_.stale;
    }
    return;
  }
  // Retry: the PS released a stuck slot; contribute `chunk` (again).
  if (cur == kUnknown || chunk > cur) {
    if (cur != kUnknown && lw.state[slot] == State::Sent) {
      ++counters_.chunks_done;  // the retry for a later chunk implies ours completed
      last_progress_ns_ = now_ns;
    }
    advance(lw, slot, chunk);
  } else if (chunk == cur && lw.state[slot] == State::Sent) {
    ++counters_.retransmissions;
    advance(lw, slot, chunk);
  } else {
    ++counters_.stale;
  }
}

unsigned WorkerEngine::tick(uint64_t now_ns, TxSink& tx) {
  if (!start_ns_) start_ns_ = last_progress_ns_ = now_ns;
  unsigned sent = 0;
  uint8_t buf[kAgqFrameLen];
  const JobSpec& job = cfg_.job;
  for (auto& lw : lws_) {
    for (unsigned b = 0; b < cfg_.burst && !lw.ready.empty(); ++b) {
      const uint32_t slot = lw.ready.front();
      if (lw.state[slot] != State::Ready) {  // advanced past while queued
        lw.ready.pop_front();
        continue;
      }
      const uint64_t c = lw.cur[slot];
      Lanes lanes;
      for (int k = 0; k < kLanes; ++k) lanes[k] = quantized_element(*lw.source, *quant_, job, c * kLanes + k);
      const auto h = make_agq(job.job_and_seq(c), uint8_t(lw.id), job.total_workers, job.hash_id_of_slot(slot), 0,
                              c, Kind::Contribution, lanes);
      lw.frame->write(h, buf, classic_src_port(h));
      if (!tx.send(lw.port, buf)) {
        ++counters_.tx_refused;
        break;
      }
      lw.ready.pop_front();
      lw.state[slot] = State::Sent;
      lw.sent_ns[slot] = now_ns;
      ++counters_.tx_pkts;
      ++sent;
      if (!first_send_ns_) first_send_ns_ = now_ns;
    }
  }
  if (!finished_ && std::all_of(lws_.begin(), lws_.end(), [](const Logical& l) { return l.remaining == 0; }))
    finished_ = true;
  if (!finished_) check_timeouts(now_ns);
  return sent;
}

void WorkerEngine::check_timeouts(uint64_t now_ns) {
  if (!diagnostic_.empty()) return;
  char b[1024];
  const uint16_t port0 = lws_.front().port;
  if (!got_reply_ && !cfg_.join && first_send_ns_ && now_ns - first_send_ns_ > cfg_.reply_timeout_ns) {
    std::snprintf(b, sizeof b,
                  "no reply from the switch on port %s after %.1f s: check that agq-switch is running with this "
                  "port as a classic worker port (worker_ports), that the PS (agq-worker --role ps) runs on the "
                  "switch's ps_port with the same job flags, and that all %u workers (--workers) are sending",
                  port_name(port0).c_str(), double(now_ns - first_send_ns_) * 1e-9, cfg_.job.total_workers);
    diagnostic_ = b;
    return;
  }
  if ((got_reply_ || cfg_.join) && now_ns - last_progress_ns_ > cfg_.stall_timeout_ns) {
    // Name the oldest outstanding slot: that is what the user would inspect
    // (agqctl) first.
    const Logical* lw_old = nullptr;
    uint32_t s_old = 0;
    for (const auto& lw : lws_)
      for (uint32_t s = 0; s < lw.state.size(); ++s)
        if (lw.state[s] == State::Sent && (!lw_old || lw.sent_ns[s] < lw_old->sent_ns[s_old])) {
          lw_old = &lw;
          s_old = s;
        }
    std::string oldest = "no slot outstanding";
    if (lw_old) {
      std::snprintf(b, sizeof b, "oldest: worker %u slot %u chunk %llu hashID %u jobAndSeq 0x%04x, sent %.1f s ago",
                    lw_old->id, s_old, (unsigned long long)lw_old->cur[s_old], unsigned(cfg_.job.hash_id_of_slot(s_old)),
                    cfg_.job.job_and_seq(lw_old->cur[s_old]), double(now_ns - lw_old->sent_ns[s_old]) * 1e-9);
      oldest = b;
    }
    std::snprintf(b, sizeof b,
                  "no progress on port %s for %.1f s (%llu slots outstanding; %s): a contribution or an ACK was "
                  "lost and the PS did not release the slot (is agq-worker --role ps still running? are all %u "
                  "workers alive? a restarted worker needs --join)",
                  port_name(port0).c_str(), double(now_ns - last_progress_ns_) * 1e-9,
                  (unsigned long long)outstanding(), oldest.c_str(), cfg_.job.total_workers);
    diagnostic_ = b;
  }
}

}  // namespace agq::worker
