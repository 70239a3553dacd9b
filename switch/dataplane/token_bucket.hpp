// A link's serialiser as a token bucket on the TSC (PortShaper's clock).
//
// Credit is bytes, in 32.32 fixed point, earned at the link's rate and
// capped at `burst` bytes (what an idle link may send back to back) -- or,
// while the queue stayed backlogged, at `catchup` bytes: a real link with
// frames waiting sends all the time, so time the lcore spent elsewhere
// (asleep, descheduled) is owed in full, not lost beyond the burst. A
// frame may start while the credit is not negative and costs its wire size
// (frame + per-frame overhead), so the credit dips below zero by at most one
// frame: a bucket smaller than a frame never blocks it, and over any long
// interval the bytes sent are rate x time + burst at most. No DPDK: the TSC
// readings and its frequency are arguments (unit-tested with a fake clock).
#pragma once

#include <cstdint>

namespace agq::dataplane {

class TokenBucket {
 public:
  static constexpr int kFrac = 32;
  static constexpr uint64_t kMaxBurst = uint64_t(1) << 26;  // 64 MiB: credit << kFrac stays far from 2^63
  static constexpr uint64_t kMaxFrame = 1u << 17;           // a frame's wire size is at most this

  TokenBucket() = default;
  // rate_bps > 0, tsc_hz > 0, 0 < burst_bytes <= catchup_bytes <= kMaxBurst
  // (catchup 0: = burst); starts full at `now`.
  TokenBucket(uint64_t rate_bps, uint64_t tsc_hz, uint64_t burst_bytes, uint64_t now, uint64_t catchup_bytes = 0)
      : cap_(int64_t(burst_bytes) << kFrac),
        catchup_(int64_t(catchup_bytes > burst_bytes ? catchup_bytes : burst_bytes) << kFrac),
        last_(now) {
    // bytes per cycle = rate / 8 / tsc_hz, in 32.32 (128-bit product: a
    // Tbit/s rate << 32 exceeds 64 bits). At least 1: a rate this low is
    // refused by the configuration long before.
    const unsigned __int128 q = ((unsigned __int128)rate_bps << kFrac) / ((unsigned __int128)tsc_hz * 8);
    per_cycle_ = q == 0 ? 1 : uint64_t(q);
    // A refill never needs more cycles than fill the bucket from its lowest
    // point (one frame below zero); capping the interval there keeps the
    // product below 2^63 however long the link was idle.
    max_delta_ = uint64_t((catchup_ + (int64_t(kMaxFrame) << kFrac)) / int64_t(per_cycle_)) + 1;
    credit_ = cap_;
  }

  // Credit for the cycles since the last refill; `backlogged`: frames
  // waited all that time (the catch-up cap applies).
  void refill(uint64_t now, bool backlogged = false) {
    uint64_t d = now - last_;
    last_ = now;
    if (d > max_delta_) d = max_delta_;
    credit_ += int64_t(d * per_cycle_);
    const int64_t cap = backlogged ? catchup_ : cap_;
    if (credit_ > cap) credit_ = cap;
  }
  bool may_send() const { return credit_ >= 0; }
  // More credit than an idle link keeps: what is left of a catch-up.
  bool above_burst() const { return credit_ > cap_; }
  void spend(uint32_t wire_bytes) { credit_ -= int64_t(wire_bytes) << kFrac; }
  void refund(uint32_t wire_bytes) { credit_ += int64_t(wire_bytes) << kFrac; }
  // Cycles from the last refill until may_send(); 0 when it already may.
  uint64_t wait_cycles() const {
    if (credit_ >= 0) return 0;
    return (uint64_t(-credit_) + per_cycle_ - 1) / per_cycle_;
  }
  // Credit in whole bytes (may be negative), for tests and reports.
  int64_t credit_bytes() const { return credit_ >> kFrac; }
  uint64_t per_cycle_q32() const { return per_cycle_; }

 private:
  int64_t credit_ = 0;
  int64_t cap_ = 0;
  int64_t catchup_ = 0;
  uint64_t per_cycle_ = 1;
  uint64_t max_delta_ = 0;
  uint64_t last_ = 0;
};

}  // namespace agq::dataplane
