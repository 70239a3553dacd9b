// The synthetic gradients of an agq job and the check of its results.
//
// Every process can build every worker's gradient of every round (counter-
// based sources, per-round seeds): AgqGradients generates them once, up
// front, into plain buffers, which the workers send from and the verifier
// reads (never regenerated per check).
//
// AgqVerifier checks one RESULT against a reference that shares nothing
// with the packet path's vectorised encoder: it re-encodes every worker's
// values with the scalar agqc::encode, checks that our own DATA carried
// exactly those lanes, that the result lanes are exactly sum_i(u_i >> d),
// that the decoded values are the scalar agqc::decode_sum of them (unbiased,
// PROTOCOL.md §2) and within its error bound N * 2^(e+d-1) of the exact
// float sum. Error feedback must be off: the reference encodes x, not x +
// residual.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lib/agq_codec.hpp"
#include "lib/agq_job.hpp"
#include "lib/gradient_source.hpp"
#include "lib/verifier.hpp"
#include "lib/verify_mode.hpp"

namespace agq::worker {

using AgqLanes = std::array<uint32_t, kAgqLanes>;

class AgqGradients {
 public:
  // Builds worker w's tensors of every round for w in `workers` (all N when empty).
  bool init(const AgqJobSpec& job, const std::string& spec, uint64_t seed, const std::vector<unsigned>& workers,
            std::string& err);
  bool has(unsigned w) const { return w < bufs_.size() && bufs_[w].data; }
  // Worker w's tensor of round r (r < job.rounds).
  std::span<const float> tensor(unsigned w, uint32_t round) const {
    return {bufs_[w].data + size_t(round) * elements_, elements_};
  }
  const std::string& describe() const { return describe_; }

 private:
  // One worker's rounds, back to back, in fresh anonymous memory on huge
  // pages where the kernel gives them: no zero-fill of ours, and ~1/512 of
  // the page faults of 4 KiB pages (the faults, not the math, were most of
  // a big job's start-up).
  struct Rounds {
    float* data = nullptr;
    size_t bytes = 0;
    Rounds() = default;
    Rounds(Rounds&& o) noexcept : data(o.data), bytes(o.bytes) { o.data = nullptr, o.bytes = 0; }
    Rounds& operator=(Rounds&&) = delete;
    ~Rounds();
  };
  std::vector<Rounds> bufs_;  // [worker]
  size_t elements_ = 0;
  std::string describe_;
};

struct AgqCheck {
  bool exact = true;
  bool sent_ok = true;      // our DATA lanes equal the reference encoding
  bool decode_ok = true;    // the decoded values equal the scalar unbiased decode of the result lanes, bit for bit
  float decoded = 0, reference = 0;  // !decode_ok: the first lane that differs
  int bad_lane = -1;
  uint32_t got = 0, expected = 0;
  bool any_clipped = false;  // some contribution clipped (OVERFLOW expected)
};

class AgqVerifier {
 public:
  AgqVerifier(const AgqGradients& g, const AgqJobSpec& job, unsigned lanes)
      : g_(g), job_(job), lanes_(lanes), guard_(agqc::guard_bits(job.num_workers)) {}
  // A result of chunk `chunk` of `round` encoded with p, granted `width`
  // bits; result and sent lanes big-endian as in the frames (sent may be
  // null); decoded: the values the engine wrote (null for a redone result,
  // which measures no error). `self` = our worker id.
  AgqCheck check(uint32_t round, uint64_t chunk, const agqc::ChunkParams& p, int width, const uint8_t* result_be,
                 const uint8_t* sent_be, unsigned self, const float* decoded, ErrorStats& err) const;

 private:
  const AgqGradients& g_;
  AgqJobSpec job_;
  unsigned lanes_;
  int guard_;
};

}  // namespace agq::worker
