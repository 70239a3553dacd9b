// lane_add / lane_clear over a row half: the 16 or 32 register actions of a
// pass, side by side (32 stateful ALUs on Tofino; 4 AVX2 or 2 AVX-512
// vectors here). The kernel is chosen once per program from what the CPU
// supports (__builtin_cpu_supports; each kernel compiled for its own target,
// so one binary runs on any x86-64), never per packet.
#pragma once

#include <cstdint>

namespace agq::pipeline::agq::fast {

enum class Simd : uint8_t { Scalar, Avx2, Avx512 };
const char* to_string(Simd s);
bool simd_supported(Simd s);
Simd best_simd();

// One pass over the lanes (stages 7-17 and E0-E1 of docs/PIPELINE.md):
//   x = (wire >> trunc) & value_mask << align;   cell += x;
//   extract: wire = (cell >> extract) & result_mask
// `wire` is the packet's big-endian lanes (read and, with extract, written
// in place); `cells` the row's half v, `n` lanes contiguous. value_mask 0
// reads the cells (a retransmission after completion).
struct LaneOp {
  uint32_t value_mask = 0;
  uint32_t result_mask = 0;
  uint8_t trunc = 0, align = 0, extract = 0;
  bool extract_on = false;
};

struct LaneKernels {
  Simd simd;
  void (*lane_add)(uint32_t* cells, uint8_t* wire, unsigned n, const LaneOp& op);
  void (*lane_clear)(uint32_t* cells, uint32_t keep, unsigned n);  // cells &= keep
};

// The kernels of `s` (which must be supported).
const LaneKernels& lane_kernels(Simd s);

}  // namespace agq::pipeline::agq::fast
