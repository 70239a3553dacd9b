// One lcore's transmit side of one port: an rte_eth_tx_buffer that batches
// packets into tx_burst calls, on the lcore's own tx queue, or on the
// port's shared queue under its spinlock (see ports.hpp).
#pragma once

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <mutex>

#include "dataplane/lcore_counters.hpp"
#include "tna/spinlock.hpp"

namespace agq::dataplane {

struct TxPort {
  rte_eth_dev_tx_buffer* buf = nullptr;  // rte_zmalloc'ed, RTE_ETH_TX_BUFFER_SIZE(burst)
  uint16_t port = 0;
  uint16_t queue = 0;
  tna::SpinLock* shared = nullptr;  // non-null: queue shared with other lcores
  LcoreCounters* counters = nullptr;
  Counter dropped;                  // this lcore's tx drops on this port

  // Queues one packet; transmits when the buffer is full.
  void send(rte_mbuf* m) {
    uint16_t sent;
    if (shared) {
      std::lock_guard g(*shared);
      sent = rte_eth_tx_buffer(port, queue, buf, m);
    } else {
      sent = rte_eth_tx_buffer(port, queue, buf, m);
    }
    if (sent) counters->tx.add(sent);
  }

  // Transmits whatever is buffered.
  void flush() {
    if (buf->length == 0) return;
    uint16_t sent;
    if (shared) {
      std::lock_guard g(*shared);
      sent = rte_eth_tx_buffer_flush(port, queue, buf);
    } else {
      sent = rte_eth_tx_buffer_flush(port, queue, buf);
    }
    if (sent) counters->tx.add(sent);
  }

  // rte_eth_tx_buffer error callback (userdata = the TxPort): the queue was
  // full; drop and count, like a tail-dropping switch queue.
  static void on_unsent(rte_mbuf** unsent, uint16_t count, void* userdata) {
    auto* self = static_cast<TxPort*>(userdata);
    rte_pktmbuf_free_bulk(unsent, count);
    self->dropped.add(count);
    self->counters->tx_dropped.add(count);
  }
};

}  // namespace agq::dataplane
