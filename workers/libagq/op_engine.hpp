// Allreduce operations over the agq protocol (docs/PROTOCOL.md §5) without
// DPDK: a caller submits float32 input/output spans, frames come in and go
// out, time is injected. One logical worker (this process's rank) of one
// job. Single-threaded: libagq's Client calls it from its poll thread only.
//
// Every worker of the job submits the same operations in the same order
// (DDP launches buckets in index order), so every worker numbers chunks
// alike without a negotiation packet: the chunks of all operations form one
// global sequence G (the header's seq, mod 2^32); chunk G uses slot
// G mod slots, one chunk per slot at a time, versions alternating per use.
// A slot's next DATA leaves only after the RESULT of its previous use
// arrived (the switch's proof that the use before last may be reused).
//
// Width and exponent per chunk: operations carry a tag (the DDP bucket
// index); an operation whose tag completed before with the same length
// chooses each chunk's R and e from that previous aggregate (identical bits
// in every worker, so identical choices: no round trip). Otherwise
// init_width / init_scale. A RESULT with OVERFLOW makes the chunk go again
// on the slot's next use with e + 2 (max_redos times).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "lib/agq_codec.hpp"
#include "lib/agq_job.hpp"
#include "lib/agq_wire.hpp"
#include "lib/tx_sink.hpp"

namespace agq::libagq {

using worker::TxSink;
namespace agqc = worker::agqc;

// The job as the switch knows it (`agqctl job get ID --json`, PROTOCOL.md
// §12) plus this process's identity in it.
struct JobParams {
  uint16_t job_id = 1;
  uint8_t num_workers = 2;
  uint8_t worker_id = 0;
  uint32_t slots = 64;
  uint32_t rows = 0;       // for the shard in the UDP source port (0 = unknown: shard = job_id)
  int row_shift_hint = -1; // the switch's row_shift (job get); -1 = computed from slots and rows
  int lanes = 32;          // lane profile; this build speaks 32
  int max_width = 32;      // the switch's cap: requests above it are clamped here
  worker::Endpoint self{}, ps{};  // addresses; zero = the default identities of lib/agq_wire

  uint32_t row_shift() const;  // PROTOCOL.md §3: smallest power of two with ceil(slots / 2^s) <= rows
  std::string validate() const;
};

struct EngineConfig {
  JobParams job;
  uint32_t window = 0;            // slots in flight; 0 = all
  int init_width = 32;            // first operation of a tag: widest request, fine step
  double init_scale = 16.0;       // ... and |x| up to this not clipped
  double error_budget = 1e-3;     // quantization step <= budget * max|aggregate/N| of the operation
  double margin = 2.0;            // headroom over the previous chunk max
  uint64_t rto_ns = 20'000'000ull;
  uint64_t rto_max_ns = 320'000'000ull;
  unsigned max_retries = 20;
  unsigned max_redos = 8;
  uint64_t reply_timeout_ns = 5'000'000'000ull;  // no RESULT at all after the first DATA: fail
  unsigned burst = 32;
};

// What one operation did, for the caller's statistics.
struct OpStats {
  uint64_t elements = 0, chunks = 0;
  uint64_t packets = 0, retransmissions = 0;
  uint64_t redos = 0;             // OVERFLOW results redone with e + 2
  uint64_t overflow_accepted = 0; // chunks still clipped after max_redos (their bound is infinite)
  uint64_t fallbacks = 0;         // chunks summed by the PS
  uint64_t req_bits_sum = 0, granted_bits_sum = 0;  // over chunks aggregated in the switch
  std::array<uint32_t, 9> granted_hist{};           // index width/4; [0] = fallback
  double max_bound = 0;           // largest per-element error bound of the result (after scale)
  uint64_t submit_ns = 0, done_ns = 0;
};

struct Op {
  const float* in = nullptr;
  float* out = nullptr;           // may equal in
  float* bound = nullptr;         // optional: per-element error bound of out
  uint64_t n = 0;
  float scale = 1.0f;             // out = sum * scale (DDP: 1 / world size)
  uint32_t tag = 0;
  uint64_t cookie = 0;            // the caller's, returned with the completion
};

struct Completion {
  uint64_t cookie = 0;
  bool ok = true;
  std::string error;
  OpStats stats;
};

class OpEngine {
 public:
  bool init(const EngineConfig& cfg, std::string& err);
  // Queues an operation; its chunks follow every earlier one's.
  void submit(const Op& op, uint64_t now_ns);
  void on_frame(std::span<const uint8_t> frame, uint64_t now_ns);
  // Sends what may leave, services timers; returns packets sent.
  unsigned tick(uint64_t now_ns, TxSink& tx, uint16_t port);
  // Completed operations since the last call (in submission order).
  std::vector<Completion>& completions() { return done_; }

  bool failed() const { return !diagnostic_.empty(); }
  const std::string& diagnostic() const { return diagnostic_; }
  uint64_t pending_ops() const { return ops_.size(); }

 private:
  enum class St : uint8_t { Idle, Sent };
  struct OpState {
    Op op;
    uint64_t base = 0;       // global index of its chunk 0
    uint64_t chunks = 0, left = 0;
    std::vector<agqc::ChunkParams> params;
    std::vector<double> chunk_max;  // max |sum / N| per chunk of the result, for the tag's next op
    OpStats st;
  };
  struct Slot {
    St st = St::Idle;
    uint32_t uses = 0;       // completed uses; version of the current one = uses & 1
    uint64_t g = 0;          // global chunk it carries
    OpState* op = nullptr;
    agqc::ChunkParams p;
    uint8_t redos = 0;
    unsigned tries = 0;
    uint64_t deadline = 0, rto = 0, sent_ns = 0;
    std::array<uint8_t, worker::kAgqDataFrameLen> frame{};  // the DATA as sent: retransmissions resend it
  };
  struct TagHistory {
    uint64_t n = 0;
    std::vector<double> chunk_max;
    double tensor_max = 0;
  };

  void plan(OpState& o);
  void encode(Slot& sl, uint32_t s, bool clipped_redo);
  bool transmit(Slot& sl, bool retransmit, uint64_t now_ns, TxSink& tx, uint16_t port);
  void on_result(const proto::Agq& h, uint64_t now_ns);
  void complete_front(uint64_t now_ns);
  void fail(const std::string& d);

  EngineConfig cfg_;
  int guard_ = 0;
  uint32_t row_shift_ = 0;
  std::unique_ptr<worker::AgqFrameTemplate> frame_;
  std::vector<Slot> slots_;
  std::deque<std::unique_ptr<OpState>> ops_;  // submitted, not completed, in order
  uint64_t next_g_ = 0;          // next global chunk to give a slot
  uint64_t assigned_end_ = 0;    // global index past the last submitted chunk
  std::deque<uint32_t> resend_;  // slots whose redo waits for tx room
  uint32_t in_flight_ = 0;
  std::unordered_map<uint32_t, TagHistory> tags_;
  std::vector<Completion> done_;
  uint64_t first_send_ns_ = 0, last_timer_scan_ = 0;
  bool got_reply_ = false;
  std::string diagnostic_;
};

}  // namespace agq::libagq
