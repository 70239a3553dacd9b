// The fuzz harness shared by the seeded random-frame driver (fuzz_frames,
// a ctest in every build, ASan/UBSan included) and the libFuzzer target
// (fuzz_libfuzzer, clang only): one frame in, every program run on it, and
// invariants checked, not just "no crash":
//
//  parser   parse_view() == parse() (error, validity, offsets).
//  classic  the fast program == its reference model (decision, output
//           bytes, counters, every register cell, MAC table); a frame the
//           parser rejects is counted (parser_errors) and touches no
//           register; a frame that is not classic AGQ touches no register.
//  agq      the TNA model (AgqProgram) and the fast program the switch runs
//           (agq_fast), each with two jobs; a frame the parser rejects is counted and touches no
//           job's cells; an agq frame dropped as malformed / unknown job /
//           bad worker / bad slot / bad width is counted under its drop
//           counter and touches no cell; an agq frame of job J never touches
//           another job's cells; ordinary traffic touches no cell; removing
//           and re-adding one job leaves the other job's cells as they were.
//
// A failed check throws FuzzFailure naming the invariant; the drivers print
// the frame and abort, so the fuzzer (or the seed and frame index) has a
// reproducer.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace agq::fuzz {

struct FuzzFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct FuzzStats {
  uint64_t frames = 0, parser_errors = 0, classic_frames = 0, agq_frames = 0, agq_rejected = 0,
           agq_accepted = 0, job_churns = 0;
};

class FuzzHarness {
 public:
  FuzzHarness();
  ~FuzzHarness();

  // Runs one frame through the parser and both pipelines and checks every
  // invariant above. `port` is the ingress port, `now_ns` its timestamp.
  void check(std::span<const uint8_t> frame, uint16_t port, uint64_t now_ns);
  // Removes and re-adds the second agq job; checks the first job's cells.
  void churn_jobs();
  // Full comparison of the classic program's state with its reference
  // (also done by check() every so often).
  void check_classic_state();

  const FuzzStats& stats() const { return stats_; }
  // Frames that make a good seed corpus (one of every kind).
  static std::vector<std::vector<uint8_t>> seed_frames();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  FuzzStats stats_;
};

}  // namespace agq::fuzz
