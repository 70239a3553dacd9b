#include "app/ports.hpp"

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "dataplane/ports.hpp"
#include "proto/headers.hpp"

namespace agq::worker {

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

int eal_init(int argc, char** argv) {
  std::vector<char*> copy(argv, argv + argc);
  return rte_eal_init(argc, copy.data());
}

void eal_cleanup() { rte_eal_cleanup(); }

Ports::Ports() = default;
Ports::~Ports() { close(); }

bool Ports::open(double connect_timeout_s, std::string& err, unsigned queues, unsigned extra_mbufs) {
  dataplane::PortOptions opt;
  opt.lcores = queues ? queues : 1;
  opt.memif_queues = uint16_t(opt.lcores);
  opt.extra_mbufs = extra_mbufs;
  opt.burst = kBurst;
  opt.with_clone_pool = false;
  opt.memif_start_timeout = std::chrono::milliseconds(int64_t(connect_timeout_s * 1000));
  try {
    dp_ = std::make_unique<dataplane::Ports>(opt);
  } catch (const dataplane::PortError& e) {
    err = std::string(e.what()) +
          ". Is agq-switch running? It must serve the socket= path of every memif --vdev (switch: role=server, "
          "workers: role=client), and be started first";
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(connect_timeout_s);
  for (uint16_t i = 0; i < dp_->count(); ++i) {
    const auto& info = dp_->info(i);
    // memif reports link up only once the peer accepted the connection:
    // sending earlier would lose packets.
    rte_eth_link link;
    while (true) {
      std::memset(&link, 0, sizeof link);
      rte_eth_link_get_nowait(info.id, &link);
      if (link.link_status == RTE_ETH_LINK_UP) break;
      if (std::chrono::steady_clock::now() > deadline) {
        err = "no reply from the switch on port " + std::to_string(i) + " (" + info.name + "): link still down after " +
              std::to_string(int(connect_timeout_s)) +
              " s. Check that agq-switch is running, that its --vdev for this socket is role=server with the "
              "same id=, and that no other client holds that connection";
        close();
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    Port p;
    p.id = info.id;
    p.rx_queues = info.rx_queues;
    // One tx batch per tx queue the port really has (a shared port: queue
    // 0 only; net_pcap may have more rx files than tx queues).
    p.txq.resize(info.tx_shared ? 1u : std::max<uint16_t>(info.tx_queues, 1));
    ports_.push_back(p);
    names_.push_back(info.name);
  }
  return true;
}

void Ports::close() {
  for (auto& p : ports_) drop_pending(p);
  if (dp_) {
    // Stop first: a memif client tells the server it disconnects, so the
    // switch stops polling our rings before they are unmapped (pitfall P7).
    for (auto& p : ports_)
      if (p.started) rte_eth_dev_stop(p.id);
    if (!ports_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    dp_->stop();
    dp_.reset();
  }
  ports_.clear();
}

rte_mempool* Ports::pool() const { return dp_->pool(); }
uint16_t Ports::tx_queue(uint16_t port, unsigned queue) const { return dp_->tx_queue(port, queue); }
uint16_t Ports::queues(uint16_t port) const { return dp_->info(port).rx_queues; }
unsigned Ports::rx_burst(uint16_t port, uint16_t queue, rte_mbuf** mbufs, unsigned n) {
  if (!ports_[port].started) return 0;  // a restart failed: the device is stopped
  return rte_eth_rx_burst(ports_[port].id, queue, mbufs, uint16_t(n));
}
bool Ports::link_up(uint16_t port) const {
  rte_eth_link link;
  std::memset(&link, 0, sizeof link);
  rte_eth_link_get_nowait(ports_[port].id, &link);
  return link.link_status == RTE_ETH_LINK_UP;
}

bool Ports::reconnect(uint16_t port) {
  Port& p = ports_[port];
  // Frames queued for the old peer go with it.
  drop_pending(p);
  if (p.started) rte_eth_dev_stop(p.id);
  p.started = rte_eth_dev_start(p.id) == 0;
  return p.started;
}

std::vector<uint64_t> Ports::rx_per_queue(uint16_t port) const {
  std::vector<uint64_t> out(ports_[port].rx_queues, 0);
  rte_eth_stats st{};
  if (rte_eth_stats_get(ports_[port].id, &st) == 0)
    for (size_t q = 0; q < out.size() && q < RTE_ETHDEV_QUEUE_STAT_CNTRS; ++q) out[q] = st.q_ipackets[q];
  return out;
}

unsigned Ports::rx_burst(uint16_t port, uint16_t queue, rte_mbuf** mbufs) {
  return rx_burst(port, queue, mbufs, kBurst);
}

std::span<const uint8_t> Ports::bytes(rte_mbuf* m) {
  // Frames here are small and single-segment (2 KiB mbufs).
  return {rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m)};
}

void Ports::free_mbuf(rte_mbuf* m) { rte_pktmbuf_free(m); }

void Ports::drop_pending(Port& p) {
  for (TxQueue& q : p.txq) {
    for (unsigned i = 0; i < q.n; ++i) rte_pktmbuf_free(q.pending[i]);
    q.n = 0;
  }
}

// Ethernet (one VLAN tag at most), IPv4, UDP: the source port's shard mod
// queues. The engines build every frame this way; anything shorter or else
// goes on queue 0, which every link has.
unsigned Ports::queue_of(std::span<const uint8_t> f, unsigned queues) {
  if (queues <= 1 || f.size() < 14) return 0;
  size_t l3 = 14;
  uint16_t type = uint16_t(f[12] << 8 | f[13]);
  if (type == 0x8100 && f.size() >= 18) {
    type = uint16_t(f[16] << 8 | f[17]);
    l3 = 18;
  }
  if (type != 0x0800 || f.size() < l3 + 20 || f[l3 + 9] != 17) return 0;
  const size_t l4 = l3 + size_t(f[l3] & 0x0F) * 4;
  if (f.size() < l4 + 2) return 0;
  const uint32_t shard = proto::shard_of_port(uint16_t(f[l4] << 8 | f[l4 + 1]));
  return shard == proto::kNoShard ? 0 : shard % queues;
}

bool Ports::send(uint16_t port, std::span<const uint8_t> frame) {
  Port& p = ports_[port];
  TxQueue& q = p.txq[queue_of(frame, unsigned(p.txq.size()))];
  if (q.n == kBurst) flush();
  if (q.n == kBurst) return false;
  rte_mbuf* m = rte_pktmbuf_alloc(dp_->pool());
  if (!m) return false;
  char* d = rte_pktmbuf_append(m, uint16_t(frame.size()));
  if (!d) {
    rte_pktmbuf_free(m);
    return false;
  }
  std::memcpy(d, frame.data(), frame.size());
  q.pending[q.n++] = m;
  return true;
}

unsigned Ports::flush() {
  unsigned total = 0;
  for (auto& p : ports_) {
    if (!p.started) continue;
    for (unsigned qi = 0; qi < p.txq.size(); ++qi) {
      TxQueue& q = p.txq[qi];
      if (!q.n) continue;
      const uint16_t sent =
          rte_eth_tx_burst(p.id, dp_->tx_queue(uint16_t(&p - ports_.data()), qi), q.pending, uint16_t(q.n));
      // Keep what the ring did not take, in order: nothing is dropped here.
      std::memmove(q.pending, q.pending + sent, (q.n - sent) * sizeof(rte_mbuf*));
      q.n -= sent;
      total += sent;
    }
  }
  return total;
}

}  // namespace agq::worker
