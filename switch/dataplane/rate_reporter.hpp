// --stats-interval: every S seconds, one line of rates from the lcores'
// counters ("rx 1.23 Mpps tx 1.20 Mpps ..."), on its own thread so the
// dataplane never formats or prints.
#pragma once

#include <atomic>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/switch_dataplane.hpp"

namespace agq::dataplane {

class RateReporter {
 public:
  RateReporter(const SwitchDataplane& dp, double interval_s, std::FILE* out = stdout)
      : dp_(dp), interval_s_(interval_s), out_(out) {}

  // Prints until `stop` is set (checked every 100 ms).
  void run(const std::atomic<bool>& stop);

  // The line for two totals() snapshots `dt_s` seconds apart.
  static std::string line(const std::vector<std::pair<std::string, uint64_t>>& prev,
                          const std::vector<std::pair<std::string, uint64_t>>& cur, double dt_s);

 private:
  const SwitchDataplane& dp_;
  double interval_s_;
  std::FILE* out_;
};

}  // namespace agq::dataplane
