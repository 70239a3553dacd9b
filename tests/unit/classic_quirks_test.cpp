// One test per quirk of the published AGQ program that the classic pipeline
// keeps on purpose (reference §5). Each asserts the published behaviour;
// a failure here means the pipeline stopped being bit-exact.
#include <gtest/gtest.h>

#include "classic_test_util.hpp"
#include "proto/bytes.hpp"

using namespace agq;
using namespace agq::classic_test;

namespace {

std::vector<uint32_t> all4(uint32_t v) { return {v, v, v, v}; }

using ClassicQuirk = ClassicFixture;

class ClassicQuirkOneWorker : public ClassicFixture {
 protected:
  ClassicQuirkOneWorker() : ClassicFixture(ClassicConfig{kPsPort, {5}, 35000}) {}
};

class ClassicQuirkSmallCapacity : public ClassicFixture {
 protected:
  ClassicQuirkSmallCapacity() : ClassicFixture(ClassicConfig{kPsPort, kWorkerPorts, 64}) {}
};

}  // namespace

// Do not fix: published behaviour. A carry out of a window's top nibble
// lands in the LSB of the previous seq's window (plain 32-bit add).
TEST_F(ClassicQuirk, Quirk_CarrySpillsIntoNeighbourWindow) {
  const uint16_t hA = 40, hB = 41;  // A at 0 (12 bits once B exists), B at 3 (20 bits)
  send(agq_pkt(1, hA, 2, all4(0x10000000)));
  send(agq_pkt(2, hB, 2, all4(0xFFFFF000)));
  const Sent b = send(agq_pkt(2, hB, 2, all4(0xFFFFF000)));
  ASSERT_TRUE(is_unicast(b.decision, kPsPort));
  EXPECT_EQ(b.agq.data[0], 0xFFFFE000u);  // B's own sum lost its carry
  EXPECT_EQ(prog.aggregator(5).reg[0], 0x101FFFFEu);
  const Sent a = send(agq_pkt(1, hA, 2, all4(0x10000000)));
  ASSERT_TRUE(is_unicast(a.decision, kPsPort));
  EXPECT_EQ(a.agq.data[0], 0x20100000u);  // ...and A got it: 0x200 + 1
}

// Do not fix: published behaviour. Opening a window inside an older seq's
// window zeroes the older seq's low bits and truncates it harder afterwards.
TEST_F(ClassicQuirk, Quirk_WindowShrinksMidAggregation) {
  const uint32_t v = 0x12345678;
  send(agq_pkt(1, 40, 2, all4(v)));
  EXPECT_EQ(prog.aggregator(5).reg[0], v);
  send(agq_pkt(2, 41, 2, all4(0)));  // B opens [3, 8)
  EXPECT_EQ(prog.aggregator(5).reg[0], 0x12300000u);
  const Sent a = send(agq_pkt(1, 40, 2, all4(v)));
  ASSERT_TRUE(is_unicast(a.decision, kPsPort));
  EXPECT_EQ(a.agq.data[0], 0x24600000u);  // not 2 * v = 0x2468ACF0
}

// Do not fix: published behaviour. The cursor ignores occupancy: after 8
// allocations it lands on a live start, the new seq gets L = 0 (nothing
// cleared) and aggregates into the same window; its ACK leaves the bitmap
// without that bit, so the old seq's ACK borrows, misses ack_t and wipes all
// four cells of the aggregator (and zeroes its own data).
TEST_F(ClassicQuirk, Quirk_CursorLandsOnLiveStart) {
  const uint16_t hX = 40, hZ = 41, hCycle = 42, hY = 43;
  send(agq_pkt(1, hX, 3, all4(0x10000000)));  // X at 0, value in nibble 0
  send(agq_pkt(2, hZ, 3, all4(0x50000000)));  // Z at 3, value lands in nibble 3
  EXPECT_EQ(prog.aggregator(5).reg[0], 0x10050000u);
  // Six short-lived seqs move the cursor through 6, 1, 4, 7, 2, 5.
  for (uint16_t i = 0; i < 6; ++i) {
    send(agq_pkt(uint16_t(100 + i), hCycle, 2, all4(0)));
    ASSERT_TRUE(is_worker_multicast(send(ack_pkt(uint16_t(100 + i), hCycle)).decision));
  }
  ASSERT_EQ(prog.aggregator(5).insert_posi, 0);
  ASSERT_EQ(prog.aggregator(5).data_isEmpty, 0b10010000);
  ASSERT_EQ(prog.aggregator(5).reg[0], 0x10050000u);

  // Y lands on X's live start 0.
  send(agq_pkt(3, hY, 3, all4(0x02000000)));
  EXPECT_EQ(prog.seq_slot(hY).start_posi, 0);
  EXPECT_EQ(prog.seq_slot(hY).job_and_seq, 3);
  EXPECT_EQ(prog.aggregator(5).data_isEmpty, 0b10010000);
  EXPECT_EQ(prog.aggregator(5).reg[0], 0x12050000u);  // mixed into X's window
  send(agq_pkt(1, hX, 3, all4(0x10000000)));
  const Sent x = send(agq_pkt(1, hX, 3, all4(0x10000000)));
  ASSERT_TRUE(is_unicast(x.decision, kPsPort));
  EXPECT_EQ(x.agq.data[0], 0x32000000u);  // X's result contains Y's value

  // ACK Y: clears [0, 3) (X's window too) and removes the shared bit.
  const Sent ackY = send(ack_pkt(3, hY, all4(0x32000000)));
  EXPECT_TRUE(is_worker_multicast(ackY.decision));
  EXPECT_EQ(prog.aggregator(5).data_isEmpty, 0b00010000);
  EXPECT_EQ(prog.aggregator(5).reg[0], 0x00050000u);

  // ACK X: 0x10 - 0x80 borrows to 0x90, ack_t misses, mask_clear 0 wipes
  // every cell (Z's contribution too), and the ACK leaves with data 0.
  const Sent ackX = send(ack_pkt(1, hX, all4(0x32000000)));
  EXPECT_TRUE(is_worker_multicast(ackX.decision));
  for (int k = 0; k < 4; ++k) EXPECT_EQ(ackX.agq.data[k], 0u);
  EXPECT_EQ(ackX.agq.data[4], ack_pkt(1, hX).data[4]);
  const auto agg = prog.aggregator(5);
  EXPECT_EQ(agg.data_isEmpty, 0b10010000);  // corrupted: bit 0 is back
  for (int k = 0; k < 4; ++k) EXPECT_EQ(agg.reg[k], 0u);

  // Z's first contribution is gone: 2 of 3 values arrive at the PS.
  send(agq_pkt(2, hZ, 3, all4(0x50000000)));
  const Sent z = send(agq_pkt(2, hZ, 3, all4(0x50000000)));
  ASSERT_TRUE(is_unicast(z.decision, kPsPort));
  EXPECT_EQ(z.agq.data[0], 0xA0000000u);  // not 0xF0000000
}

