#include "observe/capture.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_pcapng.h>
#include <rte_ring.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "control/columns.hpp"
#include "control/command_util.hpp"
#include "control/text.hpp"
#include "observe/port_hooks.hpp"

namespace agq::observe {
namespace {

using control::CommandError;

constexpr const char* kUsage =
    "capture <port> rx|tx|both <file.pcapng> [--count N] [--snaplen B] | capture stop [<port>] | capture list";
constexpr uint32_t kDefaultSnaplen = 2048;  // a whole frame of the switch's 2 KiB mbufs
constexpr uint32_t kMaxSnaplen = 65535;
constexpr unsigned kRingSize = 4096;
constexpr size_t kPoolBytes = 16u << 20;  // copies in flight per port, whatever the snaplen
constexpr unsigned kWriteBurst = 64;

enum Dir : unsigned { kRx = 1, kTx = 2 };

// Written by one lcore each: no cache line shared between lcores.
struct alignas(RTE_CACHE_LINE_SIZE) LcoreCount {
  uint64_t seen = 0, dropped = 0;
};

// One per port that was ever captured; lives until the manager dies.
struct Tap {
  uint16_t port = 0;
  uint32_t snaplen = 0;     // of the pool; a capture with a larger one makes a new pool
  rte_ring* ring = nullptr;  // lcores enqueue (MP), the writer dequeues (SC)
  rte_mempool* pool = nullptr;
  std::atomic<unsigned> dirs{0};  // directions being copied right now (kRx | kTx)
  std::atomic<uint32_t> copy_len{kDefaultSnaplen};
  PortHooks::Set hooks;  // installed now
  LcoreCount count[RTE_MAX_LCORE + 1];                          // +1: a non-EAL thread

  LcoreCount& mine() {
    const unsigned id = rte_lcore_id();
    return count[id < RTE_MAX_LCORE ? id : RTE_MAX_LCORE];
  }
  void totals(uint64_t& seen, uint64_t& dropped) const {
    seen = dropped = 0;
    for (const auto& c : count) {
      seen += __atomic_load_n(&c.seen, __ATOMIC_RELAXED);
      dropped += __atomic_load_n(&c.dropped, __ATOMIC_RELAXED);
    }
  }

  // On the lcore: copy, enqueue, count; never block.
  void copy(uint16_t queue, rte_mbuf** pkts, uint16_t n, rte_pcapng_direction dir) {
    rte_mbuf* copies[RTE_MAX(kWriteBurst, 32u)];
    const uint64_t now = rte_get_tsc_cycles();
    const uint32_t len = copy_len.load(std::memory_order_relaxed);
    LcoreCount& c = mine();
    for (uint16_t done = 0; done < n;) {
      const uint16_t chunk = uint16_t(RTE_MIN(unsigned(n - done), unsigned(RTE_DIM(copies))));
      unsigned k = 0;
      for (uint16_t i = 0; i < chunk; ++i) {
        rte_mbuf* m = rte_pcapng_copy(port, queue, pkts[done + i], pool, len, now, dir);
        if (m != nullptr) copies[k++] = m;
      }
      const unsigned q = rte_ring_enqueue_burst(ring, reinterpret_cast<void**>(copies), k, nullptr);
      if (q < k) rte_pktmbuf_free_bulk(copies + q, k - q);
      __atomic_store_n(&c.seen, c.seen + chunk, __ATOMIC_RELAXED);
      if (q < chunk) __atomic_store_n(&c.dropped, c.dropped + (chunk - q), __ATOMIC_RELAXED);
      done = uint16_t(done + chunk);
    }
  }
};

uint16_t on_rx(uint16_t, uint16_t queue, rte_mbuf** pkts, uint16_t n, uint16_t, void* user) {
  Tap* t = static_cast<Tap*>(user);
  if (n != 0 && (t->dirs.load(std::memory_order_relaxed) & kRx)) t->copy(queue, pkts, n, RTE_PCAPNG_DIRECTION_IN);
  return n;
}

uint16_t on_tx(uint16_t, uint16_t queue, rte_mbuf** pkts, uint16_t n, void* user) {
  Tap* t = static_cast<Tap*>(user);
  if (n != 0 && (t->dirs.load(std::memory_order_relaxed) & kTx)) t->copy(queue, pkts, n, RTE_PCAPNG_DIRECTION_OUT);
  return n;
}

struct Capture {
  uint16_t port = 0;
  unsigned dirs = 0;
  std::string path;
  uint32_t snaplen = kDefaultSnaplen;
  uint64_t limit = 0;  // 0: until stopped
  uint64_t written = 0;
  uint64_t seen0 = 0, dropped0 = 0;  // the tap's totals when it started
  uint64_t seen = 0, dropped = 0;    // final, once ended
  bool running = false;
  std::string end;  // why it ended
  int fd = -1;
  rte_pcapng_t* out = nullptr;
  uint64_t start_ns = 0;
};

const char* dir_name(unsigned d) { return d == (kRx | kTx) ? "both" : d == kRx ? "rx" : "tx"; }

uint64_t wall_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count());
}

}  // namespace

