#include "lib/agq_worker_engine.hpp"

#include <algorithm>
#include <cinttypes>

namespace agq::worker {

AllreduceJob AgqWorkerEngine::engine_job(const AgqWorkerConfig& cfg) {
  AllreduceJob j;
  j.job_id = cfg.job.job_id;
  j.num_workers = cfg.job.num_workers;
  j.slots = cfg.job.slots;
  j.window = cfg.job.window;
  j.lanes = cfg.lanes;
  j.row_shift = cfg.row_shift ? cfg.row_shift : AllreduceJob::row_shift_for(cfg.job.slots, cfg.job.rows);
  j.max_width = cfg.max_width;
  return j;
}

bool AgqWorkerEngine::init(const AgqWorkerConfig& cfg, std::string& err, FrameIo* io,
                           std::shared_ptr<const AgqGradients> grads) {
  cfg_ = cfg;
  if (err = cfg.job.validate(); !err.empty()) return false;
  if (cfg.ids.empty() || cfg.ids.size() != cfg.ports.size()) {
    err = "one port per logical worker id";
    return false;
  }
  EngineConfig ec;
  ec.job = engine_job(cfg);
  AllreduceTuning& t = ec.tuning;
  t.init_width = cfg.init_width;
  t.init_scale = cfg.init_scale;
  t.error_budget = cfg.error_budget;
  t.margin = cfg.margin;
  t.rto_init_ns = cfg.rto_ns;
  t.rto_min_ns = std::min(cfg.rto_min_ns, cfg.rto_max_ns);
  t.rto_max_ns = cfg.rto_max_ns;
  t.max_retries = cfg.max_retries;
  t.max_redos = cfg.max_redos;
  t.reply_timeout_ns = cfg.reply_timeout_ns;
  t.burst = cfg.burst;
  ec.part = cfg.part;
  ec.parts = cfg.parts;
  ec.queues = cfg.queues;
  ec.workers.clear();
  for (size_t i = 0; i < cfg.ids.size(); ++i) {
    WorkerIdentity w = WorkerIdentity::defaults(cfg.job.job_id, cfg.ids[i], cfg.ports[i]);
    for (const auto& x : cfg.identities)
      if (x.id == cfg.ids[i]) w = x, w.port = cfg.ports[i];
    ec.workers.push_back(w);
  }
  if (!io) {
    own_io_ = std::make_unique<BufferFrameIo>(uint32_t(ec.workers.size()) * ec.job.slots, agq_frame_len(ec.job.lanes));
    io = own_io_.get();
  }
  if (!eng_.init(ec, *io, err)) return false;
  if (grads) {
    grads_ = std::move(grads);
  } else {
    // Our own workers' tensors always; everyone's when results are checked.
    auto g = std::make_shared<AgqGradients>();
    if (!g->init(cfg.job, cfg.source, cfg.seed, cfg.verify_every ? std::vector<unsigned>{} : cfg.ids, err))
      return false;
    grads_ = std::move(g);
  }
  if (cfg.verify_every) verifier_ = std::make_unique<AgqVerifier>(*grads_, cfg.job, cfg.lanes);
  eng_.set_observer(this);
  lws_.clear();
  for (unsigned id : cfg.ids) {
    Logical lw;
    lw.id = id;
    lw.cur.assign(cfg.job.elements, 0.0f);
    lws_.push_back(std::move(lw));
  }
  window_of_.assign(cfg.job.slots, {0, 0});
  stats_.round_granted_sum.assign(cfg.job.rounds, 0);
  stats_.round_seqs.assign(cfg.job.rounds, 0);
  if (cfg.barrier) {
    // One chunk per logical worker that completes only when all N workers
    // sent it: round 0 then starts with every process running.
    barrier_done_ = false;
    barrier_in_.assign(lws_.size(), 0.0f);
    barrier_out_.assign(lws_.size(), 0.0f);
    auto left = std::make_shared<size_t>(lws_.size());
    for (size_t i = 0; i < lws_.size(); ++i) {
      auto op = make_op(kBarrierKey, std::span<const float>(&barrier_in_[i], 1), std::span<float>(&barrier_out_[i], 1),
                        [this, left](AllreduceOp&) {
                          if (--*left == 0) barrier_done_ = true;
                        },
                        unsigned(i), cfg.parts);
      prepare_op(op, std::make_shared<TensorState>(), cfg.lanes);
      eng_.submit(op);
    }
  } else {
    for (size_t i = 0; i < lws_.size(); ++i) start_round(i);
  }
  return true;
}

void AgqWorkerEngine::start_round(size_t i) {
  Logical& lw = lws_[i];
  lw.round_done = false;
  const std::vector<float>& in = grads_->tensor(lw.id, lw.round);
  auto op = make_op(0, in, lw.cur, [this, i](AllreduceOp&) { lws_[i].round_done = true; }, unsigned(i), cfg_.parts);
  prepare_op(op, lw.state, cfg_.lanes);
  eng_.submit(op);
}

// Rounds are barriers per logical worker: round r+1 starts once it holds
// every result of round r (its widths are chosen from that aggregate).
void AgqWorkerEngine::advance(uint64_t now_ns) {
  if (!barrier_done_) return;
  if (!start_ns_) {
    start_ns_ = now_ns;
    if (cfg_.barrier)
      for (size_t i = 0; i < lws_.size(); ++i) start_round(i);
  }
  bool all = true;
  for (size_t i = 0; i < lws_.size(); ++i) {
    Logical& lw = lws_[i];
    if (lw.round_done && !lw.done) {
      if (i == 0) ++stats_.rounds_done;
      std::swap(lw.prev, lw.cur);
      if (lw.round + 1 < cfg_.job.rounds) {
        ++lw.round;
        lw.cur.assign(cfg_.job.elements, 0.0f);
        start_round(i);
      } else {
        lw.done = true;
      }
    }
    all &= lw.done;
  }
  finished_ = all;
}

unsigned AgqWorkerEngine::tick(uint64_t now_ns, TxSink& tx) {
  if (own_io_) own_io_->set_sink(&tx);
  return tick(now_ns);
}

unsigned AgqWorkerEngine::tick(uint64_t now_ns) {
  advance(now_ns);
  return eng_.tick(now_ns);
}

int AgqWorkerEngine::on_frame(uint16_t, std::span<const uint8_t> frame, uint64_t now_ns) {
  return eng_.on_frame(frame, now_ns);
}

const AgqStats& AgqWorkerEngine::stats() {
  stats_.bad_header = eng_.stats().bad_results;
  stats_.retransmissions = eng_.counters().retransmissions;
  stats_.duplicate_results = eng_.counters().stale;
  stats_.max_retries_seen = eng_.stats().max_retries_seen;
  return stats_;
}

void AgqWorkerEngine::on_chunk(const ChunkResult& r) {
  if (r.op->key == kBarrierKey) return;
  ++stats_.results;
  if (r.fallback) ++stats_.fallbacks;
  if (r.worker != 0) return;  // the process's other logical workers got the same result
  const uint32_t round = r.op->round;
  if (verifier_ && verify_chunk(r.global, cfg_.verify_every)) {
    ++stats_.checked;
    const AgqCheck ck =
        verifier_->check(round, r.chunk, r.p, r.width, r.result_be, r.sent_be, lws_[0].id, r.decoded, stats_.error);
    if (ck.exact) {
      ++stats_.exact;
    } else {
      ++stats_.mismatches;
      if (stats_.mismatches <= cfg_.max_print)
        std::fprintf(cfg_.log,
                     "MISMATCH worker %u round %u chunk %" PRIu64 " slot %u v%u: R %d W %d pos %d e %d%s lane %d "
                     "%s 0x%08x expected 0x%08x\n",
                     lws_[0].id, round, r.chunk, r.slot, r.version, r.p.width, r.width, r.pos, r.p.exponent,
                     r.fallback ? " (fallback)" : "", ck.bad_lane, ck.sent_ok ? "got" : "SENT", ck.got, ck.expected);
    }
  }
  ++stats_.seqs;
  stats_.req_bits_sum += unsigned(r.p.width);
  ++stats_.req_hist[r.p.width / 4];
  if (!r.fallback) {
    ++stats_.seqs_aggregated;
    stats_.granted_bits_sum += unsigned(r.width);
    ++stats_.granted_hist[r.width / 4];
    if (round < stats_.round_seqs.size()) {
      ++stats_.round_seqs[round];
      stats_.round_granted_sum[round] += unsigned(r.width);
    }
  }
  if (!r.redo) stats_.error_bound = std::max(stats_.error_bound, agqc::error_bound(cfg_.job.num_workers, r.p.exponent, r.p.width - r.width));
  account_memory(r.slot, r.version, r.fallback ? 0 : r.width);
  if (r.overflow) ++stats_.overflow_results;
  if (r.redo) ++stats_.redos;
}

void AgqWorkerEngine::account_memory(uint32_t slot, unsigned v, int width) {
  const uint32_t spr = cfg_.job.slots_per_row();
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
