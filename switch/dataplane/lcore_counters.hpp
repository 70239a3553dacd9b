// Counters of one dataplane lcore. Each lcore writes only its own block
// (no sharing, no atomic read-modify-write on the hot path); the control
// thread reads them at any time. Relaxed atomic load+store compiles to a
// plain add on x86 and keeps those concurrent reads free of torn values.
#pragma once

#include <atomic>
#include <cstdint>

namespace agq::dataplane {

// A single-writer counter.
class Counter {
 public:
  void add(uint64_t n) { v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  uint64_t get() const { return v_.load(std::memory_order_relaxed); }
  void set(uint64_t n) { v_.store(n, std::memory_order_relaxed); }  // a gauge (queue depth)

 private:
  std::atomic<uint64_t> v_{0};
};

// alignas(64): two lcores' blocks never share a cache line.
struct alignas(64) LcoreCounters {
  Counter rx;              // packets received
  Counter tx;              // packets (and replicas) handed to the NIC
  Counter tx_dropped;      // refused by a full tx queue or tx hand-off ring
  Counter tx_handoff;      // packets given to the lcore that owns a port's only tx queue
  Counter handoff;         // packets given to the lcore that owns their shard (rx hand-off)
  Counter handoff_drops;   // refused by the owner's full hand-off ring
  Counter clones;          // multicast replicas sharing the original's bytes (mbuf refcount)
  Counter copies;          // replicas copied for a program's egress rewrite
  Counter reused;          // replicas sent from the original, rewritten once the port let go of it
  Counter reuse_held;      // originals a port kept past tx_burst: copied for the rest (reuse then off there)
  Counter clone_failures;  // replicas lost because their pool was empty
  Counter replica_overflow;  // replicas beyond SwitchDataplane::kMaxReplicas
  Counter program_drops;   // Decision::Drop (the program counts the reason)
  Counter multiseg_drops;  // multi-segment mbufs that could not be linearized
  Counter bad_port_drops;  // unicast/multicast to a port that does not exist
  Counter idle_sleeps;     // sleeps of the idle back-off
  Counter commands;        // control-plane commands run between bursts
  Counter command_cycles;  // TSC cycles they took: the lcore's pauses for the control plane
  Counter digest_drops;    // MAC digests lost to a full digest ring
  Counter memif_missing_rings;  // memif queues found without a client ring (then polled no more)
  Counter memif_missing_drops;  // what was read from such a queue before that (not the client's frames)
  Counter memif_check_retries; // ring checks a port-stats reset made undecidable (checked again on the next burst)
  Counter run_packets;     // packets of one-flow runs the program decided at once (the fused path)
  // TSC cycles of the rounds that received something, from the first rx
  // call to the end of the round's flush (testpmd's --record-core-cycles,
  // VPP's clocks per vector): busy_cycles / rx is the lcore's cost per
  // packet whether or not the sender kept it saturated. Empty rounds (the
  // idle back-off's polls) are not counted.
  Counter busy_cycles;
  // Those rounds: rx / busy_rounds is the mean burst (VPP's vectors per
  // call), which says how much of a round's fixed cost each packet carries.
  Counter busy_rounds;

  // Calls fn(name, value) for every counter, in a stable order.
  template <typename Fn> void for_each(Fn&& fn) const {
    fn("rx", rx.get());
    fn("tx", tx.get());
    fn("tx_dropped", tx_dropped.get());
    fn("tx_handoff", tx_handoff.get());
    fn("handoff", handoff.get());
    fn("handoff_drops", handoff_drops.get());
    fn("clones", clones.get());
    fn("copies", copies.get());
    fn("reused", reused.get());
    fn("reuse_held", reuse_held.get());
    fn("clone_failures", clone_failures.get());
    fn("replica_overflow", replica_overflow.get());
    fn("program_drops", program_drops.get());
    fn("multiseg_drops", multiseg_drops.get());
    fn("bad_port_drops", bad_port_drops.get());
    fn("idle_sleeps", idle_sleeps.get());
    fn("commands", commands.get());
    fn("command_cycles", command_cycles.get());
    fn("digest_drops", digest_drops.get());
    fn("memif_missing_rings", memif_missing_rings.get());
    fn("memif_missing_drops", memif_missing_drops.get());
    fn("memif_check_retries", memif_check_retries.get());
    fn("run_packets", run_packets.get());
    fn("busy_cycles", busy_cycles.get());
    fn("busy_rounds", busy_rounds.get());
  }
};

}  // namespace agq::dataplane
