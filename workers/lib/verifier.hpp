// Checks every aggregate the PS receives: against the classic model (bit
// for bit) and against the exact float sum of the workers' gradients (the
// quantization error). Regenerates every worker's contribution from the job
// spec, so it needs no traffic from the workers beyond the aggregates.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/expected_model.hpp"
#include "lib/gradient_source.hpp"
#include "lib/job.hpp"
#include "lib/quantizer.hpp"

namespace agq::worker {

struct ErrorStats {
  uint64_t elements = 0;       // real elements checked (padding excluded)
  uint64_t clipped = 0;        // worker values outside [-range, range]
  double max_abs = 0, sum_sq = 0;
  double max_over_bound = 0;   // max |error| / bound(L) over checked elements (<= 1 expected, unclipped)
  void add(double err, double bound);
  double rms() const;
};

struct VerifyStats {
  uint64_t checked = 0, exact = 0, mismatches = 0, order_dependent = 0, resyncs = 0;
  std::array<uint64_t, 9> width_hist{};  // index L/4: how many results had window width L
  ErrorStats exact_results;              // quantization error of results the model explains
  ErrorStats order_dependent_results;    // error of the order-dependent ones (packed mode)
};

struct VerifyResult {
  Check check;
  std::array<double, kLanes> exact_sum{};  // float sum of the workers' values
  std::array<double, kLanes> dequantized{};
};

class Verifier {
 public:
  // Builds one source per worker id 0..total_workers-1; false with err on failure.
  bool init(const JobSpec& job, const std::string& source_spec, uint64_t seed, double range, std::string& err);

  // The quantized contribution of `worker` to `chunk` (what it sends).
  Lanes contribution(unsigned worker, uint64_t chunk) const;

  VerifyResult verify(uint64_t chunk, const Lanes& got);
  // See ExpectedModel::forget.
  void assume_fresh() { model_->assume_fresh(); }
  void forget(uint64_t chunk) { model_->forget(job_.hash1_of_slot(job_.slot_of(chunk))); }

  const VerifyStats& stats() const { return stats_; }
  const Quantizer& quantizer() const { return *quant_; }

 private:
  JobSpec job_;
  std::vector<std::unique_ptr<GradientSource>> sources_;
  std::unique_ptr<Quantizer> quant_;
  std::unique_ptr<ExpectedModel> model_;
  VerifyStats stats_;
  std::array<std::vector<uint32_t>, kLanes> scratch_;
};

// Element `i` of a worker's tensor as quantized for the wire; padding past
// the tensor's end is 0.0 so every worker pads alike.
inline uint32_t quantized_element(const GradientSource& s, const Quantizer& q, const JobSpec& job, uint64_t i) {
  return q.quantize(i < job.elements ? s.at(i) : 0.0f);
}

}  // namespace agq::worker
