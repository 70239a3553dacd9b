// The agq constant tables (pipeline/agq/tables.hpp) as flat arrays indexed
// by the same keys, copied once from the model's tables, so the fast program
// and the model can never disagree on an entry. A shift action becomes its
// constant amount: the fast program shifts by it directly.
#pragma once

#include <array>
#include <cstdint>

#include "pipeline/agq/tables.hpp"

namespace agq::pipeline::agq::fast {

struct FastTables {
  std::array<AllocAction, 2048> alloc_t;
  std::array<WindowAction, 128> window_t;
  std::array<GrantAction, 128> grant_t;
  std::array<GrantAllocAction, 128> grant_alloc_t;
  std::array<uint8_t, 256> trunc_t;   // shift right by (bits)
  std::array<uint8_t, 16> align_t;    // shift left by
  std::array<uint8_t, 16> extract_t;  // shift right by
  std::array<ForwardAction, 2 * std::size_t(Verdict::Count)> agq_forward_t;
};

const FastTables& fast_tables();

}  // namespace agq::pipeline::agq::fast
