// lane_add / lane_clear over a row half: the 16 or 32 register actions of a
// pass, side by side (32 stateful ALUs on Tofino; 4 AVX2 or 2 AVX-512
// vectors here). Three kernels, each a struct of inline functions carrying
// its own target attribute (no -m flag needed): the program instantiates
// its whole register stage once per kernel, inside a function of the same
// target, so the lane pass is inlined where the packet's metadata already
// sits in registers (perf: the out-of-line call through a kernel table
// cost ~4% of the agq replay). Which one runs is chosen once per program
// from what the CPU supports (__builtin_cpu_supports), never per packet: one
// binary runs on any x86-64.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace agq::pipeline::agq::fast {

enum class Simd : uint8_t { Scalar, Avx2, Avx512 };
const char* to_string(Simd s);
bool simd_supported(Simd s);
Simd best_simd();

// One pass over the lanes (stages 7-17 and E0-E1 of docs/PIPELINE.md):
//   x = (wire >> trunc) & value_mask << align;   cell = (cell & keep) + x;
//   extract: wire = (cell >> extract) & result_mask
// `wire` is the packet's big-endian lanes (read and, with extract, written
// in place); `cells` the row's half v, `n` lanes contiguous. value_mask 0
// reads the cells (a retransmission after completion). `keep` is a first
// contribution's lane_clear of the window its slot released, fused into
// the same read-modify-write (nothing reads the cells in between): ~0
// keeps every bit.
struct LaneOp {
  uint32_t value_mask = 0;
  uint32_t keep = ~0u;
  uint32_t result_mask = 0;
  uint8_t trunc = 0, align = 0, extract = 0;
  bool extract_on = false;
};

// Each kernel: add(cells, wire, n, op) as above; clear(cells, keep, n):
// cells &= keep (a released window with no pass to fuse it into). n is 16 or 32. And, for admission on the same target's
// pipes, frame_matches(frame, tmpl, bytes): a frame's first 64 bytes equal
// a template's at every byte set in `bytes` (AgqFastProgram::JobMemo).
struct LanesScalar {
  static constexpr Simd simd = Simd::Scalar;
  [[gnu::always_inline]] static inline void add(uint32_t* cells, uint8_t* wire, unsigned n, const LaneOp& op) {
    for (unsigned k = 0; k < n; ++k) {
      uint32_t x;
      std::memcpy(&x, wire + 4 * k, 4);
      x = ((__builtin_bswap32(x) >> op.trunc) & op.value_mask) << op.align;
      const uint32_t c = cells[k] = (cells[k] & op.keep) + x;
      if (op.extract_on) {
        const uint32_t r = __builtin_bswap32((c >> op.extract) & op.result_mask);
        std::memcpy(wire + 4 * k, &r, 4);
      }
    }
  }
  [[gnu::always_inline]] static inline void clear(uint32_t* cells, uint32_t keep, unsigned n) {
    for (unsigned k = 0; k < n; ++k) cells[k] &= keep;
  }
  // Both frame and tmpl have 64 readable bytes. Here: word by word.
  [[gnu::always_inline]] static inline bool frame_matches(const uint8_t* frame, const uint8_t* tmpl, uint64_t bytes) {
    uint64_t diff = 0;
    for (unsigned w = 0; w < 8; ++w) {
      uint64_t a, b, m = 0;
      std::memcpy(&a, frame + 8 * w, 8);
      std::memcpy(&b, tmpl + 8 * w, 8);
      for (unsigned k = 0; k < 8; ++k)
        if (bytes >> (8 * w + k) & 1) m |= uint64_t(0xFF) << (8 * k);
      diff |= (a ^ b) & m;
    }
    return diff == 0;
  }
};

#if defined(__x86_64__)
#define AGQ_TARGET_AVX2 __attribute__((target("avx2")))
#define AGQ_TARGET_AVX512 __attribute__((target("avx512f,avx512bw")))

