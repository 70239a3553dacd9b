// The dataplane's drop simulator without DPDK: probability <-> threshold,
// the extremes exact (0 never drops, 1 always), and the PRNG's rate close
// to the probability.
#include <gtest/gtest.h>

#include <cmath>

#include "dataplane/drop_sim.hpp"

namespace agq::dataplane {
namespace {

TEST(DropSim, StartsAtZeroAndKeepsPortsAndDirectionsApart) {
  DropSim s(3);
  for (uint16_t p = 0; p < 3; ++p)
    for (SimDir d : {SimDir::Rx, SimDir::Tx}) EXPECT_EQ(s.threshold(p, d), 0u);
  s.set(1, SimDir::Tx, 0.5);
  EXPECT_EQ(s.threshold(1, SimDir::Tx), DropSim::kOne / 2);
  EXPECT_EQ(s.threshold(1, SimDir::Rx), 0u);
  EXPECT_EQ(s.threshold(0, SimDir::Tx), 0u);
  EXPECT_DOUBLE_EQ(s.get(1, SimDir::Tx), 0.5);
  s.set(7, SimDir::Rx, 1.0);  // no such port: ignored, not out of bounds
  EXPECT_EQ(s.get(7, SimDir::Rx), 0.0);
  s.clear();
  EXPECT_EQ(s.threshold(1, SimDir::Tx), 0u);
}

// active(d): the lcores' once-per-burst check; it must follow every change.
TEST(DropSim, ActiveFollowsTheThresholds) {
  DropSim s(2);
  EXPECT_FALSE(s.active(SimDir::Rx));
  EXPECT_FALSE(s.active(SimDir::Tx));
  s.set(1, SimDir::Tx, 0.25);
  EXPECT_TRUE(s.active(SimDir::Tx));
  EXPECT_FALSE(s.active(SimDir::Rx));
  s.set(0, SimDir::Tx, 0.5);
  s.set(1, SimDir::Tx, 0.0);
  EXPECT_TRUE(s.active(SimDir::Tx));  // port 0 still drops
  s.set(0, SimDir::Tx, 0.0);
  EXPECT_FALSE(s.active(SimDir::Tx));
  s.set(0, SimDir::Rx, 1.0);
  EXPECT_TRUE(s.active(SimDir::Rx));
  s.clear();
  EXPECT_FALSE(s.active(SimDir::Rx));
}

TEST(DropSim, ClampsNonsense) {
  DropSim s(1);
  s.set(0, SimDir::Rx, 2.0);
  EXPECT_EQ(s.threshold(0, SimDir::Rx), DropSim::kOne);
  s.set(0, SimDir::Rx, -1.0);
  EXPECT_EQ(s.threshold(0, SimDir::Rx), 0u);
  s.set(0, SimDir::Rx, std::nan(""));
  EXPECT_EQ(s.threshold(0, SimDir::Rx), 0u);
}

TEST(DropSim, ExtremesAreExact) {
  XorShift64 rng(1);
  int dropped = 0;
  for (int i = 0; i < 100000; ++i) dropped += rng.drop(DropSim::kOne);
  EXPECT_EQ(dropped, 100000);
  dropped = 0;
  for (int i = 0; i < 100000; ++i) dropped += rng.drop(0);
  EXPECT_EQ(dropped, 0);
}

TEST(DropSim, RateFollowsProbability) {
  for (double p : {0.01, 0.1, 0.5}) {
    DropSim s(1);
    s.set(0, SimDir::Tx, p);
    XorShift64 rng(42);
    const int n = 200000;
    int dropped = 0;
    for (int i = 0; i < n; ++i) dropped += rng.drop(s.threshold(0, SimDir::Tx));
    const double sd = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(dropped, n * p, 6 * sd) << "p = " << p;
  }
}

TEST(DropSim, ZeroSeedStillRandom) {
  XorShift64 a(0);
  const uint32_t x = a.next();
  EXPECT_NE(x, a.next());
}

}  // namespace
}  // namespace agq::dataplane
