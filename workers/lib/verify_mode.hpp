// --verify all | sample:K | off: which results a process checks. Header
// only, no dependencies (the CLI translation unit includes it).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

namespace agq::worker {

// --verify all | sample:K | off -> check one chunk in `every` (0 = off).
inline bool parse_verify(const std::string& s, uint32_t& every, std::string& err) {
  if (s == "all" || s == "off") {
    every = s == "all" ? 1 : 0;
    return true;
  }
  if (s.rfind("sample:", 0) == 0) {
    char* end = nullptr;
    const unsigned long k = std::strtoul(s.c_str() + 7, &end, 10);
    if (end && *end == 0 && k >= 1 && k <= 1'000'000'000ul) {
      every = uint32_t(k);
      return true;
    }
  }
  err = "--verify must be all, sample:K (check one chunk in K, K >= 1) or off, not '" + s + "'";
  return false;
}
// Whether global chunk g is checked: 1 in `every`, spread by a hash (not a stride that a slot pattern could alias).
inline bool verify_chunk(uint64_t g, uint32_t every) {
  if (every <= 1) return every == 1;
  uint64_t x = g * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  return x % every == 0;
}

}  // namespace agq::worker
