// Gradient tensors of the job's workers. Synthetic sources are counter
// based (element i of worker w is a pure function of seed, w and i), so the
// PS can regenerate every worker's contribution to verify an aggregate, and
// a retransmission re-sends exactly the same values, without storing tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace agq::worker {

class GradientSource {
 public:
  virtual ~GradientSource() = default;
  virtual float at(uint64_t i) const = 0;  // element i (i < elements of the job)
  // Elements first .. first + n - 1 into out: the same values as at(), in
  // batches where a source can (normal: four lanes of AVX2 log and cos).
  virtual void fill(uint64_t first, size_t n, float* out) const {
    for (size_t k = 0; k < n; ++k) out[k] = at(first + k);
  }
  virtual std::string describe() const = 0;
};

// Spec syntax (the --source flag):
//   normal[:sigma]      N(0, sigma^2), default sigma 1
//   laplace[:b]         Laplace(0, b), heavy-tailed, default b 1
//   sparse[:density]    normal values at a fraction `density` (default 0.01), else 0
//   constant[:v]        every element v (default 1)
//   file:PATH           float32 .npy or raw file; "{id}" in PATH becomes the worker id
// Returns nullptr with `err` set on a bad spec or file; `elements` is the
// job's length (a file must hold at least that many values).
std::unique_ptr<GradientSource> make_source(const std::string& spec, uint64_t seed, unsigned worker_id,
                                            uint64_t elements, std::string& err);

}  // namespace agq::worker
