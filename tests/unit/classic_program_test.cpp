// Scenario tests of ClassicProgram::process() with real frames: the worked
// example of reference §3.5, completion, two sequences in one aggregator,
// ACK release and window regrowth, collisions, counters, dumps, and the
// non-AGQ path.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "classic_test_util.hpp"
#include "proto/bytes.hpp"

using namespace agq;
using namespace agq::classic_test;

namespace {

const std::vector<uint32_t> kWorkedIn = {0x0000F0C0, 0x0146F43C, 0x0015B4C9, 0x00DCEEE3};
const std::vector<uint32_t> kWorkedOut = {0x0001E180, 0x028DE878, 0x002B6992, 0x01B9DDC6};

// Offsets where `a` and `b` differ.
std::vector<std::size_t> diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  std::vector<std::size_t> d;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (a[i] != b[i]) d.push_back(i);
  return d;
}

using ClassicScenario = ClassicFixture;

}  // namespace

// Reference §3.5 worked example: seq jas 1, hashID 300 (aggregator 37, slot
// 4), two identical contributions, p = 0, L = 32.
TEST_F(ClassicScenario, WorkedExampleSection3_5) {
  const AgqClassic pkt = agq_pkt(1, 300, 2, kWorkedIn);
  const Sent first = send(pkt);
  EXPECT_TRUE(is_drop(first.decision, DropReason::AgqAbsorbed));
  EXPECT_EQ(counter("allocations"), 1u);
  EXPECT_EQ(counter("resubmits"), 1u);
  EXPECT_EQ(counter("contributions"), 1u);

  const Sent second = send(pkt);
  ASSERT_TRUE(is_unicast(second.decision, kPsPort));
  for (int k = 0; k < 4; ++k) EXPECT_EQ(second.agq.data[k], kWorkedOut[k]) << "data" << k;

  // Byte for byte: only data0..3 (16 bytes at AGQ offset 4) changed.
  ASSERT_EQ(second.out.size(), 115u);
  const std::size_t data0 = 42 + 4;
  const auto d = diff(second.in, second.out);
  ASSERT_FALSE(d.empty());
  EXPECT_GE(d.front(), data0);
  EXPECT_LT(d.back(), data0 + 16);
  std::vector<uint8_t> expected = second.in;
  for (int k = 0; k < 4; ++k) proto::store_be32(expected.data() + data0 + 4 * k, kWorkedOut[k]);
  EXPECT_EQ(second.out, expected);

  const auto slot = prog.seq_slot(300);
  EXPECT_EQ(slot.job_and_seq, 1);
  EXPECT_EQ(slot.start_posi, 0);
  EXPECT_EQ(slot.worker_agg, 2);
  const auto agg = prog.aggregator(37);
  EXPECT_EQ(agg.insert_posi, 3);
  EXPECT_EQ(agg.data_isEmpty, 0x80);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(agg.reg[k], kWorkedOut[k]);
  EXPECT_EQ(counter("completions"), 1u);
  EXPECT_EQ(counter("absorbed"), 1u);
  EXPECT_EQ(counter("agq_packets"), 2u);
}

