// The switch's run-to-completion lcores, shared-nothing (docs/ARCHITECTURE.md):
// every EAL lcore (the main one included) owns one program instance with its
// own PRE (control::Pipe), polls its rx queues (Ports::rx_lcore), and per rx
// burst:
//   1. drop simulator (rx), linearize-or-drop multi-segment mbufs;
//   2. Program::shard_of per packet: the shard's owner is lcore shard % L
//      (docs/PROTOCOL.md section 10; kAnyShard: this lcore). Packets of other
//      owners go to the owner's hand-off rte_ring in one enqueue per owner
//      (dp.handoff; a full ring drops, dp.handoff_drops);
//   3. Program::process_burst over its own packets and over what the other
//      lcores handed it, data prefetched across the burst;
//   4. decisions in bulk: drops freed in one inline bulk free, unicast into
//      the lcore's tx batch of that port (its own tx queue, or the hand-off
//      ring of the lcore that owns a single-queue port), multicast by the
//      lcore's own PRE: identical replicas share the mbuf (refcount), replicas
//      an egress control rewrites get one flat copy of the frame each (no
//      re-parse) and then Program::egress -- a burst's run of multicast
//      decisions at once, before the next unicast one (replicate.cpp).
// No lock is taken on the packet path. Between bursts, and while idle, the
// lcore runs the control plane's commands from its command ring
// (CommandRings) and reports learned MACs on its digest ring.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "control/pipes.hpp"
#include "dataplane/command_rings.hpp"
#include "dataplane/drop_sim.hpp"
#include "dataplane/lcore_counters.hpp"
#include "dataplane/port_shaper.hpp"
#include "dataplane/ports.hpp"
#include "tna/pre.hpp"
#include "tna/program.hpp"

struct rte_mbuf;
struct rte_ring;

namespace agq::dataplane {

struct LoopOptions {
  uint16_t burst = 64;            // rx burst size, 1..kMaxBurst
  uint16_t tx_batch = 128;        // a port's tx batch leaves when this full, 1..kMaxBurst (and every round)
  uint32_t idle_sleep_us = 100;   // idle back-off ceiling; 0 = pure busy poll
  uint32_t idle_polls = 256;      // empty rounds before the first sleep
  // Multicast replicas rewritten from the original mbuf, member after
  // member, on ports whose driver copies a frame out inside tx_burst
  // (TxPort::copies_out); false: a buffer per replica everywhere.
  bool reuse_replicas = true;
  // By port (missing or rate 0: not shaped): an egress rate and queue
  // (port_shaper.hpp). A shaped port's tx is funnelled to one lcore, which
  // holds its queue and sends on its tx queue 0 (setup()).
  std::vector<ShaperSpec> shapers;
};

class SwitchDataplane {
 public:
  static constexpr uint16_t kMaxBurst = 256;
  // Replicas of one multicast decision (several rids may share a port);
  // further replicas are dropped and counted (dp.replica_overflow).
  static constexpr unsigned kMaxReplicas = 256;
  // Packets in flight to one lcore (rx hand-off) or to one shared tx queue.
  static constexpr unsigned kHandoffRing = 1024;
  static constexpr unsigned kDigestRing = 1024;
  // A busy lcore looks at its command ring every this many poll rounds
  // (an idle one after every empty round).
  static constexpr unsigned kCommandEvery = 8;
  // How long the control thread waits for an lcore's ack (plus the idle
  // back-off ceiling); below agqctl's own timeout (control::kCtlTimeoutMs).
  static constexpr unsigned kCommandTimeoutMs = 5000;
  // An lcore with a memif queue switched off (no client ring) looks at that
  // port's link every this many rounds, to re-arm it after a reconnect.
  static constexpr unsigned kLinkCheckEvery = 256;
  // The fused path (ingest): a run of at least this many equal frames is
  // decided at once; after the program declines one, this many rx bursts
  // go without the check.
  static constexpr uint16_t kMinRun = 8;
  static constexpr uint16_t kRunSkip = 64;

  struct RxQueue {
    uint16_t port, queue;
    // memif queue >= 1: its ring is confirmed on the first packets after
    // link-up (check_memif_ring); off: the client has no ring for it.
    bool verify = false, off = false;
    // Several lcores, a steered port and a program that checks ownership
    // itself: its packets go straight to this lcore's instance, which hands
    // back (Decision::handoff) those of other lcores' shards.
    bool program_shards = false;
  };

  // `pipes` holds one instance per EAL lcore, in rte_lcore_index order, each
  // with its own PRE. Assigns the rx queues (Ports::rx_lcore), makes the tx
  // batches, the hand-off, command and digest rings. Throws
  // std::runtime_error on a bad option or an allocation failure.
  SwitchDataplane(Ports& ports, control::Pipes& pipes, LoopOptions opt);
  ~SwitchDataplane();
  SwitchDataplane(const SwitchDataplane&) = delete;
  SwitchDataplane& operator=(const SwitchDataplane&) = delete;

