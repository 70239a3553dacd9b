// The worker role as a state machine without DPDK: frames in, frames out,
// time injected. One engine drives every logical worker of a process.
//
// Per logical worker and slot s: the slot carries chunks s, s+W, s+2W, ...
// A chunk is sent once; the slot advances when the ACK for that chunk
// (isACK=1, multicast by the switch to every worker port) comes back.
// Retransmission follows what the classic protocol allows: a contribution is
// sent again only after the PS has released the slot with a "retry" ACK
// (then the switch's partial count is gone and nothing is counted twice).
// A worker never resends on its own timeout, because the classic switch has
// no dedup: a resent contribution that had been counted would be added twice.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lib/gradient_source.hpp"
#include "lib/job.hpp"
#include "lib/quantizer.hpp"
#include "lib/stats.hpp"
#include "lib/tx_sink.hpp"
#include "lib/wire.hpp"

namespace agq::worker {

struct WorkerConfig {
  JobSpec job;
  std::string source = "normal";
  uint64_t seed = 1;
  double range = 4.0;
  std::vector<unsigned> ids{0};       // logical workers of this process
  std::vector<uint16_t> ports{0};     // port of each logical worker (same length as ids)
  std::vector<std::string> port_names;  // for diagnostics, by port index
  bool join = false;                  // restarted worker: send only what ACK/retry notices ask for
  uint64_t reply_timeout_ns = 5'000'000'000ull;
  uint64_t stall_timeout_ns = 20'000'000'000ull;
  unsigned burst = 32;                // packets per logical worker per tick
};

class WorkerEngine {
 public:
  bool init(const WorkerConfig& cfg, std::string& err);

  void on_frame(uint16_t port, std::span<const uint8_t> frame, uint64_t now_ns);
  // Sends what is ready, checks timeouts. Returns packets sent.
  unsigned tick(uint64_t now_ns, TxSink& tx);

  bool finished() const { return finished_; }
  bool failed() const { return !diagnostic_.empty(); }
  const std::string& diagnostic() const { return diagnostic_; }
  uint64_t outstanding() const;
  uint64_t elements_done() const { return counters_.chunks_done * kLanes; }
  const Counters& counters() const { return counters_; }
  bool finished_by_announcement() const { return by_announcement_; }
  // Exit code of a failure: 3 = the switch never answered, 4 = stalled later.
  int failure_code() const { return got_reply_ ? 4 : 3; }

 private:
  static constexpr uint64_t kUnknown = ~0ull;
  enum class State : uint8_t { Ready, Sent, Done, Unknown };
  struct Logical {
    unsigned id;
    uint16_t port;
    std::unique_ptr<GradientSource> source;
    std::unique_ptr<FrameTemplate> frame;
    std::vector<uint64_t> cur;     // chunk the slot carries now
    std::vector<State> state;
    std::vector<uint64_t> sent_ns;
    std::deque<uint32_t> ready;
    uint64_t remaining = 0;        // slots not Done
  };

  void on_notice(Logical& lw, uint32_t slot, uint64_t chunk, Kind kind, uint64_t now_ns);
  void advance(Logical& lw, uint32_t slot, uint64_t next_chunk);
  void check_timeouts(uint64_t now_ns);
  std::string port_name(uint16_t port) const;

  WorkerConfig cfg_;
  std::unique_ptr<Quantizer> quant_;
  std::vector<Logical> lws_;
  Counters counters_;
  uint64_t start_ns_ = 0, first_send_ns_ = 0, last_progress_ns_ = 0;
  bool got_reply_ = false, finished_ = false, by_announcement_ = false;
  std::string diagnostic_;
};

}  // namespace agq::worker
