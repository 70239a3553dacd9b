// The PS role without DPDK. It receives the completed aggregates the switch
// sends to its ps_port, verifies each one (Verifier), records it and sends
// the ACK that releases the slot; the ACK carries the aggregate in data0..3,
// as the published send_ack.py does, and the switch multicasts it to every
// worker port.
//
// Recovery the classic protocol allows, driven from here because only the PS
// knows which chunk each slot must deliver next:
//  - a slot with no aggregate for --retry-ms gets a "retry" ACK for its
//    expected chunk. If the switch holds a partial aggregation of that chunk
//    (a contribution was lost, a worker died, or the result to the PS was
//    lost), the ACK matches the owner, clears the window and count, and is
//    multicast: every worker sends its contribution again from scratch. If
//    the switch holds no such seq the ACK is dropped there, harmlessly.
//  - an aggregate for a chunk already recorded (cannot normally happen) is
//    answered with its ACK again.
// What stays unrecoverable in classic: a contribution that is still in
// flight when a retry releases its slot is counted into the fresh seq and
// then sent again (double count); the retry interval must exceed any
// queueing delay. The agq pipeline fixes this with per-worker dedup.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "lib/job.hpp"
#include "lib/stats.hpp"
#include "lib/tx_sink.hpp"
#include "lib/verifier.hpp"
#include "lib/wire.hpp"

namespace agq::worker {

struct PsConfig {
  JobSpec job;
  std::string source = "normal";
  uint64_t seed = 1;
  double range = 4.0;
  uint16_t port = 0;
  std::string port_name;
  bool assume_fresh_switch = false;   // every aggregator's cursor starts at 0
  uint64_t retry_ns = 1'000'000'000ull;
  uint64_t stall_timeout_ns = 20'000'000'000ull;  // no aggregate at all for this long: give up
  uint64_t linger_ns = 300'000'000ull;            // keep announcing "done" this long
  unsigned max_print = 10;                        // mismatches printed in full
  FILE* log = stderr;
  bool record = true;                             // keep every aggregate (for --dump)
};

struct Recorded {
  uint64_t chunk;
  Lanes lanes;
};

class PsEngine {
 public:
  bool init(const PsConfig& cfg, std::string& err);
  void on_frame(uint16_t port, std::span<const uint8_t> frame, uint64_t now_ns);
  unsigned tick(uint64_t now_ns, TxSink& tx);

  bool finished() const { return finished_; }
  bool failed() const { return !diagnostic_.empty(); }
  const std::string& diagnostic() const { return diagnostic_; }
  uint64_t outstanding() const;
  uint64_t elements_done() const { return counters_.chunks_done * kLanes; }
  const Counters& counters() const { return counters_; }
  const VerifyStats& verify_stats() const { return verifier_.stats(); }
  const Verifier& verifier() const { return verifier_; }
  const std::vector<Recorded>& recorded() const { return recorded_; }
  // Exit code of a failure: 3 = no aggregate ever arrived, 4 = stalled later.
  int failure_code() const { return counters_.chunks_done ? 4 : 3; }

 private:
  void record(uint64_t chunk, const proto::AgqClassic& h);
  void queue_ack(uint64_t chunk, const Lanes& lanes, Kind kind);

  PsConfig cfg_;
  Verifier verifier_;
  std::unique_ptr<FrameTemplate> frame_;
  std::vector<uint64_t> expected_;   // per slot: the chunk it must deliver next
  std::vector<uint64_t> last_ns_;    // per slot: last aggregate or retry
  std::deque<proto::AgqClassic> txq_;
  std::vector<uint8_t> done_frame_;
  std::vector<Recorded> recorded_;
  Counters counters_;
  uint64_t start_ns_ = 0, last_progress_ns_ = 0, done_ns_ = 0, last_done_tx_ = 0, last_retry_scan_ = 0;
  bool finished_ = false;
  std::string diagnostic_;
};

}  // namespace agq::worker
