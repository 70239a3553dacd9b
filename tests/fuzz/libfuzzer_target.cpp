// libFuzzer entry point (clang -fsanitize=fuzzer,address,undefined; built by
// scripts/fuzz.sh): every input is one frame, run through the same harness
// and invariants as fuzz_frames. The first byte picks the ingress port.
#include <cstdio>
#include <cstdlib>

#include "fuzz_checks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static agq::fuzz::FuzzHarness h;
  static uint64_t now = 0;
  const uint16_t port = size ? uint16_t(data[0] % 6) : 0;
  try {
    h.check(std::span<const uint8_t>(data, size), port, now += 100);
    if (size && data[size - 1] == 0xA5 && size % 7 == 0) h.churn_jobs();
  } catch (const agq::fuzz::FuzzFailure& e) {
    std::fprintf(stderr, "invariant failed: %s\n", e.what());
    std::abort();
  }
  return 0;
}
