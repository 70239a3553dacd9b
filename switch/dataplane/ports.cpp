#include "dataplane/ports.hpp"

#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

namespace agq::dataplane {
namespace {

constexpr unsigned kPoolCache = 256;  // per-lcore mempool cache
constexpr unsigned kPoolSlack = 512;  // in flight between lcores, control, drivers

std::string port_label(const PortInfo& p) {
  return "port " + std::to_string(p.id) + " (" + p.name + ")";
}

[[noreturn]] void fail(const PortInfo& p, const char* what, int ret) {
  const int err = ret < 0 ? -ret : ret;
  throw PortError(port_label(p) + ": " + what + " failed: " + rte_strerror(err) + " (" +
                  std::to_string(ret) + ")");
}

// Pools of 2^k - 1 elements use their ring without waste.
unsigned pool_size(uint64_t need) {
  unsigned n = 2047;
  while (n < need) n = n * 2 + 1;
  return n;
}

}  // namespace

Ports::Ports(const PortOptions& opt) : opt_(opt) {
  const uint16_t def_desc = rte_eal_has_hugepages() ? 1024 : 512;
  if (opt_.rx_desc == 0) opt_.rx_desc = def_desc;
  if (opt_.tx_desc == 0) opt_.tx_desc = def_desc;
  if (opt_.lcores == 0) opt_.lcores = 1;

  // Ports are addressed 0..n-1 by the configuration, in probe order.
  uint16_t pid;
  RTE_ETH_FOREACH_DEV(pid) {
    PortInfo p;
    p.id = pid;
    char name[RTE_ETH_NAME_MAX_LEN] = {};
    rte_eth_dev_get_name_by_port(pid, name);
    p.name = name;
    if (pid != info_.size())
      throw PortError(port_label(p) + ": port ids are not contiguous from 0 (was a device removed?)");
    info_.push_back(std::move(p));
  }
  if (info_.empty())
    throw PortError("no ports: give DPDK a NIC or a virtual device, e.g. "
                    "--vdev=net_memif0,role=server,id=0,socket=/tmp/agq0.sock,socket-abstract=no");
  tx_locks_ = std::make_unique<tna::SpinLock[]>(info_.size());

  try {
    // Queue counts first: the pools are sized from them.
    for (auto& p : info_) {
      rte_eth_dev_info di{};
      if (int ret = rte_eth_dev_info_get(p.id, &di); ret != 0) fail(p, "rte_eth_dev_info_get", ret);
      p.driver = di.driver_name ? di.driver_name : "?";
      // memif: the client decides at connect time how many rings exist in
      // each direction, so a queue beyond the peer's count has no ring (tx on
      // it dropped packets, then crashed). One shared queue is always there.
      p.tx_shared = di.max_tx_queues < opt_.lcores || (p.driver == "net_memif" && opt_.lcores > 1);
      p.tx_queues = p.tx_shared ? 1 : static_cast<uint16_t>(opt_.lcores);
    }
    create_pools();
    for (auto& p : info_) configure(p.id);
    for (auto& p : info_) start(p.id);
  } catch (...) {
    stop();
    throw;
  }
}

Ports::~Ports() { stop(); }

void Ports::create_pools() {
  const uint64_t lcores = opt_.lcores, burst = opt_.burst, nports = info_.size();
  uint64_t tx_ring = 0;
  for (const auto& p : info_) tx_ring += uint64_t(p.tx_queues) * opt_.tx_desc;
  // Per lcore: one rx burst in hand, one tx buffer per port, a mempool cache (up to 1.5x).
  const uint64_t per_lcore = burst + nports * burst + kPoolCache * 3 / 2;
  const int socket = static_cast<int>(rte_socket_id());

  const unsigned n = pool_size(nports * opt_.rx_desc + tx_ring + lcores * per_lcore + kPoolSlack);
  pool_ = rte_pktmbuf_pool_create("agq_mbuf", n, kPoolCache, 0, RTE_MBUF_DEFAULT_BUF_SIZE, socket);
  if (!pool_)
    throw PortError("mbuf pool of " + std::to_string(n) + " mbufs: " + rte_strerror(rte_errno) +
                    " (raise EAL -m)");
  if (opt_.with_clone_pool) {
    // Indirect mbufs only (no data room): a replica points at the original's data.
    const unsigned c = pool_size(tx_ring + lcores * per_lcore + kPoolSlack);
    clone_pool_ = rte_pktmbuf_pool_create("agq_clone", c, kPoolCache, 0, 0, socket);
    if (!clone_pool_)
      throw PortError("clone pool of " + std::to_string(c) + " mbufs: " + rte_strerror(rte_errno) +
                      " (raise EAL -m)");
  }
}

void Ports::configure(uint16_t port) {
  PortInfo& p = info_[port];
  rte_eth_conf conf{};  // no offloads: replicas share data, so no MBUF_FAST_FREE either
  int ret = rte_eth_dev_configure(port, 1, p.tx_queues, &conf);
  if (ret != 0 && p.tx_queues > 1) {
    // Some drivers advertise many tx queues but want as many rx queues
    // (net_tap pairs them): fall back to one shared tx queue.
    p.tx_queues = 1;
    p.tx_shared = true;
    ret = rte_eth_dev_configure(port, 1, 1, &conf);
  }
  if (ret != 0) fail(p, "rte_eth_dev_configure", ret);
  configured_.push_back(port);

  uint16_t rxd = opt_.rx_desc, txd = opt_.tx_desc;
  if (int ret = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rxd, &txd); ret != 0)
    fail(p, "rte_eth_dev_adjust_nb_rx_tx_desc", ret);
  const int socket = rte_eth_dev_socket_id(port);
  const unsigned sock = socket < 0 ? static_cast<unsigned>(SOCKET_ID_ANY) : static_cast<unsigned>(socket);
  if (int ret = rte_eth_rx_queue_setup(port, 0, rxd, sock, nullptr, pool_); ret != 0)
    fail(p, "rte_eth_rx_queue_setup", ret);
  for (uint16_t q = 0; q < p.tx_queues; ++q)
    if (int ret = rte_eth_tx_queue_setup(port, q, txd, sock, nullptr); ret != 0)
      fail(p, "rte_eth_tx_queue_setup", ret);
}

