// A port's egress link with a rate: one FIFO of frames in front of the port's
// tx queue, drained by a token bucket (token_bucket.hpp) at the link's rate,
// with a tail-drop limit in packets or bytes and a DCTCP-style ECN mark
// (ecn.hpp) on every ECN-capable frame that arrives while the queue is at or
// above its threshold K. docs/ARCHITECTURE.md, "Links with rates".
//
// One lcore owns a shaper and is its only caller (the dataplane funnels a
// shaped port's tx to that lcore: SwitchDataplane::setup); the control
// thread only reads its counters (relaxed loads of single-writer counters,
// as LcoreCounters). Nothing blocks and nothing is allocated per packet:
// enqueue() queues or drops at once, service() sends what the credit allows,
// at most kServeMax frames per call, and says how long the head must wait.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <memory>

#include "dataplane/ecn.hpp"
#include "dataplane/lcore_counters.hpp"
#include "dataplane/token_bucket.hpp"

struct rte_mempool;

namespace agq::dataplane {

// What the configuration asks of one port ([[port]] in the TOML, conf/README.md).
struct ShaperSpec {
  static constexpr uint32_t kMaxSlots = 16384;  // frames a queue may hold, whatever its byte limit

  uint64_t rate_bps = 0;        // 0: the port is not shaped
  uint32_t queue_packets = 0;   // tail-drop limit in frames, or
  uint64_t queue_bytes = 0;     // in frame bytes (one of the two is set)
  bool ecn = false;             // marks on
  uint32_t ecn_packets = 0;     // K in frames, or
  uint64_t ecn_bytes = 0;       // in bytes (ecn_in_bytes)
  bool ecn_in_bytes = false;
  uint64_t burst_bytes = 0;     // the bucket's depth; 0: burst()
  uint16_t overhead = 24;       // wire bytes per frame beyond the frame: preamble, SFD, FCS, gap

  bool shaped() const { return rate_bps != 0; }
  // Frames the queue can hold: the mbufs it may keep out of the pool.
  uint32_t slots() const {
    if (queue_packets) return queue_packets < kMaxSlots ? queue_packets : kMaxSlots;
    const uint64_t n = queue_bytes / 60 + 1;  // 60: the smallest Ethernet frame without FCS
    return n < kMaxSlots ? uint32_t(n) : kMaxSlots;
  }
  // The default depth: 1 ms of the rate, and at least two full-size frames:
  // what an idle link sends back to back when frames arrive.
  uint64_t burst() const {
    if (burst_bytes) return burst_bytes;
    const uint64_t ms = rate_bps / 8 / 1000;
    const uint64_t two = 2 * (1514 + uint64_t(overhead));
    const uint64_t b = ms > two ? ms : two;
    return b < TokenBucket::kMaxBurst ? b : TokenBucket::kMaxBurst;
  }
  // Credit a backlogged queue may catch up after a gap in the lcore's polls
  // (idle sleeps, a descheduled thread): 500 ms of the rate. The queue was
  // waiting all along, so a real link would have sent it; the long-term
  // rate then holds through gaps up to this (on this 2-vCPU box under a
  // load of 15, an lcore pinned beside other busy-polling processes missed
  // 100 ms at a time).
  uint64_t catchup() const {
    const uint64_t c = rate_bps / 8 / 2;
    const uint64_t b = burst();
    return c < b ? b : c < TokenBucket::kMaxBurst ? c : TokenBucket::kMaxBurst;
  }
};

// A snapshot of one shaper for the control plane.
struct ShaperStats {
  uint64_t depth_packets = 0, depth_bytes = 0;          // now
  uint64_t max_depth_packets = 0, max_depth_bytes = 0;  // since start
  uint64_t enqueued_packets = 0, enqueued_bytes = 0;
  uint64_t dequeued_packets = 0, dequeued_bytes = 0;    // handed to the port's tx queue
  uint64_t dropped_packets = 0, dropped_bytes = 0;      // queue full (tail drop)
  uint64_t ecn_marked = 0;      // ECT frames set to CE
  uint64_t ecn_not_ect = 0;     // frames over the threshold that were not ECN-capable (or not IP)
  uint64_t ecn_unmarkable = 0;  // ECT frames over the threshold sent unmarked: shared, and no mbuf to copy into
};

class PortShaper {
 public:
  static constexpr uint16_t kServeBatch = 64;  // frames per tx_burst call
  static constexpr unsigned kServeCalls = 4;   // tx_burst calls per service()
  static constexpr uint64_t kEmpty = ~uint64_t(0);

