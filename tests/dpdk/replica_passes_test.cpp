// replica_passes (switch/dataplane/replica_passes.hpp): multicast replicas
// made from the original frames member after member, driven through test
// ports: each "port" records the bytes of every frame it takes, then either
// copies it out (frees it, as memif's tx does: the FrameLender gets it
// back) or keeps it (a DMA queue; freed at the end, it goes home). Checked: every member gets every frame it took with its
// own rewrite and nothing else changed; a kept frame is never written
// again; a full queue loses only that member's replicas; no mbuf leaks or
// is freed twice (the pool's count at the end). Runs the EAL in the test
// process (--no-huge, one net_null port).
#include "dataplane/replica_passes.hpp"

#include "dataplane/frame_lender.hpp"
#include "test_eal.hpp"

#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

namespace agq::dataplane {
namespace {

rte_mempool* pool() {
  static rte_mempool* p = agq::test::test_eal()
                              ? rte_pktmbuf_pool_create("replpass", 255, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0)
                              : nullptr;
  return p;
}

const FrameLender& lender() {
  static FrameLender l(pool(), "replpass_lend");
  return l;
}

constexpr unsigned kLen = 96;
constexpr uint8_t kMember = 0xA0;  // byte 0: the member the frame was last rewritten for

// Frame j's bytes: its id at byte 1, a pattern after.
uint8_t pattern(unsigned id, unsigned i) { return uint8_t(id * 31 + i * 7 + 3); }

std::vector<uint8_t> expected(unsigned id, unsigned member) {
  std::vector<uint8_t> b(kLen);
  b[0] = uint8_t(kMember + member);
  b[1] = uint8_t(id);
  for (unsigned i = 2; i < kLen; ++i) b[i] = pattern(id, i);
  return b;
}

struct Ports {
  unsigned hold_member = ~0u;    // this member's port keeps the odd frames
  unsigned refuse_member = ~0u;  // this member's port takes all but the last two
  std::map<unsigned, std::vector<std::vector<uint8_t>>> wire;  // member -> frames taken, in order
  std::vector<std::pair<rte_mbuf*, std::vector<uint8_t>>> kept;

  unsigned send(unsigned r, rte_mbuf** f, unsigned n) {
    const unsigned take = r == refuse_member && n > 2 ? n - 2 : n;
    for (unsigned j = 0; j < take; ++j) {
      const uint8_t* d = rte_pktmbuf_mtod(f[j], const uint8_t*);
      std::vector<uint8_t> bytes(d, d + f[j]->data_len);
      wire[r].push_back(bytes);
      if (r == hold_member && bytes[1] % 2 == 1)
        kept.emplace_back(f[j], bytes);  // the port's reference, released after the test's checks
      else
        rte_pktmbuf_free(f[j]);  // copied out: the port's reference goes
    }
    return take;
  }
};

struct Frames {
  std::vector<rte_mbuf*> f;
  std::vector<uint8_t*> bytes;
  ReplicaPassStats st;
  std::vector<std::pair<unsigned, unsigned>> held;
  bool lost_before = false;

  explicit Frames(unsigned n) {
    for (unsigned id = 0; id < n; ++id) {
      rte_mbuf* m = rte_pktmbuf_alloc(pool());
      EXPECT_NE(m, nullptr);
      uint8_t* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, kLen));
      std::vector<uint8_t> e = expected(id, 0);
      std::memcpy(d, e.data(), kLen);
      d[0] = 0;  // not yet rewritten
      f.push_back(m);
      bytes.push_back(d);
    }
  }

  void go(Ports& p, unsigned members, bool buffers = true) {
    replica_passes(
        lender(), f.data(), bytes.data(), unsigned(f.size()), members,
        [this](unsigned r, uint8_t** b, rte_mbuf**, unsigned k, bool same) {
          EXPECT_EQ(same, r != 0 && !lost_before) << r;
          lost_before = false;
          for (unsigned j = 0; j < k; ++j) b[j][0] = uint8_t(kMember + r);
        },
        [&p](unsigned r, rte_mbuf** fr, unsigned k) { return p.send(r, fr, k); },
        [this](unsigned r, unsigned k) { held.emplace_back(r, k); },
        [this, buffers]() -> rte_mbuf* {
          if (!buffers) lost_before = true;  // the frame leaves the arrays: the next rewrite is told
          return buffers ? rte_pktmbuf_alloc(pool()) : nullptr;
        },
        st);
  }
};

