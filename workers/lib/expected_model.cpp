#include "lib/expected_model.hpp"

#include "lib/classic_window.hpp"

namespace agq::worker {

uint32_t solo_lane_result(std::span<const uint32_t> contributions, int p) {
  const int L = solo_width(p);
  uint32_t cell = 0;  // the window is cleared when the seq is allocated
  for (uint32_t v : contributions) cell += (v & top_bits(L)) >> (4 * p);
  return uint32_t((cell & window_mask(p, 8)) << (4 * p));
}

namespace {

Lanes solo_result(const std::array<std::span<const uint32_t>, kLanes>& c, int p) {
  Lanes r{};
  for (int k = 0; k < kLanes; ++k) r[k] = solo_lane_result(c[k], p);
  return r;
}

}  // namespace

std::optional<int> ExpectedModel::predicted_p(uint16_t hash1) const {
  auto it = next_p_.find(hash1);
  if (it == next_p_.end()) return fresh_ ? std::optional<int>(0) : std::nullopt;
  if (it->second < 0) return std::nullopt;
  return it->second;
}

Check ExpectedModel::check(uint16_t hash1, const std::array<std::span<const uint32_t>, kLanes>& c,
                           const Lanes& got) {
  return job_.seqs_per_agg == 1 ? check_exact(hash1, c, got) : check_packed(c, got);
}

Check ExpectedModel::check_exact(uint16_t hash1, const std::array<std::span<const uint32_t>, kLanes>& c,
                                 const Lanes& got) {
  Check r;
  const auto predicted = predicted_p(hash1);
  if (predicted) {
    r.expected = solo_result(c, *predicted);
    if (r.expected == got) {
      r.verdict = Verdict::Exact;
      r.p = *predicted;
    }
  }
  if (r.p < 0) {
    // Unknown or missed cursor: find the positions that explain the result.
    int match = -1, matches = 0;
    for (int p = 0; p < 8; ++p)
      if (solo_result(c, p) == got) {
        if (match < 0) match = p;
        ++matches;
      }
    if (!predicted) r.expected = solo_result(c, 0);
    if (matches > 0) {
      r.verdict = Verdict::Exact;
      r.resynced = predicted.has_value();
      r.expected = got;
      // Several positions give the same bits (values with zero low bits):
      // the result is right, but the cursor stays unknown.
      r.p = matches == 1 ? match : -1;
    }
  }
  if (r.p >= 0) {
    r.width = solo_width(r.p);
    next_p_[hash1] = next_cursor(r.p);
  } else {
    next_p_[hash1] = -1;
  }
  return r;
}

Check ExpectedModel::check_packed(const std::array<std::span<const uint32_t>, kLanes>& c,
                                  const Lanes& got) const {
  Check r;
  r.verdict = Verdict::OrderDependent;
  r.expected = solo_result(c, 0);
  // Widths 32, 28, ..., 4: a seq that kept one window of width L throughout
  // returns sum(v & TOP(L)) whatever its position.
  for (int p = 0; p < 8; ++p) {
    if (solo_result(c, p) == got) {
      r.verdict = Verdict::Exact;
      r.width = solo_width(p);
      r.expected = got;
      break;
    }
  }
  return r;
}

}  // namespace agq::worker
