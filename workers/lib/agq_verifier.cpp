#include "lib/agq_verifier.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace agq::worker {

namespace {
inline uint32_t rd32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

// MemAvailable of /proc/meminfo in bytes; 0 when it cannot be read.
size_t mem_available() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
  std::fclose(f);
  return size_t(kb) << 10;
}
}  // namespace

AgqGradients::Rounds::~Rounds() {
  if (data) ::munmap(data, bytes);
}

bool AgqGradients::init(const AgqJobSpec& job, const std::string& spec, uint64_t seed,
                        const std::vector<unsigned>& workers, std::string& err) {
  bufs_.clear();
  bufs_.resize(job.num_workers);
  elements_ = job.elements;
  std::vector<unsigned> ws = workers;
  if (ws.empty())
    for (unsigned w = 0; w < job.num_workers; ++w) ws.push_back(w);
  for (unsigned w : ws)
    if (w >= job.num_workers) {
      err = "worker id " + std::to_string(w) + " is not below N = " + std::to_string(job.num_workers);
      return false;
    }
  // Every tensor is built before the job starts: a job larger than the
  // machine's free memory is refused here, with what to change, rather than
  // ended by the OOM killer halfway through the fill.
  const size_t per_worker = size_t(job.rounds) * job.elements * sizeof(float);
  const size_t need = per_worker * ws.size(), avail = mem_available();
  if (avail != 0 && need > avail) {
    err = "the synthetic gradients need " + std::to_string(need >> 20) + " MiB (" + std::to_string(ws.size()) +
          " workers' tensors x " + std::to_string(job.rounds) + " rounds x " + std::to_string(job.elements) +
          " elements x 4 B), more than the " + std::to_string(avail >> 20) +
          " MiB this machine has available: fewer --rounds or --elements" +
          (workers.empty() ? std::string(", or --verify off (then a process builds only its own workers')") : "");
    return false;
  }
  for (unsigned w : ws) {
    Rounds& b = bufs_[w];
    if (b.data) continue;
    b.bytes = std::max<size_t>(1, size_t(job.rounds) * job.elements * sizeof(float));
    void* p = ::mmap(nullptr, b.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      err = "cannot map " + std::to_string(b.bytes >> 20) + " MiB for worker " + std::to_string(w) +
            "'s gradients (" + std::to_string(job.rounds) + " rounds of " + std::to_string(job.elements) +
            " elements)";
      b.bytes = 0;
      return false;
    }
    ::madvise(p, b.bytes, MADV_HUGEPAGE);  // advice: fine if the kernel says no
    b.data = static_cast<float*>(p);
    for (uint32_t r = 0; r < job.rounds; ++r) {
      auto s = make_source(spec, round_seed(seed, r), w, job.elements, err);
      if (!s) return false;
      if (describe_.empty()) describe_ = s->describe();
      s->fill(0, job.elements, b.data + size_t(r) * job.elements);
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
    const std::span<const float> x = g_.tensor(w, round);
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
    const float ref = float(agqc::decode_sum(got, n, width, guard_, p.exponent, d));
    if (std::bit_cast<uint32_t>(ref) != std::bit_cast<uint32_t>(decoded[k]) && r.decode_ok) {
      r.decode_ok = false;
      r.bad_lane = r.exact && r.sent_ok ? int(k) : r.bad_lane;
      r.decoded = decoded[k];
      r.reference = ref;
    }
    if (clipped[k]) {
      ++err.clipped;  // the clip is the exponent's choice (OVERFLOW redo), not the switch's error
      continue;
    }
    // The job's values are float32: the bound plus the rounding of the decoded sum to float.
    err.add(double(decoded[k]) - fsum[k],
            agqc::error_bound(n, p.exponent, d) + std::fabs(double(decoded[k])) * 0x1p-24);
  }
  if (!r.sent_ok || !r.decode_ok) r.exact = false;
  return r;
}

}  // namespace agq::worker
