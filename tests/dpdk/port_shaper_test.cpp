// PortShaper (switch/dataplane/port_shaper.hpp) on real mbufs with a fake
// clock and a fake tx queue: frames leave at the rate and in order, a full
// queue (frames or bytes) drops and counts, a refusing tx keeps frames at
// the head without losing credit, ECT frames at or above K leave CE with a
// valid checksum while Not-ECT ones are counted, and a frame shared with
// other ports (a multicast clone) is copied before its mark: the other
// references keep the original bytes.
#include "dataplane/port_shaper.hpp"

#include <gtest/gtest.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <cstring>
#include <vector>

#include "proto/headers.hpp"
#include "test_eal.hpp"

namespace agq::dataplane {
namespace {

constexpr uint64_t kHz = 1'000'000'000;  // fake TSC: 1 cycle = 1 ns

rte_mempool* pool() {
  static rte_mempool* p = agq::test::test_eal()
                              ? rte_pktmbuf_pool_create("shapertest", 2047, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0)
                              : nullptr;
  return p;
}

// An IPv4/UDP frame of `len` bytes, TOS `tos`, its id in the IP id field.
rte_mbuf* frame(uint16_t len, uint8_t tos, uint16_t id) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool());
  if (!m) return nullptr;
  uint8_t* f = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, len));
  std::memset(f, 0, len);
  f[12] = 0x08;
  proto::Ipv4 ip;
  ip.diffserv = tos;
  ip.total_len = uint16_t(len - 14);
  ip.identification = id;
  ip.protocol = 17;
  ip.src = 0x0A000001;
  ip.dst = 0x0A000002;
  ip.hdr_checksum = ip.compute_checksum();
  ip.encode(f + 14);
  return m;
}

proto::Ipv4 ip_of(const rte_mbuf* m) {
  proto::Ipv4 ip;
  ip.decode(rte_pktmbuf_mtod(m, const uint8_t*) + 14);
  return ip;
}

// A tx queue that takes up to `room` frames per call and keeps them.
struct FakeTx {
  std::vector<rte_mbuf*> got;
  uint16_t room = 0xFFFF;
  uint16_t operator()(rte_mbuf** m, uint16_t k) {
    const uint16_t take = k < room ? k : room;
    got.insert(got.end(), m, m + take);
    return take;
  }
  ~FakeTx() {
    for (rte_mbuf* m : got) rte_pktmbuf_free(m);
  }
};

ShaperSpec spec(uint64_t rate, uint32_t packets, uint64_t bytes = 0) {
  ShaperSpec s;
  s.rate_bps = rate;
  s.queue_packets = packets;
  s.queue_bytes = bytes;
  s.overhead = 24;
  return s;
}

