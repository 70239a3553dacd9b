// Parser tests: every header of the switch parser, and malformed input
// (truncated at every byte offset, bad IHL, wrong UDP port, VLAN, non-IP).
#include <gtest/gtest.h>

#include "pipeline/parser.hpp"
#include "proto/agq.hpp"
#include "proto/frame.hpp"

using namespace agq;
using namespace agq::proto;
using agq::pipeline::Headers;
using agq::pipeline::parse;
using agq::pipeline::ParserError;

namespace {

AgqClassic sample_agq() {
  AgqClassic a;
  a.job_and_seq = 0x1234;
  a.worker_id = 7;
  a.total_workers = 2;
  for (int i = 0; i < kAgqClassicLanes; ++i) a.data[i] = 0x01020304u * uint32_t(i + 1);
  a.is_ack = 0;
  a.hash_id = 300;
  a.hash1 = 37;
  a.hash2 = 4;
  return a;
}

UdpFrameSpec spec(std::optional<uint16_t> vlan = std::nullopt) {
  UdpFrameSpec s;
  s.dst_mac = {0x02, 0, 0, 0, 0, 0x10};
  s.src_mac = {0x02, 0, 0, 0, 0, 0x01};
  s.vlan_id = vlan;
  s.src_ip = 0x0A020201;
  s.dst_ip = 0x0A020203;
  return s;
}

}  // namespace

TEST(Parser, AgqClassicUntaggedIs115Bytes) {
  auto f = build_agq_classic_frame(spec(), sample_agq());
  ASSERT_EQ(f.size(), 115u);
  Headers h;
  ASSERT_EQ(parse(f, h), ParserError::None);
  EXPECT_TRUE(h.ipv4_valid);
  EXPECT_TRUE(h.udp_valid);
  ASSERT_TRUE(h.agq_classic_valid);
  EXPECT_FALSE(h.vlan_valid);
  EXPECT_EQ(h.agq_classic.job_and_seq, 0x1234);
  EXPECT_EQ(h.agq_classic.hash_id, 300);
  EXPECT_EQ(h.agq_classic.hash1, 37);
  EXPECT_EQ(h.agq_classic.hash2, 4);
  EXPECT_EQ(h.agq_classic.data[15], 0x01020304u * 16);
  EXPECT_EQ(h.payload_offset, 42);
}

TEST(Parser, HeaderFieldsAtPublishedOffsets) {
  auto f = build_agq_classic_frame(spec(), sample_agq());
  const uint8_t* agq = f.data() + 42;
  EXPECT_EQ(load_be16(agq + 0), 0x1234);
  EXPECT_EQ(agq[2], 7);
  EXPECT_EQ(agq[3], 2);
  EXPECT_EQ(load_be32(agq + 4), 0x01020304u);
  EXPECT_EQ(agq[68], 0);
  EXPECT_EQ(load_be16(agq + 69), 300);
  EXPECT_EQ(load_be16(agq + 71), (37 << 3) | 4);  // hashID2 == hashID in the scapy sender
}

TEST(Parser, OneVlanTag) {
  auto f = build_agq_classic_frame(spec(uint16_t(42)), sample_agq());
  ASSERT_EQ(f.size(), 119u);
  Headers h;
  ASSERT_EQ(parse(f, h), ParserError::None);
  EXPECT_TRUE(h.vlan_valid);
  EXPECT_EQ(h.vlan.vid, 42);
  EXPECT_TRUE(h.agq_classic_valid);
  EXPECT_EQ(h.payload_offset, 46);
}

TEST(Parser, TruncatedAtEveryOffsetIsAnErrorOrNotAgq) {
  auto f = build_agq_classic_frame(spec(), sample_agq());
  for (size_t len = 0; len < f.size(); ++len) {
    Headers h;
    auto err = parse(std::span<const uint8_t>(f.data(), len), h);
    EXPECT_EQ(err, ParserError::Truncated) << "len " << len;
    EXPECT_FALSE(h.agq_classic_valid) << "len " << len;
  }
  auto fv = build_agq_classic_frame(spec(uint16_t(5)), sample_agq());
  for (size_t len = 0; len < fv.size(); ++len) {
    Headers h;
    EXPECT_EQ(parse(std::span<const uint8_t>(fv.data(), len), h), ParserError::Truncated) << len;
  }
}

TEST(Parser, BadIhlAndVersion) {
  for (uint8_t ihl = 0; ihl < 5; ++ihl) {
    auto f = build_agq_classic_frame(spec(), sample_agq());
    f[14] = uint8_t(0x40 | ihl);
    Headers h;
    EXPECT_EQ(parse(f, h), ParserError::BadIpv4Header) << int(ihl);
  }
  auto f = build_agq_classic_frame(spec(), sample_agq());
  f[14] = 0x65;  // version 6
  Headers h;
  EXPECT_EQ(parse(f, h), ParserError::BadIpv4Header);
}

