// Idle back-off for a polling lcore: busy-poll while traffic flows; after
// `polls_before_sleep` consecutive empty poll rounds, sleep 1 us, 2 us, 4 us,
// ... up to `max_sleep_us`; the first packet resets it. It lets a 2-core CI
// machine run a switch and several workers at once. max 0 =
// pure busy poll.
#pragma once

#include <rte_pause.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

namespace agq::dataplane {

class IdleBackoff {
 public:
  explicit IdleBackoff(uint32_t max_sleep_us, uint32_t polls_before_sleep = 256)
      : max_us_(max_sleep_us), polls_before_sleep_(polls_before_sleep) {}

  void reset() {
    empty_polls_ = 0;
    sleep_us_ = 1;
  }

  // Called after an empty poll round; returns true if it slept.
  bool idle() {
    if (max_us_ == 0 || ++empty_polls_ < polls_before_sleep_) {
      rte_pause();
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
    sleep_us_ = std::min(sleep_us_ * 2, max_us_);
    return true;
  }

  // idle(), with the sleep ending after at most `cap_us` (the switch's
  // shaped queues: their head's departure); cap 0 pauses without sleeping.
  bool idle(uint32_t cap_us) {
    if (max_us_ == 0 || ++empty_polls_ < polls_before_sleep_ || cap_us == 0) {
      rte_pause();
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(std::min(sleep_us_, cap_us)));
    sleep_us_ = std::min(sleep_us_ * 2, max_us_);
    return true;
  }

 private:
  uint32_t max_us_;
  uint32_t polls_before_sleep_;
  uint32_t empty_polls_ = 0;
  uint32_t sleep_us_ = 1;
};

}  // namespace agq::dataplane
