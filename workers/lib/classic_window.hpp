// The classic pipeline's window arithmetic as the workers' model needs it.
// TOP(L), W(p,q) and next_start(B,p) come from the switch's own table
// formulas (pipeline/classic/tables.hpp), so model and switch share one
// definition; what the model adds is the cursor's walk and the width of a
// seq that is alone on its aggregator.
#pragma once

#include <cstdint>

#include "pipeline/classic/tables.hpp"

namespace agq::worker {

inline uint32_t top_bits(int L) { return pipeline::classic::TOP(unsigned(L)); }
inline uint32_t window_mask(int p, int q) { return pipeline::classic::W(unsigned(p), unsigned(q)); }
inline int next_start(uint8_t B, int p) { return int(pipeline::classic::next_start(B, unsigned(p))); }

// The cursor's advance on every allocation (insert_posi: p > 4 ? p - 5 : p + 3),
// whatever is live: starts cycle 0,3,6,1,4,7,2,5,0,...
constexpr int next_cursor(int p) { return p > 4 ? p - 5 : p + 3; }

// Width of a sequence's window when it is the only live one on its
// aggregator and starts at nibble p: [p, 8).
constexpr int solo_width(int p) { return 32 - 4 * p; }

}  // namespace agq::worker