TEST(Parser, Ipv4OptionsAreNotParsedAsUdp) {
  auto f = build_agq_classic_frame(spec(), sample_agq());
  f[14] = 0x46;  // IHL 6
  Headers h;
  ASSERT_EQ(parse(f, h), ParserError::None);
  EXPECT_TRUE(h.ipv4_valid);
  EXPECT_FALSE(h.udp_valid);
  EXPECT_FALSE(h.agq_classic_valid);
}

TEST(Parser, WrongUdpPortIsPlainUdp) {
  auto s = spec();
  for (uint16_t port : {49999, 50002, 4791, 53}) {
    s.dst_port = port;
    auto f = build_agq_classic_frame(s, sample_agq());
    Headers h;
    ASSERT_EQ(parse(f, h), ParserError::None);
    EXPECT_TRUE(h.udp_valid);
    EXPECT_FALSE(h.agq_classic_valid) << port;
  }
  s.dst_port = 50001;  // the second AGQ port
  auto f = build_agq_classic_frame(s, sample_agq());
  Headers h;
  ASSERT_EQ(parse(f, h), ParserError::None);
  EXPECT_TRUE(h.agq_classic_valid);
}

TEST(Parser, NonIpIsAcceptedWithoutL3) {
  std::vector<uint8_t> f(60, 0);
  f[12] = 0x86;
  f[13] = 0xDD;  // IPv6: not parsed
  Headers h;
  ASSERT_EQ(parse(f, h), ParserError::None);
  EXPECT_FALSE(h.ipv4_valid);
  EXPECT_FALSE(h.arp_valid);
  EXPECT_EQ(h.ethernet.ether_type, 0x86DD);
}

TEST(Parser, ArpRequest) {
  std::vector<uint8_t> f(42, 0);
  Ethernet e{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, {2, 0, 0, 0, 0, 1}, kEtherTypeArp};
  e.encode(f.data());
  Arp a;
  a.oper = 1;
  a.sha = e.src;
  a.spa = 0x0A000001;
  a.tpa = 0x0A000002;
  a.encode(f.data() + 14);
  Headers h;
  ASSERT_EQ(parse(f, h), ParserError::None);
  ASSERT_TRUE(h.arp_valid);
  EXPECT_EQ(h.arp.oper, 1);
  EXPECT_EQ(h.arp.tpa, 0x0A000002u);
}

TEST(Parser, DeparseRoundTripIsByteExact) {
  auto f = build_agq_classic_frame(spec(uint16_t(9)), sample_agq());
  auto copy = f;
  Headers h;
  ASSERT_EQ(parse(f, h), ParserError::None);
  agq::pipeline::deparse(h, f);
  EXPECT_EQ(f, copy);
}

TEST(Parser, AgqHeaderRoundTripAndTruncation) {
  Agq a;
  a.type = AgqType::Data;
  a.flags = kAgqFlagVersion | kAgqFlagRetransmit;
  a.job_id = 0xBEEF;
  a.worker_id = 3;
  a.num_workers = 4;
  a.slot = 513;
  a.seq = 0xA0B0C0D0;
  a.req_width = 16;
  a.exponent = -7;
  for (int k = 0; k < kAgqLanes; ++k) a.lanes[k] = 0x11111111u * uint32_t(k % 15);
  uint8_t payload[Agq::kLen];
  a.encode(payload);
  EXPECT_EQ(payload[0], 0x11);
  EXPECT_EQ(payload[16], 0xF9);
  auto s = spec();
  s.src_port = s.dst_port = kAgqPort;
  auto f = build_udp_frame(s, payload);
  ASSERT_EQ(f.size(), 190u);
  Headers h;
  ASSERT_EQ(parse(f, h), ParserError::None);
  ASSERT_TRUE(h.agq_valid);
  EXPECT_FALSE(h.agq_classic_valid);
  EXPECT_EQ(h.agq.job_id, 0xBEEF);
  EXPECT_EQ(h.agq.exponent, -7);
  EXPECT_EQ(h.agq.slot, 513);
  EXPECT_EQ(h.agq.lanes[14], 0x11111111u * 14);
  auto copy = f;
  agq::pipeline::deparse(h, f);
  EXPECT_EQ(f, copy);
  for (size_t len = 42; len < f.size(); ++len) {
    Headers t;
    EXPECT_EQ(parse(std::span<const uint8_t>(f.data(), len), t), ParserError::Truncated) << len;
  }
}
