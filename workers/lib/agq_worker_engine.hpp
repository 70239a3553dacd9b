// agq-worker's synthetic-gradient job on the allreduce engine: every
// logical worker of the process runs `rounds` ops of one tensor key on
// buffers generated once up front (round r's widths come from round r-1's
// aggregate, inside the engine), one round after the other. Verification
// (--verify all | sample:K | off) runs once per process, on the first
// logical worker's results, against the scalar reference (AgqVerifier).
//
// Several lcores: one AgqWorkerEngine per lcore (part j of parts, its own
// queue and FrameIo), all sharing one AgqRounds: the ops of every round are
// made once, before the lcores start, and each part submits the same op on
// its own thread (the engine serves the op's chunks of the slots it owns;
// the op completes when its last part is done).
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lib/agq_codec.hpp"
#include "lib/agq_job.hpp"
#include "lib/agq_verifier.hpp"
#include "lib/allreduce_engine.hpp"
#include "lib/buffer_frame_io.hpp"
#include "lib/stats.hpp"
#include "lib/tx_sink.hpp"

namespace agq::worker {

struct AgqWorkerConfig {
  AgqJobSpec job;
  uint8_t lanes = 32;            // lane profile
  uint8_t row_shift = 0;         // for the shard in the UDP source port (0: from job.rows)
  uint8_t max_width = 32;
  uint16_t switch_lcores = 1;    // the switch's dataplane lcores (RACK keeps one order per lcore)
  std::string source = "normal";
  uint64_t seed = 1;
  std::vector<unsigned> ids{0};
  std::vector<uint16_t> ports{0};
  std::vector<WorkerIdentity> identities;  // optional: from the switch (else defaults)
  std::vector<std::string> port_names;
  int init_width = 16;
  double init_scale = 4.0;      // round 0: |x| up to this is not clipped
  double error_budget = 1e-3;   // quantization step <= budget * max|aggregate/N| of the tensor
  double margin = 2.0;          // headroom over last round's chunk max before clipping
  uint64_t rto_ns = 20'000'000ull;      // before the first RTT sample
  uint64_t rto_min_ns = 2'000'000ull;
  uint64_t reo_min_ns = 200'000ull;  // AllreduceTuning::reo_min_ns
  uint64_t rto_max_ns = 640'000'000ull;
  unsigned max_retries = 25;
  uint64_t retry_time_ns = 5'000'000'000ull;  // AllreduceTuning::retry_time_ns
  unsigned max_redos = 8;       // OVERFLOW redos per chunk before accepting the clipped result
  uint64_t reply_timeout_ns = 5'000'000'000ull;
  unsigned burst = 32;
  uint64_t away_ns = 0;  // AllreduceTuning::away_ns
  int min_width_slack = 0;      // AllreduceTuning::min_width_slack
  int fixed_width = 0;          // AllreduceTuning::fixed_width (0: adaptive)
  bool error_feedback = false;  // AllreduceTuning::error_feedback (needs verify_every = 0)
  uint32_t verify_every = 1;    // 1 = all, K = one chunk in K, 0 = off
  bool barrier = false;         // a one-chunk op first: every worker is there when round 0 starts
  unsigned part = 0, parts = 1, queues = 1;  // slot partition of this engine (lcores)
  unsigned max_print = 5;
  FILE* log = stderr;
};

// What one process measured; memory figures come from its first logical
// worker only (every worker of a job sees the same results).
struct AgqStats {
  uint64_t results = 0;             // RESULTs accepted (all logical workers)
  uint64_t checked = 0, exact = 0, mismatches = 0, bad_header = 0;
  uint64_t fallbacks = 0;           // results computed by the PS (FALLBACK)
  uint64_t overflow_results = 0, redos = 0;
  uint64_t retransmissions = 0;     // DATA resent on RTO expiry
  uint64_t max_retries_seen = 0;
  uint64_t duplicate_results = 0;   // a RESULT for a use already completed (multicast + resend)
  uint64_t rounds_done = 0;
  // Memory (first logical worker):
  uint64_t seqs = 0, seqs_aggregated = 0;
  uint64_t req_bits_sum = 0, granted_bits_sum = 0;
  std::array<uint64_t, 9> req_hist{}, granted_hist{};  // index width/4
  uint64_t row_samples = 0, row_seqs_sum = 0, row_seqs_max = 0, row_bits_sum = 0, row_bits_max = 0;
  std::vector<uint64_t> round_granted_sum, round_seqs;  // per round: adaptive width made visible
  ErrorStats error;
  double error_bound = 0;           // largest per-element bound of a final result

