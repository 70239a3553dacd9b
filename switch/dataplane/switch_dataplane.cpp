#include "dataplane/switch_dataplane.hpp"

#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_cycles.h>
#include <sys/prctl.h>

#include <array>
#include <chrono>
#include <mutex>
#include <span>
#include <stdexcept>

#include "dataplane/idle_backoff.hpp"
#include "dataplane/tx_port.hpp"

namespace agq::dataplane {

struct SwitchDataplane::Lcore {
  explicit Lcore(unsigned id, uint16_t nports)
      : lcore_id(id), rng(rte_rdtsc() ^ (uint64_t(id) << 48)), sim_drops(new Counter[size_t(nports) * 2]) {}

  LcoreCounters counters;
  unsigned lcore_id = 0;
  std::vector<uint16_t> rx_ports;
  std::unique_ptr<TxPort[]> tx;  // by port id
  XorShift64 rng;                           // drop simulator decisions
  std::unique_ptr<Counter[]> sim_drops;     // DropSim::index(port, dir)
  // Scratch for one multicast decision, here rather than on the stack so
  // that nothing is initialised or allocated per packet.
  std::array<tna::Replica, kMaxReplicas> replicas;
  std::array<rte_mbuf*, kMaxReplicas> copies;

  void flush_all(uint16_t nports) {
    for (uint16_t p = 0; p < nports; ++p) tx[p].flush();
  }
};

SwitchDataplane::SwitchDataplane(Ports& ports, tna::Program& program,
                                 const tna::ReplicationEngine& pre, LoopOptions opt)
    : ports_(ports), program_(program), pre_(pre), opt_(opt), egress_(program.has_egress()),
      drop_sim_(ports.count()) {
  if (opt_.burst == 0 || opt_.burst > kMaxBurst)
    throw std::runtime_error("burst must be 1.." + std::to_string(kMaxBurst));
  const uint16_t nports = ports_.count();
  try {
    setup(nports);
  } catch (...) {
    release();
    throw;
  }
  for (uint16_t p = 0; p < nports; ++p) lcores_[p % lcores_.size()]->rx_ports.push_back(p);
}

void SwitchDataplane::setup(uint16_t nports) {
  unsigned lcore_id;
  RTE_LCORE_FOREACH(lcore_id) {
    lcores_.push_back(std::make_unique<Lcore>(lcore_id, nports));
    Lcore* c = lcores_.back().get();
    c->tx = std::make_unique<TxPort[]>(nports);
    const unsigned index = static_cast<unsigned>(lcores_.size() - 1);
    for (uint16_t p = 0; p < nports; ++p) {
      TxPort& t = c->tx[p];
      t.buf = static_cast<rte_eth_dev_tx_buffer*>(rte_zmalloc_socket(
          "agq_txbuf", RTE_ETH_TX_BUFFER_SIZE(opt_.burst), 0, rte_lcore_to_socket_id(lcore_id)));
      if (!t.buf) throw std::runtime_error("tx buffer allocation failed (raise EAL -m)");
      rte_eth_tx_buffer_init(t.buf, opt_.burst);
      rte_eth_tx_buffer_set_err_callback(t.buf, &TxPort::on_unsent, &t);
      t.port = p;
      t.queue = ports_.tx_queue(p, index);
      t.shared = ports_.tx_lock(p);
      t.counters = &c->counters;
    }
  }
}

SwitchDataplane::~SwitchDataplane() { release(); }

void SwitchDataplane::release() {
  const uint16_t nports = ports_.count();
  for (auto& c : lcores_) {
    if (!c->tx) continue;
    for (uint16_t p = 0; p < nports; ++p) {
      // Packets left over when run() was never called go back to the pool.
      if (c->tx[p].buf) rte_pktmbuf_free_bulk(c->tx[p].buf->pkts, c->tx[p].buf->length);
      rte_free(c->tx[p].buf);
      c->tx[p].buf = nullptr;
    }
  }
}

void SwitchDataplane::run(const std::atomic<bool>& stop) {
  stop_ = &stop;
  rte_eal_mp_remote_launch(&SwitchDataplane::entry, this, CALL_MAIN);
  rte_eal_mp_wait_lcore();
}

int SwitchDataplane::entry(void* self) {
  auto* dp = static_cast<SwitchDataplane*>(self);
  return dp->loop(*dp->lcores_.at(static_cast<size_t>(rte_lcore_index(rte_lcore_id()))));
}

int SwitchDataplane::loop(Lcore& c) {
  if (c.rx_ports.empty()) return 0;  // more lcores than ports
  // Linux's default 50 us timer slack would stretch every short idle sleep
  // to >= 50 us; 1 us lets the back-off grow as designed.
  if (opt_.idle_sleep_us) prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  IdleBackoff idle(opt_.idle_sleep_us, opt_.idle_polls);
  std::array<rte_mbuf*, kMaxBurst> pkts;
  const uint16_t nports = ports_.count();

  while (!stop_->load(std::memory_order_relaxed)) {
    uint64_t got = 0;
    for (uint16_t in : c.rx_ports) {
      uint16_t n = rte_eth_rx_burst(in, 0, pkts.data(), opt_.burst);
      if (n == 0) continue;
      got += n;
      n = sim_drop_rx(c, in, pkts.data(), n);
      // One stamp per burst: every packet of it was dequeued by this call,
      // and a clock read per packet would cost ~20 ns each.
      const uint64_t now = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(
              std::chrono::steady_clock::now().time_since_epoch()).count());
      for (uint16_t i = 0; i < n; ++i) {
        if (i + 1 < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void*));
        handle(c, in, pkts[i], now);
      }
    }
    if (got) {
      c.counters.rx.add(got);
      // Full buffers already went out inside send(); flushing the rest here
      // bounds latency to one round, so no drain timer is needed.
      c.flush_all(nports);
      idle.reset();
    } else if (idle.idle()) {
      c.counters.idle_sleeps.add(1);
    }
  }
  c.flush_all(nports);
  return 0;
}

