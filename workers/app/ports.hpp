// DPDK ports of agq-worker on top of the switch's port bring-up
// (dataplane::Ports: pools, queues, memif start retry, pitfall P6), plus
// what a traffic source needs beyond it: a wait for link up (memif connects
// asynchronously), batched TX that keeps unsent frames instead of dropping
// them (a dropped contribution stalls a classic slot), and an orderly stop
// (pitfall P7).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lib/tx_sink.hpp"

struct rte_mbuf;
struct rte_mempool;
namespace agq::dataplane { class Ports; }

namespace agq::worker {

class Ports final : public TxSink {
 public:
  static constexpr unsigned kBurst = 64;

  // Returns false with a diagnostic in `err` (which port, why, what to check).
  // queues: queue pairs per port (memif: the rings this client asks for, one
  // per lcore); extra_mbufs: mbufs the caller keeps (one per outstanding slot).
  bool open(double connect_timeout_s, std::string& err, unsigned queues = 1, unsigned extra_mbufs = 0);
  void close();
  Ports();
  ~Ports() override;

  uint16_t count() const { return uint16_t(ports_.size()); }
  const std::vector<std::string>& names() const { return names_; }

  // Receives up to kBurst frames from every rx queue of `port` (a PS
  // connects with one ring per switch lcore: the switch's lcore i sends on
  // queue i); fn(port, bytes) per frame.
  template <typename Fn> unsigned poll(uint16_t port, Fn&& fn);

  // Queues the frame on its ring: with Q queue pairs per port, a frame
  // whose UDP source port carries shard k (PROTOCOL.md section 10) leaves
  // on queue k mod Q, so a switch with Q lcores receives it on the rx queue
  // of the lcore that owns the shard (no hand-off); anything else on queue 0.
  bool send(uint16_t port, std::span<const uint8_t> frame) override;
  unsigned flush();  // hands queued frames to the NICs; returns frames sent

  // The packet path's raw access (MbufFrameIo, the agq poll loop).
  rte_mempool* pool() const;
  uint16_t port_id(uint16_t port) const { return ports_[port].id; }
  uint16_t tx_queue(uint16_t port, unsigned queue) const;
  uint16_t queues(uint16_t port) const;
  unsigned rx_burst(uint16_t port, uint16_t queue, rte_mbuf** mbufs, unsigned n);
  bool link_up(uint16_t port) const;
  // memif: a client whose server went away does not reconnect by itself;
  // stop and start the port so it connects to a server serving the socket
  // again. Only with nobody else inside the port's rx/tx (link_watch.hpp).
  // false: start failed (nobody serves the socket yet); the port stays
  // stopped, and rx/flush leave it alone until a restart succeeds.
  bool reconnect(uint16_t port);
  bool started(uint16_t port) const { return ports_[port].started; }
  // Frames received per rx queue (the driver's per-queue statistics; memif
  // counts only the rings of its current connection, none while down).
  std::vector<uint64_t> rx_per_queue(uint16_t port) const;

 private:
  struct TxQueue {
    rte_mbuf* pending[kBurst];
    unsigned n = 0;
  };
  struct Port {
    uint16_t id;
    uint16_t rx_queues = 1;
    bool started = true;  // changed only by reconnect(), with the port's other users kept off it
    std::vector<TxQueue> txq;  // one per tx queue the port has
  };
  static unsigned queue_of(std::span<const uint8_t> frame, unsigned queues);
  static void drop_pending(Port& p);
  unsigned rx_burst(uint16_t port, uint16_t queue, rte_mbuf** mbufs);
  static std::span<const uint8_t> bytes(rte_mbuf* m);
  static void free_mbuf(rte_mbuf* m);

  std::unique_ptr<dataplane::Ports> dp_;
  std::vector<Port> ports_;
  std::vector<std::string> names_;
};

template <typename Fn> unsigned Ports::poll(uint16_t port, Fn&& fn) {
  rte_mbuf* m[kBurst];
  unsigned total = 0;
  for (uint16_t q = 0; q < ports_[port].rx_queues; ++q) {
    const unsigned n = rx_burst(port, q, m);
    for (unsigned i = 0; i < n; ++i) {
      fn(port, bytes(m[i]));
      free_mbuf(m[i]);
    }
    total += n;
  }
  return total;
}

// rte_eal_init on a copy of argv (it permutes it); returns the number of
// arguments it consumed, or -1.
int eal_init(int argc, char** argv);
void eal_cleanup();
uint64_t now_ns();

}  // namespace agq::worker
