#include "dataplane/port_shaper.hpp"

#include <rte_branch_prediction.h>
#include <rte_mbuf.h>

namespace agq::dataplane {

PortShaper::PortShaper(uint16_t port, const ShaperSpec& spec, rte_mempool* copy_pool, uint64_t tsc_hz, uint64_t now)
    : port_(port), spec_(spec), copy_pool_(copy_pool), bucket_(spec.rate_bps, tsc_hz, spec.burst(), now, spec.catchup()) {
  slots_ = spec.slots();
  uint32_t cap = 1;
  while (cap < slots_) cap <<= 1;
  ring_ = std::make_unique<rte_mbuf*[]>(cap);
  mask_ = cap - 1;
  limit_bytes_ = spec.queue_packets ? 0 : spec.queue_bytes;
  k_ = spec.ecn_in_bytes ? spec.ecn_bytes : spec.ecn_packets;
  retry_cycles_ = tsc_hz / 100000;
}

PortShaper::~PortShaper() {
  while (count_) {
    rte_pktmbuf_free(ring_[head_++ & mask_]);
    --count_;
  }
}

// An ECN-capable frame over the threshold. A frame shared with other ports
// (a multicast clone: refcount above 1, or an indirect mbuf) is copied
// first: the mark is this port's, not its siblings'.
void PortShaper::mark(rte_mbuf*& m) {
  const EcnResult peek = ecn_peek(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len);
  if (peek != EcnResult::Marked) {
    if (peek != EcnResult::AlreadyCe) ecn_not_ect_.add(1);
    return;
  }
  if (unlikely(!RTE_MBUF_DIRECT(m) || rte_mbuf_refcnt_read(m) != 1)) {
    rte_mbuf* copy = copy_pool_ ? rte_pktmbuf_copy(m, copy_pool_, 0, UINT32_MAX) : nullptr;
    if (copy == nullptr) {
      ecn_unmarkable_.add(1);
      return;
    }
    rte_pktmbuf_free(m);
    m = copy;
  }
  mark_ce(rte_pktmbuf_mtod(m, uint8_t*), m->data_len);
  ecn_marked_.add(1);
}

void PortShaper::enqueue(rte_mbuf* const* m, uint16_t n) {
  rte_mbuf* dropped[256];
  uint16_t nd = 0;
  uint64_t enq = 0, enq_bytes = 0, drops = 0, drop_bytes = 0;
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* x = m[i];
    const uint32_t len = x->pkt_len;
    if (unlikely(count_ == slots_ || (limit_bytes_ && bytes_ + len > limit_bytes_))) {
      if (nd == 256) {
        rte_pktmbuf_free_bulk(dropped, nd);
        nd = 0;
      }
      dropped[nd++] = x;
      ++drops;
      drop_bytes += len;
      continue;
    }
    // DCTCP: marked when the queue, this frame included, holds more than K.
    if (spec_.ecn && (spec_.ecn_in_bytes ? bytes_ + len > k_ : count_ + 1u > k_)) mark(x);
    ring_[tail_++ & mask_] = x;
    ++count_;
    bytes_ += len;
    ++enq;
    enq_bytes += len;
  }
  if (enq) {
    enq_packets_.add(enq);
    enq_bytes_.add(enq_bytes);
    if (count_ > max_packets_) max_depth_packets_.set(max_packets_ = count_);
    if (bytes_ > max_bytes_) max_depth_bytes_.set(max_bytes_ = bytes_);
    publish_depth();
  }
  if (drops) {
    drop_packets_.add(drops);
    drop_bytes_.add(drop_bytes);
    rte_pktmbuf_free_bulk(dropped, nd);
  }
}

ShaperStats PortShaper::stats() const {
  ShaperStats s;
  s.depth_packets = depth_packets_.get();
  s.depth_bytes = depth_bytes_.get();
  s.max_depth_packets = max_depth_packets_.get();
  s.max_depth_bytes = max_depth_bytes_.get();
  s.enqueued_packets = enq_packets_.get();
  s.enqueued_bytes = enq_bytes_.get();
  s.dequeued_packets = deq_packets_.get();
  s.dequeued_bytes = deq_bytes_.get();
  s.dropped_packets = drop_packets_.get();
  s.dropped_bytes = drop_bytes_.get();
  s.ecn_marked = ecn_marked_.get();
  s.ecn_not_ect = ecn_not_ect_.get();
  s.ecn_unmarkable = ecn_unmarkable_.get();
  return s;
}

}  // namespace agq::dataplane