// Do not fix: published behaviour. An ACK with isACK >= 2 takes the ACK
// branch (slot released) but adds its data into the window instead of
// clearing it, and leaves with data0..3 = 0 (mask_extract never set).
TEST_F(ClassicQuirk, Quirk_AckWithIsAck2AddsIntoRegisters) {
  send(agq_pkt(1, 40, 2, all4(0x10000000)));
  const Sent ack = send(ack_pkt(1, 40, all4(0x01000000), /*is_ack=*/2));
  EXPECT_TRUE(is_worker_multicast(ack.decision));
  for (int k = 0; k < 4; ++k) EXPECT_EQ(ack.agq.data[k], 0u);
  EXPECT_EQ(ack.agq.is_ack, 2);
  EXPECT_EQ(prog.seq_slot(40).job_and_seq, 0);
  const auto agg = prog.aggregator(5);
  EXPECT_EQ(agg.data_isEmpty, 0);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(agg.reg[k], 0x11000000u);
}

// Do not fix: published behaviour. The payload is rewritten but the UDP
// checksum is not updated (hosts send 0 or ignore it).
TEST_F(ClassicQuirk, Quirk_UdpChecksumLeftStale) {
  auto f = proto::build_agq_classic_frame(frame_spec(), agq_pkt(1, 300, 2, {0x0000F0C0, 1, 2, 3}));
  const std::size_t udp_csum = 14 + 20 + 6;
  proto::store_be16(f.data() + udp_csum, 0xBEEF);
  send_frame(f);
  const Sent s = send_frame(f);
  ASSERT_TRUE(is_unicast(s.decision, kPsPort));
  EXPECT_NE(s.out, s.in);
  EXPECT_EQ(proto::load_be16(s.out.data() + udp_csum), 0xBEEF);
  EXPECT_EQ(s.agq.data[0], 0x0001E180u);
}

// Do not fix: published behaviour. No dedup: a repeated contribution counts
// and adds again; once past total_workers the result is never re-emitted.
TEST_F(ClassicQuirk, Quirk_DuplicateContributionDoubleCounted) {
  const AgqClassic p = agq_pkt(1, 40, 2, all4(7));  // same worker, twice
  send(p);
  const Sent done = send(p);
  ASSERT_TRUE(is_unicast(done.decision, kPsPort));
  EXPECT_EQ(done.agq.data[0], 14u);
  const Sent third = send(p);
  EXPECT_TRUE(is_drop(third.decision, DropReason::AgqAbsorbed));
  EXPECT_EQ(prog.aggregator(5).reg[0], 21u);
  EXPECT_EQ(prog.seq_slot(40).worker_agg, 3);
  EXPECT_EQ(counter("completions"), 1u);
}

// Do not fix: published behaviour. worker_agg is 8 bits: after 256 more
// contributions the count matches total_workers again and the running sum
// is sent to the PS a second time.
TEST_F(ClassicQuirk, Quirk_WorkerAggWraps) {
  const AgqClassic p = agq_pkt(1, 40, 1, all4(1));
  int to_ps = 0;
  Sent last;
  for (int i = 1; i <= 257; ++i) {
    last = send(p);
    if (is_unicast(last.decision, kPsPort)) ++to_ps;
  }
  EXPECT_EQ(to_ps, 2);
  ASSERT_TRUE(is_unicast(last.decision, kPsPort));
  EXPECT_EQ(last.agq.data[0], 257u);
  EXPECT_EQ(prog.seq_slot(40).worker_agg, 1);
  EXPECT_EQ(counter("completions"), 2u);
  EXPECT_EQ(counter("absorbed"), 255u);
}

