// Float -> the classic switch's unsigned 32-bit format and back.
//
// The classic switch adds plain uint32 values, truncates each to the top L
// bits of its window and lets carries out of the window top spill into the
// neighbour. So values must be unsigned and leave headroom for
// total_workers additions: u = round((clip(x) + range) * scale), with
// scale chosen so that total_workers * max(u) < 2^32. range and scale are
// shared by the whole job (every worker and the PS derive them from the
// same --range and --workers).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace agq::worker {

class Quantizer {
 public:
  Quantizer(double range, unsigned total_workers)
      : range_(range), n_(total_workers),
        max_u_(double(uint64_t(1) << 32) / double(total_workers) - 1.0),
        scale_(std::floor(max_u_) / (2.0 * range)) {}

  uint32_t quantize(float x) const {
    const double c = std::clamp(double(x), -range_, range_);
    return uint32_t(std::min(std::floor((c + range_) * scale_ + 0.5), std::floor(max_u_)));
  }
  // Sum of n quantized values (as the switch returns it) back to a float sum.
  double dequantize_sum(uint64_t sum, unsigned n) const { return double(sum) / scale_ - n * range_; }
  // Worst-case error of one element of the sum when each contribution was
  // truncated to its top L bits (rounding half a step + truncation).
  double error_bound(int L, unsigned n) const {
    const double trunc = L >= 32 ? 0.0 : double((uint64_t(1) << (32 - L)) - 1);
    return n * (0.5 + trunc) / scale_;
  }
  bool clipped(float x) const { return std::fabs(double(x)) > range_; }

  double range() const { return range_; }
  double scale() const { return scale_; }
  unsigned total_workers() const { return n_; }

 private:
  double range_;
  unsigned n_;
  double max_u_;
  double scale_;
};

}  // namespace agq::worker
