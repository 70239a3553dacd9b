// Memory efficiency of the agq pipeline (docs/PROTOCOL.md §2–3), printed as a
// Markdown table: for each granted width W, how many live sequences (32
// gradients each) one MiB of aggregator memory holds, against a design that
// keeps one 32-bit register per gradient (SwitchML-like, also with a shadow
// copy); and the quantization error of the agq encoding at that width for
// N workers on normal and Laplace gradients (block floating point: the
// exponent is sized to the chunk's max, as the workers do).
//
// Not a timing benchmark: it counts bytes and measures error on real
// encodes/decodes (agq_workerlib's codec, the same code the workers run).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "lib/agq_codec.hpp"

namespace {

using namespace agq::worker::agqc;

constexpr int kLanes = 32;
// A row: 32 lanes x 2 halves (the version / shadow copy) x 32 bits = 256 B.
constexpr double kRowBytes = kLanes * 2 * 4;

struct ErrorStats {
  double rms = 0, max = 0;  // relative to max |sum|
};

// Aggregates `chunks` chunks of 32 lanes from n workers at width w and
// compares the decoded sums with the exact float sums.
ErrorStats error_at(int w, unsigned n, bool laplace, int chunks) {
  std::mt19937 rng(1234 + w * 7 + n);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::exponential_distribution<double> expo(1.0);
  const int g = guard_bits(n);
  double se = 0, worst = 0, scale = 0;
  long count = 0;
  for (int c = 0; c < chunks; ++c) {
    std::vector<std::vector<float>> x(n, std::vector<float>(kLanes));
    double m = 0;
    for (auto& v : x)
      for (auto& e : v) {
        e = float(laplace ? (rng() & 1 ? 1 : -1) * expo(rng) : normal(rng));
        m = std::max(m, double(std::fabs(e)));
      }
    const int e = exponent_for(m, w - g);
    for (int k = 0; k < kLanes; ++k) {
      std::vector<uint32_t> us;
      double exact = 0;
      for (unsigned i = 0; i < n; ++i) {
        us.push_back(encode(x[i][k], w, g, e).u);
        exact += x[i][k];
      }
      const auto s = uint32_t(expected_sum(us, w, w));
      const double got = decode_sum(s, n, w, g, e, 0);
      const double err = std::fabs(got - exact);
      se += err * err;
      worst = std::max(worst, err);
      scale = std::max(scale, std::fabs(exact));
      ++count;
    }
  }
  return {std::sqrt(se / double(count)) / scale, worst / scale};
}

}  // namespace

int main() {
  std::printf("| granted width W | sequences per MiB (agq) | per MiB (32-bit design) | memory saving |"
              " N=4 normal rms / max err | N=8 normal rms / max err | N=8 Laplace rms / max err |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|\n");
  const double mib = 1024.0 * 1024.0;
  const double plain = mib / kRowBytes;  // one sequence = one full row
  for (int w = 4; w <= 32; w += 4) {
    const double per_mib = mib / (kRowBytes * w / 32.0);
    auto cell = [&](unsigned n, bool lap) {
      if (w - guard_bits(n) < 2) return std::string("— (W < g + 2)");
      const ErrorStats s = error_at(w, n, lap, 200);
      char b[64];
      std::snprintf(b, sizeof b, "%.2e / %.2e", s.rms, s.max);
      return std::string(b);
    };
    std::printf("| %d | %.0f | %.0f | %.1fx | %s | %s | %s |\n", w, per_mib, plain, per_mib / plain,
                cell(4, false).c_str(), cell(8, false).c_str(), cell(8, true).c_str());
  }
  std::printf("\nErrors are relative to the largest |sum| in the sample (200 chunks x 32 lanes),"
              " block floating point per chunk, guard bits g = ceil(log2 N).\n");
  return 0;
}
