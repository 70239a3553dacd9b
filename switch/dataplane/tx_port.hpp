// One lcore's transmit side of one port: a batch of up to `cap` packets that
// goes out in one call, either rte_eth_tx_burst on the lcore's own tx queue,
// or, for a port with a single tx queue owned by another lcore, one
// rte_ring_enqueue_burst onto that owner's hand-off ring. Whatever the queue
// or ring does not take is freed and counted: a full tx ring drops, like a
// tail-dropping switch queue, and never blocks the lcore.
#pragma once

#include <rte_branch_prediction.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "dataplane/lcore_counters.hpp"
#include "dataplane/port_shaper.hpp"

namespace agq::dataplane {

struct TxPort {
  static constexpr uint16_t kMax = 256;  // = SwitchDataplane::kMaxBurst

  uint16_t port = 0;
  uint16_t queue = 0;
  uint16_t cap = 32;               // flush when this many are queued
  uint16_t n = 0;
  rte_ring* handoff = nullptr;     // non-null: the port's tx queue belongs to another lcore
  PortShaper* shaper = nullptr;    // non-null: a shaped port this lcore transmits (its queue, not tx_burst)
  // The driver copies a frame out during tx_burst and gives the mbuf back
  // (memif, pcap, af_packet, null), so a multicast original may be
  // rewritten for the next member once sent (replicate_in_place). Cleared
  // for good the first time the port keeps a frame past tx_burst.
  bool copies_out = false;
  LcoreCounters* counters = nullptr;
  Counter dropped;                 // this lcore's tx drops on this port
  rte_mbuf* pkts[kMax];

  void send(rte_mbuf* m) {
    pkts[n++] = m;
    if (n == cap) flush();
  }

  // A run of k packets for this port (the dataplane's fused path hands the
  // rx array itself): queued behind what is already batched, batches leaving
  // as send() lets them; with nothing batched and at least a batch's worth,
  // they go out in one call straight from `m`, with no store per packet.
  void send_burst(rte_mbuf** m, uint16_t k) {
    if (n == 0 && k >= cap) {
      xmit(m, k);
      return;
    }
    while (k) {
      const uint16_t take = k < uint16_t(cap - n) ? k : uint16_t(cap - n);
      for (uint16_t i = 0; i < take; ++i) pkts[n + i] = m[i];
      n = uint16_t(n + take);
      m += take;
      k = uint16_t(k - take);
      if (n == cap) flush();
    }
  }

  void flush() {
    if (n == 0) return;
    xmit(pkts, n);
    n = 0;
  }

 private:
  // Out in one call; what the queue or ring refuses is freed and counted.
  void xmit(rte_mbuf** m, uint16_t k) {
    uint16_t sent;
    if (handoff) {
      sent = uint16_t(rte_ring_enqueue_burst(handoff, reinterpret_cast<void**>(m), k, nullptr));
      counters->tx_handoff.add(sent);
    } else if (unlikely(shaper != nullptr)) {
      shaper->enqueue(m, k);  // queued or counted as its drops
      return;
    } else {
      sent = rte_eth_tx_burst(port, queue, m, k);
      counters->tx.add(sent);
    }
    if (sent < k) {
      rte_pktmbuf_free_bulk(m + sent, k - sent);
      dropped.add(k - sent);
      counters->tx_dropped.add(k - sent);
    }
  }
};

// The sends of one vector of decisions, port after port. A run of packets
// to one port keeps that port's batch count in a register and writes it
// back when the port changes (or at close()): TxPort::send() stores and
// reloads TxPort::n per packet, a store-to-load dependency that perf showed
// as most of the decision loop's time. Between close() and the next send()
// the ports' own send()/flush() may be used (multicast does).
class TxRun {
 public:
  explicit TxRun(TxPort* ports) : ports_(ports) {}
  TxRun(const TxRun&) = delete;
  TxRun& operator=(const TxRun&) = delete;
  ~TxRun() { close(); }

  void send(uint16_t port, rte_mbuf* m) {
    if (port != port_) open(port);
    cur_->pkts[n_++] = m;
    if (n_ == cur_->cap) {
      cur_->n = n_;
      cur_->flush();
      n_ = 0;
    }
  }

  void close() {
    if (cur_) cur_->n = n_;
    cur_ = nullptr;
    port_ = kNone;
  }

 private:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  void open(uint16_t port) {
    close();
    cur_ = &ports_[port];
    port_ = port;
    n_ = cur_->n;
  }
  TxPort* const ports_;
  TxPort* cur_ = nullptr;
  uint32_t port_ = kNone;
  uint16_t n_ = 0;
};

}  // namespace agq::dataplane
