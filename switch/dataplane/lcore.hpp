// One dataplane lcore's state (SwitchDataplane::Lcore), private to the
// dataplane's sources (switch_dataplane.cpp: the poll loop; replicate.cpp:
// the multicast paths), and the one way a packet leaves (transmit).
#pragma once

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <array>
#include <memory>
#include <vector>

#include "dataplane/frame_lender.hpp"
#include "dataplane/switch_dataplane.hpp"
#include "dataplane/tx_port.hpp"

namespace agq::dataplane {

struct SwitchDataplane::Lcore {
  Lcore(SwitchDataplane& dp, unsigned idx, unsigned id, uint16_t nports)
      : index(idx), lcore_id(id), rng(rte_rdtsc() ^ (uint64_t(id) << 48)), sim_drops(new Counter[size_t(nports) * 2]),
        sink(dp, idx) {}

  // The program's MAC-learning digests go on this lcore's digest ring.
  struct DigestSink final : pipeline::MacDigestSink {
    DigestSink(SwitchDataplane& d, unsigned i) : dp(d), index(i) {}
    void push(const tna::MacDigest& d) override { dp.push_mac_digest(index, d); }
    SwitchDataplane& dp;
    unsigned index;
  };

  LcoreCounters counters;
  unsigned index = 0;     // rte_lcore_index = instance index
  unsigned lcore_id = 0;  // EAL lcore id
  tna::Program* prog = nullptr;
  const tna::ReplicationEngine* pre = nullptr;
  std::vector<RxQueue> rxq;
  std::unique_ptr<TxPort[]> tx;        // by port
  std::vector<uint16_t> owned_tx;      // shared ports whose only tx queue this lcore owns, and shaped ports
  // The queues of the shaped ports this lcore transmits (port_shaper.hpp).
  std::vector<std::unique_ptr<PortShaper>> shapers;
  unsigned memif_off = 0;              // rx queues switched off for lack of a client ring
  std::vector<uint8_t> link_was_down;  // by port: seen down since a queue was switched off
  rte_ring* inbox = nullptr;           // hand-off from the other lcores (multi-producer)
  rte_ring* digests = nullptr;         // MacDigest elements to the control thread
  XorShift64 rng;                      // drop simulator decisions
  std::unique_ptr<Counter[]> sim_drops;  // DropSim::index(port, dir)
  // Scratch, here rather than on the stack: nothing is initialised or
  // allocated per packet.
  std::array<rte_mbuf*, kMaxBurst> rx;
  std::array<rte_mbuf*, kMaxBurst> local;
  std::array<rte_mbuf*, kMaxBurst> drops;
  std::array<rte_mbuf*, kMaxBurst> plain;  // dropped plain mbufs of the pool, the stash full
  std::array<tna::BurstPacket, kMaxBurst> burst;
  std::vector<std::array<rte_mbuf*, kMaxBurst>> stage;  // by owner lcore
  std::vector<uint16_t> staged;
  std::array<tna::Replica, kMaxReplicas> replicas;
  std::array<rte_mbuf*, kMaxReplicas> copies;
  std::array<uint8_t*, kMaxReplicas> replica_bytes;
  std::array<uint16_t, kMaxBurst> lens;  // replicate_in_place's frame lengths
  // replicate_in_place's frames, lent to the ports for each send but the
  // last; null when no port of this lcore reuses frames.
  std::unique_ptr<FrameLender> lender;
  // apply_decisions' run of multicast decisions (multicast_run) and its
  // replica groups for the program's egress.
  std::array<rte_mbuf*, kMaxBurst> mc_pkts;
  std::array<const tna::Decision*, kMaxBurst> mc_decisions;
  std::array<tna::Program::ReplicaGroup, kMaxBurst> groups;
  // Program-dropped mbufs (absorbed agq DATA) kept as the next replicas'
  // buffers instead of a free now and an alloc later: an agq RESULT of N
  // DATA needs N-1 new buffers just as N-1 of its DATA are absorbed. At
  // most Ports::kMaxSpares (the pool is sized for it); freed in release().
  std::array<rte_mbuf*, kMaxBurst> spare;
  uint16_t nspare = 0;
  // Rx bursts left to go without looking for a run, after the program
  // declined one (traffic whose frames agree in their first bytes but are
  // not ordinary, e.g. agq DATA of one job): the scan is not paid per burst.
  uint16_t run_skip = 0;
  DigestSink sink;
  pipeline::SwitchProgram* sprog = nullptr;  // = prog, for the sink's removal
};

// Every packet and replica leaves through here: the lcore's tx batch of that
// port, or, only while the drop simulator's tx side is on (sim_tx, read once
// per burst), through its decision first.
inline void SwitchDataplane::transmit(Lcore& c, uint16_t port, rte_mbuf* m, bool sim_tx) {
  if (unlikely(sim_tx)) {
    transmit_sim(c, port, m);
    return;
  }
  c.tx[port].send(m);
}

}  // namespace agq::dataplane