struct LanesAvx2 {  // 8 lanes per vector
  static constexpr Simd simd = Simd::Avx2;
  AGQ_TARGET_AVX2 static inline void add(uint32_t* cells, uint8_t* wire, unsigned n, const LaneOp& op) {
    // A row half is 16 or 32 lanes: 2 or 4 vectors, unrolled, the extract
    // decided once per pass rather than once per vector.
    if (op.extract_on)
      n == 32 ? run<true, 4>(cells, wire, op) : n == 16 ? run<true, 2>(cells, wire, op) : loop<true>(cells, wire, n, op);
    else
      n == 32 ? run<false, 4>(cells, wire, op) : n == 16 ? run<false, 2>(cells, wire, op) : loop<false>(cells, wire, n, op);
  }
  template <bool kExtract>
  AGQ_TARGET_AVX2 static inline void one(uint32_t* cells, uint8_t* wire, __m256i bswap, __m128i trunc, __m128i align,
                                         __m128i extract, __m256i vmask, __m256i rmask, __m256i keep) {
    __m256i* w = reinterpret_cast<__m256i*>(wire);
    __m256i* c = reinterpret_cast<__m256i*>(cells);
    __m256i x = _mm256_shuffle_epi8(_mm256_loadu_si256(w), bswap);
    x = _mm256_sll_epi32(_mm256_and_si256(_mm256_srl_epi32(x, trunc), vmask), align);
    const __m256i sum = _mm256_add_epi32(_mm256_and_si256(_mm256_load_si256(c), keep), x);
    _mm256_store_si256(c, sum);
    if constexpr (kExtract)
      _mm256_storeu_si256(w, _mm256_shuffle_epi8(_mm256_and_si256(_mm256_srl_epi32(sum, extract), rmask), bswap));
  }
#define AGQ_LANES_AVX2_SETUP                                                                                   \
  const __m256i bswap = _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12, /**/            \
                                         3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);                \
  const __m128i trunc = _mm_cvtsi32_si128(op.trunc), align = _mm_cvtsi32_si128(op.align),                     \
                extract = _mm_cvtsi32_si128(op.extract);                                                      \
  const __m256i vmask = _mm256_set1_epi32(int(op.value_mask)), rmask = _mm256_set1_epi32(int(op.result_mask)), \
                keep = _mm256_set1_epi32(int(op.keep))
  template <bool kExtract, unsigned kVecs>
  AGQ_TARGET_AVX2 static inline void run(uint32_t* cells, uint8_t* wire, const LaneOp& op) {
    AGQ_LANES_AVX2_SETUP;
    for (unsigned v = 0; v < kVecs; ++v)
      one<kExtract>(cells + 8 * v, wire + 32 * v, bswap, trunc, align, extract, vmask, rmask, keep);
  }
  template <bool kExtract>
  AGQ_TARGET_AVX2 static inline void loop(uint32_t* cells, uint8_t* wire, unsigned n, const LaneOp& op) {
    AGQ_LANES_AVX2_SETUP;
    for (unsigned k = 0; k < n; k += 8) one<kExtract>(cells + k, wire + 4 * k, bswap, trunc, align, extract, vmask, rmask, keep);
  }
#undef AGQ_LANES_AVX2_SETUP
  AGQ_TARGET_AVX2 static inline void clear(uint32_t* cells, uint32_t keep, unsigned n) {
    const __m256i m = _mm256_set1_epi32(int(keep));
    for (unsigned k = 0; k < n; k += 8) {
      __m256i* c = reinterpret_cast<__m256i*>(cells + k);
      _mm256_store_si256(c, _mm256_and_si256(_mm256_load_si256(c), m));
    }
  }
  AGQ_TARGET_AVX2 static inline bool frame_matches(const uint8_t* frame, const uint8_t* tmpl, uint64_t bytes) {
    const auto eq = [](const uint8_t* a, const uint8_t* b) {
      return uint32_t(_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)),
                                                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)))));
    };
    const uint64_t same = uint64_t(eq(frame, tmpl)) | uint64_t(eq(frame + 32, tmpl + 32)) << 32;
    return (bytes & ~same) == 0;
  }
};

