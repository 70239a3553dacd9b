// Three implementations of the lane pass: scalar, AVX2 (8 lanes per
// vector), AVX-512 (16). Each vector kernel carries its own target
// attribute: the file needs no -m flag beyond the project's.
#include "pipeline/agq_fast/lanes_simd.hpp"

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace agq::pipeline::agq::fast {

namespace {

void lane_add_scalar(uint32_t* cells, uint8_t* wire, unsigned n, const LaneOp& op) {
  for (unsigned k = 0; k < n; ++k) {
    uint32_t x;
    std::memcpy(&x, wire + 4 * k, 4);
    x = ((__builtin_bswap32(x) >> op.trunc) & op.value_mask) << op.align;
    const uint32_t c = cells[k] += x;
    if (op.extract_on) {
      const uint32_t r = __builtin_bswap32((c >> op.extract) & op.result_mask);
      std::memcpy(wire + 4 * k, &r, 4);
    }
  }
}
void lane_clear_scalar(uint32_t* cells, uint32_t keep, unsigned n) {
  for (unsigned k = 0; k < n; ++k) cells[k] &= keep;
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) void lane_add_avx2(uint32_t* cells, uint8_t* wire, unsigned n, const LaneOp& op) {
  const __m256i bswap = _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12,  //
                                         3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
  const __m128i trunc = _mm_cvtsi32_si128(op.trunc), align = _mm_cvtsi32_si128(op.align),
                extract = _mm_cvtsi32_si128(op.extract);
  const __m256i vmask = _mm256_set1_epi32(int(op.value_mask)), rmask = _mm256_set1_epi32(int(op.result_mask));
  for (unsigned k = 0; k < n; k += 8) {
    __m256i* w = reinterpret_cast<__m256i*>(wire + 4 * k);
    __m256i* c = reinterpret_cast<__m256i*>(cells + k);
    __m256i x = _mm256_shuffle_epi8(_mm256_loadu_si256(w), bswap);
    x = _mm256_sll_epi32(_mm256_and_si256(_mm256_srl_epi32(x, trunc), vmask), align);
    const __m256i sum = _mm256_add_epi32(_mm256_load_si256(c), x);
    _mm256_store_si256(c, sum);
    if (op.extract_on)
      _mm256_storeu_si256(w, _mm256_shuffle_epi8(_mm256_and_si256(_mm256_srl_epi32(sum, extract), rmask), bswap));
  }
}
__attribute__((target("avx2"))) void lane_clear_avx2(uint32_t* cells, uint32_t keep, unsigned n) {
  const __m256i m = _mm256_set1_epi32(int(keep));
  for (unsigned k = 0; k < n; k += 8) {
    __m256i* c = reinterpret_cast<__m256i*>(cells + k);
    _mm256_store_si256(c, _mm256_and_si256(_mm256_load_si256(c), m));
  }
}

__attribute__((target("avx512f,avx512bw"))) void lane_add_avx512(uint32_t* cells, uint8_t* wire, unsigned n,
                                                                 const LaneOp& op) {
  const __m512i bswap = _mm512_broadcast_i32x4(_mm_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12));
  const __m128i trunc = _mm_cvtsi32_si128(op.trunc), align = _mm_cvtsi32_si128(op.align),
                extract = _mm_cvtsi32_si128(op.extract);
  const __m512i vmask = _mm512_set1_epi32(int(op.value_mask)), rmask = _mm512_set1_epi32(int(op.result_mask));
  for (unsigned k = 0; k < n; k += 16) {
    void* w = wire + 4 * k;
    __m512i x = _mm512_shuffle_epi8(_mm512_loadu_si512(w), bswap);
    x = _mm512_sll_epi32(_mm512_and_si512(_mm512_srl_epi32(x, trunc), vmask), align);
    const __m512i sum = _mm512_add_epi32(_mm512_load_si512(cells + k), x);
    _mm512_store_si512(cells + k, sum);
    if (op.extract_on)
      _mm512_storeu_si512(w, _mm512_shuffle_epi8(_mm512_and_si512(_mm512_srl_epi32(sum, extract), rmask), bswap));
  }
}
__attribute__((target("avx512f"))) void lane_clear_avx512(uint32_t* cells, uint32_t keep, unsigned n) {
  const __m512i m = _mm512_set1_epi32(int(keep));
  for (unsigned k = 0; k < n; k += 16) _mm512_store_si512(cells + k, _mm512_and_si512(_mm512_load_si512(cells + k), m));
}
#endif

const LaneKernels kScalar{Simd::Scalar, &lane_add_scalar, &lane_clear_scalar};
#if defined(__x86_64__)
const LaneKernels kAvx2{Simd::Avx2, &lane_add_avx2, &lane_clear_avx2};
const LaneKernels kAvx512{Simd::Avx512, &lane_add_avx512, &lane_clear_avx512};
#endif

}  // namespace

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

const LaneKernels& lane_kernels(Simd s) {
#if defined(__x86_64__)
  if (s == Simd::Avx512) return kAvx512;
  if (s == Simd::Avx2) return kAvx2;
#endif
  (void)s;
  return kScalar;
}

}  // namespace agq::pipeline::agq::fast