TEST_F(ClassicScenario, SequenceCompletesAtTotalWorkersThenAckFreesSlot) {
  const uint16_t h = 8 * 9 + 2;
  EXPECT_TRUE(is_drop(send(agq_pkt(5, h, 3, {100, 200, 300, 400})).decision, DropReason::AgqAbsorbed));
  EXPECT_TRUE(is_drop(send(agq_pkt(5, h, 3, {1, 2, 3, 4})).decision, DropReason::AgqAbsorbed));
  const Sent done = send(agq_pkt(5, h, 3, {10, 20, 30, 40}));
  ASSERT_TRUE(is_unicast(done.decision, kPsPort));
  EXPECT_EQ(done.agq.data[0], 111u);
  EXPECT_EQ(done.agq.data[3], 444u);
  EXPECT_EQ(prog.seq_slot(h).worker_agg, 3);

  // The PS's ACK carries the sums; p = 0, L = 32: its data leaves unchanged.
  const Sent ack = send(ack_pkt(5, h, {111, 222, 333, 444}));
  EXPECT_TRUE(is_worker_multicast(ack.decision));
  EXPECT_EQ(ack.out, ack.in);
  const auto slot = prog.seq_slot(h);
  EXPECT_EQ(slot.job_and_seq, 0);
  EXPECT_EQ(slot.start_posi, 0);
  EXPECT_EQ(slot.worker_agg, 0);
  const auto agg = prog.aggregator(9);
  EXPECT_EQ(agg.data_isEmpty, 0);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(agg.reg[k], 0u);
  EXPECT_EQ(counter("acks"), 1u);
  EXPECT_EQ(counter("acks_released"), 1u);

  // A second ACK finds no owner and is dropped (NEW behaviour).
  EXPECT_TRUE(is_drop(send(ack_pkt(5, h, {})).decision, DropReason::AgqAckNoOwner));
  EXPECT_EQ(counter("acks_no_owner"), 1u);
}

// The slot is reused by the next seq, which starts where the cursor is now
// (3), so a lone seq gets only [3, 8) = 20 bits: published behaviour.
TEST_F(ClassicScenario, SlotReuseStartsAtCursor) {
  const uint16_t h = 8 * 9;
  send(agq_pkt(5, h, 1, {1, 1, 1, 1}));
  send(ack_pkt(5, h, {1, 1, 1, 1}));
  const Sent s = send(agq_pkt(6, h, 1, {0x12345678, 0x12345678, 0x12345678, 0x12345678}));
  ASSERT_TRUE(is_unicast(s.decision, kPsPort));
  EXPECT_EQ(prog.seq_slot(h).start_posi, 3);
  EXPECT_EQ(s.agq.data[0], 0x12345000u);  // truncated to the top 20 bits
  EXPECT_EQ(prog.aggregator(9).reg[0], 0x00012345u);
}

// Two seqs in aggregator 5: A starts at 0, B at 3 -> windows 0:12 and 3:20.
// B's first packet is resubmitted after a first pass that truncated and
// shifted its PHV: the second pass must see the original bytes (else B's
// value would be shifted twice).
TEST_F(ClassicScenario, TwoSequencesShareAnAggregator) {
  const uint16_t hA = 40, hB = 41;
  const uint32_t vA = 0x12345678, vB = 0x0ABCDEF0;
  send(agq_pkt(1, hA, 2, {vA, vA, vA, vA}));
  send(agq_pkt(2, hB, 2, {vB, vB, vB, vB}));
  EXPECT_EQ(prog.seq_slot(hA).start_posi, 0);
  EXPECT_EQ(prog.seq_slot(hB).start_posi, 3);
  EXPECT_EQ(prog.aggregator(5).data_isEmpty, 0b10010000);

  const Sent a = send(agq_pkt(1, hA, 2, {vA, vA, vA, vA}));
  const Sent b = send(agq_pkt(2, hB, 2, {vB, vB, vB, vB}));
  ASSERT_TRUE(is_unicast(a.decision, kPsPort));
  ASSERT_TRUE(is_unicast(b.decision, kPsPort));
  // A: 12 bits, 2 x 0x123 (its first contribution's low bits were cleared
  // when B opened [3, 8)).
  EXPECT_EQ(a.agq.data[0], 0x24600000u);
  // B: 20 bits, 2 x 0xABCDE... -> 0x1579A, MSB-aligned again.
  EXPECT_EQ(b.agq.data[0], 0x1579A000u);
  EXPECT_EQ(prog.aggregator(5).reg[0], 0x2461579Au);
}