// memif clients need their server, which may start after us (P6): start
// fails while nobody listens, and a server that listens but has not started
// its port yet accepts the connection and then drops it ("ID not found"),
// after which the client never reconnects by itself. So: start, wait for the
// link, and stop/start again until the deadline.
bool Ports::is_memif_client(uint16_t port) const {
  if (info_[port].driver != "net_memif") return false;
  rte_eth_dev_info di{};
  if (rte_eth_dev_info_get(port, &di) != 0 || !di.device) return false;
  const rte_devargs* da = rte_dev_devargs(di.device);
  return da && da->args && std::strstr(da->args, "role=client");
}

void Ports::start(uint16_t port) {
  const PortInfo& p = info_[port];
  if (!is_memif_client(port)) {
    if (int ret = rte_eth_dev_start(port); ret != 0) fail(p, "rte_eth_dev_start", ret);
  } else {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + opt_.memif_start_timeout;
    auto pause = std::chrono::milliseconds(100);
    for (;;) {
      const int ret = rte_eth_dev_start(port);
      if (ret == 0 && wait_link_up(port, std::min(deadline, clock::now() + std::chrono::seconds(1)))) break;
      if (ret == 0) rte_eth_dev_stop(port);  // connected but dropped: connect again
      if (opt_.cancel && opt_.cancel->load())
        throw PortError(port_label(p) + ": interrupted while waiting for the memif server");
      if (clock::now() >= deadline)
        throw PortError(port_label(p) + ": memif client could not connect to its server within " +
                        std::to_string(opt_.memif_start_timeout.count()) +
                        " ms (is the server process running, with the same socket= and id=?)");
      std::this_thread::sleep_for(pause);  // growing pause: the PMD logs every failed attempt
      pause = std::min(pause * 2, std::chrono::milliseconds(500));
    }
  }
  started_.push_back(port);
  if (opt_.promiscuous) {
    const int ret = rte_eth_promiscuous_enable(port);
    if (ret != 0 && ret != -ENOTSUP) fail(p, "rte_eth_promiscuous_enable", ret);
  }
}

bool Ports::wait_link_up(uint16_t port, std::chrono::steady_clock::time_point until) {
  for (;;) {
    rte_eth_link link{};
    if (rte_eth_link_get_nowait(port, &link) == 0 && link.link_status == RTE_ETH_LINK_UP) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void Ports::stop() {
  for (uint16_t port : started_)
    if (int ret = rte_eth_dev_stop(port); ret != 0)
      std::fprintf(stderr, "%s: rte_eth_dev_stop: %s\n", port_label(info_[port]).c_str(), rte_strerror(-ret));
  started_.clear();
  for (uint16_t port : configured_) rte_eth_dev_close(port);
  configured_.clear();
  // After close: no driver holds mbufs any more.
  rte_mempool_free(clone_pool_);
  rte_mempool_free(pool_);
  clone_pool_ = pool_ = nullptr;
}

}  // namespace agq::dataplane
