// What the classic pipeline must return for one chunk, given every worker's
// quantized contribution.
//
// Exact mode (one live seq per aggregator, seqs_per_agg = 1): the seq owns
// the window [p, 8) of its aggregator, L = 32 - 4p, where p is the
// aggregator's rotating cursor (0,3,6,1,4,7,2,5: it advances on every
// allocation, whatever the occupancy). The result is then independent of
// arrival order and bit-for-bit predictable. The model tracks the cursor per
// aggregator; the first result on an aggregator reveals it (the switch may
// have been used before), after which every result must match the predicted
// p exactly.
//
// Packed mode (seqs_per_agg > 1): windows shrink and grow as other seqs on
// the aggregator start and end, so the result depends on arrival order
// (reference §5.3). The model accepts a result that equals the sum at one
// constant width L ("exact at width L") and classifies anything else as
// order-dependent; such results are reported, not counted as mismatches.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>

#include "lib/job.hpp"

namespace agq::worker {

using Lanes = std::array<uint32_t, kLanes>;

// The pipeline's aggregation of one lane for a seq alone at position p:
// cell starts cleared, each contribution is truncated to TOP(L), aligned by
// 4p and added with 32-bit wrap; the result is extracted and re-aligned.
uint32_t solo_lane_result(std::span<const uint32_t> contributions, int p);

enum class Verdict : uint8_t {
  Exact,           // equals the model's prediction
  Mismatch,        // equals no prediction: an error
  OrderDependent,  // packed mode: no constant window explains it (documented quirk)
};

struct Check {
  Verdict verdict = Verdict::Mismatch;
  int p = -1;         // start nibble used (exact mode), -1 if unknown
  int width = 0;      // L in bits, 0 if unknown
  bool resynced = false;  // exact mode: cursor was not where predicted (foreign allocation)
  Lanes expected{};   // the prediction (for printing mismatches)
};

class ExpectedModel {
 public:
  explicit ExpectedModel(const JobSpec& job) : job_(job) {}

  // contributions[k] = every worker's quantized value of lane k.
  Check check(uint16_t hash1, const std::array<std::span<const uint32_t>, kLanes>& contributions,
              const Lanes& got);

  // The cursor of `hash1` may have advanced without a result reaching us
  // (a retry released a partial seq): forget the prediction.
  void forget(uint16_t hash1) { next_p_[hash1] = -1; }
  // The switch's state is fresh (cleared): every aggregator's cursor is 0
  // until its first allocation, so even the first result is checked strictly.
  void assume_fresh() { fresh_ = true; }
  std::optional<int> predicted_p(uint16_t hash1) const;

 private:
  Check check_exact(uint16_t hash1, const std::array<std::span<const uint32_t>, kLanes>& c, const Lanes& got);
  Check check_packed(const std::array<std::span<const uint32_t>, kLanes>& c, const Lanes& got) const;

  JobSpec job_;
  std::unordered_map<uint16_t, int> next_p_;  // hash1 -> cursor at its next allocation, -1 unknown
  bool fresh_ = false;
};

}  // namespace agq::worker
