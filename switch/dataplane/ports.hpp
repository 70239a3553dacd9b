// Port bring-up after rte_eal_init: every probed ethdev (NIC or vdev:
// memif, tap, af_packet, pcap, ring, null) gets rx and tx queues for the
// dataplane lcores, a shared mbuf pool, steering where the device has it,
// and is started. Generic on purpose: the switch and the DPDK workers both
// use it.
//
// Queues (docs/PROTOCOL.md section 10): L = lcores. Rx: L queues when
// dev_info.max_rx_queues allows, else what the device has (net_pcap: one per
// rx_pcap= file, all of them read); rx queue q is polled by one lcore
// (rx_lcore()). Tx: L queues when the device allows, lcore i on queue i;
// otherwise one queue, owned by one lcore (tx_owner()), to which the other
// lcores hand their packets through an rte_ring (no lock on any queue).
// memif: the client chooses the ring count and DPDK's memif server cannot
// tell how many it chose (a queue without a ring aliases ring 0), so memif
// ports get exactly `memif_queues` queue pairs and the peer should connect
// with that many rings (both sides pass the same number). A client with
// fewer is found on the missing queue's first packets (SwitchDataplane::
// check_memif_ring, from the driver's per-queue statistics), said so on
// stderr, and served through ring 0 and the software hand-off.
// Steering (NICs): rte_flow rules send UDP source port 0xC000|shard to queue
// shard % L (L a power of two), else RSS; virtual devices have neither and
// rely on the software hand-off.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "dataplane/mbuf_pool.hpp"

struct rte_mempool;

namespace agq::dataplane {

// Bring-up failed. The message names the port and the DPDK error. When it is
// thrown, everything already configured has been stopped, closed and freed.
class PortError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct PortOptions {
  unsigned lcores = 1;          // dataplane lcores (queues per port where the device allows)
  uint16_t memif_queues = 1;    // queue pairs of memif ports = the rings of the client
  uint16_t burst = 64;          // rx burst (mempool sizing)
  uint16_t tx_batch = 128;      // per port and lcore, mbufs waiting for tx (mempool sizing)
  uint16_t rx_desc = 0;         // 0: 1024 with hugepages, 512 without (4 KiB pages: keep pools small)
  uint16_t tx_desc = 0;         // same
  bool promiscuous = true;      // ignored by drivers that do not support it
  // memif clients cannot connect before their server has started (P6):
  // keep trying for this long.
  std::chrono::milliseconds memif_start_timeout{5000};
  // When set (e.g. by SIGINT), waiting for memif servers gives up at once.
  const std::atomic<bool>* cancel = nullptr;
  bool with_clone_pool = true;  // indirect mbufs for multicast replicas
  unsigned extra_mbufs = 0;     // held by the application (agq-worker: one per outstanding slot)
};

struct PortInfo {
  uint16_t id = 0;
  std::string name;    // rte_eth_dev_get_name_by_port, e.g. "net_memif0"
  std::string driver;  // dev_info.driver_name
  uint16_t rx_queues = 1;  // configured and polled
  uint16_t tx_queues = 1;  // configured (memif: the peer's ring count)
  bool tx_shared = false;  // one tx queue (0) for all lcores, owned by tx_owner()
  std::string steering;    // "rte_flow", "rss", or "none"
};

class Ports {
 public:
  // Configures and starts every available port. Throws PortError.
  explicit Ports(const PortOptions& opt);
  ~Ports();  // stop()
  Ports(const Ports&) = delete;
  Ports& operator=(const Ports&) = delete;

  // The replica buffers an lcore may hold back from the pool (its stash of
  // absorbed agq DATA, SwitchDataplane::Lcore::spare): what N-1 workers'
  // rx bursts absorb before the burst of their RESULTs arrives (192 for 4
  // workers at the default burst of 64), so that burst's replicas take no
  // buffer from the pool and the absorbed ones go back to none.
  static constexpr unsigned kMaxSpares = 256;

  // Stops and closes every port, then frees the pools. Idempotent.
  void stop();

  uint16_t count() const { return static_cast<uint16_t>(info_.size()); }
  const PortInfo& info(uint16_t port) const { return info_.at(port); }
  rte_mempool* pool() const { return pool_; }
  rte_mempool* clone_pool() const { return clone_pool_; }
  // How pool() was laid out (dataplane/mbuf_pool.hpp).
  const PoolMemory& pool_memory() const { return pool_mem_; }
  // The tx queue lcore `lcore_index` uses on `port` (shared ports: queue 0,
  // which only tx_owner() may call tx_burst on).
  uint16_t tx_queue(uint16_t port, unsigned lcore_index) const {
    return info_[port].tx_shared ? 0 : static_cast<uint16_t>(lcore_index);
  }
  // The lcore that transmits on a shared port's only tx queue.
  unsigned tx_owner(uint16_t port) const { return port % opt_.lcores; }
  // The lcore that polls rx queue `queue` of `port`: queue q on lcore q when
  // the port has a queue per lcore (steered traffic reaches its owner), else
  // spread by port so single-queue ports do not all land on lcore 0.
  unsigned rx_lcore(uint16_t port, uint16_t queue) const {
    return info_[port].rx_queues >= opt_.lcores ? queue % opt_.lcores : (port + queue) % opt_.lcores;
  }
  const PortOptions& options() const { return opt_; }

 private:
  void create_pools();
  void configure(uint16_t port);
  void start(uint16_t port);
  bool is_memif_client(uint16_t port) const;
  void steer(uint16_t port);  // rte_flow rules, after start
  static bool wait_link_up(uint16_t port, std::chrono::steady_clock::time_point until);

  PortOptions opt_;
  std::vector<PortInfo> info_;
  std::vector<bool> rss_;  // RSS configured at rte_eth_dev_configure
  std::vector<uint16_t> configured_, started_;
  rte_mempool* pool_ = nullptr;
  rte_mempool* clone_pool_ = nullptr;
  PoolMemory pool_mem_;
};

}  // namespace agq::dataplane
