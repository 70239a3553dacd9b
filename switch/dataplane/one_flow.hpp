// Whether an rx burst is a vector of one flow: the check behind the
// dataplane's fused path (SwitchDataplane::ingest, tna::Program::process_run).
// VPP's l2 nodes look a key up once when it equals the previous packet's;
// here the whole leading run of frames equal to frame 0 in every byte a
// program may read for an ordinary frame (Program::kRunKeyBytes) gets one
// decision and one tx batch, with no per-packet vector entry.
#pragma once

#include <immintrin.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>

#include <array>
#include <cstdint>

#include "tna/program.hpp"

namespace agq::dataplane {

static_assert(tna::Program::kRunKeyBytes == 44, "run_length compares bytes 0..31 and 12..43");

// The compared bits of bytes [0, 32) and [12, 44) for each RunKeyFree
// (tna::Program::run_key_byte_free: 0x00 where a run's frames may differ).
struct RunKeyMasks {
  alignas(32) uint8_t lo[32];
  alignas(32) uint8_t hi[32];
};
inline const RunKeyMasks& run_key_masks(tna::Program::RunKeyFree f) {
  static const auto table = [] {
    std::array<RunKeyMasks, 3> t{};
    for (unsigned k = 0; k < 3; ++k) {
      const auto free = tna::Program::RunKeyFree(k);
      for (unsigned i = 0; i < 32; ++i) {
        t[k].lo[i] = tna::Program::run_key_byte_free(free, i) ? 0x00 : 0xFF;
        t[k].hi[i] = tna::Program::run_key_byte_free(free, i + 12) ? 0x00 : 0xFF;
      }
    }
    return t;
  }();
  return table[unsigned(f)];
}

// How many of pkts[0..n), from pkts[0] on, are one-segment frames of
// pkts[0]'s length whose bytes [0, 44) equal pkts[0]'s except the free ones
// (tna::Program::run_key_free: IPv4 identification and checksums): 0 if pkts[0] has
// several segments or fewer than 44 bytes (nothing is read past a frame's
// end; such frames are malformed anyway and take the per-packet path). Two
// 32-byte compares per frame (AVX2: the project's baseline is x86-64-v3).
inline uint16_t run_length(rte_mbuf* const* pkts, uint16_t n) {
  const rte_mbuf* m0 = pkts[0];
  if (m0->nb_segs != 1 || m0->data_len < tna::Program::kRunKeyBytes) return 0;
  const uint8_t* a = rte_pktmbuf_mtod(m0, const uint8_t*);
  const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
  const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 12));
  const uint16_t len = m0->data_len;
  const RunKeyMasks& mk = run_key_masks(tna::Program::run_key_free(a));
  const __m256i k0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(mk.lo));
  const __m256i k1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(mk.hi));
  constexpr uint16_t kAhead = 4;
  for (uint16_t i = 1; i < n && i <= kAhead; ++i) rte_prefetch0(pkts[i]);
  for (uint16_t i = 1; i < n; ++i) {
    const rte_mbuf* m = pkts[i];
    if (i + kAhead < n) rte_prefetch0(pkts[i + kAhead]);
    if (m->nb_segs != 1 || m->data_len != len) return i;
    const uint8_t* b = rte_pktmbuf_mtod(m, const uint8_t*);
    const __m256i d0 = _mm256_xor_si256(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)));
    const __m256i d1 = _mm256_xor_si256(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 12)));
    if (!(_mm256_testz_si256(d0, k0) & _mm256_testz_si256(d1, k1))) return i;
  }
  return n;
}

}  // namespace agq::dataplane
