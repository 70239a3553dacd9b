// The arithmetic of a shaped link (switch/dataplane/token_bucket.hpp) and its
// ECN mark (switch/dataplane/ecn.hpp), with a fake TSC and frames built
// here: the bucket sends rate x time (+ one burst) over any interval, waits
// exactly as long as the credit needs, survives long idle spells and huge
// rates; the mark sets CE on ECT IPv4/IPv6 frames only, and leaves a valid
// IPv4 checksum, equal to a full recomputation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "dataplane/ecn.hpp"
#include "dataplane/token_bucket.hpp"
#include "proto/headers.hpp"

namespace agq::dataplane {
namespace {

constexpr uint64_t kHz = 2'100'000'000;  // a TSC like this machine's

// Frames of `wire` bytes sent back to back whenever the bucket allows, the
// clock advancing `step` cycles between polls, for `cycles`: bytes sent.
uint64_t drain(TokenBucket& b, uint64_t start, uint64_t cycles, uint64_t step, uint32_t wire) {
  uint64_t sent = 0;
  for (uint64_t t = start; t <= start + cycles; t += step) {
    b.refill(t);
    while (b.may_send()) {
      b.spend(wire);
      sent += wire;
    }
  }
  return sent;
}

TEST(TokenBucket, SendsTheRateOverTimePlusOneBurst) {
  for (uint64_t rate : {10'000ull, 50'000'000ull, 1'000'000'000ull, 100'000'000'000ull}) {
    // The default depth (ShaperSpec::burst): 1 ms of the rate, at least two
    // frames -- more than the 5 us between polls, so no credit is lost.
    const uint64_t burst = std::max<uint64_t>(3076, rate / 8 / 1000);
    TokenBucket b(rate, kHz, burst, 0);
    const uint64_t cycles = kHz;  // one second
    const uint64_t sent = drain(b, 0, cycles, kHz / 200000, 1024);  // polled every 5 us
    const double want = double(rate) / 8;
    // Within one burst and one frame of rate x time.
    EXPECT_LE(double(sent), want + burst + 1024) << rate;
    EXPECT_GE(double(sent), want - 1024) << rate;
  }
}

TEST(TokenBucket, PollingGapsBelowTheBurstLoseNothing) {
  // 1 Gbit/s, a burst of 1 ms; the lcore wakes every 400 us (idle sleeps).
  const uint64_t rate = 1'000'000'000;
  TokenBucket b(rate, kHz, rate / 8 / 1000, 0);
  const uint64_t sent = drain(b, 0, kHz, kHz / 2500, 1538);
  EXPECT_NEAR(double(sent), double(rate) / 8, 2 * 125000.0 + 1538);
}

TEST(TokenBucket, ABackloggedQueueCatchesUpAGapAnIdleOneDoesNot) {
  const uint64_t rate = 8'000'000;  // 1 byte per us
  TokenBucket b(rate, 1'000'000'000, 1000, 0, 100'000);  // burst 1 ms, catch-up 100 ms
  b.spend(1000);
  b.refill(50'000'000, true);  // 50 ms asleep with frames waiting
  EXPECT_NEAR(double(b.credit_bytes()), 50'000.0, 1.0) << "the whole gap is owed";
  b.refill(500'000'000, true);
  EXPECT_EQ(b.credit_bytes(), 100'000) << "up to the catch-up cap";
  b.refill(500'000'001, false);
  EXPECT_EQ(b.credit_bytes(), 1000) << "an idle link keeps its burst only";
  b.refill(900'000'000, false);
  EXPECT_EQ(b.credit_bytes(), 1000);
}

TEST(TokenBucket, WaitIsWhatTheCreditNeeds) {
  const uint64_t rate = 8'000'000;  // 1 byte per us
  TokenBucket b(rate, 1'000'000'000, 1000, 0);  // 1 GHz: 1000 cycles per byte
  b.refill(0);
  EXPECT_EQ(b.wait_cycles(), 0u);
  b.spend(1500);  // 1000 - 1500 = -500 bytes
  EXPECT_FALSE(b.may_send());
  EXPECT_EQ(b.credit_bytes(), -500);
  const uint64_t w = b.wait_cycles();
  EXPECT_NEAR(double(w), 500'000.0, 2.0);
  b.refill(w - 2);
  EXPECT_FALSE(b.may_send());
  b.refill(w);
  EXPECT_TRUE(b.may_send());
  b.refund(100);
  EXPECT_EQ(b.credit_bytes(), 100);
}

TEST(TokenBucket, CreditIsCappedAtTheBurstAfterAnyIdleSpell) {
  TokenBucket b(1'000'000'000'000ull, kHz, TokenBucket::kMaxBurst, 0);  // 1 Tbit/s, the largest bucket
  b.spend(100);
  b.refill(uint64_t(1) << 62);  // years of TSC: the product must not overflow
  EXPECT_EQ(b.credit_bytes(), int64_t(TokenBucket::kMaxBurst));
  TokenBucket s(10'000, kHz, 64, 0);  // the slowest rate, the smallest bucket
  s.spend(9000);
  s.refill(uint64_t(1) << 62);
  EXPECT_EQ(s.credit_bytes(), 64);
}

TEST(TokenBucket, AFrameLargerThanTheBucketStillLeaves) {
  TokenBucket b(1'000'000, kHz, 64, 0);
  b.refill(0);
  ASSERT_TRUE(b.may_send());
  b.spend(9000);
  EXPECT_FALSE(b.may_send());
  b.refill(b.wait_cycles());
  EXPECT_TRUE(b.may_send());
}

// An Ethernet (+ VLAN tags) + IPv4 frame with a valid header checksum.
std::vector<uint8_t> ipv4_frame(uint8_t tos, std::mt19937& rng, int tags = 0) {
  std::vector<uint8_t> f(12, 0x02);
  for (int i = 0; i < tags; ++i) f.insert(f.end(), {0x81, 0x00, 0x00, uint8_t(i + 1)});
  f.insert(f.end(), {0x08, 0x00});
  proto::Ipv4 ip;
  ip.diffserv = tos;
  ip.total_len = 46;
  ip.identification = uint16_t(rng());
  ip.ttl = uint8_t(rng());
  ip.protocol = 17;
  ip.src = uint32_t(rng());
  ip.dst = uint32_t(rng());
  ip.hdr_checksum = ip.compute_checksum();
  const size_t at = f.size();
  f.resize(at + 46);
  ip.encode(f.data() + at);
  return f;
}

proto::Ipv4 ip_of(const std::vector<uint8_t>& f, size_t at) {
  proto::Ipv4 ip;
  ip.decode(f.data() + at);
  return ip;
}

TEST(Ecn, MarksEctIpv4AndTheChecksumEqualsARecomputation) {
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const int tags = i % 3;
    const uint8_t ect = (i & 4) ? 1 : 2;  // ECT(1), ECT(0)
    const uint8_t dscp = uint8_t(rng() & 0xFC);
    auto f = ipv4_frame(dscp | ect, rng, tags);
    const size_t at = 14 + 4 * size_t(tags);
    ASSERT_EQ(ecn_peek(f.data(), uint32_t(f.size())), EcnResult::Marked);
    ASSERT_EQ(mark_ce(f.data(), uint32_t(f.size())), EcnResult::Marked);
    const proto::Ipv4 ip = ip_of(f, at);
    EXPECT_EQ(ip.diffserv, dscp | 3) << "CE, the DSCP kept";
    ASSERT_EQ(ip.hdr_checksum, ip.compute_checksum()) << i;
    EXPECT_EQ(mark_ce(f.data(), uint32_t(f.size())), EcnResult::AlreadyCe);
    EXPECT_EQ(ip_of(f, at).hdr_checksum, ip.hdr_checksum);
  }
}

TEST(Ecn, LeavesNotEctAndNonIpFramesAlone) {
  std::mt19937 rng(9);
  auto f = ipv4_frame(0xB8, rng);  // EF, Not-ECT
  const auto before = f;
  EXPECT_EQ(ecn_peek(f.data(), uint32_t(f.size())), EcnResult::NotEct);
  EXPECT_EQ(mark_ce(f.data(), uint32_t(f.size())), EcnResult::NotEct);
  EXPECT_EQ(f, before);
  std::vector<uint8_t> arp(60, 0);
  arp[12] = 0x08;
  arp[13] = 0x06;
  EXPECT_EQ(mark_ce(arp.data(), uint32_t(arp.size())), EcnResult::NotIp);
  auto shortf = ipv4_frame(2, rng);
  EXPECT_EQ(mark_ce(shortf.data(), 14 + 19), EcnResult::NotIp) << "a header cut short is not read";
  auto v6in4 = ipv4_frame(2, rng);
  v6in4[14] = 0x65;  // an IPv4 ethertype whose header says version 6
  EXPECT_EQ(mark_ce(v6in4.data(), uint32_t(v6in4.size())), EcnResult::NotIp);
}

TEST(Ecn, MarksEctIpv6) {
  std::vector<uint8_t> f(14 + 40, 0);
  f[12] = 0x86;
  f[13] = 0xDD;
  // version 6, traffic class 0xAA (DSCP 42, ECT(0)), flow label 0x12345
  f[14] = 0x60 | 0x0A;
  f[15] = 0xA0 | 0x01;
  f[16] = 0x23;
  f[17] = 0x45;
  EXPECT_EQ(mark_ce(f.data(), uint32_t(f.size())), EcnResult::Marked);
  EXPECT_EQ(f[14], 0x6A);
  EXPECT_EQ(f[15], 0xB1) << "traffic class 0xAB: CE, the DSCP and the flow label kept";
  EXPECT_EQ(mark_ce(f.data(), uint32_t(f.size())), EcnResult::AlreadyCe);
  f[15] = 0x81;  // traffic class 0xA8: Not-ECT
  EXPECT_EQ(mark_ce(f.data(), uint32_t(f.size())), EcnResult::NotEct);
}

}  // namespace
}  // namespace agq::dataplane
