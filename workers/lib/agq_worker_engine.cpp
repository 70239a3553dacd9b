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
  j.switch_lcores = cfg.switch_lcores;
  return j;
}

std::shared_ptr<AgqRounds> AgqRounds::make(const AgqWorkerConfig& cfg, const AgqGradients& grads) {
  auto r = std::make_shared<AgqRounds>();
  r->lws.resize(cfg.ids.size());
  for (size_t i = 0; i < cfg.ids.size(); ++i) {
    Logical& lw = r->lws[i];
    lw.barrier = make_op(kBarrierKey, std::span<const float>(&lw.barrier_in, 1), std::span<float>(&lw.barrier_out, 1),
                         {}, unsigned(i), cfg.parts);
    prepare_op(lw.barrier, std::make_shared<TensorState>(), cfg.lanes, cfg.error_feedback);
    lw.out[0].assign(cfg.job.elements, 0.0f);
    if (cfg.job.rounds > 1) lw.out[1].assign(cfg.job.elements, 0.0f);
    auto state = std::make_shared<TensorState>();
    for (uint32_t k = 0; k < cfg.job.rounds; ++k) {
      auto op = make_op(0, grads.tensor(cfg.ids[i], k), lw.out[k % 2], {}, unsigned(i), cfg.parts);
      prepare_op(op, state, cfg.lanes, cfg.error_feedback);
      lw.rounds.push_back(std::move(op));
    }
  }
  return r;
}

std::shared_ptr<const AgqGradients> AgqWorkerEngine::make_gradients(const AgqWorkerConfig& cfg, std::string& err) {
  // Our own workers' tensors always; everyone's when results are checked.
  auto g = std::make_shared<AgqGradients>();
  if (!g->init(cfg.job, cfg.source, cfg.seed, cfg.verify_every ? std::vector<unsigned>{} : cfg.ids, err))
    return nullptr;
  return g;
}

bool AgqWorkerEngine::init(const AgqWorkerConfig& cfg, std::string& err, FrameIo* io,
                           std::shared_ptr<const AgqGradients> grads, std::shared_ptr<AgqRounds> rounds) {
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
  t.reo_min_ns = cfg.reo_min_ns;
  t.max_retries = cfg.max_retries;
  t.retry_time_ns = cfg.retry_time_ns;
  t.max_redos = cfg.max_redos;
  t.reply_timeout_ns = cfg.reply_timeout_ns;
  t.burst = cfg.burst;
  t.away_ns = cfg.away_ns;
  t.min_width_slack = cfg.min_width_slack;
  t.fixed_width = cfg.fixed_width;
  t.error_feedback = cfg.error_feedback;
  if (cfg.error_feedback && cfg.verify_every) {
    err = "error feedback changes what every worker encodes (x + its residual), which the verifier's scalar "
          "reference does not model: --verify off with --error-feedback on";
    return false;
  }
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
  grads_ = grads ? std::move(grads) : make_gradients(cfg, err);
  if (!grads_) return false;
  rounds_ = rounds ? std::move(rounds) : AgqRounds::make(cfg, *grads_);
  if (rounds_->lws.size() != cfg.ids.size()) {
    err = "the shared rounds were made for another set of logical workers";
    return false;
  }
  if (cfg.verify_every) verifier_ = std::make_unique<AgqVerifier>(*grads_, cfg.job, cfg.lanes);
  eng_.set_observer(this);
  lws_.clear();
  for (unsigned id : cfg.ids) lws_.push_back(Logical{id});
  window_of_.assign(cfg.job.slots, {0, 0});
  stats_.round_granted_sum.assign(cfg.job.rounds, 0);
  stats_.round_seqs.assign(cfg.job.rounds, 0);
  if (cfg.barrier) {
    // One chunk per logical worker that completes only when all N workers
    // sent it: round 0 then starts with every process running.
    barrier_done_ = false;
    for (auto& lw : rounds_->lws) eng_.submit(lw.barrier);
  }
  return true;
}

// Rounds are barriers per logical worker: round r+1 starts once it holds
// every result of round r (its widths are chosen from that aggregate). The
// ops are shared with the other parts: completion is read, not signalled.
void AgqWorkerEngine::advance(uint64_t now_ns) {
  if (!barrier_done_) {
    for (auto& lw : rounds_->lws)
      if (!lw.barrier->complete.load(std::memory_order_acquire)) return;
    barrier_done_ = true;
  }
  if (!start_ns_) {
    start_ns_ = now_ns;
    for (size_t i = 0; i < lws_.size(); ++i) eng_.submit(rounds_->lws[i].rounds[0]);
  }
  bool all = true;
  for (size_t i = 0; i < lws_.size(); ++i) {
    Logical& lw = lws_[i];
    if (!lw.done && rounds_->lws[i].rounds[lw.round]->complete.load(std::memory_order_acquire)) {
      if (i == 0) ++stats_.rounds_done;
      if (lw.round + 1 < cfg_.job.rounds)
        eng_.submit(rounds_->lws[i].rounds[++lw.round]);
      else
        lw.done = true;
    }
    all &= lw.done;
  }
  finished_ = all;
}

unsigned AgqWorkerEngine::tick(uint64_t now_ns, TxSink& tx) {
  if (own_io_) own_io_->set_sink(&tx);
  return tick(now_ns);
}

unsigned AgqWorkerEngine::tick(uint64_t now_ns, bool timers) {
  advance(now_ns);
  return eng_.tick(now_ns, timers);
}

int AgqWorkerEngine::on_frame(uint16_t, std::span<const uint8_t> frame, uint64_t now_ns) {
  return eng_.on_frame(frame, now_ns);
}

void AgqStats::add(const AgqStats& o) {
  results += o.results;
  checked += o.checked;
  exact += o.exact;
  mismatches += o.mismatches;
  bad_header += o.bad_header;
  fallbacks += o.fallbacks;
  overflow_results += o.overflow_results;
  redos += o.redos;
  retransmissions += o.retransmissions;
  max_retries_seen = std::max(max_retries_seen, o.max_retries_seen);
  duplicate_results += o.duplicate_results;
  rounds_done = std::min(rounds_done, o.rounds_done);
  seqs += o.seqs;
  seqs_aggregated += o.seqs_aggregated;
  req_bits_sum += o.req_bits_sum;
  granted_bits_sum += o.granted_bits_sum;
  for (size_t i = 0; i < req_hist.size(); ++i) req_hist[i] += o.req_hist[i], granted_hist[i] += o.granted_hist[i];
  row_samples += o.row_samples;
  row_seqs_sum += o.row_seqs_sum;
  row_bits_sum += o.row_bits_sum;
  row_seqs_max = std::max(row_seqs_max, o.row_seqs_max);
  row_bits_max = std::max(row_bits_max, o.row_bits_max);
  for (size_t r = 0; r < round_seqs.size() && r < o.round_seqs.size(); ++r)
    round_seqs[r] += o.round_seqs[r], round_granted_sum[r] += o.round_granted_sum[r];
  error.elements += o.error.elements;
  error.clipped += o.error.clipped;
  error.max_abs = std::max(error.max_abs, o.error.max_abs);
  error.sum_sq += o.error.sum_sq;
  error.max_over_bound = std::max(error.max_over_bound, o.error.max_over_bound);
  error_bound = std::max(error_bound, o.error_bound);
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
      if (!ck.decode_ok && stats_.mismatches <= cfg_.max_print)
        std::fprintf(cfg_.log, "  decoded %.9g, the scalar decode of the result lane says %.9g\n", double(ck.decoded),
                     double(ck.reference));
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