  double avg_granted_bits() const { return seqs_aggregated ? double(granted_bits_sum) / double(seqs_aggregated) : 0; }
  // Another part's (lcore's) figures: sums, maxima; rounds_done is the same in every part.
  void add(const AgqStats& o);
  double avg_req_bits() const { return seqs ? double(req_bits_sum) / double(seqs) : 0; }
};

inline constexpr uint64_t kBarrierKey = ~uint64_t(0);

// The ops of a process's job, shared by its parts: per logical worker a
// one-chunk barrier op (every worker is there before round 0 starts) and
// one op per round, linked round to round (adaptive widths); round r
// writes output buffer r mod 2 (round r+1 starts after round r completes).
struct AgqRounds {
  struct Logical {
    OpPtr barrier;
    std::vector<OpPtr> rounds;
    std::array<std::vector<float>, 2> out;
    float barrier_in = 0, barrier_out = 0;
  };
  std::vector<Logical> lws;
  static std::shared_ptr<AgqRounds> make(const AgqWorkerConfig& cfg, const AgqGradients& grads);
};

class AgqWorkerEngine final : private ChunkObserver {
 public:
  // io: where frames go (the DPDK mbuf io); null = an internal buffer io
  // that copies frames to the TxSink given to tick(). grads and rounds:
  // shared by the engines of a multi-part process (null = built here).
  bool init(const AgqWorkerConfig& cfg, std::string& err, FrameIo* io = nullptr,
            std::shared_ptr<const AgqGradients> grads = nullptr, std::shared_ptr<AgqRounds> rounds = nullptr);
  // Gradients as this config needs them (every worker's when verifying).
  static std::shared_ptr<const AgqGradients> make_gradients(const AgqWorkerConfig& cfg, std::string& err);
  // Frame in; returns the buffer the io may adopt it for (see AllreduceEngine::on_frame).
  int on_frame(uint16_t port, std::span<const uint8_t> frame, uint64_t now_ns);
  unsigned tick(uint64_t now_ns, TxSink& tx);  // with the internal buffer io
  unsigned tick(uint64_t now_ns, bool timers = true);  // with an external io (timers: rx drained)
  void on_link(bool up, uint64_t now_ns) { eng_.on_link(up, now_ns); }

  bool finished() const { return finished_; }
  bool failed() const { return eng_.failed(); }
  const std::string& diagnostic() const { return eng_.diagnostic(); }
  uint64_t outstanding() const { return eng_.outstanding(); }
  uint64_t elements_done() const { return eng_.counters().chunks_done * cfg_.lanes; }
  const Counters& counters() const { return eng_.counters(); }
  const AgqStats& stats();
  const EngineStats& engine_stats() const { return eng_.stats(); }
  AllreduceEngine& engine() { return eng_; }
  int failure_code() const { return eng_.got_reply() ? 4 : 3; }
  uint64_t first_send_ns() const { return eng_.first_send_ns(); }
  // When round 0 started (after the barrier op, if any): the throughput clock's start.
  uint64_t start_ns() const { return start_ns_ ? start_ns_ : eng_.first_send_ns(); }
  uint64_t last_result_ns() const { return eng_.last_result_ns(); }
  // The decoded aggregate of the last round of logical worker i (once finished).
  const std::vector<float>& aggregate(size_t i = 0) const {
    return rounds_->lws[i].out[(cfg_.job.rounds + 1) % 2];
  }
  static AllreduceJob engine_job(const AgqWorkerConfig& cfg);

 private:
  struct Logical {
    unsigned id;
    uint32_t round = 0;
    bool done = false;
  };
  void on_chunk(const ChunkResult& r) override;
  void advance(uint64_t now_ns);
  void account_memory(uint32_t slot, unsigned version, int width);

  AgqWorkerConfig cfg_;
  AllreduceEngine eng_;
  std::unique_ptr<BufferFrameIo> own_io_;
  std::shared_ptr<const AgqGradients> grads_;
  std::shared_ptr<AgqRounds> rounds_;
  std::unique_ptr<AgqVerifier> verifier_;
  std::vector<Logical> lws_;
  std::vector<std::array<uint8_t, 2>> window_of_;  // first logical worker: last granted width per (slot, v)
  AgqStats stats_;
  bool finished_ = false, barrier_done_ = true;
  uint64_t start_ns_ = 0;
};

}  // namespace agq::worker