// ACK of B (start 3) clears [3, 8) and frees the bit; A's window grows back
// to 32 bits on its next packet.
TEST_F(ClassicScenario, AckReleasesAndWindowRegrows) {
  const uint16_t hA = 40, hB = 41;
  send(agq_pkt(1, hA, 3, {0x11111111, 0x11111111, 0x11111111, 0x11111111}));
  send(agq_pkt(2, hB, 2, {0x22222222, 0x22222222, 0x22222222, 0x22222222}));
  EXPECT_EQ(prog.aggregator(5).reg[0], 0x11122222u);
  send(agq_pkt(1, hA, 3, {0x11111111, 0x11111111, 0x11111111, 0x11111111}));  // L = 12
  EXPECT_EQ(prog.aggregator(5).reg[0], 0x22222222u);

  const Sent ack = send(ack_pkt(2, hB, {0x44444444, 0x44444444, 0x44444444, 0x44444444}));
  EXPECT_TRUE(is_worker_multicast(ack.decision));
  EXPECT_EQ(ack.agq.data[0], 0x00044444u);  // (data & TOP(20)) >> 12
  EXPECT_EQ(ack.agq.data[4], ack_pkt(2, hB).data[4]);
  const auto agg = prog.aggregator(5);
  EXPECT_EQ(agg.data_isEmpty, 0x80);
  EXPECT_EQ(agg.reg[0], 0x22200000u);

  const Sent a = send(agq_pkt(1, hA, 3, {0x11111111, 0x11111111, 0x11111111, 0x11111111}));
  ASSERT_TRUE(is_unicast(a.decision, kPsPort));
  EXPECT_EQ(a.agq.data[0], 0x33311111u);  // full 32-bit window again
}

// Collision: hashID owned by another jobAndSeq -> dropped (no fallback to
// the PS), nothing changes. Do not fix: published behaviour.
TEST_F(ClassicScenario, CollisionIsDropped) {
  send(agq_pkt(1, 40, 2, {5, 5, 5, 5}));
  const auto before = prog.dump_aggregator(5);
  const Sent s = send(agq_pkt(2, 40, 2, {7, 7, 7, 7}));
  EXPECT_TRUE(is_drop(s.decision, DropReason::AgqCollision));
  EXPECT_EQ(prog.dump_aggregator(5), before);
  EXPECT_EQ(counter("collisions"), 1u);
  EXPECT_EQ(counter("drops_agq_collision"), 1u);
  EXPECT_EQ(counter("contributions"), 1u);
}

TEST_F(ClassicScenario, CountersHaveStableNames) {
  std::vector<std::string> names;
  prog.visit_counters([&](std::string_view n, uint64_t) { names.emplace_back(n); });
  const std::vector<std::string> head = {
      "agq_packets", "contributions", "allocations", "resubmits", "completions", "absorbed",
      "collisions", "acks", "acks_released", "acks_no_owner", "parser_errors"};
  ASSERT_GE(names.size(), head.size());
  EXPECT_TRUE(std::equal(head.begin(), head.end(), names.begin()));
  for (uint16_t r = 1; r < uint16_t(DropReason::Count); ++r)
    EXPECT_NE(std::find(names.begin(), names.end(),
                        std::string("drops_") + pipeline::to_string(DropReason(r))),
              names.end());

  send(agq_pkt(1, 40, 1, {1}));
  EXPECT_EQ(counter("agq_packets"), 1u);
  prog.clear_counters();
  EXPECT_EQ(counter("agq_packets"), 0u);
  EXPECT_EQ(counter("completions"), 0u);
}

