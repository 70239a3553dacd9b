// The switch's run-to-completion lcore loop, l2fwd-style: every EAL lcore
// (the main one included) polls its own ports' rx queue 0, runs each packet
// through the Program, and acts on the traffic manager's Decision: drop,
// unicast into a per-lcore tx buffer, or multicast by PRE group with
// rte_pktmbuf_clone replicas.
//
// Locking: program passes are serialised by Program::lock() (one spinlock,
// like the single pipe of a Tofino), and the PRE group is read under the
// same lock, so the control plane must change groups under it too. Rx, tx
// and cloning run in parallel on every lcore. See docs/ARCHITECTURE.md.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/lcore_counters.hpp"
#include "dataplane/ports.hpp"
#include "tna/pre.hpp"
#include "tna/program.hpp"

struct rte_mbuf;

namespace agq::dataplane {

struct LoopOptions {
  uint16_t burst = 32;            // rx burst and tx buffer size, 1..kMaxBurst
  uint32_t idle_sleep_us = 100;   // idle back-off ceiling; 0 = pure busy poll
  uint32_t idle_polls = 256;      // empty rounds before the first sleep
};

class SwitchDataplane {
 public:
  static constexpr uint16_t kMaxBurst = 256;

  // Assigns ports to lcores round-robin (port p -> p-th lcore modulo the lcore
  // count; a port is never polled by two lcores) and allocates tx buffers.
  // Throws std::runtime_error on a bad option or allocation failure.
  SwitchDataplane(Ports& ports, tna::Program& program, const tna::ReplicationEngine& pre,
                  LoopOptions opt);
  ~SwitchDataplane();
  SwitchDataplane(const SwitchDataplane&) = delete;
  SwitchDataplane& operator=(const SwitchDataplane&) = delete;

  // Runs the loop on every EAL lcore, the calling main lcore included;
  // returns once `stop` is set and every lcore has flushed and returned.
  void run(const std::atomic<bool>& stop);

  unsigned lcore_count() const { return static_cast<unsigned>(lcores_.size()); }
  // (EAL lcore id, rx ports) per dataplane lcore.
  std::vector<std::pair<unsigned, std::vector<uint16_t>>> rx_assignment() const;

  // Sums over lcores, monotonic (clearing is the reader's business), in
  // LcoreCounters::for_each order.
  std::vector<std::pair<std::string, uint64_t>> totals() const;
  // Software tx drops on one port, over all lcores.
  uint64_t tx_dropped(uint16_t port) const;

 private:
  struct Lcore;
  void setup(uint16_t nports);
  void release();  // frees the tx buffers
  static int entry(void* self);
  int loop(Lcore& c);
  void handle(Lcore& c, uint16_t in_port, rte_mbuf* m, uint64_t now_ns);
  void replicate(Lcore& c, rte_mbuf* m, tna::PortId* out, unsigned n);

  Ports& ports_;
  tna::Program& program_;
  const tna::ReplicationEngine& pre_;
  LoopOptions opt_;
  std::vector<std::unique_ptr<Lcore>> lcores_;  // by rte_lcore_index
  const std::atomic<bool>* stop_ = nullptr;
};

}  // namespace agq::dataplane
