// Counters shared by the worker and PS roles, the live progress line and
// the final summary (text and JSON).
#pragma once

#include <cstdint>
#include <string>

namespace agq::worker {

struct Counters {
  uint64_t tx_pkts = 0, rx_pkts = 0;
  uint64_t chunks_done = 0;      // worker: ACKed chunks; PS: aggregates recorded
  uint64_t acks = 0;             // worker: ACKs that completed a chunk; PS: ACKs sent
  uint64_t retries = 0;          // worker: retry notices received; PS: retry notices sent
  uint64_t retransmissions = 0;  // worker: contributions sent again after a retry
  uint64_t duplicates = 0;       // PS: aggregate for an already recorded chunk (ACK re-sent)
  uint64_t stale = 0;            // ACK/retry for a chunk we are already past
  uint64_t foreign = 0;          // AGQ packets of another job / slot, or not ours
  uint64_t malformed = 0;        // ours, but chunk/slot/jobAndSeq inconsistent
  uint64_t other = 0;            // non-AGQ traffic (ARP, IPv6 ND, ...)
  uint64_t tx_refused = 0;       // TX queue full: packet kept for the next round
  uint64_t errors = 0;           // verification mismatches (PS) and protocol errors
};

// a += b, field by field (the parts of a multi-lcore process).
void add_counters(Counters& a, const Counters& b);

class Progress {
 public:
  // One line: packets, Mpps, Gbit/s of gradient (32-bit elements), elements/s,
  // outstanding slots, retransmissions/retries, errors. Rates since the last call.
  std::string line(const char* role, const Counters& c, uint64_t elements_done, uint64_t outstanding,
                   uint64_t now_ns);

 private:
  uint64_t last_ns_ = 0, last_pkts_ = 0, last_elems_ = 0;
};

// Minimal JSON object writer (numbers, strings, nested objects): the summary
// has a fixed, flat shape, so a library would be overkill.
class Json {
 public:
  Json& num(const char* k, double v);
  Json& num(const char* k, uint64_t v);
  Json& str(const char* k, const std::string& v);
  Json& raw(const char* k, const std::string& json);
  std::string done() const { return "{" + body_ + "}"; }

 private:
  void key(const char* k);
  std::string body_;
};

std::string counters_json(const Counters& c);

}  // namespace agq::worker
