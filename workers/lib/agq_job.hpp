// An agq-protocol job as every worker and the PS derive it from the same
// flags (docs/PROTOCOL.md §5): chunks of 32 lanes, the slot pool, rounds,
// and which slot/version/seq each chunk of each round uses. No negotiation
// packet: identical flags give identical mappings.
//
// Sequences are numbered globally, G = round * chunks + chunk (the header's
// seq, mod 2^32), and chunk G goes to slot G mod slots. Each slot carries its
// chunks one after another, alternating versions; a chunk redone after an
// OVERFLOW result takes the next use (version) of the same slot, so every
// worker, seeing the same flag in the same result, agrees on it.
#pragma once

#include <cstdint>
#include <string>

namespace agq::worker {

// = proto::kAgqLanes (checked in agq_job.cpp); no proto include here so the
// CLI translation unit, which sees only this header, needs no switch headers.
inline constexpr int kAgqLanes = 32;

struct AgqJobSpec {
  uint16_t job_id = 1;        // 1..65535 (the switch's [[job]] id)
  uint8_t num_workers = 2;    // N, 1..32 (bits of the switch's slot bitmap)
  uint64_t elements = 65536;  // gradient length per round
  uint32_t slots = 64;        // the job's slots on the switch (its `slots`)
  uint32_t window = 0;        // slots with a sequence in flight per worker; 0 = all slots
  uint32_t rounds = 3;        // training iterations: round r's widths come from round r-1's aggregate
  uint32_t rows = 0;          // the job's rows on the switch, for the memory report only (0 = unknown)

  uint64_t chunks() const { return (elements + kAgqLanes - 1) / kAgqLanes; }
  uint32_t max_outstanding() const { return window ? window : slots; }
  uint64_t global(uint32_t round, uint64_t chunk) const { return uint64_t(round) * chunks() + chunk; }
  uint32_t slot_of(uint32_t round, uint64_t chunk) const { return uint32_t(global(round, chunk) % slots); }
  // First chunk of `round` that slot s carries (>= chunks() if none).
  uint64_t first_chunk(uint32_t round, uint32_t slot) const {
    const uint64_t base = global(round, 0) % slots;
    return (slot + slots - base) % slots;
  }
  uint32_t slots_per_row() const { return rows ? slots / rows : 0; }

  std::string validate() const;
};

// Synthetic gradients differ per round (a new iteration, a new gradient):
// round r uses seed + r * kRoundSeedStride; round 0 uses --seed itself.
inline constexpr uint64_t kRoundSeedStride = 1000003;
inline uint64_t round_seed(uint64_t seed, uint32_t round) { return seed + uint64_t(round) * kRoundSeedStride; }

}  // namespace agq::worker
