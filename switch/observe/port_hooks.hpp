// ethdev rx/tx callbacks on every configured queue of a port, for the
// observers that look at packets from outside the dataplane's code
// (capture, job meter). Nothing is installed, so nothing is paid, while no
// observer runs. Removal follows ethdev's rule for
// rte_eth_remove_*_callback: an lcore may still be inside a removed
// callback, so its memory (and the observer's state it points to) is freed
// only when this object dies, after the lcores have stopped.
// Control-side only (one thread at a time); lcores never touch it.
#pragma once

#include <rte_ethdev.h>

#include <cstdint>
#include <string>
#include <vector>

namespace agq::observe {

class PortHooks {
 public:
  struct Set {  // what one install() put on one port
    uint16_t port = 0;
    std::vector<const rte_eth_rxtx_callback*> rx, tx;  // index = queue
  };

  PortHooks() = default;
  ~PortHooks();
  PortHooks(const PortHooks&) = delete;
  PortHooks& operator=(const PortHooks&) = delete;

  // rx_fn / tx_fn may be null (that direction untouched). Throws
  // control::CommandError naming the queue if ethdev refuses (nothing left
  // installed then).
  Set install(uint16_t port, rte_rx_callback_fn rx_fn, rte_tx_callback_fn tx_fn, void* user);
  void remove(Set& s);  // s emptied; memory freed at destruction

  static bool port_exists(uint16_t port);
  // "port 9 does not exist (5 ports: 0..4)"
  static std::string no_such_port(const std::string& port);

 private:
  std::vector<const rte_eth_rxtx_callback*> removed_;
};

}  // namespace agq::observe
