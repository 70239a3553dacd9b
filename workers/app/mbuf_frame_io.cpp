#include "app/mbuf_frame_io.hpp"

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <cstring>

#include "app/ports.hpp"

namespace agq::worker {

MbufFrameIo::MbufFrameIo(Ports& ports, uint32_t buffers, unsigned queue) : ports_(ports), buf_(buffers, nullptr) {
  for (auto& m : buf_) {
    m = rte_pktmbuf_alloc(ports.pool());
    if (!m) {
      ok_ = false;
      return;
    }
  }
  tx_.resize(ports.count());
  for (uint16_t p = 0; p < ports.count(); ++p) {
    tx_[p].id = ports.port_id(p);
    tx_[p].queue = ports.tx_queue(p, queue);
  }
}

MbufFrameIo::~MbufFrameIo() {
  for (auto& t : tx_)
    for (unsigned i = 0; i < t.n; ++i) rte_pktmbuf_free(t.pending[i]);
  free_now();
  for (rte_mbuf* m : buf_)
    if (m) rte_pktmbuf_free(m);
}

uint8_t* MbufFrameIo::frame(uint32_t b) {
  rte_mbuf* m = buf_[b];
  if (rte_mbuf_refcnt_read(m) > 1) {
    // A driver still holds it (queued, not yet transmitted): never write
    // into a frame on its way out. Rare with memif (it copies at tx_burst).
    rte_mbuf* c = rte_pktmbuf_alloc(ports_.pool());
    if (c) {
      std::memcpy(rte_pktmbuf_mtod(c, uint8_t*), rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m));
      c->data_len = m->data_len;
      c->pkt_len = m->pkt_len;
      rte_pktmbuf_free(m);  // our reference
      buf_[b] = m = c;
      ++copies_;
    }
  }
  return rte_pktmbuf_mtod(m, uint8_t*);
}

bool MbufFrameIo::send(uint16_t port, uint32_t b, uint16_t len) {
  Tx& t = tx_[port];
  if (!t.up) {
    ++dropped_;  // the link is down: as lost on the wire; the engine's timers recover
    return true;
  }
  if (t.n == kBurst) flush();
  if (t.n == kBurst) return false;
  rte_mbuf* m = buf_[b];
  m->data_len = len;
  m->pkt_len = len;
  m->nb_segs = 1;
  m->next = nullptr;
  m->ol_flags = 0;
  rte_mbuf_refcnt_update(m, 1);  // the driver's free after tx leaves ours
  t.pending[t.n++] = m;
  return true;
}

void MbufFrameIo::adopt(uint32_t b, rte_mbuf* m) {
  // Same pool (the ports' one): the pools stay balanced. Anything unusual
  // (chained, another pool, a shared data room) is simply freed.
  if (m->pool != buf_[b]->pool || m->nb_segs != 1 || RTE_MBUF_CLONED(m) || rte_mbuf_refcnt_read(m) != 1) {
    release(m);
    return;
  }
  release(buf_[b]);
  buf_[b] = m;
}

void MbufFrameIo::free_now() {
  if (n_free_) rte_pktmbuf_free_bulk(free_, n_free_);
  n_free_ = 0;
}

unsigned MbufFrameIo::flush() {
  unsigned total = 0;
  for (auto& t : tx_) {
    if (!t.n) continue;
    const uint16_t sent = rte_eth_tx_burst(t.id, t.queue, t.pending, uint16_t(t.n));
    std::memmove(t.pending, t.pending + sent, (t.n - sent) * sizeof(rte_mbuf*));
    t.n -= sent;
    total += sent;
  }
  return total;
}

void MbufFrameIo::set_link(uint16_t port, bool up) {
  Tx& t = tx_[port];
  if (t.up && !up) {
    // Frames queued for a dead peer: drop them (our reference stays).
    for (unsigned i = 0; i < t.n; ++i) rte_mbuf_refcnt_update(t.pending[i], -1);
    dropped_ += t.n;
    t.n = 0;
  }
  t.up = up;
}

}  // namespace agq::worker
