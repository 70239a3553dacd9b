// The allreduce engine of the agq protocol (docs/PROTOCOL.md §5): the one
// piece of code that turns "sum this float32 tensor over the job's N
// workers" into DATA frames and RESULT frames back. agq-worker (synthetic
// gradients) and libagq (training) are both thin programs on it.
//
// No DPDK, no threads, no clock: frames go out through a FrameIo (one frame
// buffer per slot, written in place and resent as is, so a DPDK io can keep
// one mbuf per outstanding slot and turn a received RESULT into the slot's
// next DATA), frames come in through on_frame(), time is passed in. One
// engine is single-threaded; a process with several lcores runs one engine
// per lcore, each owning the slots of its shards (EngineConfig::part/parts).
//
// Operations. submit() takes an AllreduceOp (input and output spans, a
// completion callback). Ops of one logical worker are numbered globally in
// submission order: chunk c of an op is global chunk G = op base + c, it
// travels in slot G mod slots with seq = G mod 2^32; every worker of the job
// must therefore submit the same ops (same sizes) in the same order, as a
// training step's buckets are. Many ops may be in flight.
//
// Adaptive width. Width R and exponent e of each chunk come from the
// previous op of the same tensor key (its decoded aggregate, identical in
// every worker): the first op of a key uses init_width/init_scale. An op
// whose predecessor on the key has not completed waits for it chunk by chunk
// (a slot parks), so every worker derives identical parameters.
//
// Per slot: one sequence at a time, alternating versions; the DATA of the
// next use leaves only after the RESULT of the current one. RTO per slot from
// the measured round trip (srtt + 4 rttvar, the variance term floored; Karn:
// only first transmissions are sampled), capped, doubling per
// retransmission; it is the last resort, it must cover scheduling stalls.
// Loss is found by order first (RACK, RFC 8985): the switch keeps the order
// of one sender's packets per owner lcore (PROTOCOL.md §10), so a sequence
// still outstanding when a sequence sent after it on the same switch lcore
// has completed, and a reorder window later, is lost and resent at once; the
// tail (nothing sent after it completes) gets one probe after 2 srtt (TLP);
// only first transmissions' RESULTs advance RACK (not the probe's: see
// on_frame).
// max_retries retransmissions (counted also while the link is down) fail
// the engine with a report of every stalled slot. OVERFLOW in a RESULT: the chunk goes
// again on the slot's next use with e + 2 (max_redos). FALLBACK results
// (computed by the PS) decode at d = 0. A RESULT with a new boot epoch (or a
// link that came back) means the switch restarted: in-flight sequences are
// retransmitted at once; if they cannot complete the failure says so.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "lib/agq_codec.hpp"
#include "lib/agq_wire.hpp"
#include "lib/stats.hpp"

namespace agq::worker {

// The job as the engine needs it (flags, a job file, or the switch's `job get`).
struct AllreduceJob {
  uint16_t job_id = 1;       // 1..65535
  uint8_t num_workers = 2;   // N, 1..32
  uint32_t slots = 64;       // the job's slots on the switch
  uint32_t window = 0;       // slots in flight per logical worker; 0 = all
  uint8_t lanes = 32;        // lane profile: 32 (Tofino 2 / software) or 16 (Tofino 1)
  uint8_t row_shift = 0;     // slots per row = 2^row_shift (PROTOCOL.md §3), for the shard
  uint8_t max_width = 32;    // requests are capped at this (the job's max_width)
  uint16_t switch_lcores = 1;  // the switch's dataplane lcores: shard k is served in order by lcore k mod this

