// Port readers and the unmap wait (switch/dataplane/port_readers.hpp), as the
// memif PMD's disconnect uses them: an "unmapper" thread (EAL's interrupt
// thread) clears a port's connected flag, calls wait_for_port_readers (what
// the interposed munmap does), then "unmaps" the region: a generation the
// readers must never see change while they are inside a burst that saw the
// flag set. Reader threads (the lcores) poll like eth_memif_tx: check the
// flag, then use the region for a while, and report a quiescent state
// between rounds. Without the wait, the region changes under a reader's
// burst (tried: the first test fails on every run); with it, never. Nothing
// is timed except the bound of a wait on a reader that never comes back.
#include "dataplane/port_readers.hpp"

#include <gtest/gtest.h>
#include <rte_pause.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace agq::dataplane {
namespace {

TEST(PortReaders, NoReaderInsideARegionWhenItIsUnmapped) {
  constexpr unsigned kReaders = 2, kUnmaps = 300;
  std::atomic<bool> connected{true};       // the PMD's ETH_MEMIF_FLAG_CONNECTED
  std::atomic<uint64_t> region{0};         // which mapping is in place
  std::atomic<uint64_t> torn{0}, bursts{0};
  std::atomic<unsigned> online{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (unsigned j = 0; j < kReaders; ++j)
    readers.emplace_back([&, j] {
      PortReader reader;
      online.fetch_add(1);
      while (!stop.load(std::memory_order_relaxed)) {
        reader.quiescent();
        if (!connected.load(std::memory_order_relaxed)) continue;  // rx/tx return 0
        const uint64_t r = region.load();
        for (unsigned k = 0; k < 100 * (j + 1); ++k) rte_pause();  // the copies into the ring
        if (region.load() != r) torn.fetch_add(1);  // unmapped under this burst
        bursts.fetch_add(1, std::memory_order_relaxed);
        if ((bursts.load(std::memory_order_relaxed) & 127) == 0) std::this_thread::yield();
      }
    });
  while (online.load() < kReaders) std::this_thread::yield();
  unsigned gave_up = 0;
  for (unsigned u = 0; u < kUnmaps; ++u) {
    connected.store(false, std::memory_order_relaxed);  // memif_disconnect: the flag first ...
    if (!wait_for_port_readers()) ++gave_up;             // ... the interposed munmap ...
    region.fetch_add(1);                                 // ... the unmap itself
    for (int k = 0; k < 500; ++k) rte_pause();           // the rest of the disconnect, then a new peer
    connected.store(true, std::memory_order_relaxed);
    const uint64_t b = bursts.load();
    while (bursts.load() < b + 4) std::this_thread::yield();  // the readers back inside the new region
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(torn.load(), 0u);
  EXPECT_EQ(gave_up, 0u);
  EXPECT_GT(port_reader_waits().waited, 0u);  // readers were mid-round at some unmaps
}

TEST(PortReaders, AWaitGivesUpOnAReaderThatNeverComesBack) {
  std::atomic<bool> inside{false}, release{false};
  std::thread stuck([&] {
    PortReader reader;
    inside = true;  // online, and never between rounds until released
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!inside.load()) std::this_thread::yield();
  const unsigned long before = port_reader_waits().gave_up;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(wait_for_port_readers(50));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));
  EXPECT_EQ(port_reader_waits().gave_up, before + 1);
  release = true;
  stuck.join();
  EXPECT_TRUE(wait_for_port_readers(50));  // it went offline when its PortReader ended
}

TEST(PortReaders, AReaderThatUnmapsDoesNotWaitForItself) {
  PortReader outer;
  {
    PortReader nested;  // a loop inside a loop on one thread: one registration
    EXPECT_TRUE(wait_for_port_readers(50));
  }
  EXPECT_TRUE(wait_for_port_readers(50));
}

}  // namespace
}  // namespace agq::dataplane
