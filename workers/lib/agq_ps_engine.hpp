// The PS role of the agq protocol (docs/PROTOCOL.md §7) without DPDK.
//
// FALLBACK_DATA (the switch forwards a contribution it could not give a
// window) is summed here in software at d = 0 (u as sent, width = R): the
// PS dedups by worker bitmap per (slot, version, seq), and when all N
// contributions are in it sends a PS_RESULT to the switch, which multicasts
// it to the job's workers as a RESULT with FALLBACK. A contribution for an
// already completed sequence (a worker's retransmission: its RESULT was
// lost) is answered with the same PS_RESULT again, flagged RETRANSMIT with
// that worker's id, which the switch unicasts to it alone.
//
// delivery = "ps": the switch sends the aggregated RESULTs of the job to the
// PS instead of the workers; the PS (which would apply them to the model)
// hands each one back as a PS_RESULT with the switch's width/pos, so the
// workers decode it exactly as if it had been multicast.
//
// The PS has no end of its own (it cannot know how many sequences fall
// back): it serves until SIGINT/SIGTERM and then prints its summary.
#pragma once

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
#include "lib/stats.hpp"
#include "lib/tx_sink.hpp"

namespace agq::worker {

struct AgqPsConfig {
  AgqJobSpec job;
  uint16_t port = 0;
  unsigned lanes = 32;          // the job's lane profile
  unsigned row_shift = 0;       // for the shard in the UDP source port (PROTOCOL.md §10)
  bool have_self = false;       // the PS's address from the switch (else agq_ps_endpoint)
  Endpoint self{};
};

struct AgqPsStats {
  uint64_t fallback_data = 0;    // FALLBACK_DATA received
  uint64_t duplicates = 0;       // a contribution already counted (pending sequence)
  uint64_t sequences = 0;        // sequences summed here
  uint64_t ps_results = 0;       // PS_RESULTs sent for them (first time)
  uint64_t resent = 0;           // PS_RESULT sent again for a retransmission
  uint64_t relayed = 0;          // delivery = ps: switch RESULTs handed back
  uint64_t overflow = 0;         // completed sequences with OVERFLOW
  uint64_t bad = 0;              // inconsistent contributions (width/exponent/N differ)
};

class AgqPsEngine {
 public:
  bool init(const AgqPsConfig& cfg, std::string& err);
  void on_frame(uint16_t port, std::span<const uint8_t> frame, uint64_t now_ns);
  unsigned tick(uint64_t now_ns, TxSink& tx);

  // Serves until stopped: never finished, never failed by itself.
  bool finished() const { return false; }
  bool failed() const { return false; }
  uint64_t outstanding() const { return pending_; }
  uint64_t elements_done() const { return stats_.sequences * kAgqLanes; }
  const Counters& counters() const { return counters_; }
  const AgqPsStats& stats() const { return stats_; }

 private:
  struct Seq {
    uint32_t seq = 0;
    bool valid = false, complete = false;
    uint32_t bitmap = 0;
    unsigned count = 0;
    proto::Agq first;                      // header of the first contribution (R, e, ...)
    std::array<uint64_t, kAgqLanes> sum{};
    bool overflow = false;
  };
  void on_fallback(const proto::Agq& h);
  bool min_width_ok(int min_width, int req_width) const;
  // to_worker >= 0: a RETRANSMIT answer the switch unicasts to that worker only.
  void queue_result(const Seq& s, int to_worker);

  AgqPsConfig cfg_;
  int guard_ = 0;
  std::unique_ptr<FrameTemplate> frame_;
  std::vector<Seq> seqs_;  // index slot * 2 + version
  std::deque<proto::Agq> txq_;
  uint64_t pending_ = 0;
  Counters counters_;
  AgqPsStats stats_;
};

}  // namespace agq::worker