  std::string validate() const;
  uint32_t max_outstanding() const { return window ? window : slots; }
  uint32_t shard_of(uint32_t slot) const { return (uint32_t(job_id) + (slot >> row_shift)) & 0x0FFF; }
  // row_shift as the switch computes it from slots and rows (0 rows: one slot per row).
  static uint8_t row_shift_for(uint32_t slots, uint32_t rows);
};

struct AllreduceTuning {
  int init_width = 16;            // first op of a tensor key: requested width
  double init_scale = 4.0;        // ... and |x| up to this is not clipped
  double error_budget = 1e-3;     // quantization step <= budget * max|aggregate/N| of the tensor
  double margin = 2.0;            // headroom over the previous op's chunk max
  uint64_t rto_init_ns = 20'000'000;  // before the first RTT sample
  uint64_t rto_min_ns = 5'000'000;    // RTO = srtt + max(4 rttvar, this): the variance term's floor
  // RACK reorder window: max(this, min_rtt / 4), doubled per retransmission
  // found spurious (up to srtt); 0 = no loss detection by order (RTO only).
  // 200 µs: a peer's own recovery (its RACK, one round trip) mostly fits in
  // it on a loaded host, so fewer of the N-1 duplicate resends of a loss
  // (20 µs: 1.5-2x the retransmissions and up to 2x the time at 1% loss,
  // N = 2, 16 MB, load 7-9).
  uint64_t reo_min_ns = 200'000;
  bool tail_probe = true;             // TLP: one probe of the newest sequence after 2 srtt without a RESULT
  uint64_t pto_min_ns = 100'000;      // ... but not before this
  uint64_t rto_max_ns = 640'000'000;  // cap, also of the back-off
  unsigned max_retries = 25;          // retransmissions of one sequence before failing ...
  // ... and not before the sequence has waited this long since its first
  // transmission: on a loaded host a peer process can be descheduled for
  // longer than max_retries short RTOs (seen in CI at 10% loss, where every
  // RTO is a few ms), and that is a stall, not a dead peer.
  uint64_t retry_time_ns = 5'000'000'000;
  unsigned max_redos = 8;             // OVERFLOW redos of one chunk before accepting the clipped result
  uint64_t reply_timeout_ns = 5'000'000'000;  // no RESULT at all since the first DATA
  unsigned burst = 32;                // DATA per logical worker per tick
  // Two ticks further apart than this: the caller's process was descheduled
  // (a poll loop ticks every few µs, or sleeps at most its idle sleep), and
  // the retransmission timers pause for the gap. 0 = never (the default:
  // under heavy load it stretched recovery at 10% loss until sequences ran
  // out of retries; the RTO and the waiting rule cover descheduling).
  uint64_t away_ns = 0;
  // min_width of every DATA (PROTOCOL.md §5): the chunk's R less this many
  // bits (a multiple of 4; never below agqc::min_width(g)). 0: every grant
  // is R or the PS's exact sum.
  int min_width_slack = 0;
  // 0 = adaptive. W (a multiple of 4, min_width(g)..max_width): every chunk
  // requests R = min_width = W, the exponent still adapts -- the fixed
  // 32-bit design of SwitchML/ATP at W = 32, for comparisons.
  int fixed_width = 0;
  // Error feedback (PROTOCOL.md §5): per tensor key one float per element,
  // what quantization, clipping and truncation removed from this worker's
  // contribution, added into the key's next op before encoding. Off for
  // bit-exact protocol checks (the encoded values are then x, not x +
  // residual).
  bool error_feedback = true;
};

// One logical worker hosted by the engine.
struct WorkerIdentity {
  unsigned id = 0;     // worker_id, 0..N-1
  uint16_t port = 0;   // FrameIo port it sends on
  Endpoint self{}, dst{};  // its MAC/IPv4 and the job's PS (DATA frames are addressed to it)
  // Defaults: agq_worker_endpoint / agq_ps_endpoint of (job, id).
  static WorkerIdentity defaults(uint16_t job_id, unsigned id, uint16_t port = 0);
};

struct EngineConfig {
  AllreduceJob job;
  AllreduceTuning tuning;
  std::vector<WorkerIdentity> workers{WorkerIdentity{}};
  // Slot partition over the lcores of a process: this engine serves slot s
  // iff (shard_of(s) mod queues) mod parts == part (PROTOCOL.md §10: shard k
  // goes to queue k mod Q; lcore j serves queues q = j mod parts).
  unsigned part = 0, parts = 1, queues = 1;
  bool owns(uint32_t slot) const { return part_of(slot) == part; }
  unsigned part_of(uint32_t slot) const { return (job.shard_of(slot) % queues) % parts; }
};

// Where the engine's frames live and go. Buffer b = worker index * slots +
// slot holds that slot's frame (job lane profile's length).
class FrameIo {
 public:
  virtual ~FrameIo() = default;
  // The buffer of b, writable, content = the frame last written or sent in
  // it (or a RESULT the io adopted for it, see on_frame): stays valid until
  // the next call for b.
  virtual uint8_t* frame(uint32_t b) = 0;
  // Queue b's frame (len bytes) on `port`. false = no room now (the engine
  // tries again); while the link is down the io takes and drops it.
  virtual bool send(uint16_t port, uint32_t b, uint16_t len) = 0;
};

// What one op did (summed over the engines/parts that served it).
struct OpStats {
  uint64_t chunks = 0;
  uint64_t results = 0;          // RESULTs accepted (final and redone)
  uint64_t fallbacks = 0;        // final results computed by the PS
  uint64_t overflows = 0;        // RESULTs with OVERFLOW
  uint64_t redos = 0;            // chunks sent again with e + 2
  uint64_t clipped_chunks = 0;   // final results still clipped (max_redos reached)
  uint64_t retransmissions = 0;
  uint64_t duplicates = 0;       // RESULTs for a use already completed
  std::array<uint64_t, 9> req_hist{}, granted_hist{};  // index width / 4; granted: switch-aggregated only
  uint64_t granted_bits_sum = 0, aggregated = 0;       // over switch-aggregated final results
  double error_bound = 0;        // max over elements of |decoded - exact float sum| allowed (unclipped)
  void add(const OpStats& o);
  double avg_granted_bits() const { return aggregated ? double(granted_bits_sum) / double(aggregated) : 0; }
};

struct TensorState;

struct AllreduceOp {
  uint64_t key = 0;                // tensor key: widths adapt over the ops of one key
  unsigned worker = 0;             // index into EngineConfig::workers
  std::span<const float> input;
  std::span<float> output;         // same size; may be the input's memory
  // Called once, on the engine thread that completes the op (last part), or
  // inside submit() for an empty tensor or a rejected op.
  std::function<void(AllreduceOp&)> done;

