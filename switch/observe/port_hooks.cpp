#include "observe/port_hooks.hpp"

#include <rte_errno.h>
#include <rte_malloc.h>

#include "control/command_util.hpp"

namespace agq::observe {

PortHooks::~PortHooks() {
  for (const auto* cb : removed_) rte_free(const_cast<rte_eth_rxtx_callback*>(cb));
}

bool PortHooks::port_exists(uint16_t port) { return rte_eth_dev_is_valid_port(port) != 0; }

std::string PortHooks::no_such_port(const std::string& port) {
  const unsigned n = rte_eth_dev_count_avail();
  return "port " + port + " does not exist (" +
         (n == 0 ? std::string("no ports") : std::to_string(n) + " ports: 0.." + std::to_string(n - 1)) + ")";
}

PortHooks::Set PortHooks::install(uint16_t port, rte_rx_callback_fn rx_fn, rte_tx_callback_fn tx_fn, void* user) {
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port, &info) != 0) throw control::CommandError{no_such_port(std::to_string(port)), ""};
  Set s;
  s.port = port;
  auto fail = [&](const char* dir, uint16_t q) {
    const int err = rte_errno;
    remove(s);
    throw control::CommandError{std::string("cannot add an ") + dir + " callback on port " + std::to_string(port) +
                                    " queue " + std::to_string(q) + ": " + rte_strerror(err) +
                                    " (DPDK built without RTE_ETHDEV_RXTX_CALLBACKS?)",
                                ""};
  };
  if (rx_fn)
    for (uint16_t q = 0; q < info.nb_rx_queues; ++q) {
      const auto* cb = rte_eth_add_rx_callback(port, q, rx_fn, user);
      if (cb == nullptr) fail("rx", q);
      s.rx.push_back(cb);
    }
  if (tx_fn)
    for (uint16_t q = 0; q < info.nb_tx_queues; ++q) {
      const auto* cb = rte_eth_add_tx_callback(port, q, tx_fn, user);
      if (cb == nullptr) fail("tx", q);
      s.tx.push_back(cb);
    }
  return s;
}

void PortHooks::remove(Set& s) {
  for (size_t q = 0; q < s.rx.size(); ++q) {
    rte_eth_remove_rx_callback(s.port, uint16_t(q), s.rx[q]);
    removed_.push_back(s.rx[q]);
  }
  for (size_t q = 0; q < s.tx.size(); ++q) {
    rte_eth_remove_tx_callback(s.port, uint16_t(q), s.tx[q]);
    removed_.push_back(s.tx[q]);
  }
  s.rx.clear();
  s.tx.clear();
}

}  // namespace agq::observe
