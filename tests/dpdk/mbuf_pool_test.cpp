// The switch's mbuf pool without hugepages (dataplane/mbuf_pool.cpp): in
// DPDK's own memory every object of a pool stays inside one 4 KiB page
// unless it is larger than a page, so a default-room mbuf (2368-byte
// object) gets a page to itself and the headers of all mbufs share one L1
// set. Ports' pool, on memory of its own, must lay its mbufs back to back.
// Runs the EAL in the test process (--no-huge, one net_null port); each
// test is its own process under ctest (gtest_discover_tests).
#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <unistd.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "dataplane/ports.hpp"
#include "test_eal.hpp"

namespace {

void start_eal() { ASSERT_TRUE(agq::test::test_eal()) << "rte_eal_init"; }

// L1 sets (64-byte lines, 64 sets: a 4 KiB way) the first header line of
// `n` mbufs taken from `pool` map to.
std::set<unsigned> header_sets(rte_mempool* pool, unsigned n) {
  std::vector<rte_mbuf*> m(n);
  EXPECT_EQ(rte_pktmbuf_alloc_bulk(pool, m.data(), n), 0);
  std::set<unsigned> sets;
  for (rte_mbuf* x : m) sets.insert(unsigned(reinterpret_cast<uintptr_t>(x) >> 6) & 63u);
  rte_pktmbuf_free_bulk(m.data(), n);
  return sets;
}

TEST(MbufPool, WithoutHugepagesPortsPoolSpreadsMbufsOverL1Sets) {
  start_eal();
  ASSERT_FALSE(rte_eal_has_hugepages());
  agq::dataplane::PortOptions opt;
  opt.with_clone_pool = false;
  agq::dataplane::Ports ports(opt);
  ASSERT_NE(ports.pool(), nullptr);
  // Ports' pool is built on memory of its own, packed back to back (objects
  // cross 4 KiB pages), so 64 mbufs of a fresh pool fall in most of the 64
  // sets.
  EXPECT_TRUE(ports.pool_memory().own);
  EXPECT_GE(ports.pool_memory().bytes, size_t(ports.pool()->size) * ports.pool()->elt_size);
  EXPECT_GE(rte_pktmbuf_data_room_size(ports.pool()), RTE_MBUF_DEFAULT_BUF_SIZE);
  EXPECT_GE(header_sets(ports.pool(), 64).size(), 32u);
  // Transparent huge pages are the kernel's to give (THP mode, free 2 MiB
  // blocks): reported, not required.
  std::printf("pool: %zu bytes, %zu in transparent huge pages\n", ports.pool_memory().bytes,
              ports.pool_memory().huge_bytes);

  // The control: DPDK's own memory, default room, same pool size, no cache.
  // Its objects are one per page, so their headers all map to one set.
  rte_mempool* def = rte_pktmbuf_pool_create("mbufpool_default", 1023, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(header_sets(def, 64).size(), 1u);
  rte_mempool_free(def);
}

}  // namespace
