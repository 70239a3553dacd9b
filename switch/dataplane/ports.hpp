// Port bring-up after rte_eal_init: every probed ethdev (NIC or vdev:
// memif, tap, af_packet, pcap, ring, null) gets one rx queue, tx queues for
// the dataplane lcores, a shared mbuf pool, and is started. Generic on
// purpose: the switch and the DPDK workers both use it.
//
// Tx queues: one per dataplane lcore when dev_info.max_tx_queues allows, so
// lcores transmit without coordination. Otherwise (pcap, af_packet, ...
// expose a single tx queue), and always for memif (whose ring count is the
// peer's choice), the port gets 1 tx queue that every lcore shares under
// the port's spinlock (tx_lock()); the lock is taken only by lcores
// transmitting on such a port.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tna/spinlock.hpp"

struct rte_mempool;

namespace agq::dataplane {

// Bring-up failed. The message names the port and the DPDK error. When it is
// thrown, everything already configured has been stopped, closed and freed.
class PortError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct PortOptions {
  unsigned lcores = 1;          // dataplane lcores that will transmit
  uint16_t burst = 32;          // rx burst = tx buffer size (mempool sizing)
  uint16_t rx_desc = 0;         // 0: 1024 with hugepages, 512 without (4 KiB pages: keep pools small)
  uint16_t tx_desc = 0;         // same
  bool promiscuous = true;      // ignored by drivers that do not support it
  // memif clients cannot connect before their server has started (P6):
  // keep trying for this long.
  std::chrono::milliseconds memif_start_timeout{5000};
  // When set (e.g. by SIGINT), waiting for memif servers gives up at once.
  const std::atomic<bool>* cancel = nullptr;
  bool with_clone_pool = true;  // indirect mbufs for multicast replicas
};

struct PortInfo {
  uint16_t id = 0;
  std::string name;    // rte_eth_dev_get_name_by_port, e.g. "net_memif0"
  std::string driver;  // dev_info.driver_name
  uint16_t tx_queues = 1;
  bool tx_shared = false;  // lcores share tx queue 0 under tx_lock()
};

class Ports {
 public:
  // Configures and starts every available port. Throws PortError.
  explicit Ports(const PortOptions& opt);
  ~Ports();  // stop()
  Ports(const Ports&) = delete;
  Ports& operator=(const Ports&) = delete;

  // Stops and closes every port, then frees the pools. Idempotent.
  void stop();

  uint16_t count() const { return static_cast<uint16_t>(info_.size()); }
  const PortInfo& info(uint16_t port) const { return info_.at(port); }
  rte_mempool* pool() const { return pool_; }
  rte_mempool* clone_pool() const { return clone_pool_; }
  // The tx queue lcore `lcore_index` uses on `port`.
  uint16_t tx_queue(uint16_t port, unsigned lcore_index) const {
    return info_[port].tx_shared ? 0 : static_cast<uint16_t>(lcore_index);
  }
  // Non-null only for ports whose tx queue is shared.
  tna::SpinLock* tx_lock(uint16_t port) const {
    return info_[port].tx_shared ? &tx_locks_[port] : nullptr;
  }
  const PortOptions& options() const { return opt_; }

 private:
  void create_pools();
  void configure(uint16_t port);
  void start(uint16_t port);
  bool is_memif_client(uint16_t port) const;
  static bool wait_link_up(uint16_t port, std::chrono::steady_clock::time_point until);

  PortOptions opt_;
  std::vector<PortInfo> info_;
  std::unique_ptr<tna::SpinLock[]> tx_locks_;
  std::vector<uint16_t> configured_, started_;
  rte_mempool* pool_ = nullptr;
  rte_mempool* clone_pool_ = nullptr;
};

}  // namespace agq::dataplane