struct CaptureManager::Impl {
  std::mutex mu;  // control thread vs writer thread; never taken by an lcore
  PortHooks hooks;  // declared first: destroyed last, after every Tap it may call
  std::map<uint16_t, std::unique_ptr<Tap>> taps;
  std::map<uint16_t, Capture> caps;  // the latest capture of each port
  std::vector<rte_mempool*> old_pools;  // replaced by a larger snaplen: freed at the end
  std::atomic<bool> quit{false};
  std::thread writer;

  ~Impl() {
    quit = true;
    if (writer.joinable()) writer.join();
    for (auto& [port, c] : caps)
      if (c.running) finish(c, "switch exit");
    for (auto& [port, t] : taps) {
      drain_discard(*t);
      rte_ring_free(t->ring);
      rte_mempool_free(t->pool);
    }
    for (rte_mempool* p : old_pools) rte_mempool_free(p);
  }

  static void drain_discard(Tap& t) {
    rte_mbuf* m[kWriteBurst];
    unsigned n;
    while ((n = rte_ring_dequeue_burst(t.ring, reinterpret_cast<void**>(m), kWriteBurst, nullptr)) > 0)
      rte_pktmbuf_free_bulk(m, n);
  }

  Tap& tap_for(uint16_t port, uint32_t snaplen) {
    auto& t = taps[port];
    if (!t) {
      t = std::make_unique<Tap>();
      t->port = port;
      const std::string name = "agq_cap_r" + std::to_string(port);
      t->ring = rte_ring_create(name.c_str(), kRingSize, int(rte_socket_id()), RING_F_SC_DEQ);
      if (t->ring == nullptr) {
        taps.erase(port);
        throw CommandError{"capture: cannot create a ring: " + std::string(rte_strerror(rte_errno)), ""};
      }
    }
    if (t->pool == nullptr || t->snaplen < snaplen) {
      const uint32_t room = rte_pcapng_mbuf_size(snaplen);
      const unsigned n = unsigned(RTE_MAX(size_t(256), RTE_MIN(size_t(kRingSize - 1), kPoolBytes / (room + 256))));
      static unsigned seq = 0;
      const std::string name = "agq_cap_p" + std::to_string(port) + "_" + std::to_string(seq++);
      rte_mempool* p = rte_pktmbuf_pool_create(name.c_str(), n, 32, 0, uint16_t(RTE_MIN(room, 65535u)),
                                               int(rte_socket_id()));
      if (p == nullptr)
        throw CommandError{"capture: cannot create a pool of " + std::to_string(n) + " mbufs of " +
                               std::to_string(room) + " bytes: " + rte_strerror(rte_errno) +
                               " (a smaller --snaplen needs less memory)",
                           ""};
      if (t->pool) old_pools.push_back(t->pool);  // callbacks of an earlier capture may still use it
      t->pool = p;
      t->snaplen = snaplen;
    }
    return *t;
  }

  void install(Tap& t, unsigned dirs) {
    t.hooks = hooks.install(t.port, (dirs & kRx) ? on_rx : nullptr, (dirs & kTx) ? on_tx : nullptr, &t);
  }