TEST_F(ClassicScenario, DumpAggregatorAndClearState) {
  send(agq_pkt(1, 300, 2, kWorkedIn));
  const auto cells = prog.dump_aggregator(37);
  ASSERT_EQ(cells.size(), 6u + 3u * 8u);
  EXPECT_EQ(cells[0], (std::pair<std::string, uint64_t>{"insert_posi", 3}));
  EXPECT_EQ(cells[1], (std::pair<std::string, uint64_t>{"data_isEmpty", 0x80}));
  EXPECT_EQ(cells[2], (std::pair<std::string, uint64_t>{"reg0", 0x0000F0C0}));
  EXPECT_EQ(cells[5].first, "reg3");
  auto find = [&](const std::string& n) {
    for (const auto& c : cells)
      if (c.first == n) return c.second;
    ADD_FAILURE() << "no cell " << n;
    return uint64_t(0);
  };
  EXPECT_EQ(find("job_and_seq_reg[300]"), 1u);
  EXPECT_EQ(find("worker_agg[300]"), 1u);
  EXPECT_EQ(find("start_posi[296]"), 0u);
  EXPECT_EQ(find("job_and_seq_reg[303]"), 0u);
  EXPECT_EQ(prog.aggregator_count(), 8192u);
  EXPECT_TRUE(prog.dump_aggregator(8192).empty());

  prog.clear_state();
  EXPECT_EQ(prog.seq_slot(300).job_and_seq, 0);
  EXPECT_EQ(prog.aggregator(37).reg[0], 0u);
  EXPECT_EQ(prog.aggregator(37).insert_posi, 0);
  // A cleared slot is allocated afresh.
  send(agq_pkt(1, 300, 2, kWorkedIn));
  EXPECT_EQ(counter("allocations"), 2u);
}

TEST_F(ClassicScenario, WorkerGroupIsConfigured) {
  EXPECT_EQ(pre.member_ports(ClassicProgram::kWorkerGroup), kWorkerPorts);
}

TEST_F(ClassicScenario, ParserErrorIsCountedDrop) {
  auto f = proto::build_agq_classic_frame(frame_spec(), agq_pkt(1, 40, 1, {1}));
  f.resize(100);  // AGQ header cut short
  const Sent s = send_frame(f);
  EXPECT_TRUE(is_drop(s.decision, DropReason::ParserError));
  EXPECT_EQ(counter("parser_errors"), 1u);
  EXPECT_EQ(counter("drops_parser_error"), 1u);
  EXPECT_EQ(counter("agq_packets"), 0u);
}

// Traffic that is not AGQ goes through the shared Forwarding control.
TEST_F(ClassicScenario, NonAgqTrafficIsForwarded) {
  ASSERT_TRUE(prog.forwarding().add_route(0x0A090909, 3));
  auto spec = frame_spec();
  spec.dst_ip = 0x0A090909;
  spec.dst_port = 4000;
  const std::vector<uint8_t> payload(20, 0xAB);
  const Sent s = send_frame(proto::build_udp_frame(spec, payload));
  EXPECT_TRUE(is_unicast(s.decision, 3));
  EXPECT_EQ(s.out, s.in);
  EXPECT_EQ(counter("agq_packets"), 0u);
}

// MAC learning through the program's digest sink (the dataplane's wiring):
// ordinary traffic reports an unknown source once (AGQ packets never reach
// the forwarding control, as in the published program); the program's own
// table stays empty until the control plane installs the digest.
TEST_F(ClassicScenario, MacDigestSinkReceivesNewSources) {
  struct Sink : pipeline::MacDigestSink {
    std::vector<tna::MacDigest> got;
    void push(const tna::MacDigest& d) override { got.push_back(d); }
  } sink;
  prog.set_mac_digest_sink(&sink);
  send(agq_pkt(1, 40, 2, {1}));
  auto spec = frame_spec();
  spec.dst_port = 4000;
  const std::vector<uint8_t> payload(20, 0xAB);
  send_frame(proto::build_udp_frame(spec, payload));
  send_frame(proto::build_udp_frame(spec, payload));
  ASSERT_EQ(sink.got.size(), 1u);
  EXPECT_EQ(sink.got[0].port, kIngressPort);
  EXPECT_EQ(sink.got[0].mac[5], 0x01);
  std::size_t entries = 0;
  prog.forwarding().for_each_mac([&](const proto::Mac&, const pipeline::Forwarding::MacEntry&) { ++entries; });
  EXPECT_EQ(entries, 0u);
  EXPECT_EQ(prog.forwarding().apply_mac_digest(sink.got[0], 0), pipeline::Forwarding::DigestResult::Learned);
  prog.set_mac_digest_sink(nullptr);
}
