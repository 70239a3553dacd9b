// PortGate (workers/app/link_watch.hpp): while lcore 0 restarts a port, no
// other lcore is inside it, and no lcore ever waits for another. Three
// threads stand for the lcores of one agq-worker process; a "port" is a
// generation number the owner changes only while the port is closed and
// quiet (a restart), and the readers use it (read it twice, as rx/tx would
// read the rings) only while the gate says it is open. It fails when a
// reader reports its quiescent state between its look at the gate and the
// end of its use (tried: caught in 3 runs of 3), and when a reader ignores
// the gate. No timing is asserted: the restarts are spread over the
// readers' loops by a varying pause, the readers never block.
#include <gtest/gtest.h>
#include <rte_pause.h>

#include <atomic>
#include <thread>
#include <vector>

#include "app/link_watch.hpp"

namespace agq::worker {
namespace {

TEST(PortGate, NoReaderInsideThePortDuringARestart) {
  constexpr unsigned kLcores = 3, kRestarts = 200;
  PortGate gate(kLcores, 2);
  ASSERT_TRUE(gate.ok());
  std::atomic<uint64_t> generation{0};          // the port as the readers see it
  std::atomic<unsigned> inside[kLcores] = {};   // reader j between its look at the gate and the end of its use
  std::atomic<uint64_t> torn{0}, used{0}, skipped{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> readers;
  for (unsigned j = 1; j < kLcores; ++j)
    readers.emplace_back([&, j] {
      gate.online(j);
      while (!stop.load(std::memory_order_relaxed)) {
        for (uint16_t p = 0; p < 2; ++p) {
          if (gate.closed(p)) {  // (a quiescent report may not come between this look and the use)
            skipped.fetch_add(1, std::memory_order_relaxed);  // down for this lcore: it moves on
            continue;
          }
          if (p != 0) continue;  // port 1 is never restarted
          // From its look at the gate to the end of its burst, the lcore is
          // inside the port; the burst takes a while (wider race windows).
          inside[j].store(1);
          const uint64_t a = generation.load();
          for (unsigned k = 0; k < 40 * j; ++k) rte_pause();  // lcores of different speeds
          if (generation.load() != a) torn.fetch_add(1);  // the port changed under this lcore's burst
          for (unsigned k = 0; k < 40 * j; ++k) rte_pause();
          inside[j].store(0);
          used.fetch_add(1, std::memory_order_relaxed);
        }
        gate.quiescent(j);  // the end of this loop iteration: after its last port access
        if ((used.load(std::memory_order_relaxed) & 63) == 0)
          std::this_thread::yield();  // one reader gets descheduled now and then
      }
      gate.offline(j);
    });
  gate.online(0);
  unsigned inside_at_restart = 0;
  uint64_t polls = 0;  // lcore 0's loop turns while waiting (it never blocks either)
  for (unsigned r = 0; r < kRestarts; ++r) {
    gate.close(0);
    EXPECT_FALSE(gate.closed(1));
    while (!gate.quiet(0)) ++polls;  // lcore 0 polls; in agq-worker it keeps working meanwhile
    // The restart (rings freed and made anew) takes a while: nobody may be
    // inside the port at any moment of it.
    generation.fetch_add(1);
    for (int k = 0; k < 2048; ++k) {
      for (unsigned j = 1; j < kLcores; ++j) inside_at_restart += inside[j].load();
      rte_pause();
    }
    gate.open(0);
    // Let the readers use the port again before the next restart.
    const uint64_t u = used.load();
    while (used.load() < u + 2) ++polls;
    for (unsigned k = 0; k < (r * 37) % 97; ++k) rte_pause();  // the next close lands anywhere in a reader's loop
  }
  stop = true;
  for (auto& t : readers) t.join();
  gate.offline(0);
  EXPECT_EQ(inside_at_restart, 0u);
  EXPECT_EQ(torn.load(), 0u);
  EXPECT_GT(skipped.load(), 0u);  // the readers saw the port closed and went on without it
  EXPECT_GE(used.load(), uint64_t(kRestarts));
}

TEST(PortGate, AnOfflineLcoreDoesNotHoldARestart) {
  PortGate gate(2, 1);
  ASSERT_TRUE(gate.ok());
  gate.online(0);
  gate.online(1);
  gate.close(0);
  EXPECT_FALSE(gate.quiet(0));  // lcore 1 has not passed a quiescent state since
  gate.quiescent(1);
  EXPECT_TRUE(gate.quiet(0));
  gate.open(0);
  gate.close(0);
  EXPECT_FALSE(gate.quiet(0));
  gate.offline(1);  // lcore 1 left its loop for good
  EXPECT_TRUE(gate.quiet(0));
  gate.open(0);
  EXPECT_FALSE(gate.closed(0));
}

}  // namespace
}  // namespace agq::worker
