// Frames lent to a port for one send, handed back by the port's own free.
//
// A multicast original made into its members' replicas one member after
// another (replica_passes.hpp) is sent, then rewritten for the next
// member -- safe only once the port has let go of it. Drivers that copy a
// frame out inside tx_burst (memif, pcap, af_packet, tap, null) let go by
// freeing the mbuf before tx_burst returns. A lent frame carries, in
// m->pool, a pool of this lender's: an rte_mempool with no objects of its
// own, on DPDK's mempool-handler interface (rte_mempool_register_ops). The
// port's rte_pktmbuf_free puts the frame into that pool's lcore cache
// (collect() takes them out) or, without one, into the handler's enqueue;
// either way the frame's home pool goes back into m->pool and the frame
// stays out of any pool: it is ours again. The refcount stays 1 throughout, so the port's free is its
// plain path (no atomic decrement: a lock-prefixed instruction waits for
// the port's copies into the peer's memory to drain, which cost 5-30% of
// the switch's cycles over memif when the vCPUs sit apart; bench/README,
// session XVII). A frame the port still holds after the send (a DMA queue,
// a zero-copy memif client, a ring of mbuf pointers) is given up: its
// m->pool becomes the lender's second pool, whose enqueue sends it home
// whenever the port frees it.
#pragma once

#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <cstdint>
#include <string>

namespace agq::dataplane {

class FrameLender {
 public:
  // Lends frames of `home` (a pktmbuf pool). Throws std::runtime_error if
  // DPDK refuses the handler or the pools.
  FrameLender(rte_mempool* home, const std::string& name);
  ~FrameLender();
  FrameLender(const FrameLender&) = delete;
  FrameLender& operator=(const FrameLender&) = delete;

  rte_mempool* home() const { return home_; }
  // A frame this lender may lend: direct, one segment, refcount 1, of home.
  bool lendable(const rte_mbuf* m) const {
    return m->pool == home_ && RTE_MBUF_DIRECT(m) && m->nb_segs == 1 && rte_mbuf_refcnt_read(m) == 1;
  }
  // Before the send: the port's free of m comes back here.
  void lend(rte_mbuf* m) const { m->pool = lent_; }
  // After the send, before back(): what the port freed is ours again.
  // The port's free of a lent frame is DPDK's inline put into the lent
  // pool's cache of this lcore (no call, no atomic): the frames found
  // there get their home back, and the cache is emptied. A free on a
  // thread without a cache, or past the cache's flush threshold (not with
  // sends of at most kMaxBurst), reaches the handler, which does the same.
  void collect() const {
    rte_mempool_cache* c = rte_mempool_default_cache(lent_, rte_lcore_id());
    if (c == nullptr) return;
    for (unsigned i = 0; i < c->len; ++i) static_cast<rte_mbuf*>(c->objs[i])->pool = home_;
    c->len = 0;
  }
  // After collect(): m was freed by the port (or never taken: take_back).
  bool back(const rte_mbuf* m) const { return m->pool == home_; }
  // A frame the port did not take: ours again as it was.
  void take_back(rte_mbuf* m) const { m->pool = home_; }
  // A frame the port still holds: its free, whenever, returns it to home.
  void give_up(rte_mbuf* m) const {
    m->pool = gone_;
    ++given_up_;
  }

 private:
  rte_mempool* home_;
  rte_mempool* lent_ = nullptr;
  rte_mempool* gone_ = nullptr;
  mutable uint64_t given_up_ = 0;  // frames a port may still free through gone_
};

}  // namespace agq::dataplane
