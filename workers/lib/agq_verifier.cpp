#include "lib/agq_verifier.hpp"

#include <stdexcept>

namespace agq::worker {

bool AgqGradients::init(const AgqJobSpec& job, const std::string& spec, uint64_t seed, std::string& err) {
  job_ = job;
  spec_ = spec;
  seed_ = seed;
  guard_ = agqc::guard_bits(job.num_workers);
  rounds_.clear();
  // Round 0 now: a bad spec or file fails at start, not mid-run.
  std::vector<std::unique_ptr<GradientSource>> v;
  for (unsigned w = 0; w < job.num_workers; ++w) {
    auto s = make_source(spec, round_seed(seed, 0), w, job.elements, err);
    if (!s) return false;
    v.push_back(std::move(s));
  }
  describe_ = v[0]->describe();
  rounds_.emplace(0, std::move(v));
  return true;
}

const std::vector<std::unique_ptr<GradientSource>>& AgqGradients::round_sources(uint32_t round) {
  auto it = rounds_.find(round);
  if (it != rounds_.end()) return it->second;
  std::vector<std::unique_ptr<GradientSource>> v;
  std::string err;
  for (unsigned w = 0; w < job_.num_workers; ++w) {
    auto s = make_source(spec_, round_seed(seed_, round), w, job_.elements, err);
    // Round 0 was built from the same spec, so this cannot fail unless a file
    // vanished mid-run; there is no sensible way to continue then.
    if (!s) throw std::runtime_error(err);
    v.push_back(std::move(s));
  }
  return rounds_.emplace(round, std::move(v)).first->second;
}

float AgqGradients::value(unsigned w, uint32_t round, uint64_t i) {
  return i < job_.elements ? round_sources(round)[w]->at(i) : 0.0f;
}

AgqLanes AgqGradients::encode(unsigned w, uint32_t round, uint64_t chunk, const agqc::ChunkParams& p,
                              bool& clipped) {
  AgqLanes l{};
  clipped = false;
  for (int k = 0; k < kAgqLanes; ++k) {
    const auto e = agqc::encode(value(w, round, chunk * kAgqLanes + k), p.width, guard_, p.exponent);
    l[k] = e.u;
    clipped |= e.clipped;
  }
  return l;
}

void AgqGradients::release_before(uint32_t round) {
  while (!rounds_.empty() && rounds_.begin()->first < round) rounds_.erase(rounds_.begin());
}

AgqCheck AgqVerifier::check(uint32_t round, uint64_t chunk, const agqc::ChunkParams& p, int width,
                            const AgqLanes& got, ErrorStats& err, bool measure) {
  AgqCheck r;
  const unsigned n = job_.num_workers;
  const int d = p.width - width;
  std::array<uint64_t, kAgqLanes> sum{};
  std::array<double, kAgqLanes> fsum{};
  std::array<bool, kAgqLanes> clipped{};
  for (unsigned w = 0; w < n; ++w) {
    for (int k = 0; k < kAgqLanes; ++k) {
      const uint64_t i = chunk * kAgqLanes + k;
      const float x = g_.value(w, round, i);
      const auto e = agqc::encode(x, p.width, guard_, p.exponent);
      sum[k] += e.u >> d;
      fsum[k] += x;
      clipped[k] = clipped[k] || e.clipped;
    }
  }
  for (int k = 0; k < kAgqLanes; ++k) {
    r.expected[k] = uint32_t(sum[k]);
    if (sum[k] != got[k] && r.exact) {
      r.exact = false;
      r.bad_lane = k;
    }
    r.decoded[k] = agqc::decode_sum(got[k], n, width, guard_, p.exponent, d);
    r.any_clipped |= clipped[k];
    if (!measure || chunk * kAgqLanes + k >= job_.elements) continue;
    if (clipped[k]) {
      ++err.clipped;  // the clip is the exponent's choice (OVERFLOW redo), not the switch's error
      continue;
    }
    err.add(r.decoded[k] - fsum[k], agqc::error_bound(n, p.exponent, d));
  }
  return r;
}

}  // namespace agq::worker
