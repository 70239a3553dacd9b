// Every process of an agq job can regenerate every worker's gradient of
// every round (counter-based sources, per-round seeds), so each worker
// checks each RESULT bit for bit against sum_i(u_i >> d) and measures the
// decoded sum's error against the exact float sum.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/agq_codec.hpp"
#include "lib/agq_job.hpp"
#include "lib/gradient_source.hpp"
#include "lib/verifier.hpp"

namespace agq::worker {

using AgqLanes = std::array<uint32_t, kAgqLanes>;

// The N workers' gradients, one set of sources per round (built on demand).
class AgqGradients {
 public:
  bool init(const AgqJobSpec& job, const std::string& spec, uint64_t seed, std::string& err);
  // Element i of worker w in round r; padding past the tensor's end is 0.
  float value(unsigned w, uint32_t round, uint64_t i);
  // Worker w's encoded lanes of a chunk; `clipped` set if any lane clipped.
  AgqLanes encode(unsigned w, uint32_t round, uint64_t chunk, const agqc::ChunkParams& p, bool& clipped);
  void release_before(uint32_t round);  // sources of older rounds are no longer needed
  const std::string& describe() const { return describe_; }

 private:
  const std::vector<std::unique_ptr<GradientSource>>& round_sources(uint32_t round);

  AgqJobSpec job_;
  std::string spec_;
  uint64_t seed_ = 1;
  int guard_ = 0;
  std::string describe_;
  std::map<uint32_t, std::vector<std::unique_ptr<GradientSource>>> rounds_;
};

struct AgqCheck {
  bool exact = true;
  int bad_lane = -1;
  AgqLanes expected{};
  std::array<double, kAgqLanes> decoded{};  // the decoded sums (what the job uses)
  bool any_clipped = false;                 // some contribution clipped (OVERFLOW expected)
};

class AgqVerifier {
 public:
  AgqVerifier(AgqGradients& g, const AgqJobSpec& job) : g_(g), job_(job), guard_(agqc::guard_bits(job.num_workers)) {}
  // A result of chunk `chunk` of `round` encoded with `p`, granted `width`
  // bits (d = p.width - width), lanes as received. Updates stats.
  AgqCheck check(uint32_t round, uint64_t chunk, const agqc::ChunkParams& p, int width, const AgqLanes& got,
                 ErrorStats& err, bool measure);

 private:
  AgqGradients& g_;
  AgqJobSpec job_;
  int guard_;
};

}  // namespace agq::worker