// The ids each member received, in order, and that every frame is that
// member's rewrite of the original.
std::vector<unsigned> ids(const Ports& p, unsigned member) {
  std::vector<unsigned> out;
  auto it = p.wire.find(member);
  if (it == p.wire.end()) return out;
  for (const auto& b : it->second) {
    EXPECT_EQ(b, expected(b[1], member)) << "member " << member << " frame " << unsigned(b[1]);
    out.push_back(b[1]);
  }
  return out;
}

std::vector<unsigned> iota(unsigned n) {
  std::vector<unsigned> v(n);
  for (unsigned i = 0; i < n; ++i) v[i] = i;
  return v;
}

TEST(ReplicaPasses, EveryMemberGetsEveryFrameRewrittenForItFromTheOriginal) {
  ASSERT_NE(pool(), nullptr);
  const unsigned before = rte_mempool_avail_count(pool());
  Ports p;
  Frames run(16);
  run.go(p, 4);
  for (unsigned r = 0; r < 4; ++r) EXPECT_EQ(ids(p, r), iota(16)) << r;
  EXPECT_EQ(run.st.sent, 64u);
  EXPECT_EQ(run.st.reused, 48u);
  EXPECT_EQ(run.st.held + run.st.copies + run.st.refused + run.st.lost, 0u);
  EXPECT_TRUE(run.held.empty());
  EXPECT_EQ(rte_mempool_avail_count(pool()), before) << "the last member's send took the frames";
}

TEST(ReplicaPasses, AFrameThePortKeepsIsNeverWrittenAgainAndLaterMembersGetACopy) {
  ASSERT_NE(pool(), nullptr);
  const unsigned before = rte_mempool_avail_count(pool());
  Ports p;
  p.hold_member = 1;
  Frames run(10);
  run.go(p, 4);
  for (unsigned r = 0; r < 4; ++r) EXPECT_EQ(ids(p, r), iota(10)) << r;
  ASSERT_EQ(run.held.size(), 1u);
  EXPECT_EQ(run.held[0], std::make_pair(1u, 5u));
  EXPECT_EQ(run.st.held, 5u);
  EXPECT_EQ(run.st.copies, 5u);
  EXPECT_EQ(run.st.lost, 0u);
  ASSERT_EQ(p.kept.size(), 5u);
  for (auto& [m, bytes] : p.kept) {
    const uint8_t* d = rte_pktmbuf_mtod(m, const uint8_t*);
    EXPECT_EQ(std::vector<uint8_t>(d, d + kLen), bytes) << "a kept frame was written after its send";
    EXPECT_FALSE(lender().back(m)) << "still the port's";
    EXPECT_NE(m->pool, pool()) << "given up: its free goes home through the lender";
    EXPECT_EQ(rte_mbuf_refcnt_read(m), 1);
    rte_pktmbuf_free(m);
    EXPECT_EQ(m->pool, pool());
  }
  EXPECT_EQ(rte_mempool_avail_count(pool()), before);
}

TEST(ReplicaPasses, WithoutBuffersAKeptFramesLaterMembersAreLostAndCounted) {
  ASSERT_NE(pool(), nullptr);
  const unsigned before = rte_mempool_avail_count(pool());
  Ports p;
  p.hold_member = 0;
  Frames run(6);
  run.go(p, 3, /*buffers=*/false);
  EXPECT_EQ(ids(p, 0), iota(6));
  EXPECT_EQ(ids(p, 1), (std::vector<unsigned>{0, 2, 4}));
  EXPECT_EQ(ids(p, 2), (std::vector<unsigned>{0, 2, 4}));
  EXPECT_EQ(run.st.held, 3u);
  EXPECT_EQ(run.st.lost, 6u);  // 3 frames x 2 members
  for (auto& [m, bytes] : p.kept) rte_pktmbuf_free(m);
  EXPECT_EQ(rte_mempool_avail_count(pool()), before);
}

TEST(ReplicaPasses, AFullQueueLosesOnlyThatMembersReplicas) {
  ASSERT_NE(pool(), nullptr);
  const unsigned before = rte_mempool_avail_count(pool());
  for (unsigned refuse : {0u, 2u}) {  // a middle member, then the last (whose send takes the frames)
    Ports p;
    p.refuse_member = refuse;
    Frames run(8);
    run.go(p, 3);
    for (unsigned r = 0; r < 3; ++r) EXPECT_EQ(ids(p, r), iota(r == refuse ? 6 : 8)) << refuse << " " << r;
    EXPECT_EQ(run.st.refused, 2u);
    EXPECT_EQ(run.st.sent, 22u);
    EXPECT_EQ(rte_mempool_avail_count(pool()), before) << refuse;
  }
}

}  // namespace
}  // namespace agq::dataplane
