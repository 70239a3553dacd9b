// The switch's run-to-completion lcore loop, l2fwd-style: every EAL lcore
// (the main one included) polls its own ports' rx queue 0, runs each packet
// through the Program, and acts on the traffic manager's Decision: drop,
// unicast into a per-lcore tx buffer, or multicast by PRE group: indirect
// rte_pktmbuf_clone replicas sharing the bytes, or, when the program has an
// egress control (per-replica rewrite, e.g. agq RESULTs), one private copy
// per replica that Program::egress(bytes, port, rid) rewrites.
//
// The drop simulator (drop_sim.hpp) drops packets with a per-port,
// per-direction probability right after rx_burst and right before tx.
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

#include "dataplane/drop_sim.hpp"
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
  // Replicas of one multicast decision (several rids may share a port);
  // further replicas are dropped and counted (dp.replica_overflow).
  static constexpr unsigned kMaxReplicas = 256;

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

  // The drop simulator's probabilities (set by the control thread at any
  // time) and its drops on one port and direction, over all lcores.
  DropSim& drop_sim() { return drop_sim_; }
  const DropSim& drop_sim() const { return drop_sim_; }
  uint64_t sim_drops(uint16_t port, SimDir d) const;

 private:
  struct Lcore;
  void setup(uint16_t nports);
  void release();  // frees the tx buffers
  static int entry(void* self);
  int loop(Lcore& c);
  void handle(Lcore& c, uint16_t in_port, rte_mbuf* m, uint64_t now_ns);
  void replicate(Lcore& c, rte_mbuf* m, unsigned n);
  void replicate_with_egress(Lcore& c, rte_mbuf* m, unsigned n);
  uint16_t sim_drop_rx(Lcore& c, uint16_t port, rte_mbuf** pkts, uint16_t n);
  void transmit(Lcore& c, uint16_t port, rte_mbuf* m);

  Ports& ports_;
  tna::Program& program_;
  const tna::ReplicationEngine& pre_;
  LoopOptions opt_;
  bool egress_;  // program_.has_egress(), fixed for the program's life
  DropSim drop_sim_;
  std::vector<std::unique_ptr<Lcore>> lcores_;  // by rte_lcore_index
  const std::atomic<bool>* stop_ = nullptr;
};

}  // namespace agq::dataplane