TEST(PortShaper, FramesLeaveAtTheRateInOrder) {
  ASSERT_NE(pool(), nullptr);
  const unsigned avail = rte_mempool_avail_count(pool());
  {
    // 8.192 Mbit/s = 1024 bytes per ms: one 1000-byte frame (+24) per ms.
    ShaperSpec s = spec(8'192'000, 100);
    s.burst_bytes = 1024;
    PortShaper q(0, s, pool(), kHz, 0);
    std::vector<rte_mbuf*> in;
    for (uint16_t i = 0; i < 50; ++i) in.push_back(frame(1000, 0, i));
    q.enqueue(in.data(), uint16_t(in.size()));
    EXPECT_EQ(q.stats().depth_packets, 50u);
    EXPECT_EQ(q.stats().depth_bytes, 50'000u);
    FakeTx tx;
    uint64_t t = 0, wait = 0;
    // Poll every 100 us for 20 ms: 1 (the full bucket) + 20 frames.
    for (; t <= 20'000'000; t += 100'000) wait = q.service(t, tx);
    // rate x time (20 frames) and the bucket's 1024 bytes, give or take the
    // last poll's rounding.
    ASSERT_GE(tx.got.size(), 21u);
    ASSERT_LE(tx.got.size(), 22u);
    const size_t n = tx.got.size();
    for (size_t i = 0; i < tx.got.size(); ++i) EXPECT_EQ(ip_of(tx.got[i]).identification, i) << "FIFO order";
    EXPECT_GT(wait, 0u);
    EXPECT_LE(wait, 1'000'000u) << "the next frame is at most one frame time away";
    const ShaperStats st = q.stats();
    EXPECT_EQ(st.enqueued_packets, 50u);
    EXPECT_EQ(st.dequeued_packets, n);
    EXPECT_EQ(st.dequeued_bytes, n * 1000);
    EXPECT_EQ(st.depth_packets, 50 - n);
    EXPECT_EQ(st.max_depth_packets, 50u);
    EXPECT_EQ(st.dropped_packets, 0u);
  }
  EXPECT_EQ(rte_mempool_avail_count(pool()), avail) << "the shaper frees what it still queues";
}

TEST(PortShaper, AGapInThePollsIsCaughtUpWhileFramesWaited) {
  ASSERT_NE(pool(), nullptr);
  ShaperSpec s = spec(8'192'000, 200);  // one 1000-byte frame (+24) per ms
  s.burst_bytes = 1024;
  PortShaper q(0, s, pool(), kHz, 0);
  std::vector<rte_mbuf*> in;
  for (uint16_t i = 0; i < 100; ++i) in.push_back(frame(1000, 0, i));
  q.enqueue(in.data(), uint16_t(in.size()));
  FakeTx tx;
  q.service(0, tx);  // the bucket's burst leaves; frames wait
  const size_t first = tx.got.size();
  q.service(30'000'000, tx);  // the lcore was away for 30 ms
  EXPECT_NEAR(double(tx.got.size() - first), 30.0, 1.0) << "a link with a backlog would have sent them";
  // 78 ms more away: the 68 frames left go, with ~9 ms of credit to spare;
  // the frames that arrived meanwhile (still in the rx rings) come in the
  // next round and are owed it.
  q.service(108'000'000, tx);
  EXPECT_TRUE(q.empty());
  rte_mbuf* m[20];
  for (uint16_t i = 0; i < 20; ++i) m[i] = frame(1000, 0, uint16_t(100 + i));
  q.enqueue(m, 20);
  const size_t before = tx.got.size();
  q.service(108'000'100, tx);
  EXPECT_NEAR(double(tx.got.size() - before), 10.0, 1.0);
  while (!q.empty()) q.service(1'000'000'000, tx);
  EXPECT_EQ(q.service(1'500'000'000, tx), PortShaper::kEmpty);  // a round with nothing queued: the link went idle
  FakeTx later;
  for (uint16_t i = 0; i < 10; ++i) m[i] = frame(1000, 0, i);
  q.enqueue(m, 10);  // after an idle half second: the burst only
  q.service(2'000'000'000, later);
  EXPECT_LE(later.got.size(), 2u);
}

TEST(PortShaper, AFullQueueDropsAndCountsInPacketsAndInBytes) {
  ASSERT_NE(pool(), nullptr);
  const unsigned avail = rte_mempool_avail_count(pool());
  {
    PortShaper q(0, spec(1'000'000, 8), pool(), kHz, 0);
    std::vector<rte_mbuf*> in;
    for (uint16_t i = 0; i < 20; ++i) in.push_back(frame(100, 0, i));
    q.enqueue(in.data(), uint16_t(in.size()));
    ShaperStats st = q.stats();
    EXPECT_EQ(st.enqueued_packets, 8u);
    EXPECT_EQ(st.dropped_packets, 12u);
    EXPECT_EQ(st.dropped_bytes, 1200u);
    EXPECT_EQ(st.depth_packets, 8u);
    EXPECT_EQ(st.max_depth_packets, 8u);
  }
  {
    PortShaper q(0, spec(1'000'000, 0, 3000), pool(), kHz, 0);  // 3000 bytes
    std::vector<rte_mbuf*> in;
    for (uint16_t i = 0; i < 5; ++i) in.push_back(frame(1000, 0, i));
    in.push_back(frame(64, 0, 5));
    q.enqueue(in.data(), uint16_t(in.size()));
    const ShaperStats st = q.stats();
    EXPECT_EQ(st.enqueued_packets, 3u) << "1000 + 1000 + 1000; the 4th and 5th do not fit, nor the 64-byte one";
    EXPECT_EQ(st.depth_bytes, 3000u);
    EXPECT_EQ(st.dropped_packets, 3u);
    EXPECT_EQ(st.dropped_bytes, 2064u);
  }
  EXPECT_EQ(rte_mempool_avail_count(pool()), avail) << "dropped frames went back to the pool";
}

TEST(PortShaper, ARefusingTxKeepsFramesAtTheHeadAndTheirCredit) {
  ASSERT_NE(pool(), nullptr);
  ShaperSpec s = spec(8'192'000, 100);
  s.burst_bytes = 10 * 1024;  // ten frames of credit
  PortShaper q(0, s, pool(), kHz, 0);
  std::vector<rte_mbuf*> in;
  for (uint16_t i = 0; i < 10; ++i) in.push_back(frame(1000, 0, i));
  q.enqueue(in.data(), uint16_t(in.size()));
  FakeTx tx;
  tx.room = 3;
  const uint64_t w = q.service(0, tx);
  EXPECT_EQ(tx.got.size(), 3u);
  EXPECT_EQ(w, kHz / 100000) << "a refusal retries after ~10 us, not at once";
  tx.room = 0xFFFF;
  q.service(1, tx);
  ASSERT_EQ(tx.got.size(), 10u) << "the refused frames' credit was given back";
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(ip_of(tx.got[i]).identification, i);
  EXPECT_EQ(q.service(2, tx), PortShaper::kEmpty);
}

TEST(PortShaper, EctFramesAtOrAboveTheThresholdLeaveCe) {
  ASSERT_NE(pool(), nullptr);
  ShaperSpec s = spec(1'000'000, 100);
  s.ecn = true;
  s.ecn_packets = 4;  // marked when the queue, the frame included, holds more than 4
  PortShaper q(0, s, pool(), kHz, 0);
  std::vector<rte_mbuf*> in;
  for (uint16_t i = 0; i < 12; ++i) in.push_back(frame(200, i % 3 == 2 ? 0x00 : (i % 3 == 0 ? 0x02 : 0x29), i));
  q.enqueue(in.data(), uint16_t(in.size()));
  FakeTx tx;
  for (uint64_t t = 0; !q.empty(); t += 10'000'000) q.service(t, tx);
  ASSERT_EQ(tx.got.size(), 12u);
  unsigned marked = 0, not_ect = 0;
  for (size_t i = 0; i < 12; ++i) {
    const proto::Ipv4 ip = ip_of(tx.got[i]);
    EXPECT_EQ(ip.hdr_checksum, ip.compute_checksum()) << i;
    const uint8_t ecn = ip.diffserv & 3;
    if (i < 4) {
      EXPECT_NE(ecn, 3) << "frame " << i << " found the queue below K";
    } else if (i % 3 == 2) {
      EXPECT_EQ(ecn, 0) << "Not-ECT is never marked";
      ++not_ect;
    } else {
      EXPECT_EQ(ecn, 3) << "frame " << i << " is ECT above K";
      EXPECT_EQ(ip.diffserv & 0xFC, i % 3 == 0 ? 0x00 : 0x28) << "the DSCP kept";
      ++marked;
    }
  }
  const ShaperStats st = q.stats();
  EXPECT_EQ(st.ecn_marked, marked);
  EXPECT_EQ(st.ecn_not_ect, not_ect);
  EXPECT_EQ(marked, 5u);
}

TEST(PortShaper, ASharedFrameIsCopiedBeforeItsMark) {
  ASSERT_NE(pool(), nullptr);
  ShaperSpec s = spec(1'000'000, 100, 0);
  s.ecn = true;
  s.ecn_in_bytes = true;
  s.ecn_bytes = 0;  // every ECT frame
  PortShaper q(0, s, pool(), kHz, 0);
  rte_mbuf* m = frame(300, 0x02, 77);
  ASSERT_NE(m, nullptr);
  rte_mbuf_refcnt_update(m, 1);  // another port's replica holds it too
  q.enqueue(&m, 1);
  FakeTx tx;
  q.service(0, tx);
  ASSERT_EQ(tx.got.size(), 1u);
  EXPECT_NE(tx.got[0], m) << "a private copy left";
  EXPECT_EQ(ip_of(tx.got[0]).diffserv, 0x03);
  EXPECT_EQ(ip_of(tx.got[0]).identification, 77);
  EXPECT_EQ(ip_of(m).diffserv, 0x02) << "the other reference keeps ECT(0)";
  EXPECT_EQ(rte_mbuf_refcnt_read(m), 1) << "the shaper gave its reference back";
  EXPECT_EQ(q.stats().ecn_marked, 1u);
  rte_pktmbuf_free(m);
}

}  // namespace
}  // namespace agq::dataplane
