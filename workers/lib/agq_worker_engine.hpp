// The worker role of the agq protocol (docs/PROTOCOL.md §5) without DPDK:
// frames in, frames out, time injected. One engine drives every logical
// worker of a process; each is independent (its own slots, rounds, timers).
//
// Per logical worker and slot: the slot carries its chunks one at a time;
// the DATA of use k+1 (version (k+1) mod 2) leaves only after the RESULT of
// use k arrived (the switch may then reuse use k-1's window). At most
// `window` slots are in flight. Each in-flight slot has a timer: on expiry
// the same DATA is sent again with RETRANSMIT, the RTO doubles up to a cap,
// and after --max-retries the worker gives up with a diagnostic (no hang).
// The switch dedups by bitmap and answers a retransmission after completion
// with the kept RESULT, so retransmitting is always safe.
//
// Widths: round 0 uses --init-width/--init-scale; round r > 0 chooses R and e
// per chunk from round r-1's decoded aggregate (identical in every worker,
// so no round trip). Rounds are barriers: a logical worker starts round r+1
// when it holds every result of round r. A RESULT with OVERFLOW makes the
// chunk go again on the slot's next use with e + 2.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lib/agq_codec.hpp"
#include "lib/agq_job.hpp"
#include "lib/agq_verifier.hpp"
#include "lib/agq_wire.hpp"
#include "lib/stats.hpp"
#include "lib/tx_sink.hpp"

namespace agq::worker {

struct AgqWorkerConfig {
  AgqJobSpec job;
  std::string source = "normal";
  uint64_t seed = 1;
  std::vector<unsigned> ids{0};
  std::vector<uint16_t> ports{0};
  std::vector<std::string> port_names;
  int init_width = 16;
  double init_scale = 4.0;      // round 0: |x| up to this is not clipped
  double error_budget = 1e-3;   // quantization step <= budget * max|aggregate/N| of the tensor
  double margin = 2.0;          // headroom over last round's chunk max before clipping
  uint64_t rto_ns = 20'000'000ull;
  uint64_t rto_max_ns = 640'000'000ull;
  unsigned max_retries = 25;
  unsigned max_redos = 8;       // OVERFLOW redos per chunk before accepting the clipped result
  uint64_t reply_timeout_ns = 5'000'000'000ull;
  unsigned burst = 32;
  bool verify = true;
  unsigned max_print = 5;
  FILE* log = stderr;
};

// What one process measured; memory figures come from its first logical
// worker only (every worker of a job sees the same results).
struct AgqStats {
  uint64_t results = 0;             // RESULTs accepted (all logical workers)
  uint64_t exact = 0, mismatches = 0, bad_header = 0;
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

  double avg_granted_bits() const { return seqs_aggregated ? double(granted_bits_sum) / double(seqs_aggregated) : 0; }
  double avg_req_bits() const { return seqs ? double(req_bits_sum) / double(seqs) : 0; }
};

class AgqWorkerEngine {
 public:
  bool init(const AgqWorkerConfig& cfg, std::string& err);
  void on_frame(uint16_t port, std::span<const uint8_t> frame, uint64_t now_ns);
  unsigned tick(uint64_t now_ns, TxSink& tx);

  bool finished() const { return finished_; }
  bool failed() const { return !diagnostic_.empty(); }
  const std::string& diagnostic() const { return diagnostic_; }
  uint64_t outstanding() const;
  uint64_t elements_done() const { return counters_.chunks_done * kAgqLanes; }
  const Counters& counters() const { return counters_; }
  const AgqStats& stats() const { return stats_; }
  int failure_code() const { return got_reply_ ? 4 : 3; }
  uint64_t first_send_ns() const { return first_send_ns_; }
  uint64_t last_result_ns() const { return last_result_ns_; }
  // The decoded aggregate of the last completed round of logical worker i.
  const std::vector<float>& aggregate(size_t i = 0) const { return lws_[i].prev; }

 private:
  enum class St : uint8_t { Idle, Ready, Sent };
  struct Slot {
    uint64_t chunk = 0;
    uint32_t uses = 0;          // completed uses; version of the current one = uses & 1
    St st = St::Idle;
    agqc::ChunkParams p;
    uint8_t redos = 0;
    unsigned tries = 0;
    uint64_t deadline = 0, rto = 0;
  };
  struct Logical {
    unsigned id;
    uint16_t port;
    std::unique_ptr<AgqFrameTemplate> frame;
    uint32_t round = 0;
    std::vector<Slot> slots;
    std::deque<uint32_t> ready;
    uint32_t in_flight = 0;
    uint64_t left = 0;            // chunks of the round without a final result
    std::vector<float> prev, cur; // aggregates of the previous / current round
    std::vector<agqc::ChunkParams> params;  // this round's per-chunk parameters
    bool done = false;
  };

  void start_round(Logical& lw, uint32_t round);
  bool send(Logical& lw, uint32_t slot, bool retransmit, TxSink& tx);
  void on_result(Logical& lw, const proto::Agq& h, uint64_t now_ns);
  void account_memory(const Logical& lw, uint32_t slot, int width, int pos);
  void check_timers(uint64_t now_ns, TxSink& tx);
  void fail(const std::string& d) { if (diagnostic_.empty()) diagnostic_ = d; }

  AgqWorkerConfig cfg_;
  int guard_ = 0;
  std::unique_ptr<AgqGradients> grads_;
  std::unique_ptr<AgqVerifier> verifier_;
  std::vector<Logical> lws_;
  std::vector<std::array<uint8_t, 2>> window_of_;  // first logical worker: last granted width per (slot, v)
  Counters counters_;
  AgqStats stats_;
  uint64_t start_ns_ = 0, first_send_ns_ = 0, last_result_ns_ = 0, last_timer_scan_ = 0;
  bool got_reply_ = false, finished_ = false;
  std::string diagnostic_;
};

}  // namespace agq::worker
