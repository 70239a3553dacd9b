#include "lib/gradient_source.hpp"

#include <immintrin.h>

#include <cmath>
#include <cstdlib>

#include "lib/npy.hpp"

// glibc's libmvec: log and cos of four doubles (the AVX2 vector ABI, what
// GCC itself calls for a vectorised loop under -ffast-math). Called by name
// so that the rest of the file keeps IEEE semantics.
extern "C" __m256d _ZGVdN4v_log(__m256d);
extern "C" __m256d _ZGVdN4v_cos(__m256d);

namespace agq::worker {

namespace {

// splitmix64: a good 64-bit mixer, enough to make independent uniforms from
// a (seed, worker, element, draw) counter.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class Counter {
 public:
  Counter(uint64_t seed, unsigned worker) : key_(mix(seed ^ mix(worker + 0x1234567ull))) {}
  // Uniform in (0, 1), never 0 (log is taken of it).
  double uniform(uint64_t i, unsigned draw) const {
    const uint64_t r = mix(key_ ^ mix(i * 4 + draw));
    return (double(r >> 11) + 0.5) * 0x1.0p-53;
  }
  // uniform(i + l, draw) in lane l: the inputs of a four-lane kernel.
  __m256d uniform4(uint64_t i, unsigned draw) const {
    return _mm256_setr_pd(uniform(i, draw), uniform(i + 1, draw), uniform(i + 2, draw), uniform(i + 3, draw));
  }
  double normal(uint64_t i) const {  // Box-Muller, one of the pair
    return std::sqrt(-2.0 * std::log(uniform(i, 0))) * std::cos(2.0 * M_PI * uniform(i, 1));
  }

 private:
  uint64_t key_;
};

// fill() of a source whose kernel makes four elements at once: whole quads
// through quad(i, out) (elements i..i+3), the tail through at(), which is
// lane 0 of the same kernel.
template <class Source, class Quad>
void fill_by_quads(const Source& src, uint64_t first, size_t n, float* out, Quad quad) {
  size_t k = 0;
  for (; k + 4 <= n; k += 4) quad(first + k, out + k);
  for (; k < n; ++k) out[k] = src.at(first + k);
}

// N(0, sigma^2) by Box-Muller over the counter's two uniforms of element i,
// four elements at a time through libmvec. A worker that checks every
// RESULT (--verify all) builds every worker's tensors of every round before
// it starts (~130 M elements for a 500-round test job of two workers).
// bench_worker_stages, one core: fill() 7.1 ns per element, at() 15.9,
// the scalar libm formula this replaced 29.9. at(i) is lane 0 of the same
// kernel (lanes never mix), so fill() and at() agree bit for bit.
class Normal final : public GradientSource {
 public:
  Normal(Counter c, double sigma) : c_(c), sigma_(sigma) {}
  float at(uint64_t i) const override {  // lane 0 of the kernel; lanes never mix
    float out[4];
    four(_mm256_set1_pd(c_.uniform(i, 0)), _mm256_set1_pd(c_.uniform(i, 1)), out);
    return out[0];
  }
  void fill(uint64_t first, size_t n, float* out) const override {
    fill_by_quads(*this, first, n, out, [this](uint64_t i, float* o) { four(c_.uniform4(i, 0), c_.uniform4(i, 1), o); });
  }
  std::string describe() const override { return "normal(sigma=" + std::to_string(sigma_) + ")"; }

 private:
  // sigma * sqrt(-2 ln u0) * cos(2 pi u1), lane by lane.
  void four(__m256d u0, __m256d u1, float* out) const {
    const __m256d r = _mm256_sqrt_pd(_mm256_mul_pd(_mm256_set1_pd(-2.0), _ZGVdN4v_log(u0)));
    const __m256d z = _mm256_mul_pd(r, _ZGVdN4v_cos(_mm256_mul_pd(_mm256_set1_pd(2.0 * M_PI), u1)));
    _mm_storeu_ps(out, _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_set1_pd(sigma_), z)));
  }

  Counter c_;
  double sigma_;
};