  void uninstall(Tap& t) {
    t.dirs.store(0, std::memory_order_relaxed);
    hooks.remove(t.hooks);
  }

  // Writes what the ring holds (up to the limit). Caller holds mu.
  unsigned write_some(Capture& c, Tap& t) {
    rte_mbuf* m[kWriteBurst];
    const unsigned n = rte_ring_dequeue_burst(t.ring, reinterpret_cast<void**>(m), kWriteBurst, nullptr);
    if (n == 0) return 0;
    unsigned keep = n;
    if (c.limit && c.written + keep > c.limit) keep = unsigned(c.limit - c.written);
    if (keep > 0 && rte_pcapng_write_packets(c.out, m, uint16_t(keep)) < 0) {
      rte_pktmbuf_free_bulk(m, n);
      finish(c, std::string("write error: ") + std::strerror(errno));
      return n;
    }
    rte_pktmbuf_free_bulk(m, n);
    c.written += keep;
    if (c.limit && c.written >= c.limit) finish(c, "count reached");
    return n;
  }

  // Ends a running capture: callbacks off, the rest of the ring written,
  // statistics block, file closed. Caller holds mu (or is the destructor).
  void finish(Capture& c, const std::string& why) {
    if (!c.running) return;
    Tap& t = *taps.at(c.port);
    uninstall(t);
    c.running = false;  // write_some below must not recurse into finish
    rte_mbuf* m[kWriteBurst];
    unsigned n;
    while ((n = rte_ring_dequeue_burst(t.ring, reinterpret_cast<void**>(m), kWriteBurst, nullptr)) > 0) {
      unsigned keep = n;
      if (c.limit && c.written + keep > c.limit) keep = unsigned(c.limit - c.written);
      if (keep > 0 && rte_pcapng_write_packets(c.out, m, uint16_t(keep)) >= 0) c.written += keep;
      rte_pktmbuf_free_bulk(m, n);
    }
    uint64_t seen, dropped;
    t.totals(seen, dropped);
    c.seen = seen - c.seen0;
    c.dropped = dropped - c.dropped0;
    rte_pcapng_write_stats(c.out, c.port, why.c_str(), c.start_ns, wall_ns(), c.seen, c.dropped);
    rte_pcapng_close(c.out);  // closes the fd too
    c.out = nullptr;
    c.fd = -1;
    c.end = why;
  }

