// The agq protocol header (docs/PROTOCOL.md §1): UDP destination port 50100,
// 148 bytes, big-endian. Shared by the switch's agq pipeline, the workers,
// the PS and the tests.
#pragma once

#include <array>
#include <cstdint>

namespace agq::proto {

inline constexpr uint16_t kAgqPort = 50100;
inline constexpr int kAgqLanes = 32;
inline constexpr uint8_t kAgqVersion = 1;

enum class AgqType : uint8_t {
  Data = 1,          // worker -> switch
  Result = 2,        // switch -> worker
  PsResult = 3,      // PS -> switch (multicast to the job as a Result)
  FallbackData = 4,  // switch -> PS: a contribution forwarded unaggregated
};

// flags
inline constexpr uint8_t kAgqFlagVersion = 1 << 0;     // slot version (shadow set) v
inline constexpr uint8_t kAgqFlagRetransmit = 1 << 1;
inline constexpr uint8_t kAgqFlagOverflow = 1 << 2;
inline constexpr uint8_t kAgqFlagFallback = 1 << 3;

struct Agq {
  static constexpr int kLen = 20 + 4 * kAgqLanes;  // 148
  uint8_t ver = kAgqVersion;
  AgqType type = AgqType::Data;
  uint8_t flags = 0;
  uint16_t job_id = 0;
  uint8_t worker_id = 0;
  uint8_t num_workers = 0;
  uint16_t slot = 0;
  uint32_t seq = 0;
  uint8_t req_width = 0;  // bits
  uint8_t width = 0;      // granted bits (Result)
  uint8_t pos = 0;        // first unit of the window (Result)
  uint8_t guard = 0;      // guard bits (Result)
  int8_t exponent = 0;    // block floating point
  uint8_t n_lanes = kAgqLanes;
  uint16_t reserved = 0;
  std::array<uint32_t, kAgqLanes> lanes{};

  uint8_t version_bit() const { return flags & kAgqFlagVersion; }
  void decode(const uint8_t* p);
  void encode(uint8_t* p) const;
};

}  // namespace agq::proto