  // Results (valid in done):
  bool failed = false;
  std::string error;
  OpStats stats;
  uint64_t first_chunk = 0;        // global chunk number of chunk 0
  uint64_t submit_ns = 0, done_ns = 0;

  // Shared by the engines of a multi-part process: the app calls
  // prepare_op() once before submitting the op to every part; with one part
  // the engine does it itself with a state per key. Weak: the state holds
  // its last op, which must not keep the state alive in turn.
  std::weak_ptr<TensorState> state;

  // Engine-private.
  std::atomic<unsigned> parts_left{0};
  std::vector<OpStats> part_stats;
  std::shared_ptr<AllreduceOp> prev;  // previous op of the key (params depend on it), until this one is done
  std::vector<float> chunk_max;       // max |aggregate| / N per chunk, written as chunks complete
  // Error feedback: the key's residual (TensorState::residual when the op
  // was prepared; null = off). Element i is read when chunk i/lanes is
  // encoded and written once, by the part that owns the chunk, from its
  // final RESULT.
  std::shared_ptr<std::vector<float>> residual;
  double tensor_max = 0;              // max of chunk_max, when complete
  std::atomic<bool> complete{false};
  bool linked = false;
  uint32_t round = 0;                 // ops of the key (same size) before this one
};
using OpPtr = std::shared_ptr<AllreduceOp>;

// Per tensor key and logical worker: the last op submitted on the key, whose
// decoded aggregate (chunk maxima) chooses the next op's width and exponent
// per chunk.
// With error feedback it also holds the key's residual, one float per
// element: a new one (zeros) whenever the key's size changes -- an op of
// the old size still in flight keeps writing its own.
struct TensorState {
  std::shared_ptr<AllreduceOp> last;
  std::shared_ptr<std::vector<float>> residual;
};

// Links op behind the last op of its key (state) for an engine of `lanes`
// lanes. Once per op, before submitting it to the parts of a multi-part
// process; error_feedback must be the engines' AllreduceTuning::error_feedback
// (submit refuses an op prepared otherwise).
void prepare_op(const std::shared_ptr<AllreduceOp>& op, const std::shared_ptr<TensorState>& state, unsigned lanes,
                bool error_feedback = false);

// A final or redone RESULT as the engine accepted it, for observers (the
// verifier, memory accounting). Lanes as they are in the frames (big-endian).
struct ChunkResult {
  const AllreduceOp* op;
  unsigned worker;          // index into EngineConfig::workers
  uint64_t chunk, global;   // chunk of the op, global chunk number
  uint32_t slot;
  unsigned version;
  agqc::ChunkParams p;      // request R and exponent e
  int width, pos;           // granted (fallback: R, pos 0)
  int min_width;            // our DATA's min_width
  bool fallback, overflow, redo;  // redo: this result is discarded, the chunk goes again
  unsigned n_lanes, n_valid;      // lanes in the frame, lanes inside the tensor
  const uint8_t* result_be;       // the RESULT's lanes
  const uint8_t* sent_be;         // our DATA's lanes, as sent
  const float* decoded;           // final results: the decoded values written to the output
  uint16_t epoch;
};
class ChunkObserver {
 public:
  virtual ~ChunkObserver() = default;
  virtual void on_chunk(const ChunkResult& r) = 0;
};

// Engine-wide counters beyond the per-op stats.
struct EngineStats {
  OpStats total;                    // all ops
  uint64_t ops_done = 0, ops_failed = 0;
  uint64_t bad_results = 0;         // RESULTs that do not fit the request (not decodable), or a grant below min_width
  uint64_t below_min_width = 0;     // ... of those: a switch grant below our DATA's min_width (not decoded)
  uint64_t max_retries_seen = 0;
  uint64_t switch_restarts = 0;     // boot epoch changes seen
  uint64_t link_downs = 0;
  uint64_t fast_retransmissions = 0; // resent because later sequences overtook them (part of the retransmissions)
  uint64_t tail_probes = 0;          // TLP probes (part of the retransmissions)
  uint64_t timer_scans = 0;          // timer scans over every slot (a deadline passed)
  uint64_t away = 0;                 // ticks more than 2 ms apart (descheduled): timers paused for the gap
  uint64_t spurious = 0;             // retransmissions found unnecessary (the original completed: a resent RESULT followed)
  uint64_t reo_wnd_ns = 0;           // current RACK reorder window
  double min_rtt_ns = 0;
  double rtt_peak_ns = 0;            // recent peak round trip (slow decay): the RTO is at least 5/4 of it
  // Completion times (first DATA -> final RESULT) of chunks: how long loss
  // recovery makes the slowest ones wait.
  uint64_t chunks_over_1ms = 0, chunks_over_5ms = 0, max_chunk_ns = 0;
  uint16_t epoch = 0;               // last boot epoch seen (0: none yet)
  // Uses of a slot that needed a retransmission of ours, by the first
  // resend's cause (0 RACK mark, 1 tail probe, 2 timer): how many, their
  // total and longest time from first DATA to RESULT.
  std::array<uint64_t, 3> recovered{}, recovered_ns{}, recovered_max_ns{};
  // The last op that completed here: time from its submission until 50%,
  // 90%, 99% and 100% of its chunks (this engine's part) had their result
  // -- where its time goes: a uniform slow-down or a tail.
  std::array<uint64_t, 4> last_op_progress_ns{};
  uint64_t lag_at_half = 0;  // ... and at 50%: uses of the slot furthest ahead - of the one furthest behind
  uint64_t rtt_samples = 0;
  double srtt_ns = 0, rttvar_ns = 0;
  uint64_t rto_ns = 0;              // current base RTO
};

class AllreduceEngine {
 public:
  AllreduceEngine();
  ~AllreduceEngine();
  bool init(const EngineConfig& cfg, FrameIo& io, std::string& err);

