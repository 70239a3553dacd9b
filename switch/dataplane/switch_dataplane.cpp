#include "dataplane/switch_dataplane.hpp"

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_memcpy.h>
#include <rte_prefetch.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>
#include <sys/prctl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <span>
#include <stdexcept>

#include "dataplane/idle_backoff.hpp"
#include "dataplane/lcore.hpp"
#include "dataplane/one_flow.hpp"
#include "dataplane/port_readers.hpp"
#include "dataplane/tsc_clock.hpp"
#include "dataplane/tx_port.hpp"

namespace agq::dataplane {

static_assert(TxPort::kMax == SwitchDataplane::kMaxBurst);
static_assert(Ports::kMaxSpares <= SwitchDataplane::kMaxBurst, "Lcore::spare holds the stash");
static_assert(sizeof(tna::MacDigest) % 4 == 0, "rte_ring elements are multiples of 4 bytes");

namespace {
// Drivers whose tx_burst copies every frame it takes (into a shared ring,
// a file, a kernel socket) or drops it, and frees the mbuf before
// returning: memif (the server always copies; a zero-copy client does not,
// which replicate_in_place finds by the refcount and then stops reusing),
// pcap, af_packet, tap (writev), null. A NIC reads the frame by DMA after tx_burst, and
// net_ring passes the mbuf itself: neither is listed.
bool copies_out_at_tx(const std::string& driver) {
  return driver == "net_memif" || driver == "net_pcap" || driver == "net_af_packet" || driver == "net_tap" ||
         driver == "net_null";
}
}  // namespace

SwitchDataplane::SwitchDataplane(Ports& ports, control::Pipes& pipes, LoopOptions opt)
    : ports_(ports), opt_(opt), egress_(pipes.instance(0).has_egress()), drop_sim_(ports.count()) {
  if (opt_.burst == 0 || opt_.burst > kMaxBurst)
    throw std::runtime_error("burst must be 1.." + std::to_string(kMaxBurst));
  if (opt_.tx_batch == 0 || opt_.tx_batch > TxPort::kMax)
    throw std::runtime_error("tx batch must be 1.." + std::to_string(TxPort::kMax));
  if (pipes.count() != rte_lcore_count())
    throw std::runtime_error("one program instance per lcore needed: " + std::to_string(pipes.count()) +
                             " instances, " + std::to_string(rte_lcore_count()) + " lcores");
  try {
    setup(pipes);
  } catch (...) {
    release();
    throw;
  }
}

void SwitchDataplane::setup(control::Pipes& pipes) {
  const uint16_t nports = ports_.count();
  const unsigned L = rte_lcore_count();
  // An lcore answers at its next poll round: within one back-off sleep when
  // idle, within kCommandEvery rounds when busy -- once it is on a CPU. On a
  // shared machine (2 vCPUs, compiles, other busy-polling processes) a
  // runnable thread can wait for a CPU for hundreds of milliseconds; the
  // control thread waits long enough for that (it gives up only on an lcore
  // that is really gone), and agqctl waits longer still (ctl_protocol.hpp).
  const auto timeout = std::chrono::milliseconds(kCommandTimeoutMs + 4 * opt_.idle_sleep_us / 1000);
  commands_ = std::make_unique<CommandRings>(L, timeout);
  // init_replica() computes a replica's data pointer instead of reading it.
  if (egress_ && (rte_pktmbuf_priv_size(ports_.pool()) != 0 ||
                  rte_pktmbuf_data_room_size(ports_.pool()) <= RTE_PKTMBUF_HEADROOM))
    throw std::logic_error("replica buffers need a pool without private area and with a data room");

  unsigned lcore_id;
  RTE_LCORE_FOREACH(lcore_id) {
    const unsigned index = static_cast<unsigned>(lcores_.size());
    lcores_.push_back(std::make_unique<Lcore>(*this, index, lcore_id, nports));
    Lcore& c = *lcores_.back();
    c.prog = c.sprog = &pipes.instance(index);
    c.pre = pipes.pre(index);
    if (!c.pre) throw std::runtime_error("program instance " + std::to_string(index) + " has no PRE");
    const int socket = int(rte_lcore_to_socket_id(lcore_id));
    const std::string sfx = std::to_string(index);
    if (L > 1) {
      c.inbox = rte_ring_create(("agq_in" + sfx).c_str(), kHandoffRing, socket, RING_F_SC_DEQ);
      if (!c.inbox) throw std::runtime_error("hand-off ring: " + std::string(rte_strerror(rte_errno)) + " (raise EAL -m)");
    }
    c.digests = rte_ring_create_elem(("agq_dg" + sfx).c_str(), sizeof(tna::MacDigest), kDigestRing, socket,
                                     RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (!c.digests) throw std::runtime_error("digest ring: " + std::string(rte_strerror(rte_errno)) + " (raise EAL -m)");
    c.stage.resize(L);
    c.staged.assign(L, 0);
    // Several instances: a learned MAC must reach all of them, so learning
    // goes to the control thread as a digest (ControlPlane applies it to
    // every instance). One instance learns directly, at once.
    if (L > 1) c.sprog->set_mac_digest_sink(&c.sink);
  }
  // A shaped port is transmitted by one lcore, as a port with a single tx
  // queue is: the others hand it their packets through its ring. So the
  // port has one queue and one token bucket, at the link's full rate
  // whichever lcores the traffic comes from, and the ECN threshold sees
  // the port's real depth. (Splitting the rate as rate/L per lcore would
  // give a flow that one lcore carries -- any ordinary flow from a
  // single-queue port -- 1/L of the link; one bucket shared by the lcores
  // would be an atomic read-modify-write per packet.) Only shaped traffic
  // pays the hand-off, and its rate is the link's.
  shapers_.assign(nports, nullptr);
  for (uint16_t p = 0; p < nports; ++p) {
    if (!shaped(p)) continue;
    Lcore& owner = *lcores_[ports_.tx_owner(p)];
    owner.shapers.push_back(
        std::make_unique<PortShaper>(p, opt_.shapers[p], ports_.pool(), rte_get_tsc_hz(), rte_rdtsc()));
    shapers_[p] = owner.shapers.back().get();
  }
  tx_rings_.assign(nports, nullptr);
  for (uint16_t p = 0; p < nports; ++p) {
    if ((!ports_.info(p).tx_shared && !shaped(p)) || L == 1) continue;
    const unsigned owner = ports_.tx_owner(p);
    tx_rings_[p] = rte_ring_create(("agq_tx" + std::to_string(p)).c_str(), kHandoffRing,
                                   int(rte_lcore_to_socket_id(lcores_[owner]->lcore_id)), RING_F_SC_DEQ);
    if (!tx_rings_[p]) throw std::runtime_error("tx hand-off ring: " + std::string(rte_strerror(rte_errno)));
    lcores_[owner]->owned_tx.push_back(p);
  }
  for (auto& cp : lcores_) {
    Lcore& c = *cp;
    c.tx = std::make_unique<TxPort[]>(nports);
    for (uint16_t p = 0; p < nports; ++p) {
      TxPort& t = c.tx[p];
      t.port = p;
      // A shaped port's owner sends on queue 0, which every port has.
      t.queue = shaped(p) ? 0 : ports_.tx_queue(p, c.index);
      t.cap = opt_.tx_batch;
      t.counters = &c.counters;
      if (tx_rings_[p] && ports_.tx_owner(p) != c.index) t.handoff = tx_rings_[p];
      if (shaped(p) && ports_.tx_owner(p) == c.index)
        for (auto& sh : c.shapers)
          if (sh.get() == shapers_[p]) t.shaper = sh.get();
      // A shaper keeps frames past the send: no in-place replicas there.
      t.copies_out = opt_.reuse_replicas && c.prog->egress_reapplies() && copies_out_at_tx(ports_.info(p).driver) &&
                     !shaped(p);
      if (t.copies_out && !c.lender)
        c.lender = std::make_unique<FrameLender>(ports_.pool(), "agq_lend" + std::to_string(c.index));
    }
  }
  // Multi-queue memif: a client may connect with fewer rings than queues,
  // which DPDK's memif server cannot report (ports.hpp). Queues >= 1 are
  // therefore confirmed on their first packets (check_memif_ring); the tx
  // of an lcore whose queue has no ring then goes to lcore 0 (queue 0
  // always exists) through this ring.
  fallback_tx_.assign(nports, nullptr);
  for (uint16_t p = 0; p < nports; ++p) {
    const PortInfo& pi = ports_.info(p);
    if (pi.driver != "net_memif" || pi.rx_queues < 2 || pi.tx_shared || shaped(p) || L == 1) continue;
    fallback_tx_[p] = rte_ring_create(("agq_fb" + std::to_string(p)).c_str(), kHandoffRing,
                                      int(rte_lcore_to_socket_id(lcores_[0]->lcore_id)), RING_F_SC_DEQ);
    if (!fallback_tx_[p]) throw std::runtime_error("tx fallback ring: " + std::string(rte_strerror(rte_errno)));
    lcores_[0]->owned_tx.push_back(p);
  }
  for (uint16_t p = 0; p < nports; ++p)
    for (uint16_t q = 0; q < ports_.info(p).rx_queues; ++q) {
      RxQueue rq{p, q};
      rq.verify = fallback_tx_[p] && q > 0;
      // A port with a queue per lcore is steered (RSS/rte_flow on the UDP
      // source port, a memif client picking the ring): its packets are
      // expected at their owner, so the program checks ownership where it
      // finds the row anyway (Program::checks_ownership) and hands back
      // the rare stray; shard_of per packet would be wasted work (agq
      // 2-lcore steered replay: +8-10%). A single-queue port delivers
      // every shard to one lcore, (L-1)/L of them foreign: shard_of (a few
      // fixed-offset loads) sorts those out before the program, cheaper
      // than admitting them, and they reach their owner before this
      // lcore's own burst runs.
      rq.program_shards = L > 1 && ports_.info(p).rx_queues > 1 && pipes.instance(0).checks_ownership();
      lcores_[ports_.rx_lcore(p, q)]->rxq.push_back(rq);
    }
}

SwitchDataplane::~SwitchDataplane() { release(); }

void SwitchDataplane::release() {
  auto drain = [](rte_ring* r) {
    if (!r) return;
    void* m;
    while (rte_ring_dequeue(r, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    rte_ring_free(r);
  };
  for (auto& c : lcores_) {
    if (c->sprog) c->sprog->set_mac_digest_sink(nullptr);  // the instances outlive us
    if (c->tx)
      for (uint16_t p = 0; p < ports_.count(); ++p) {
        rte_pktmbuf_free_bulk(c->tx[p].pkts, c->tx[p].n);  // when run() never flushed
        c->tx[p].n = 0;
      }
    rte_pktmbuf_free_bulk(c->spare.data(), c->nspare);
    c->nspare = 0;
    c->shapers.clear();  // frees what they still queue
    drain(c->inbox);
    c->inbox = nullptr;
    rte_ring_free(c->digests);
    c->digests = nullptr;
  }
  for (auto& r : tx_rings_) {
    drain(r);
    r = nullptr;
  }
  for (auto& r : fallback_tx_) {
    drain(r);
    r = nullptr;
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

namespace {
// rte_pktmbuf_free_bulk's work, inline. Debian's DPDK is shared libraries,
// and the library's function finds the lcore's mempool cache through the
// global-dynamic TLS model (a __tls_get_addr call per free: perf, 1.5% of
// the agq replay beside free_bulk's own 3.5%); inlined here, the executable
// reads the lcore id with its initial-exec TLS access. Frees what the
// library does: one segment at a time to its own pool, in batches.
inline void free_bulk_inline(rte_mbuf* const* m, uint16_t n) {
  constexpr uint16_t kBatch = 64;
  void* put[kBatch];
  rte_mempool* pool = nullptr;
  uint16_t k = 0;
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* x = m[i];
    if (unlikely(x->nb_segs != 1)) {
      rte_pktmbuf_free(x);
      continue;
    }
    x = rte_pktmbuf_prefree_seg(x);
    if (x == nullptr) continue;  // another reference remains
    if (x->pool != pool || k == kBatch) {
      if (k) rte_mempool_put_bulk(pool, put, k);
      pool = x->pool;
      k = 0;
    }
    put[k++] = x;
  }
  if (k) rte_mempool_put_bulk(pool, put, k);
}

// One packet into the program's vector: the frame's bytes (the mbuf's first
// cache line, which the driver just wrote) and its intrinsic metadata. The
// frame itself is not touched here: the program prefetches what it reads.
inline void stage_packet(tna::BurstPacket& b, rte_mbuf* m, uint16_t port, uint64_t now_ns) {
  b.bytes = rte_pktmbuf_mtod(m, uint8_t*);
  b.len = m->data_len;
  b.md.ingress_port = port;
  b.md.ingress_mac_tstamp_ns = now_ns;
  b.md.resubmit_flag = false;
  b.decision = tna::Decision{};
}
}  // namespace

int SwitchDataplane::loop(Lcore& c) {
  // Linux's default 50 us timer slack would stretch every short idle sleep
  // to >= 50 us; 1 us lets the back-off grow as designed.
  if (opt_.idle_sleep_us) prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  IdleBackoff idle(opt_.idle_sleep_us, opt_.idle_polls);
  TscClock clock(rte_get_tsc_hz(), rte_rdtsc());  // the packets' stamp, from round_start
  const uint64_t cycles_per_us = std::max<uint64_t>(1, rte_get_tsc_hz() / 1000000);
  // Online from here to the last flush: an unmap of port memory (a memif
  // peer leaving) waits until this lcore is between rounds (port_readers.hpp).
  PortReader reader;
  commands_->set_polling(c.index, true);
  const bool sharded = lcore_count() > 1;
  unsigned round = 0;
  bool busy = false;

  while (!stop_->load(std::memory_order_relaxed)) {
    // Control-plane changes land between bursts: after every empty round
    // (idle: at most one back-off sleep late) and every kCommandEvery-th
    // round while traffic flows, so a busy lcore does not read the control
    // thread's ring indices once per burst.
    ++round;
    reader.quiescent();  // no burst call in progress: the port memory may go
    if (!busy || (round % kCommandEvery) == 0) {
      uint64_t cycles = 0;
      if (unsigned k = commands_->serve(c.index, &cycles)) {
        c.counters.commands.add(k);
        c.counters.command_cycles.add(cycles);
      }
    }

    uint64_t got = 0, now = 0;
    // One TSC read per round, one more per busy round (~0.5 cycles per
    // packet at full bursts): dp.busy_cycles.
    const uint64_t round_start = rte_rdtsc();
    for (RxQueue& q : c.rxq) {
      if (unlikely(q.off)) continue;
      // A queue under the memif ring check notes the stats-reset sequence
      // before its burst (see check_memif_ring).
      const uint32_t reset_seq = unlikely(q.verify) ? stats_reset_seq_.load(std::memory_order_acquire) : 0;
      uint16_t n = rte_eth_rx_burst(q.port, q.queue, c.rx.data(), opt_.burst);
      if (n == 0) continue;
      if (unlikely(q.verify) && !check_memif_ring(c, q, c.rx.data(), n, reset_seq)) continue;
      got += n;
      c.counters.rx.add(n);
      n = sim_drop_rx(c, q.port, c.rx.data(), n);
      // One stamp per round, from the TSC the round already read.
      if (now == 0) now = clock.ns(round_start);
      if (sharded && !q.program_shards)
        ingest<true>(c, q.port, c.rx.data(), n, now);
      else
        ingest<false>(c, q.port, c.rx.data(), n, now);
    }
    if (c.inbox) {
      const uint16_t n = uint16_t(rte_ring_dequeue_burst(c.inbox, reinterpret_cast<void**>(c.local.data()),
                                                         opt_.burst, nullptr));
      if (n) {
        got += n;
        if (now == 0) now = clock.ns(round_start);
        process_inbox(c, c.local.data(), n, now);
      }
    }
    if (!c.owned_tx.empty() && drain_shared_tx(c)) got = 1;
    if (unlikely(c.memif_off > 0) && (round % kLinkCheckEvery) == 0) rearm_memif_queues(c);
    busy = got != 0;
    if (busy) {
      // Full batches already left inside send(); flushing the rest here
      // bounds latency to one round, so no drain timer is needed.
      flush_all(c);
      if (unlikely(!c.shapers.empty())) serve_shapers(c);
      c.counters.busy_cycles.add(rte_rdtsc() - round_start);
      c.counters.busy_rounds.add(1);
      idle.reset();
    } else if (likely(c.shapers.empty())) {
      if (idle.idle()) c.counters.idle_sleeps.add(1);
    } else {
      // Nothing came, but a shaped queue may hold frames waiting for
      // credit: the round is idle all the same (the back-off goes on), and
      // a sleep ends no later than the head's departure.
      const uint64_t wait = serve_shapers(c);
      const uint32_t cap = wait == PortShaper::kEmpty ? ~0u : uint32_t(std::min<uint64_t>(wait / cycles_per_us, ~0u));
      if (idle.idle(cap)) c.counters.idle_sleeps.add(1);
    }
  }
  flush_all(c);
  commands_->set_polling(c.index, false);
  return 0;
}

void SwitchDataplane::flush_all(Lcore& c) {
  for (uint16_t p = 0; p < ports_.count(); ++p) c.tx[p].flush();
}

// The packets other lcores queued for a single-queue port this lcore owns.
bool SwitchDataplane::drain_shared_tx(Lcore& c) {
  bool any = false;
  for (uint16_t p : c.owned_tx) {
    rte_mbuf** pkts = c.drops.data();  // free here: drops are only collected inside run_program
    rte_ring* r = tx_rings_[p] ? tx_rings_[p] : fallback_tx_[p];
    const uint16_t n = uint16_t(rte_ring_dequeue_burst(r, reinterpret_cast<void**>(pkts), opt_.burst, nullptr));
    if (n == 0) continue;
    any = true;
    if (PortShaper* sh = c.tx[p].shaper) {
      sh->enqueue(pkts, n);
      continue;
    }
    const uint16_t sent = rte_eth_tx_burst(p, 0, pkts, n);
    c.counters.tx.add(sent);
    if (sent < n) {
      rte_pktmbuf_free_bulk(pkts + sent, n - sent);
      c.tx[p].dropped.add(n - sent);
      c.counters.tx_dropped.add(n - sent);
    }
  }
  return any;
}

// The shaped ports this lcore transmits: what their credit allows goes to
// their tx queue 0. Returns the cycles until the first head may leave
// (PortShaper::kEmpty: every queue is empty).
uint64_t SwitchDataplane::serve_shapers(Lcore& c) {
  const uint64_t now = rte_rdtsc();
  uint64_t wait = PortShaper::kEmpty;
  for (auto& sp : c.shapers) {
    PortShaper& s = *sp;
    const uint16_t port = s.port();  // (an empty queue's call only notes that it ran dry)
    const uint64_t w = s.service(now, [&c, port](rte_mbuf** m, uint16_t k) -> uint16_t {
      const uint16_t sent = rte_eth_tx_burst(port, 0, m, k);
      c.counters.tx.add(sent);
      return sent;
    });
    wait = std::min(wait, w);
  }
  return wait;
}

// Rx side of one burst, in one pass: linearize (rare), and with several
// lcores shard and stage the packets other lcores own for the hand-off; the
// rest goes straight into the program's vector. kSharded = more than one
// lcore: only then is the frame read here (shard_of), so only then is it
// prefetched here.
template <bool kSharded>
void SwitchDataplane::ingest(Lcore& c, uint16_t port, rte_mbuf** pkts, uint16_t n, uint64_t now_ns) {
  tna::BurstPacket* bp = c.burst.data();
  // The fused path: a leading run of frames equal to frame 0 in every byte
  // the program may read (run_length) is decided once by the program
  // (process_run: its parser and Forwarding's tables on frame 0, counted
  // for all) and leaves in one tx batch straight from the rx array -- no
  // vector entry, no decision read per packet, and with several lcores no
  // shard_of per frame: the program accepts only runs without aggregation
  // state (ordinary frames, tna::kAnyShard), which the lcore that received
  // them processes. The rest of the burst, or all of it if the program
  // declines, takes the per-packet path below, in arrival order after the
  // run.
  {
    if (n >= kMinRun && c.run_skip == 0) {
      const uint16_t r = run_length(pkts, n);
      if (r >= kMinRun) {
        stage_packet(bp[0], pkts[0], port, now_ns);
        if (c.prog->process_run(bp[0], r)) {
          c.counters.run_packets.add(r);
          send_run(c, pkts, r, bp[0].decision);
          pkts += r;
          n = uint16_t(n - r);
          if (n == 0) return;
        } else {
          c.run_skip = kRunSkip;
        }
      }
    } else if (c.run_skip) {
      --c.run_skip;
    }
  }
  uint16_t nl = 0;
  constexpr uint16_t kAhead = 4;
  if constexpr (kSharded)
    for (uint16_t i = 0; i < n && i < kAhead; ++i) rte_prefetch0(rte_pktmbuf_mtod(pkts[i], void*));
  // The mbufs' first cache lines (nb_segs, data_off, data_len) a few packets
  // ahead: with several rx queues per round the PMD's writes to them have
  // left L1 by the time this pass reads them (perf: the nb_segs load was
  // this loop's hot spot).
  for (uint16_t i = 0; i < n && i < kAhead; ++i) rte_prefetch0(pkts[i]);
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    if (i + kAhead < n) rte_prefetch0(pkts[i + kAhead]);
    if constexpr (kSharded)
      if (i + kAhead < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + kAhead], void*));
    // The program sees one contiguous frame.
    if (unlikely(m->nb_segs > 1) && rte_pktmbuf_linearize(m) != 0) {
      c.counters.multiseg_drops.add(1);
      rte_pktmbuf_free(m);
      continue;
    }
    if constexpr (kSharded) {
      const uint32_t shard =
          c.prog->shard_of(std::span<const uint8_t>(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len));
      const unsigned owner = shard == tna::kAnyShard ? c.index : shard % lcore_count();
      if (owner != c.index) {
        m->port = port;  // the ingress port travels with a handed-off packet
        c.stage[owner][c.staged[owner]++] = m;
        continue;
      }
    }
    c.local[nl] = m;
    m->port = port;  // travels with the packet if the program hands it off
    stage_packet(bp[nl++], m, port, now_ns);
  }
  if constexpr (kSharded) handoff(c);
  if (nl) run_program(c, nl);
}

// The staged packets of other owners: one enqueue burst per owner.
void SwitchDataplane::handoff(Lcore& c) {
  for (unsigned o = 0; o < lcore_count(); ++o) {
    const uint16_t k = c.staged[o];
    if (k == 0) continue;
    c.staged[o] = 0;
    const uint16_t put = uint16_t(
        rte_ring_enqueue_burst(lcores_[o]->inbox, reinterpret_cast<void**>(c.stage[o].data()), k, nullptr));
    c.counters.handoff.add(put);
    if (put < k) {
      rte_pktmbuf_free_bulk(c.stage[o].data() + put, k - put);
      c.counters.handoff_drops.add(k - put);
    }
  }
}

// What the other lcores handed this one (dequeued into c.local).
void SwitchDataplane::process_inbox(Lcore& c, rte_mbuf** pkts, uint16_t n, uint64_t now_ns) {
  tna::BurstPacket* bp = c.burst.data();
  for (uint16_t i = 0; i < n; ++i) stage_packet(bp[i], pkts[i], pkts[i]->port, now_ns);
  run_program(c, n);
}

void SwitchDataplane::transmit_sim(Lcore& c, uint16_t port, rte_mbuf* m) {
  if (c.rng.drop(drop_sim_.threshold(port, SimDir::Tx))) {
    c.sim_drops[DropSim::index(port, SimDir::Tx)].add(1);
    rte_pktmbuf_free(m);
    return;
  }
  c.tx[port].send(m);
}

// The vector c.burst[0..n) (mbufs c.local[0..n)) through the program, then
// its decisions: unicast into the tx batches, drops collected and freed in
// one bulk call, multicast through the lcore's PRE.
void SwitchDataplane::run_program(Lcore& c, uint16_t n) {
  tna::BurstPacket* bp = c.burst.data();
  c.prog->process_burst(bp, n);
  apply_decisions(c, c.local.data(), n, [bp](uint16_t i) -> const tna::Decision& { return bp[i].decision; });
}

// A run the program decided at once (process_run): unicast to a port goes
// out as one tx batch; anything else (a drop, e.g. a destination behind the
// ingress port; a flood; a port that does not exist; the drop simulator's
// tx side on) packet by packet, exactly as run_program would.
void SwitchDataplane::send_run(Lcore& c, rte_mbuf** pkts, uint16_t n, const tna::Decision& d) {
  if (likely(d.kind == tna::Decision::Kind::Unicast && d.port < ports_.count() && !drop_sim_.active(SimDir::Tx))) {
    c.tx[d.port].send_burst(pkts, n);
    return;
  }
  apply_decisions(c, pkts, n, [&d](uint16_t) -> const tna::Decision& { return d; });
}

// The decisions of pkts[0..n) (decision(i) of pkts[i]): unicast into the
// tx batches and multicast through the lcore's PRE, in arrival order; then,
// in a pass of their own, the drops: kept as replica buffers or collected
// and freed in one bulk call. Two passes because perf showed the one-pass
// loop's counters spilled around the multicast call, each packet waiting on
// the previous one's store; here the first pass keeps its batch count in a
// register (TxRun) and the second has nothing to keep across a call.
template <typename DecisionOf>
void SwitchDataplane::apply_decisions(Lcore& c, rte_mbuf** pkts, uint16_t n, DecisionOf decision) {
  const uint16_t nports = ports_.count();
  const bool sim_tx = drop_sim_.active(SimDir::Tx);
  bool any_drop = false, any_handoff = false;
  {
    // With an egress control (and the simulator's tx side off), multicast
    // decisions wait in a run that multicast_run() replicates at once --
    // before the next unicast, so every port still sends in arrival order.
    const bool batch_mc = egress_ && !sim_tx;
    rte_mbuf** const mc_pkts = c.mc_pkts.data();
    const tna::Decision** const mc_dec = c.mc_decisions.data();
    unsigned nm = 0;
    TxRun run(c.tx.get());
    for (uint16_t i = 0; i < n; ++i) {
      const tna::Decision& d = decision(i);
      if (likely(d.kind == tna::Decision::Kind::Unicast && d.port < nports)) {
        if (unlikely(nm != 0)) {
          run.close();
          multicast_run(c, mc_pkts, mc_dec, nm);
          nm = 0;
        }
        if (likely(!sim_tx))
          run.send(d.port, pkts[i]);
        else
          transmit_sim(c, d.port, pkts[i]);
      } else if (d.kind == tna::Decision::Kind::Multicast) {
        if (likely(batch_mc)) {
          mc_pkts[nm] = pkts[i];
          mc_dec[nm++] = &d;
          continue;
        }
        run.close();  // multicast sends through the ports' own batches
        multicast(c, pkts[i], d, sim_tx);
      } else if (d.kind == tna::Decision::Kind::Handoff) {
        // Another lcore's shard (RxQueue::program_shards): staged for its owner,
        // the same hand-off as ingest<true>'s. A program hands off only
        // when several lcores hold shards, and never to its own lcore.
        const unsigned owner = d.shard % lcore_count();
        if (unlikely(owner == c.index)) {  // a program bug: never loop a packet through our own ring
          c.counters.handoff_drops.add(1);
          rte_pktmbuf_free(pkts[i]);
          continue;
        }
        c.stage[owner][c.staged[owner]++] = pkts[i];
        any_handoff = true;
      } else {
        any_drop = true;
      }
    }
    if (nm != 0) {
      run.close();
      multicast_run(c, mc_pkts, mc_dec, nm);
    }
  }
  if (any_handoff) handoff(c);
  if (!any_drop) return;
  uint16_t nd = 0, np = 0, program_drops = 0, bad_port = 0;
  // Only a program with an egress control needs replica buffers. The
  // stash holds several bursts' drops (Ports::kMaxSpares): agq traffic
  // arrives a worker's burst at a time, so the DATA of N-1 bursts are
  // absorbed before one burst of RESULTs wants 3 buffers each. Kept to one
  // burst, two of every three absorbed bursts went back to the pool and the
  // RESULT burst took them out again: bulk operations that crossed the
  // mempool cache's flush threshold and ran its ring's atomics (callgrind,
  // memif agq: 875 -> 858 instructions per packet without them).
  const uint16_t spare_cap = egress_ ? uint16_t(Ports::kMaxSpares) : 0;
  uint16_t nspare = c.nspare;
  rte_mempool* const pool = ports_.pool();
  rte_mbuf** const drops = c.drops.data();
  rte_mbuf** const plain = c.plain.data();
  rte_mbuf** const spare = c.spare.data();
  for (uint16_t i = 0; i < n; ++i) {
    const tna::Decision& d = decision(i);
    rte_mbuf* m = pkts[i];
    if (d.kind == tna::Decision::Kind::Drop) {
      ++program_drops;
      // A plain mbuf of the pool, ours alone (one segment, so no next: the
      // state the pool hands mbufs out in): kept as a replica buffer, or,
      // the stash full, put back into the pool as it is -- what
      // rte_pktmbuf_free would find out again mbuf by mbuf, its next
      // pointer's cache line included, is known here.
      if (m->pool == pool && RTE_MBUF_DIRECT(m) && m->nb_segs == 1 && rte_mbuf_refcnt_read(m) == 1) {
        if (nspare < spare_cap)
          spare[nspare++] = m;
        else
          plain[np++] = m;
      } else {
        drops[nd++] = m;
      }
    } else if (d.kind == tna::Decision::Kind::Unicast) {
      if (d.port >= nports) {  // to a port that does not exist
        ++bad_port;
        drops[nd++] = m;
      }
    } else if (d.kind != tna::Decision::Kind::Multicast && d.kind != tna::Decision::Kind::Handoff) {
      drops[nd++] = m;  // unreachable with a valid Kind
    }
  }
  c.nspare = nspare;
  if (program_drops) c.counters.program_drops.add(program_drops);
  if (bad_port) c.counters.bad_port_drops.add(bad_port);
  if (np) rte_mempool_put_bulk(pool, reinterpret_cast<void* const*>(plain), np);
  if (nd) free_bulk_inline(drops, nd);
}

// A multi-queue memif port's queue q >= 1, on its first packets since
// link-up. DPDK's memif server has no API for the ring count the client
// chose, and polls a queue without a ring as if it were ring 0 (reading
// ring 0's slots behind the back of the lcore that owns queue 0). The
// driver's per-queue statistics do cover exactly the rings the client
// made: a queue with a ring has counted the packets just read, one
// without has no entry (0). Then: this burst is not the client's traffic
// (dropped, counted), the queue is polled no more, this lcore's tx on the
// port goes to lcore 0 (queue 0) through the fallback ring, and the
// shards of this lcore reach it through the software hand-off from
// whoever reads ring 0. A reconnect (link down, then up) re-arms the check.
//
// The statistics are cumulative and the control thread may reset them
// (`agqctl` clearing port counters) at any time: a reset between this
// burst's rx and the read below zeroes the count of a queue that does have
// a ring. Misreading that as "no ring" used to drop the burst and switch a
// working queue off. So a zero read while a reset ran (the sequence count
// moved or is odd) decides nothing: the burst is the client's as far as
// anyone can tell (processed), and the next burst is checked again.
bool SwitchDataplane::check_memif_ring(Lcore& c, RxQueue& q, rte_mbuf** pkts, uint16_t n, uint32_t reset_seq) {
  rte_eth_stats st{};
  const bool can_tell = q.queue < RTE_ETHDEV_QUEUE_STAT_CNTRS && rte_eth_stats_get(q.port, &st) == 0;
  if (!can_tell || st.q_ipackets[q.queue] != 0) {
    q.verify = false;  // the client has this ring
    return true;
  }
  if ((reset_seq & 1) != 0 || stats_reset_seq_.load(std::memory_order_acquire) != reset_seq) {
    c.counters.memif_check_retries.add(1);
    return true;  // a reset raced the read: keep q.verify, decide on the next burst
  }
  rte_pktmbuf_free_bulk(pkts, n);
  c.counters.memif_missing_drops.add(n);
  c.counters.memif_missing_rings.add(1);
  q.off = true;
  ++c.memif_off;
  c.link_was_down.assign(ports_.count(), 0);
  // Lcore i transmits on queue i: without ring i, through lcore 0.
  if (q.queue == c.index && c.index != 0 && fallback_tx_[q.port]) {  // (a shaped port sends on queue 0 already)
    c.tx[q.port].flush();
    c.tx[q.port].handoff = fallback_tx_[q.port];
  }
  std::fprintf(stderr,
               "agq-switch: port %u (%s): the memif client has no ring for queue %u (it connected with fewer "
               "rings than --memif-queues %u): lcore %u stops polling it; its shards reach it through the "
               "software hand-off and its tx on this port goes through lcore 0. Connect the client with %u "
               "rings to steer by ring.\n",
               unsigned(q.port), ports_.info(q.port).name.c_str(), unsigned(q.queue),
               unsigned(ports_.info(q.port).rx_queues), c.lcore_id, unsigned(ports_.info(q.port).rx_queues));
  return false;
}

// Every kLinkCheckEvery rounds while a queue is off: after its port's link
// went down and came back (the client reconnected, maybe with more rings),
// the queue is polled again and checked again.
void SwitchDataplane::rearm_memif_queues(Lcore& c) {
  for (RxQueue& q : c.rxq) {
    if (!q.off) continue;
    rte_eth_link link{};
    if (rte_eth_link_get_nowait(q.port, &link) != 0) continue;
    if (link.link_status != RTE_ETH_LINK_UP) {
      c.link_was_down[q.port] = 1;
      continue;
    }
    if (!c.link_was_down[q.port]) continue;
    q.off = false;
    q.verify = true;
    --c.memif_off;
    if (fallback_tx_[q.port]) {
      c.tx[q.port].flush();
      c.tx[q.port].handoff = nullptr;
    }
  }
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

void SwitchDataplane::reset_port_stats() {
  stats_reset_seq_.fetch_add(1, std::memory_order_acq_rel);  // odd: resetting
  for (uint16_t p = 0; p < ports_.count(); ++p) rte_eth_stats_reset(p);
  stats_reset_seq_.fetch_add(1, std::memory_order_acq_rel);
}

void SwitchDataplane::push_mac_digest(unsigned index, const tna::MacDigest& d) {
  Lcore& c = *lcores_[index];
  tna::MacDigest copy = d;  // rte_ring_enqueue_elem takes a non-const pointer
  if (rte_ring_enqueue_elem(c.digests, &copy, sizeof copy) != 0) c.counters.digest_drops.add(1);
}

std::vector<tna::MacDigest> SwitchDataplane::take_mac_digests() {
  std::vector<tna::MacDigest> out;
  std::array<tna::MacDigest, 64> buf;
  for (auto& c : lcores_)
    for (unsigned n; (n = rte_ring_dequeue_burst_elem(c->digests, buf.data(), sizeof(tna::MacDigest),
                                                      unsigned(buf.size()), nullptr)) != 0;)
      out.insert(out.end(), buf.begin(), buf.begin() + n);
  return out;
}

std::vector<std::pair<unsigned, std::vector<SwitchDataplane::RxQueue>>> SwitchDataplane::rx_assignment() const {
  std::vector<std::pair<unsigned, std::vector<RxQueue>>> r;
  for (const auto& c : lcores_) r.emplace_back(c->lcore_id, c->rxq);
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
  if (const PortShaper* s = shaper(port)) n += s->stats().dropped_packets;
  return n;
}

const PortShaper* SwitchDataplane::shaper(uint16_t port) const {
  return port < shapers_.size() ? shapers_[port] : nullptr;
}

}  // namespace agq::dataplane
