// The engine's FrameIo on DPDK mbufs, SwitchML style: one mbuf per
// outstanding slot, allocated once. A DATA is written into its slot's mbuf
// and handed to the NIC with an extra reference, so the driver's free after
// transmission leaves it with us (a retransmission resends it untouched, no
// copy, no alloc). A received RESULT is adopted as its slot's mbuf (the old
// one is freed in bulk) and rewritten in place into the slot's next DATA.
// TX in bursts per port; while a port's link is down its frames are taken
// and dropped (counted), so the engine's retransmission timers keep running.
#pragma once

#include <cstdint>
#include <vector>

#include <rte_mbuf.h>
#include <rte_prefetch.h>

#include "app/ports.hpp"
#include "lib/allreduce_engine.hpp"

namespace agq::worker {

class MbufFrameIo final : public FrameIo {
 public:
  static constexpr unsigned kBurst = 32;
  // buffers: the engine's buffers(); queue: the tx queue (lcore) of every port.
  MbufFrameIo(Ports& ports, uint32_t buffers, unsigned queue);
  ~MbufFrameIo() override;
  bool ok() const { return ok_; }

  uint8_t* frame(uint32_t b) override;
  bool send(uint16_t port, uint32_t b, uint16_t len) override;

  // Rx: the engine returned b for this received mbuf: it becomes b's buffer.
  // Otherwise the mbuf goes to the bulk free list.
  void adopt(uint32_t b, rte_mbuf* m);
  void release(rte_mbuf* m) { free_[n_free_++] = m; if (n_free_ == kFree) free_now(); }
  void free_now();
  unsigned flush();                      // tx bursts; returns frames handed to the NICs
  void set_link(uint16_t port, bool up);  // down: pending frames are dropped
  uint64_t dropped_link_down() const { return dropped_; }
  uint64_t copies() const { return copies_; }  // a slot's mbuf was still held by a driver

 private:
  static constexpr unsigned kFree = 256;
  struct Tx {
    uint16_t id = 0, queue = 0;
    bool up = true;
    unsigned n = 0;
    rte_mbuf* pending[kBurst];
  };
  Ports& ports_;
  std::vector<rte_mbuf*> buf_;
  std::vector<Tx> tx_;
  rte_mbuf* free_[kFree];
  unsigned n_free_ = 0;
  uint64_t dropped_ = 0, copies_ = 0;
  bool ok_ = true;
};

// The receive side of an engine on MbufFrameIo (agq-worker's lcores and
// libagq's poll thread): bursts of `queue` of `port` until the queue comes
// back short (at most max_bursts, so tx is not starved), the next frame
// prefetched, every mbuf to f(m) (which adopts or releases it). drained =
// false when the queue may still hold frames: the caller then runs the
// engine's tick without timers (a RESULT waiting in the ring is not a loss).
template <typename F>
unsigned drain_rx(Ports& ports, uint16_t port, uint16_t queue, F&& f, bool& drained, unsigned max_bursts = 16) {
  constexpr unsigned kRx = 32;
  rte_mbuf* m[kRx];
  unsigned total = 0;
  for (unsigned r = 0; r < max_bursts; ++r) {
    const unsigned n = ports.rx_burst(port, queue, m, kRx);
    for (unsigned i = 0; i < n; ++i) {
      if (i + 1 < n) rte_prefetch0(rte_pktmbuf_mtod(m[i + 1], void*));
      f(m[i]);
    }
    total += n;
    if (n < kRx) return total;
  }
  drained = false;
  return total;
}

// A received frame's bytes, and what becomes of it once the engine saw it:
// a RESULT the engine completed (b >= 0, AllreduceEngine::on_frame) becomes
// that slot's buffer (the next DATA is written into it), the rest is freed
// in bulk.
inline std::span<const uint8_t> bytes_of(const rte_mbuf* m) {
  return {rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m)};
}
inline void keep_or_free(MbufFrameIo& io, rte_mbuf* m, int b) {
  if (b >= 0)
    io.adopt(uint32_t(b), m);
  else
    io.release(m);
}

}  // namespace agq::worker
