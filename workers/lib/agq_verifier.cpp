#include "lib/agq_verifier.hpp"

#include <cmath>
#include <cstdlib>

namespace agq::worker {

namespace {
inline uint32_t rd32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}
}  // namespace

bool AgqGradients::init(const AgqJobSpec& job, const std::string& spec, uint64_t seed,
                        const std::vector<unsigned>& workers, std::string& err) {
  bufs_.assign(job.num_workers, {});
  std::vector<unsigned> ws = workers;
  if (ws.empty())
    for (unsigned w = 0; w < job.num_workers; ++w) ws.push_back(w);
  for (unsigned w : ws) {
    if (w >= job.num_workers) {
      err = "worker id " + std::to_string(w) + " is not below N = " + std::to_string(job.num_workers);
      return false;
    }
    if (!bufs_[w].empty()) continue;
    bufs_[w].resize(job.rounds);
    for (uint32_t r = 0; r < job.rounds; ++r) {
      auto s = make_source(spec, round_seed(seed, r), w, job.elements, err);
      if (!s) return false;
      if (describe_.empty()) describe_ = s->describe();
      std::vector<float>& b = bufs_[w][r];
      b.resize(job.elements);
      for (uint64_t i = 0; i < job.elements; ++i) b[i] = s->at(i);
    }
  }
  return true;
}

AgqCheck AgqVerifier::check(uint32_t round, uint64_t chunk, const agqc::ChunkParams& p, int width,
                            const uint8_t* result_be, const uint8_t* sent_be, unsigned self, const float* decoded,
                            ErrorStats& err) const {
  AgqCheck r;
  const unsigned n = job_.num_workers;
  const int d = p.width - width;
  std::array<uint64_t, kAgqLanes> sum{};
  std::array<double, kAgqLanes> fsum{};
  std::array<bool, kAgqLanes> clipped{};
  const uint64_t base = chunk * lanes_;
  for (unsigned w = 0; w < n; ++w) {
    const std::vector<float>& x = g_.tensor(w, round);
    for (unsigned k = 0; k < lanes_; ++k) {
      const float v = base + k < job_.elements ? x[base + k] : 0.0f;  // padding past the end is 0
      const auto e = agqc::encode(v, p.width, guard_, p.exponent);
      sum[k] += e.u >> d;
      fsum[k] += double(v);
      clipped[k] = clipped[k] || e.clipped;
      if (w == self && sent_be && rd32(sent_be + 4 * k) != e.u && r.sent_ok) {
        r.sent_ok = false;
        r.bad_lane = int(k);
        r.got = rd32(sent_be + 4 * k);
        r.expected = e.u;
      }
    }
  }
  for (unsigned k = 0; k < lanes_; ++k) {
    r.any_clipped |= clipped[k];
    const uint32_t got = rd32(result_be + 4 * k);
    if (uint64_t(got) != sum[k] && r.exact && r.sent_ok) {
      r.exact = false;
      r.bad_lane = int(k);
      r.got = got;
      r.expected = uint32_t(sum[k]);
    }
    if (!decoded || base + k >= job_.elements) continue;
    if (clipped[k]) {
      ++err.clipped;  // the clip is the exponent's choice (OVERFLOW redo), not the switch's error
      continue;
    }
    // The job's values are float32: the bound plus the rounding of the decoded sum to float.
    err.add(double(decoded[k]) - fsum[k],
            agqc::error_bound(n, p.exponent, d) + std::fabs(double(decoded[k])) * 0x1p-24);
  }
  if (!r.sent_ok) r.exact = false;
  return r;
}

}  // namespace agq::worker