  // Runs the loop on every EAL lcore, the calling main lcore included;
  // returns once `stop` is set and every lcore has flushed and returned.
  void run(const std::atomic<bool>& stop);

  unsigned lcore_count() const { return static_cast<unsigned>(lcores_.size()); }
  // (EAL lcore id, rx queues) per dataplane lcore.
  std::vector<std::pair<unsigned, std::vector<RxQueue>>> rx_assignment() const;

  // The control plane's way to the instances (Pipes::set_executor).
  CommandRings& commands() { return *commands_; }

  // Sums over lcores, monotonic (clearing is the reader's business), in
  // LcoreCounters::for_each order.
  std::vector<std::pair<std::string, uint64_t>> totals() const;
  // Software tx drops on one port, over all lcores (its shaper's tail
  // drops included).
  uint64_t tx_dropped(uint16_t port) const;
  // A shaped port's queue (nullptr: not shaped); its stats() may be read
  // from any thread.
  const PortShaper* shaper(uint16_t port) const;

  // The drop simulator's probabilities (set by the control thread at any
  // time) and its drops on one port and direction, over all lcores.
  DropSim& drop_sim() { return drop_sim_; }
  const DropSim& drop_sim() const { return drop_sim_; }
  uint64_t sim_drops(uint16_t port, SimDir d) const;

  // rte_eth_stats_reset on every port (control thread). Bracketed by a
  // sequence count the memif ring check reads (check_memif_ring): a reset
  // that lands between a queue's first rx burst and its statistics read
  // would make a queue with a ring look like one without.
  void reset_port_stats();

  // MAC digests the lcores reported since the last call (control thread).
  std::vector<tna::MacDigest> take_mac_digests();
  // Lcore `index`'s digest ring producer side (its program's sink).
  void push_mac_digest(unsigned index, const tna::MacDigest& d);

 private:
  struct Lcore;
  void setup(control::Pipes& pipes);
  void release();
  static int entry(void* self);
  int loop(Lcore& c);
  template <bool kSharded> void ingest(Lcore& c, uint16_t port, rte_mbuf** pkts, uint16_t n, uint64_t now_ns);
  void handoff(Lcore& c);
  void process_inbox(Lcore& c, rte_mbuf** pkts, uint16_t n, uint64_t now_ns);
  void run_program(Lcore& c, uint16_t n);
  void send_run(Lcore& c, rte_mbuf** pkts, uint16_t n, const tna::Decision& d);
  template <typename DecisionOf> void apply_decisions(Lcore& c, rte_mbuf** pkts, uint16_t n, DecisionOf decision);
  void multicast(Lcore& c, rte_mbuf* m, const tna::Decision& d, bool sim_tx);
  void multicast_run(Lcore& c, rte_mbuf* const* m, const tna::Decision* const* d, unsigned n);
  void replicate_in_place(Lcore& c, rte_mbuf** f, unsigned n, const tna::Replica* members, unsigned nr);
  uint16_t sim_drop_rx(Lcore& c, uint16_t port, rte_mbuf** pkts, uint16_t n);
  void transmit(Lcore& c, uint16_t port, rte_mbuf* m, bool sim_tx);
  void transmit_sim(Lcore& c, uint16_t port, rte_mbuf* m);
  bool check_memif_ring(Lcore& c, RxQueue& q, rte_mbuf** pkts, uint16_t n, uint32_t reset_seq);
  void rearm_memif_queues(Lcore& c);
  bool drain_shared_tx(Lcore& c);
  uint64_t serve_shapers(Lcore& c);
  bool shaped(uint16_t port) const { return port < opt_.shapers.size() && opt_.shapers[port].shaped(); }
  void flush_all(Lcore& c);

  Ports& ports_;
  LoopOptions opt_;
  bool egress_;  // the programs' has_egress(), fixed for their life
  DropSim drop_sim_;
  std::vector<std::unique_ptr<Lcore>> lcores_;  // by rte_lcore_index
  std::vector<rte_ring*> tx_rings_;             // by port: to a shared tx queue's owner
  std::vector<rte_ring*> fallback_tx_;          // by port (multi-queue memif): to lcore 0, which owns queue 0
  std::vector<const PortShaper*> shapers_;      // by port, owned by the owner lcore
  std::unique_ptr<CommandRings> commands_;
  const std::atomic<bool>* stop_ = nullptr;
  std::atomic<uint32_t> stats_reset_seq_{0};  // odd while reset_port_stats() runs
};

}  // namespace agq::dataplane
