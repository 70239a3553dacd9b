// Which lane kernel the CPU can run (lanes_simd.hpp holds the kernels).
#include "pipeline/agq_fast/lanes_simd.hpp"

namespace agq::pipeline::agq::fast {

const char* to_string(Simd s) {
  switch (s) {
    case Simd::Scalar: return "scalar";
    case Simd::Avx2: return "avx2";
    case Simd::Avx512: return "avx512";
  }
  return "?";
}

bool simd_supported(Simd s) {
#if defined(__x86_64__)
  switch (s) {
    case Simd::Scalar: return true;
    case Simd::Avx2: return __builtin_cpu_supports("avx2");
    case Simd::Avx512: return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  }
  return false;
#else
  return s == Simd::Scalar;
#endif
}

Simd best_simd() {
  if (simd_supported(Simd::Avx512)) return Simd::Avx512;
  if (simd_supported(Simd::Avx2)) return Simd::Avx2;
  return Simd::Scalar;
}

}  // namespace agq::pipeline::agq::fast
