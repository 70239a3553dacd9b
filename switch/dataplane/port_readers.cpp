#include "dataplane/port_readers.hpp"

#include <rte_pause.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace agq::dataplane {
namespace {

// Readers at once: every lcore of a process, and then some.
constexpr unsigned kMaxReaders = 128;

// The process's one QSBR variable, made by the first reader and never
// freed: a munmap may run during exit, after static destructors.
std::atomic<rte_rcu_qsbr*> g_qs{nullptr};
std::atomic<uint64_t> g_used[kMaxReaders / 64];  // reader ids taken
std::atomic<unsigned long> g_waited{0}, g_gave_up{0}, g_longest_us{0};

// This thread's registration (depth 0: none).
struct ThreadReader {
  unsigned id = 0;
  unsigned depth = 0;
};
thread_local ThreadReader t_reader;

rte_rcu_qsbr* qsbr() {
  static std::once_flag once;
  std::call_once(once, [] {
    const size_t sz = rte_rcu_qsbr_get_memsize(kMaxReaders);
    void* mem = std::aligned_alloc(RTE_CACHE_LINE_SIZE, (sz + RTE_CACHE_LINE_SIZE - 1) / RTE_CACHE_LINE_SIZE *
                                                            RTE_CACHE_LINE_SIZE);
    auto* v = static_cast<rte_rcu_qsbr*>(mem);
    if (!v || rte_rcu_qsbr_init(v, kMaxReaders) != 0) {
      std::fprintf(stderr, "agq: cannot set up the port readers' rte_rcu_qsbr (%u threads)\n", kMaxReaders);
      std::abort();
    }
    g_qs.store(v, std::memory_order_release);
  });
  return g_qs.load(std::memory_order_acquire);
}

unsigned take_id() {
  for (;;) {
    for (unsigned w = 0; w < kMaxReaders / 64; ++w) {
      uint64_t used = g_used[w].load(std::memory_order_relaxed);
      while (~used) {
        const unsigned bit = unsigned(__builtin_ctzll(~used));
        if (g_used[w].compare_exchange_weak(used, used | (uint64_t(1) << bit), std::memory_order_acq_rel))
          return w * 64 + bit;
      }
    }
    std::fprintf(stderr, "agq: more than %u threads poll ports at once\n", kMaxReaders);
    std::abort();
  }
}

void give_id(unsigned id) {
  g_used[id / 64].fetch_and(~(uint64_t(1) << (id % 64)), std::memory_order_acq_rel);
}

}  // namespace

PortReader::PortReader() : qs_(qsbr()) {
  if (t_reader.depth++ == 0) {
    t_reader.id = take_id();
    rte_rcu_qsbr_thread_register(qs_, t_reader.id);
    rte_rcu_qsbr_thread_online(qs_, t_reader.id);
  }
  id_ = t_reader.id;
}

PortReader::~PortReader() {
  if (--t_reader.depth == 0) {
    rte_rcu_qsbr_thread_offline(qs_, id_);
    rte_rcu_qsbr_thread_unregister(qs_, id_);
    give_id(id_);
  }
}

bool wait_for_port_readers(unsigned limit_ms) noexcept {
  rte_rcu_qsbr* v = g_qs.load(std::memory_order_acquire);
  if (!v) return true;  // no thread has polled a port yet
  // The token's release orders everything the unmapping thread did before
  // (the PMD's clearing of its connected flag) before any reader's
  // acknowledgement of it.
  const uint64_t t = rte_rcu_qsbr_start(v);
  if (t_reader.depth) rte_rcu_qsbr_quiescent(v, t_reader.id);  // a reader unmapping itself: between rounds
  if (rte_rcu_qsbr_check(v, t, false) == 1) return true;
  g_waited.fetch_add(1, std::memory_order_relaxed);
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::milliseconds(limit_ms);
  struct NoteLongest {
    std::chrono::steady_clock::time_point start;
    ~NoteLongest() {
      const auto us = (unsigned long)std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - start).count();
      unsigned long prev = g_longest_us.load(std::memory_order_relaxed);
      while (us > prev && !g_longest_us.compare_exchange_weak(prev, us, std::memory_order_relaxed)) {
      }
    }
  } note{start};
  // A busy lcore answers within a round (microseconds): spin a little.
  // Then sleep between looks: the lcore we wait for may share this CPU
  // (EAL's interrupt thread runs on the main lcore's CPU when every CPU is
  // an lcore), and spinning would only hold it off.
  for (unsigned spins = 0; rte_rcu_qsbr_check(v, t, false) != 1; ++spins) {
    if (spins < 256) {
      rte_pause();
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      g_gave_up.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return true;
}

PortReaderWaits port_reader_waits() noexcept {
  return {g_waited.load(std::memory_order_relaxed), g_gave_up.load(std::memory_order_relaxed),
          g_longest_us.load(std::memory_order_relaxed)};
}

}  // namespace agq::dataplane
