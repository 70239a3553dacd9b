#include "lib/verifier.hpp"

#include <cmath>

namespace agq::worker {

void ErrorStats::add(double err, double bound) {
  ++elements;
  const double a = std::fabs(err);
  if (a > max_abs) max_abs = a;
  sum_sq += err * err;
  if (bound > 0 && a / bound > max_over_bound) max_over_bound = a / bound;
}

double ErrorStats::rms() const { return elements ? std::sqrt(sum_sq / double(elements)) : 0.0; }

bool Verifier::init(const JobSpec& job, const std::string& source_spec, uint64_t seed, double range,
                    std::string& err) {
  job_ = job;
  sources_.clear();
  for (unsigned w = 0; w < job.total_workers; ++w) {
    auto s = make_source(source_spec, seed, w, job.elements, err);
    if (!s) return false;
    sources_.push_back(std::move(s));
  }
  quant_ = std::make_unique<Quantizer>(range, job.total_workers);
  model_ = std::make_unique<ExpectedModel>(job);
  for (auto& v : scratch_) v.resize(job.total_workers);
  return true;
}

Lanes Verifier::contribution(unsigned worker, uint64_t chunk) const {
  Lanes l{};
  for (int k = 0; k < kLanes; ++k)
    l[k] = quantized_element(*sources_[worker], *quant_, job_, chunk * kLanes + k);
  return l;
}

VerifyResult Verifier::verify(uint64_t chunk, const Lanes& got) {
  VerifyResult r;
  for (unsigned w = 0; w < job_.total_workers; ++w) {
    const Lanes l = contribution(w, chunk);
    for (int k = 0; k < kLanes; ++k) scratch_[k][w] = l[k];
  }
  std::array<std::span<const uint32_t>, kLanes> spans;
  for (int k = 0; k < kLanes; ++k) spans[k] = scratch_[k];
  r.check = model_->check(job_.hash1_of_slot(job_.slot_of(chunk)), spans, got);

  ++stats_.checked;
  switch (r.check.verdict) {
    case Verdict::Exact: ++stats_.exact; break;
    case Verdict::Mismatch: ++stats_.mismatches; break;
    case Verdict::OrderDependent: ++stats_.order_dependent; break;
  }
  if (r.check.resynced) ++stats_.resyncs;
  if (r.check.width > 0) ++stats_.width_hist[r.check.width / 4];

  const unsigned n = job_.total_workers;
  for (int k = 0; k < kLanes; ++k) {
    const uint64_t e = chunk * kLanes + k;
    if (e >= job_.elements) continue;
    double sum = 0;
    bool clipped = false;
    for (unsigned w = 0; w < n; ++w) {
      const float x = sources_[w]->at(e);
      sum += x;
      clipped |= quant_->clipped(x);
    }
    r.exact_sum[k] = sum;
    r.dequantized[k] = quant_->dequantize_sum(got[k], n);
    if (r.check.verdict == Verdict::Mismatch) continue;  // a wrong result says nothing about quantization
    ErrorStats& es = r.check.verdict == Verdict::Exact ? stats_.exact_results : stats_.order_dependent_results;
    if (clipped) {
      ++es.clipped;
      continue;  // clipping error is the range's choice, not the switch's
    }
    const int L = r.check.width > 0 ? r.check.width : 4;
    es.add(r.dequantized[k] - sum, quant_->error_bound(L, n));
  }
  return r;
}

}  // namespace agq::worker