void SwitchDataplane::handle(Lcore& c, uint16_t in_port, rte_mbuf* m, uint64_t now_ns) {
  // The program sees one contiguous frame.
  if (m->nb_segs > 1 && rte_pktmbuf_linearize(m) != 0) {
    c.counters.multiseg_drops.add(1);
    rte_pktmbuf_free(m);
    return;
  }
  tna::IngressIntrinsicMd md;
  md.ingress_port = in_port;
  md.ingress_mac_tstamp_ns = now_ns;
  unsigned n_out = 0;
  tna::Decision d;
  {
    std::lock_guard g(program_.lock());
    d = program_.process(std::span<uint8_t>(rte_pktmbuf_mtod(m, uint8_t*), m->data_len), md);
    // Copy the replicas while the lock keeps the control plane out of the
    // PRE; members() is a reference into the group, no allocation.
    if (d.kind == tna::Decision::Kind::Multicast)
      for (const tna::Replica& r : pre_.members(d.group)) {
        if (r.port == d.exclude_port) continue;
        if (n_out == kMaxReplicas) {
          c.counters.replica_overflow.add(1);
          continue;
        }
        c.replicas[n_out++] = r;
      }
  }
  switch (d.kind) {
    case tna::Decision::Kind::Drop:
      c.counters.program_drops.add(1);
      rte_pktmbuf_free(m);
      return;
    case tna::Decision::Kind::Unicast:
      if (d.port >= ports_.count()) {
        c.counters.bad_port_drops.add(1);
        rte_pktmbuf_free(m);
        return;
      }
      transmit(c, d.port, m);
      return;
    case tna::Decision::Kind::Multicast:
      replicate(c, m, n_out);
      return;
  }
  rte_pktmbuf_free(m);  // unreachable with a valid Kind
}

void SwitchDataplane::replicate(Lcore& c, rte_mbuf* m, unsigned n) {
  auto& reps = c.replicas;
  unsigned valid = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (reps[i].port < ports_.count())
      reps[valid++] = reps[i];
    else
      c.counters.bad_port_drops.add(1);
  }
  if (valid == 0) {  // e.g. a flood from the only port
    rte_pktmbuf_free(m);
    return;
  }
  if (egress_) {
    replicate_with_egress(c, m, valid);
    return;
  }
  // Replicas are indirect mbufs sharing the (already deparsed) data: every
  // member gets the same bytes, as from Tofino's PRE without egress pipeline.
  for (unsigned i = 0; i + 1 < valid; ++i) {
    rte_mbuf* r = rte_pktmbuf_clone(m, ports_.clone_pool());
    if (!r) {
      c.counters.clone_failures.add(1);
      continue;
    }
    c.counters.clones.add(1);
    transmit(c, reps[i].port, r);
  }
  transmit(c, reps[valid - 1].port, m);  // the original goes to the last member
}