  // Engine thread only. Returns false (and calls done with failed/error) if
  // the op is invalid or the engine has failed.
  bool submit(const OpPtr& op);
  // One received frame. Returns the buffer index whose frame it completed
  // (the io may adopt this frame as that buffer's next one: a RESULT becomes
  // the slot's next DATA in place), or -1 (not ours / nothing to adopt).
  int on_frame(std::span<const uint8_t> frame, uint64_t now_ns);
  // Call after rx is drained: sends ready DATA (burst per logical worker)
  // and services the retransmission timers. timers = false: rx is not
  // drained yet (the loop sends between rx bursts), so only sends. Returns
  // frames sent.
  unsigned tick(uint64_t now_ns, bool timers = true);
  // The io saw the link go down or come back (a restarted switch: redo in-flight sequences).
  void on_link(bool up, uint64_t now_ns);
  void set_observer(ChunkObserver* o) { observer_ = o; }

  bool idle() const;                // nothing submitted that is not done
  bool failed() const { return !diagnostic_.empty(); }
  const std::string& diagnostic() const { return diagnostic_; }
  bool got_reply() const { return got_reply_; }
  uint64_t outstanding() const;     // sequences in flight
  uint64_t chunks_done() const { return counters_.chunks_done; }
  const Counters& counters() const { return counters_; }
  const EngineStats& stats() const { return stats_; }
  const EngineConfig& config() const { return cfg_; }
  uint32_t buffers() const { return uint32_t(cfg_.workers.size()) * cfg_.job.slots; }
  size_t frame_len() const { return agq_frame_len(cfg_.job.lanes); }
  uint64_t first_send_ns() const { return first_send_ns_; }
  uint64_t last_result_ns() const { return last_result_ns_; }
  // Fail every op with this message (the app gives up, e.g. on a signal).
  void fail(const std::string& why);

 private:
  struct Impl;
  // Why a sequence is resent: its timer expired (back-off), it was found
  // lost by order or probed (a short timer follows, doubling up to the RTO).
  enum class Resend { Timer, Lost, Probe };
  bool retransmit(uint32_t li, uint32_t s, uint64_t now_ns, Resend why);
  std::unique_ptr<Impl> im_;
  EngineConfig cfg_;
  ChunkObserver* observer_ = nullptr;
  Counters counters_;
  EngineStats stats_;
  std::string diagnostic_;
  bool got_reply_ = false;
  uint64_t first_send_ns_ = 0, last_result_ns_ = 0;
};

// An op ready for an engine of `parts` parts (one per lcore; submit it to every one).
OpPtr make_op(uint64_t key, std::span<const float> input, std::span<float> output,
              std::function<void(AllreduceOp&)> done = {}, unsigned worker = 0, unsigned parts = 1);

}  // namespace agq::worker