// Do not fix: published behaviour, except for the one deliberate change:
// ina_action 3 goes to the configured worker ports (PRE group
// kWorkerGroup) instead of hard-coded port 176; only the first ACK is
// forwarded.
TEST_F(ClassicQuirk, Quirk_AckGoesToWorkerPortsMulticast) {
  send(agq_pkt(1, 40, 1, all4(1)));
  const Sent ack = send(ack_pkt(1, 40, all4(1)));
  ASSERT_TRUE(is_worker_multicast(ack.decision));
  EXPECT_EQ(ack.decision.exclude_port, tna::kNoPort);
  EXPECT_EQ(pre.member_ports(ack.decision.group), kWorkerPorts);
  EXPECT_TRUE(is_drop(send(ack_pkt(1, 40, all4(1))).decision, DropReason::AgqAckNoOwner));
}

TEST_F(ClassicQuirkOneWorker, Quirk_AckToSingleWorkerPortIsUnicast) {
  // Do not fix: published behaviour (one worker port, as port 176 was).
  send(agq_pkt(1, 40, 1, all4(1)));
  EXPECT_TRUE(is_unicast(send(ack_pkt(1, 40, all4(1))).decision, 5));
}

// Documented deviation, not a published behaviour to keep: Tofino's
// behaviour for an index past the 35000-cell registers is undefined; here
// the packet is dropped and counted, and no register changes.
TEST_F(ClassicQuirk, Quirk_BadIndexDropped) {
  AgqClassic p = agq_pkt(1, 35000, 1, all4(1));
  EXPECT_TRUE(is_drop(send(p).decision, DropReason::AgqBadIndex));
  p.is_ack = 1;
  EXPECT_TRUE(is_drop(send(p).decision, DropReason::AgqBadIndex));
  EXPECT_EQ(counter("drops_agq_bad_index"), 2u);
  EXPECT_EQ(counter("allocations"), 0u);
  EXPECT_EQ(counter("acks"), 0u);
}

TEST_F(ClassicQuirkSmallCapacity, Quirk_BadHash1Dropped) {
  // Documented deviation (see Quirk_BadIndexDropped); hashID is in range,
  // hash1 is not (the switch never checks hashID == hash1 << 3 | hash2).
  AgqClassic p = agq_pkt(1, 10, 1, all4(1));
  p.hash1 = 64;
  EXPECT_TRUE(is_drop(send(p).decision, DropReason::AgqBadIndex));
  EXPECT_EQ(prog.seq_slot(10).job_and_seq, 0);
  EXPECT_EQ(prog.aggregator_count(), 64u);
}

// Do not fix: published behaviour. Only data0..3 are aggregated; data4..15
// (and every other field) are those of the completing packet.
TEST_F(ClassicQuirk, Quirk_Data4To15Untouched) {
  AgqClassic p1 = agq_pkt(1, 40, 2, all4(1));
  AgqClassic p2 = agq_pkt(1, 40, 2, all4(2));
  for (int k = 4; k < 16; ++k) {
    p1.data[k] = 0x11110000u + uint32_t(k);
    p2.data[k] = 0x22220000u + uint32_t(k);
  }
  p2.worker_id = 9;
  send(p1);
  const Sent s = send(p2);
  ASSERT_TRUE(is_unicast(s.decision, kPsPort));
  EXPECT_EQ(s.agq.data[0], 3u);
  for (int k = 4; k < 16; ++k) EXPECT_EQ(s.agq.data[k], p2.data[k]);
  EXPECT_EQ(s.agq.worker_id, 9);
  // Outside data0..3 the bytes are exactly those sent.
  for (std::size_t i = 0; i < s.out.size(); ++i) {
    if (i >= 46 && i < 62) continue;  // data0..3
    ASSERT_EQ(s.out[i], s.in[i]) << "byte " << i;
  }
}

// Do not fix: published behaviour. One 802.1Q tag is parsed; the AGQ
// header just sits 4 bytes later.
TEST_F(ClassicQuirk, Quirk_VlanTaggedAgqWorks) {
  const AgqClassic p = agq_pkt(1, 300, 2, {0x0000F0C0, 0x0146F43C, 0x0015B4C9, 0x00DCEEE3});
  send(p, 100);
  const Sent s = send(p, 100);
  ASSERT_TRUE(is_unicast(s.decision, kPsPort));
  ASSERT_EQ(s.out.size(), 119u);
  std::vector<uint8_t> expected = s.in;
  const uint32_t out[4] = {0x0001E180, 0x028DE878, 0x002B6992, 0x01B9DDC6};
  for (int k = 0; k < 4; ++k) proto::store_be32(expected.data() + 46 + 4 + 4 * k, out[k]);
  EXPECT_EQ(s.out, expected);
}
