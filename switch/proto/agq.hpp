// The agq protocol header (docs/PROTOCOL.md §1): UDP destination port 50100,
// 20 + 4 * n_lanes bytes (148 for the 32-lane profile, 84 for 16), big-endian. Shared by the switch's agq pipeline, the workers,
// the PS and the tests.
#pragma once

#include <array>
#include <cstdint>

namespace agq::proto {

inline constexpr uint16_t kAgqPort = 50100;
inline constexpr int kAgqLanes = 32;       // the widest lane profile (Tofino 2)
inline constexpr int kAgqLanesT1 = 16;     // the Tofino 1 lane profile (PROTOCOL §10)
inline constexpr int kAgqFixedLen = 20;    // header bytes before lane[0]
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

// Lanes a header with this n_lanes carries: 16 for the 16-lane profile,
// otherwise 32 (a header with any other n_lanes is malformed, but it is only
// parsed -- and dropped -- when it is as long as a 32-lane header).
constexpr int lanes_carried(uint8_t n_lanes) { return n_lanes == kAgqLanesT1 ? kAgqLanesT1 : kAgqLanes; }
constexpr int header_len(uint8_t n_lanes) { return kAgqFixedLen + 4 * lanes_carried(n_lanes); }

struct Agq {
  static constexpr int kLen = 20 + 4 * kAgqLanes;  // 148: the 32-lane header
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
  uint16_t epoch = 0;     // the switch's boot epoch in every frame it makes (PROTOCOL §11)
  std::array<uint32_t, kAgqLanes> lanes{};  // lanes_carried(n_lanes) of them on the wire

  int len() const { return header_len(n_lanes); }

  uint8_t version_bit() const { return flags & kAgqFlagVersion; }
  // decode() reads lanes_carried(p[17]) lanes (the rest are zero); encode()
  // writes lanes_carried(n_lanes): the caller provides len() bytes.
  void decode(const uint8_t* p);
  void encode(uint8_t* p) const;
};

}  // namespace agq::proto