  void writer_loop() {
    while (!quit.load()) {
      unsigned moved = 0;
      {
        std::lock_guard g(mu);
        for (auto& [port, c] : caps)
          if (c.running) moved += write_some(c, *taps.at(port));
      }
      // Idle back-off: the ring holds 4096 copies, ~4 ms at 1 Mpps.
      if (moved == 0) std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  }

  std::string start(const std::vector<std::string>& w) {
    auto port_n = control::parse_uint(w[1]);
    if (!port_n) throw CommandError{"'" + w[1] + "' is not a port number", kUsage};
    if (*port_n >= RTE_MAX_ETHPORTS || !PortHooks::port_exists(uint16_t(*port_n)))
      throw CommandError{PortHooks::no_such_port(w[1]), kUsage};
    const uint16_t port = uint16_t(*port_n);
    unsigned dirs;
    if (w[2] == "rx") dirs = kRx;
    else if (w[2] == "tx") dirs = kTx;
    else if (w[2] == "both") dirs = kRx | kTx;
    else throw CommandError{"direction must be rx, tx or both, not '" + w[2] + "'", kUsage};
    Capture c;
    c.port = port;
    c.dirs = dirs;
    c.path = w[3];
    if (c.path.empty() || c.path[0] != '/')
      throw CommandError{"'" + c.path + "': the file must be an absolute path (agqctl makes it one)", kUsage};
    for (size_t i = 4; i < w.size(); i += 2) {
      if (i + 1 >= w.size()) throw CommandError{w[i] + " needs a value", kUsage};
      auto v = control::parse_uint(w[i + 1]);
      if (w[i] == "--count") {
        if (!v || *v == 0) throw CommandError{"--count must be a positive number, not '" + w[i + 1] + "'", kUsage};
        c.limit = *v;
      } else if (w[i] == "--snaplen") {
        if (!v || *v < 64 || *v > kMaxSnaplen)
          throw CommandError{"--snaplen must be 64.." + std::to_string(kMaxSnaplen) + ", not '" + w[i + 1] + "'", kUsage};
        c.snaplen = uint32_t(*v);
      } else {
        throw CommandError{"unknown option '" + w[i] + "'", kUsage};
      }
    }
    std::lock_guard g(mu);
    if (auto it = caps.find(port); it != caps.end() && it->second.running)
      throw CommandError{"port " + w[1] + " is already being captured to " + it->second.path + " ('capture stop " +
                             w[1] + "' first)",
                         ""};
    // The file first: a path that cannot be written changes nothing.
    c.fd = ::open(c.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (c.fd < 0) throw CommandError{"cannot write " + c.path + ": " + std::strerror(errno), ""};
    Tap* t = nullptr;
    try {
      t = &tap_for(port, c.snaplen);
    } catch (...) {
      ::close(c.fd);
      ::unlink(c.path.c_str());
      throw;
    }
    c.out = rte_pcapng_fdopen(c.fd, nullptr, nullptr, "agq-switch", nullptr);
    if (c.out == nullptr) {
      const int err = rte_errno;
      ::close(c.fd);
      ::unlink(c.path.c_str());
      throw CommandError{"cannot start a pcapng file: " + std::string(rte_strerror(err)), ""};
    }
    drain_discard(*t);  // leftovers of an earlier capture of this port
    t->totals(c.seen0, c.dropped0);
    t->copy_len.store(c.snaplen, std::memory_order_relaxed);
    try {
      install(*t, dirs);
    } catch (...) {
      rte_pcapng_close(c.out);
      ::unlink(c.path.c_str());
      throw;
    }
    c.start_ns = wall_ns();
    c.running = true;
    t->dirs.store(dirs, std::memory_order_release);
    caps[port] = std::move(c);
    if (!writer.joinable()) writer = std::thread([this] { writer_loop(); });
    return "";
  }

  std::string stop(const std::vector<std::string>& w) {
    std::lock_guard g(mu);
    if (w.size() == 3) {
      auto p = control::parse_uint(w[2]);
      if (!p) throw CommandError{"'" + w[2] + "' is not a port number", kUsage};
      auto it = caps.find(uint16_t(*p));
      if (*p > 0xFFFF || it == caps.end() || !it->second.running)
        throw CommandError{"no capture running on port " + w[2], ""};
      finish(it->second, "stopped");
      return "";
    }
    for (auto& [port, c] : caps) finish(c, "stopped");
    return "";
  }

  std::string list(bool json) {
    std::lock_guard g(mu);
    control::Columns t;
    t.row({"port", "dir", "file", "snaplen", "count", "written", "seen", "dropped", "state"});
    for (auto& [port, c] : caps) {
      uint64_t seen = c.seen, dropped = c.dropped;
      if (c.running) {
        taps.at(port)->totals(seen, dropped);
        seen -= c.seen0;
        dropped -= c.dropped0;
      }
      t.row({c.port, dir_name(c.dirs), c.path, c.snaplen, c.limit ? control::Cell(c.limit) : control::Cell(nullptr),
             c.written, seen, dropped, c.running ? std::string("running") : "ended: " + c.end});
    }
    return t.output(json);
  }
};

CaptureManager::CaptureManager() : impl_(std::make_unique<Impl>()) {}
CaptureManager::~CaptureManager() = default;

void CaptureManager::stop_all() {
  std::lock_guard g(impl_->mu);
  for (auto& [port, c] : impl_->caps) impl_->finish(c, "switch exit");
}

std::string CaptureManager::command(const std::vector<std::string>& w, bool json) {
  control::check_arg_count(w, 2, 8, kUsage);
  if (w[1] == "list") {
    control::check_arg_count(w, 2, 2, kUsage);
    return impl_->list(json);
  }
  if (w[1] == "stop") {
    control::check_arg_count(w, 2, 3, kUsage);
    return impl_->stop(w);
  }
  control::check_arg_count(w, 4, 8, kUsage);
  return impl_->start(w);
}

}  // namespace agq::observe
