#include "dataplane/ports.hpp"

#include "dataplane/mbuf_pool.hpp"

#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_flow.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

#include <unistd.h>

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
  if (opt_.memif_queues == 0) opt_.memif_queues = 1;

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
  rss_.assign(info_.size(), false);

  try {
    // Queue counts first: the pools are sized from them.
    for (auto& p : info_) {
      rte_eth_dev_info di{};
      if (int ret = rte_eth_dev_info_get(p.id, &di); ret != 0) fail(p, "rte_eth_dev_info_get", ret);
      p.driver = di.driver_name ? di.driver_name : "?";
      const uint16_t L = static_cast<uint16_t>(opt_.lcores);
      if (p.driver == "net_memif") {
        // The client's ring count, which the server cannot query (ports.hpp).
        p.rx_queues = p.tx_queues = opt_.memif_queues;
        p.tx_shared = p.tx_queues < L;
      } else {
        // net_pcap exposes one rx queue per rx_pcap= file: read them all.
        p.rx_queues = p.driver == "net_pcap" ? std::max<uint16_t>(1, di.max_rx_queues)
                                             : std::max<uint16_t>(1, std::min<uint16_t>(L, di.max_rx_queues));
        p.tx_shared = di.max_tx_queues < L;
        p.tx_queues = p.tx_shared ? 1 : L;
      }
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
  const uint64_t lcores = opt_.lcores, burst = opt_.burst, tx_batch = opt_.tx_batch, nports = info_.size();
  uint64_t tx_ring = 0, rx_ring = 0;
  for (const auto& p : info_) {
    tx_ring += uint64_t(p.tx_queues) * opt_.tx_desc;
    // net_af_xdp fills every rx queue's fill ring with 2048 buffers of the
    // pool (its default ring size, whatever rx_desc says): a second port
    // otherwise fails its rx queue setup ("Failed to get enough buffers").
    const uint64_t rx_per_queue = p.driver == "net_af_xdp" ? std::max<uint64_t>(opt_.rx_desc, 2048) : opt_.rx_desc;
    rx_ring += uint64_t(p.rx_queues) * rx_per_queue;
  }
  // Per lcore: one rx burst in hand, one tx buffer per port, the stash of
  // spare replica buffers (SwitchDataplane's recycled drops), a mempool
  // cache (up to 1.5x).
  const uint64_t per_lcore = burst + kMaxSpares + nports * tx_batch + kPoolCache * 3 / 2;
  const int socket = static_cast<int>(rte_socket_id());

  // Plus, per lcore, the software hand-off rings (rx to the owner, tx to a
  // shared queue's owner): SwitchDataplane::kHandoffRing each at most.
  const uint64_t handoff = lcores > 1 ? lcores * (1 + nports) * 1024 : 0;
  const unsigned n = pool_size(rx_ring + tx_ring + lcores * per_lcore + handoff + kPoolSlack + opt_.extra_mbufs);
  pool_ = create_mbuf_pool("agq_mbuf", n, kPoolCache, socket, &pool_mem_);
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
  rte_eth_dev_info di{};
  rte_eth_dev_info_get(port, &di);
  // RSS on the UDP ports spreads shards over the queues where rte_flow cannot
  // place them exactly; the hand-off fixes the rest.
  const uint64_t rss_hf = di.flow_type_rss_offloads & (RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_IPV4);
  if (p.rx_queues > 1 && rss_hf != 0 && p.driver != "net_pcap") {
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_hf = rss_hf;
    rss_[port] = true;
  }
  int ret = rte_eth_dev_configure(port, p.rx_queues, p.tx_queues, &conf);
  if (ret != 0 && (p.rx_queues > 1 || p.tx_queues > 1) && p.driver != "net_memif") {
    // A driver that advertises more queues than it accepts: one of each.
    p.rx_queues = p.tx_queues = 1;
    p.tx_shared = opt_.lcores > 1;
    conf = rte_eth_conf{};
    rss_[port] = false;
    ret = rte_eth_dev_configure(port, 1, 1, &conf);
  }
  if (ret != 0) fail(p, "rte_eth_dev_configure", ret);
  configured_.push_back(port);

  uint16_t rxd = opt_.rx_desc, txd = opt_.tx_desc;
  if (int ret = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rxd, &txd); ret != 0)
    fail(p, "rte_eth_dev_adjust_nb_rx_tx_desc", ret);
  const int socket = rte_eth_dev_socket_id(port);
  const unsigned sock = socket < 0 ? static_cast<unsigned>(SOCKET_ID_ANY) : static_cast<unsigned>(socket);
  for (uint16_t q = 0; q < p.rx_queues; ++q)
    if (int ret = rte_eth_rx_queue_setup(port, q, rxd, sock, nullptr, pool_); ret != 0)
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
  steer(port);
}

// One rule per lcore: UDP source port 0xC000|shard with shard % L == r goes
// to queue r (mask 0xC000 | L-1, so L must be a power of two). All or none:
// a device that refuses one rule keeps RSS (if configured) and the software
// hand-off. Rules live until the port is closed.
void Ports::steer(uint16_t port) {
  PortInfo& p = info_[port];
  p.steering = rss_[port] ? "rss" : "none";
  const unsigned L = opt_.lcores;
  if (p.rx_queues < L || L < 2 || (L & (L - 1)) != 0 || p.driver == "net_memif" || p.driver == "net_pcap") return;
  std::vector<rte_flow*> rules;
  for (unsigned r = 0; r < L; ++r) {
    rte_flow_attr attr{};
    attr.ingress = 1;
    rte_flow_item_udp spec{}, mask{};
    spec.hdr.src_port = rte_cpu_to_be_16(uint16_t(0xC000 | r));
    mask.hdr.src_port = rte_cpu_to_be_16(uint16_t(0xC000 | (L - 1)));
    rte_flow_item pattern[4]{};
    pattern[0].type = RTE_FLOW_ITEM_TYPE_ETH;
    pattern[1].type = RTE_FLOW_ITEM_TYPE_IPV4;
    pattern[2].type = RTE_FLOW_ITEM_TYPE_UDP;
    pattern[2].spec = &spec;
    pattern[2].mask = &mask;
    pattern[3].type = RTE_FLOW_ITEM_TYPE_END;
    rte_flow_action_queue queue{};
    queue.index = uint16_t(r);
    rte_flow_action actions[2]{};
    actions[0].type = RTE_FLOW_ACTION_TYPE_QUEUE;
    actions[0].conf = &queue;
    actions[1].type = RTE_FLOW_ACTION_TYPE_END;
    rte_flow_error err{};
    rte_flow* f = rte_flow_validate(port, &attr, pattern, actions, &err) == 0
                      ? rte_flow_create(port, &attr, pattern, actions, &err)
                      : nullptr;
    if (!f) {
      for (rte_flow* g : rules) rte_flow_destroy(port, g, &err);
      return;
    }
    rules.push_back(f);
  }
  p.steering = "rte_flow";
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