// Laplace(0, b) by inversion of the counter's uniform of element i, four
// elements at a time through libmvec's log, as Normal; at(i) is lane 0 of
// the same kernel.
class Laplace final : public GradientSource {
 public:
  Laplace(Counter c, double b) : c_(c), b_(b) {}
  float at(uint64_t i) const override {
    float out[4];
    four(_mm256_set1_pd(c_.uniform(i, 0)), out);
    return out[0];
  }
  void fill(uint64_t first, size_t n, float* out) const override {
    fill_by_quads(*this, first, n, out, [this](uint64_t i, float* o) { four(c_.uniform4(i, 0), o); });
  }
  std::string describe() const override { return "laplace(b=" + std::to_string(b_) + ")"; }

 private:
  // -b sign(u - 1/2) ln(1 - 2|u - 1/2|), lane by lane.
  void four(__m256d u, float* out) const {
    const __m256d sign_bit = _mm256_set1_pd(-0.0);
    const __m256d c = _mm256_sub_pd(u, _mm256_set1_pd(0.5));
    const __m256d mag = _mm256_andnot_pd(sign_bit, c);
    const __m256d l = _ZGVdN4v_log(_mm256_sub_pd(_mm256_set1_pd(1.0), _mm256_add_pd(mag, mag)));
    // -b * sign(c) * l: b's sign flipped where c >= 0 (copysign(1, c) of the scalar formula).
    const __m256d nb = _mm256_xor_pd(_mm256_set1_pd(b_), _mm256_andnot_pd(_mm256_and_pd(sign_bit, c), sign_bit));
    _mm_storeu_ps(out, _mm256_cvtpd_ps(_mm256_mul_pd(nb, l)));
  }

  Counter c_;
  double b_;
};

class Sparse final : public GradientSource {
 public:
  Sparse(Counter c, double density) : c_(c), density_(density) {}
  float at(uint64_t i) const override { return c_.uniform(i, 2) < density_ ? float(c_.normal(i)) : 0.0f; }
  std::string describe() const override { return "sparse(density=" + std::to_string(density_) + ")"; }
 private:
  Counter c_;
  double density_;
};

class Constant final : public GradientSource {
 public:
  explicit Constant(float v) : v_(v) {}
  float at(uint64_t) const override { return v_; }
  std::string describe() const override { return "constant(" + std::to_string(v_) + ")"; }
 private:
  float v_;
};

class File final : public GradientSource {
 public:
  File(std::string path, std::vector<float> v) : path_(std::move(path)), v_(std::move(v)) {}
  float at(uint64_t i) const override { return v_[i]; }
  std::string describe() const override { return "file(" + path_ + ", " + std::to_string(v_.size()) + " values)"; }
 private:
  std::string path_;
  std::vector<float> v_;
};

bool parse_param(const std::string& s, double dflt, double& out) {
  if (s.empty()) { out = dflt; return true; }
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end && *end == '\0' && std::isfinite(out);
}

}  // namespace

std::unique_ptr<GradientSource> make_source(const std::string& spec, uint64_t seed, unsigned worker_id,
                                            uint64_t elements, std::string& err) {
  const auto colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : spec.substr(colon + 1);
  const Counter c(seed, worker_id);
  double v = 0;
  auto bad = [&](const char* what) {
    err = "bad --source '" + spec + "': " + what;
    return nullptr;
  };
  if (kind == "normal") {
    if (!parse_param(arg, 1.0, v) || v <= 0) return bad("sigma must be a positive number");
    return std::make_unique<Normal>(c, v);
  }
  if (kind == "laplace") {
    if (!parse_param(arg, 1.0, v) || v <= 0) return bad("b must be a positive number");
    return std::make_unique<Laplace>(c, v);
  }
  if (kind == "sparse") {
    if (!parse_param(arg, 0.01, v) || v < 0 || v > 1) return bad("density must be in [0, 1]");
    return std::make_unique<Sparse>(c, v);
  }
  if (kind == "constant") {
    if (!parse_param(arg, 1.0, v)) return bad("value must be a number");
    return std::make_unique<Constant>(float(v));
  }
  if (kind == "file") {
    std::string path = arg;
    if (const auto at = path.find("{id}"); at != std::string::npos)
      path.replace(at, 4, std::to_string(worker_id));
    std::vector<float> data;
    if (!load_float32_file(path, data, err)) return nullptr;
    if (data.size() < elements) {
      err = path + " holds " + std::to_string(data.size()) + " float32 values, the job needs " +
            std::to_string(elements) + " (--elements)";
      return nullptr;
    }
    return std::make_unique<File>(path, std::move(data));
  }
  return bad("kind must be normal, laplace, sparse, constant or file");
}

}  // namespace agq::worker