  // `copy_pool`: where a frame shared with other ports (a multicast clone)
  // gets its private copy before its mark is written.
  PortShaper(uint16_t port, const ShaperSpec& spec, rte_mempool* copy_pool, uint64_t tsc_hz, uint64_t now);
  ~PortShaper();  // frees what is still queued
  PortShaper(const PortShaper&) = delete;
  PortShaper& operator=(const PortShaper&) = delete;

  // Takes m[0..n): queued (an ECT frame marked CE at or above the
  // threshold) or, the queue full, freed and counted.
  void enqueue(rte_mbuf* const* m, uint16_t n);

  // Sends the frames the credit allows at `now` (TSC), through
  // tx(rte_mbuf** pkts, uint16_t k) -> frames taken. Frames tx refuses stay
  // at the head, their credit given back. Returns the TSC cycles until the
  // head may leave (0: now; tx refused: ~10 us, the time a full tx ring
  // takes to make room, not a spin), kEmpty when
  // nothing is queued.
  template <typename Tx> uint64_t service(uint64_t now, Tx&& tx);

  bool empty() const { return count_ == 0; }
  uint16_t port() const { return port_; }
  const ShaperSpec& spec() const { return spec_; }
  ShaperStats stats() const;  // any thread

 private:
  void mark(rte_mbuf*& m);
  void publish_depth() {
    depth_packets_.set(count_);
    depth_bytes_.set(bytes_);
  }

  uint16_t port_;
  ShaperSpec spec_;
  rte_mempool* copy_pool_;
  TokenBucket bucket_;
  std::unique_ptr<rte_mbuf*[]> ring_;
  uint32_t mask_ = 0;
  uint32_t slots_ = 0;      // the queue's frame limit (<= mask_ + 1)
  uint64_t limit_bytes_ = 0;  // 0: none
  uint64_t k_ = 0;          // ECN threshold, in frames or bytes
  uint64_t retry_cycles_ = 0;  // after a refusal by tx
  uint32_t head_ = 0, tail_ = 0, count_ = 0;
  bool backlogged_ = false;  // frames were left at the end of the last service()
  uint64_t bytes_ = 0;
  uint64_t max_packets_ = 0, max_bytes_ = 0;

  Counter depth_packets_, depth_bytes_, max_depth_packets_, max_depth_bytes_;
  Counter enq_packets_, enq_bytes_, deq_packets_, deq_bytes_, drop_packets_, drop_bytes_;
  Counter ecn_marked_, ecn_not_ect_, ecn_unmarkable_;
};

template <typename Tx>
uint64_t PortShaper::service(uint64_t now, Tx&& tx) {
  if (count_ == 0) {
    backlogged_ = false;
    return kEmpty;
  }
  // Frames waited since the last call if some were left then: only this
  // lcore dequeues, so the queue was never empty in between.
  const bool was_backlogged = backlogged_;
  bucket_.refill(now, backlogged_);
  rte_mbuf* out[kServeBatch];
  uint64_t sent_pkts = 0, sent_bytes = 0;
  bool refused = false;
  for (unsigned call = 0; call < kServeCalls && count_ != 0 && bucket_.may_send(); ++call) {
    uint16_t k = 0;
    uint64_t bytes = 0;
    while (k < kServeBatch && k < count_ && bucket_.may_send()) {
      rte_mbuf* m = ring_[(head_ + k) & mask_];
      bucket_.spend(m->pkt_len + spec_.overhead);
      bytes += m->pkt_len;
      out[k++] = m;
    }
    const uint16_t sent = tx(out, k);
    for (uint16_t i = sent; i < k; ++i) {  // stay at the head, credit back
      bucket_.refund(out[i]->pkt_len + spec_.overhead);
      bytes -= out[i]->pkt_len;
    }
    head_ += sent;
    count_ -= sent;
    bytes_ -= bytes;
    sent_pkts += sent;
    sent_bytes += bytes;
    if (sent < k) {
      refused = true;
      break;
    }
  }
  if (sent_pkts) {
    deq_packets_.add(sent_pkts);
    deq_bytes_.add(sent_bytes);
    publish_depth();
  }
  // Still backlogged: frames are left, or a catch-up emptied the queue
  // with credit to spare -- the frames that arrived during the gap are
  // still in the rx rings and reach the queue in the next rounds; they are
  // owed the rest of it. (A link that really went idle finds its queue
  // empty at the next call and keeps its burst only.)
  backlogged_ = count_ != 0 || (was_backlogged && bucket_.above_burst());
  if (count_ == 0) return kEmpty;
  return refused ? retry_cycles_ : bucket_.wait_cycles();
}

}  // namespace agq::dataplane