void SwitchDataplane::replicate_with_egress(Lcore& c, rte_mbuf* m, unsigned n) {
  auto& reps = c.replicas;
  auto& bufs = c.copies;
  // Every replica gets bytes of its own because egress rewrites them (agq:
  // destination MAC/IP and worker_id per worker). Copies are made before any
  // egress runs, from the untouched deparsed bytes, and outside the lock.
  unsigned k = 0;
  for (unsigned i = 0; i + 1 < n; ++i) {
    rte_mbuf* r = rte_pktmbuf_copy(m, ports_.pool(), 0, UINT32_MAX);
    if (r && r->nb_segs != 1) {  // cannot happen from a linear mbuf of the same pool; never rewrite a chain
      rte_pktmbuf_free(r);
      r = nullptr;
    }
    if (!r) {
      c.counters.clone_failures.add(1);
      continue;
    }
    c.counters.copies.add(1);
    reps[k] = reps[i];
    bufs[k++] = r;
  }
  reps[k] = reps[n - 1];
  bufs[k++] = m;  // the original is the last replica's copy
  {
    std::lock_guard g(program_.lock());
    for (unsigned i = 0; i < k; ++i)
      program_.egress(std::span<uint8_t>(rte_pktmbuf_mtod(bufs[i], uint8_t*), bufs[i]->data_len), reps[i].port,
                      reps[i].rid);
  }
  for (unsigned i = 0; i < k; ++i) transmit(c, reps[i].port, bufs[i]);
}

uint16_t SwitchDataplane::sim_drop_rx(Lcore& c, uint16_t port, rte_mbuf** pkts, uint16_t n) {
  const uint64_t t = drop_sim_.threshold(port, SimDir::Rx);
  if (t == 0) return n;  // the common case: one relaxed load per burst
  uint16_t kept = 0;
  for (uint16_t i = 0; i < n; ++i) {
    if (c.rng.drop(t)) {
      c.sim_drops[DropSim::index(port, SimDir::Rx)].add(1);
      rte_pktmbuf_free(pkts[i]);
    } else {
      pkts[kept++] = pkts[i];
    }
  }
  return kept;
}

// Every packet and replica leaves through here: the drop simulator's tx side,
// then the lcore's tx buffer of that port.
void SwitchDataplane::transmit(Lcore& c, uint16_t port, rte_mbuf* m) {
  if (c.rng.drop(drop_sim_.threshold(port, SimDir::Tx))) {
    c.sim_drops[DropSim::index(port, SimDir::Tx)].add(1);
    rte_pktmbuf_free(m);
    return;
  }
  c.tx[port].send(m);
}

std::vector<std::pair<unsigned, std::vector<uint16_t>>> SwitchDataplane::rx_assignment() const {
  std::vector<std::pair<unsigned, std::vector<uint16_t>>> r;
  for (const auto& c : lcores_) r.emplace_back(c->lcore_id, c->rx_ports);
  return r;
}

std::vector<std::pair<std::string, uint64_t>> SwitchDataplane::totals() const {
  std::vector<std::pair<std::string, uint64_t>> sum;
  for (const auto& c : lcores_) {
    size_t i = 0;
    c->counters.for_each([&](const char* name, uint64_t v) {
      if (i == sum.size()) sum.emplace_back(name, 0);
      sum[i++].second += v;
    });
  }
  return sum;
}

uint64_t SwitchDataplane::sim_drops(uint16_t port, SimDir d) const {
  uint64_t n = 0;
  if (port >= ports_.count()) return 0;
  for (const auto& c : lcores_) n += c->sim_drops[DropSim::index(port, d)].get();
  return n;
}

uint64_t SwitchDataplane::tx_dropped(uint16_t port) const {
  uint64_t n = 0;
  for (const auto& c : lcores_)
    if (port < ports_.count()) n += c->tx[port].dropped.get();
  return n;
}

}  // namespace agq::dataplane