struct LanesAvx512 {  // 16 lanes per vector
  static constexpr Simd simd = Simd::Avx512;
  AGQ_TARGET_AVX512 static inline void add(uint32_t* cells, uint8_t* wire, unsigned n, const LaneOp& op) {
    // 16 or 32 lanes: 1 or 2 vectors, unrolled, the extract decided once.
    if (op.extract_on)
      n == 32 ? run<true, 2>(cells, wire, op) : n == 16 ? run<true, 1>(cells, wire, op) : loop<true>(cells, wire, n, op);
    else
      n == 32 ? run<false, 2>(cells, wire, op) : n == 16 ? run<false, 1>(cells, wire, op) : loop<false>(cells, wire, n, op);
  }
  template <bool kExtract>
  AGQ_TARGET_AVX512 static inline void one(uint32_t* cells, uint8_t* wire, __m512i bswap, __m128i trunc, __m128i align,
                                           __m128i extract, __m512i vmask, __m512i rmask, __m512i keep) {
    __m512i x = _mm512_shuffle_epi8(_mm512_loadu_si512(wire), bswap);
    x = _mm512_sll_epi32(_mm512_and_si512(_mm512_srl_epi32(x, trunc), vmask), align);
    const __m512i sum = _mm512_add_epi32(_mm512_and_si512(_mm512_load_si512(cells), keep), x);
    _mm512_store_si512(cells, sum);
    if constexpr (kExtract)
      _mm512_storeu_si512(wire, _mm512_shuffle_epi8(_mm512_and_si512(_mm512_srl_epi32(sum, extract), rmask), bswap));
  }
#define AGQ_LANES_AVX512_SETUP                                                                                  \
  const __m512i bswap =                                                                                        \
      _mm512_broadcast_i32x4(_mm_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12));             \
  const __m128i trunc = _mm_cvtsi32_si128(op.trunc), align = _mm_cvtsi32_si128(op.align),                     \
                extract = _mm_cvtsi32_si128(op.extract);                                                      \
  const __m512i vmask = _mm512_set1_epi32(int(op.value_mask)), rmask = _mm512_set1_epi32(int(op.result_mask)), \
                keep = _mm512_set1_epi32(int(op.keep))
  template <bool kExtract, unsigned kVecs>
  AGQ_TARGET_AVX512 static inline void run(uint32_t* cells, uint8_t* wire, const LaneOp& op) {
    AGQ_LANES_AVX512_SETUP;
    for (unsigned v = 0; v < kVecs; ++v)
      one<kExtract>(cells + 16 * v, wire + 64 * v, bswap, trunc, align, extract, vmask, rmask, keep);
  }
  template <bool kExtract>
  AGQ_TARGET_AVX512 static inline void loop(uint32_t* cells, uint8_t* wire, unsigned n, const LaneOp& op) {
    AGQ_LANES_AVX512_SETUP;
    for (unsigned k = 0; k < n; k += 16) one<kExtract>(cells + k, wire + 4 * k, bswap, trunc, align, extract, vmask, rmask, keep);
  }
#undef AGQ_LANES_AVX512_SETUP
  AGQ_TARGET_AVX512 static inline void clear(uint32_t* cells, uint32_t keep, unsigned n) {
    const __m512i m = _mm512_set1_epi32(int(keep));
    for (unsigned k = 0; k < n; k += 16) _mm512_store_si512(cells + k, _mm512_and_si512(_mm512_load_si512(cells + k), m));
  }
  AGQ_TARGET_AVX512 static inline bool frame_matches(const uint8_t* frame, const uint8_t* tmpl, uint64_t bytes) {
    return _mm512_mask_cmpneq_epu8_mask(__mmask64(bytes), _mm512_loadu_si512(frame), _mm512_loadu_si512(tmpl)) == 0;
  }
};
#endif

}  // namespace agq::pipeline::agq::fast
