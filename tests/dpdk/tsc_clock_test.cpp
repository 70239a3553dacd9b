// TscClock (switch/dataplane/tsc_clock.hpp): the packets' nanosecond stamp
// from the round's TSC reading. Driven by a synthetic TSC and a synthetic
// reference clock, so nothing here is timed: the conversion between anchors,
// the re-anchor, and the rate it re-measures when the EAL's estimate is off.
#include "dataplane/tsc_clock.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

namespace agq::dataplane {
namespace {

// The reference clock of a machine whose TSC runs at kTrueHz: a test sets
// the TSC, the clock reads the matching nanoseconds (plus a start offset).
constexpr uint64_t kTrueHz = 2'500'000'000;
constexpr uint64_t kStartNs = 7'000'000'000;
uint64_t g_tsc = 0;
unsigned g_reads = 0;
uint64_t reference_ns() {
  ++g_reads;
  return kStartNs + uint64_t((unsigned __int128)g_tsc * 1'000'000'000 / kTrueHz);
}

uint64_t at(TscClock& c, uint64_t tsc) {
  g_tsc = tsc;
  return c.ns(tsc);
}

TscClock make(uint64_t hz, uint64_t tsc) {
  g_tsc = tsc;
  return TscClock(hz, tsc, &reference_ns);
}

TEST(TscClock, ExactRateFollowsTheReferenceBetweenAnchors) {
  g_reads = 0;
  TscClock c = make(kTrueHz, 1000);  // the first anchor
  EXPECT_EQ(g_reads, 1u);
  EXPECT_EQ(at(c, 1000), reference_ns());
  const unsigned anchors = g_reads;
  uint64_t last = 0;
  for (uint64_t tsc = 1000; tsc < kTrueHz / 4; tsc += 12'345) {
    const uint64_t v = at(c, tsc);
    EXPECT_GE(v, last);
    last = v;
    const uint64_t want = kStartNs + uint64_t((unsigned __int128)tsc * 1'000'000'000 / kTrueHz);
    EXPECT_LE(v > want ? v - want : want - v, 1u) << tsc;
  }
  EXPECT_EQ(g_reads, anchors) << "no reference reads between anchors";
}

TEST(TscClock, AWrongEstimateIsCorrectedAtTheNextAnchor) {
  // The EAL's estimate 0.4% high (10 MHz rounding at 2.5 GHz, four times
  // over): the first quarter second drifts by at most that share, later
  // intervals run at the re-measured rate.
  g_reads = 0;
  constexpr uint64_t kEstimate = kTrueHz + 10'000'000;
  TscClock c = make(kEstimate, 0);
  int64_t worst_first = 0, worst_later = 0;
  for (uint64_t tsc = 1; tsc < 3 * kTrueHz; tsc += 1'000'003) {
    const int64_t err = int64_t(at(c, tsc)) - int64_t(reference_ns());
    int64_t& worst = tsc < kEstimate / 4 ? worst_first : worst_later;
    if (std::llabs(err) > std::llabs(worst)) worst = err;
  }
  EXPECT_LE(std::llabs(worst_first), 1'000'000) << "0.4% of 250 ms";
  EXPECT_LE(std::llabs(worst_later), 10) << "re-measured rate";
  EXPECT_GE(g_reads, 12u);  // anchors every quarter second over 3 s, plus the test's reads
}

TEST(TscClock, ALongIdleGapReanchorsOnTheFirstRoundAfterIt) {
  TscClock c = make(kTrueHz, 5);
  g_reads = 0;
  const uint64_t after = 60 * kTrueHz;  // a minute asleep
  EXPECT_EQ(at(c, after), kStartNs + 60'000'000'000);
  EXPECT_EQ(g_reads, 1u);
  // ...and the rate it measured over the gap is the true one.
  const uint64_t v = at(c, after + kTrueHz / 8);
  const uint64_t want = reference_ns();
  EXPECT_LE(v > want ? v - want : want - v, 1u);
}

}  // namespace
}  // namespace agq::dataplane
