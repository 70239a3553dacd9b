// FrameLender (switch/dataplane/frame_lender.hpp): a frame lent to a port
// comes back by the port's own free -- through the lent pool's lcore cache
// on an lcore, through the handler on a thread without one -- and never
// reaches its home pool while lent; a frame given up goes home when freed,
// on either kind of thread.
#include "dataplane/frame_lender.hpp"

#include <gtest/gtest.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <thread>

#include "test_eal.hpp"

namespace agq::dataplane {
namespace {

rte_mempool* pool() {
  static rte_mempool* p = agq::test::test_eal()
                              ? rte_pktmbuf_pool_create("lendtest", 63, 16, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0)
                              : nullptr;
  return p;
}

const FrameLender& lender() {
  static FrameLender l(pool(), "lendtest_lend");
  return l;
}

TEST(FrameLender, ALentFrameFreedOnTheLcoreComesBackNotToThePool) {
  ASSERT_NE(pool(), nullptr);
  const unsigned before = rte_mempool_avail_count(pool());
  rte_mbuf* m[3];
  ASSERT_EQ(rte_pktmbuf_alloc_bulk(pool(), m, 3), 0);
  for (rte_mbuf* x : m) {
    ASSERT_TRUE(lender().lendable(x));
    lender().lend(x);
  }
  rte_pktmbuf_free(m[0]);
  rte_pktmbuf_free_bulk(m + 1, 1);  // m[2]: not taken
  lender().take_back(m[2]);
  lender().collect();
  for (rte_mbuf* x : m) {
    EXPECT_TRUE(lender().back(x));
    EXPECT_TRUE(lender().lendable(x)) << "as it was: direct, one segment, refcount 1, of its home";
  }
  EXPECT_EQ(rte_mempool_avail_count(pool()), before - 3) << "lent frames never reach the pool";
  rte_pktmbuf_free_bulk(m, 3);
  EXPECT_EQ(rte_mempool_avail_count(pool()), before);
}

TEST(FrameLender, AFreeOnAThreadWithoutACacheComesBackThroughTheHandler) {
  ASSERT_NE(pool(), nullptr);
  const unsigned before = rte_mempool_avail_count(pool());
  rte_mbuf* m = rte_pktmbuf_alloc(pool());
  ASSERT_NE(m, nullptr);
  lender().lend(m);
  std::thread([m] { rte_pktmbuf_free(m); }).join();  // not an EAL lcore: no mempool cache
  EXPECT_TRUE(lender().back(m)) << "back before any collect()";
  EXPECT_EQ(rte_mempool_avail_count(pool()), before - 1);
  rte_pktmbuf_free(m);
  EXPECT_EQ(rte_mempool_avail_count(pool()), before);
}

TEST(FrameLender, AFrameGivenUpGoesHomeWhenTheHolderFreesIt) {
  ASSERT_NE(pool(), nullptr);
  const unsigned before = rte_mempool_avail_count(pool());
  rte_mbuf* m[2];
  ASSERT_EQ(rte_pktmbuf_alloc_bulk(pool(), m, 2), 0);
  for (rte_mbuf* x : m) lender().lend(x);
  lender().collect();  // the "port" kept both
  for (rte_mbuf* x : m) {
    EXPECT_FALSE(lender().back(x));
    lender().give_up(x);
  }
  rte_pktmbuf_free(m[0]);                              // the holder, on the lcore
  std::thread([&m] { rte_pktmbuf_free(m[1]); }).join();  // and on another thread
  EXPECT_EQ(rte_mempool_avail_count(pool()), before);
}

}  // namespace
}  // namespace agq::dataplane
