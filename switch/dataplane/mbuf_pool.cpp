#include "dataplane/mbuf_pool.hpp"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_mempool.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1; older kernels answer EINVAL, which is fine
#endif

namespace agq::dataplane {
namespace {

constexpr std::size_t kHuge = std::size_t(2) << 20;

// The data room of a pool in DPDK's own memory without hugepages (the
// fallback when a pool of its own cannot be had). DPDK keeps every object
// inside one 4 KiB page unless the object is larger than a page, so a
// default 2368-byte object gets a page to itself: every mbuf header, and
// every frame's first bytes, then sit at the same offset of their page, in
// the same L1 set, and a burst evicts its own lines. A room raised until
// the object is just over a page lets DPDK pack them (65 lines apart).
// Only where a page holds a single default object (not with 16/64 KiB pages).
uint16_t page_sized_room() {
  const long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return RTE_MBUF_DEFAULT_BUF_SIZE;
  rte_mempool_objsz sz{};
  const uint32_t def = rte_mempool_calc_obj_size(uint32_t(sizeof(rte_mbuf)) + RTE_MBUF_DEFAULT_BUF_SIZE, 0, &sz);
  if (def == 0 || uint32_t(page) / def >= 2) return RTE_MBUF_DEFAULT_BUF_SIZE;
  uint32_t room = std::max<uint32_t>(RTE_MBUF_DEFAULT_BUF_SIZE, uint32_t(page) - uint32_t(sizeof(rte_mbuf)));
  while (room < 65535 - RTE_CACHE_LINE_SIZE &&
         rte_mempool_calc_obj_size(uint32_t(sizeof(rte_mbuf)) + room, 0, &sz) <= uint32_t(page))
    room += RTE_CACHE_LINE_SIZE;
  return uint16_t(room);
}

// The pool's own memory: an anonymous mapping, unmapped with the pool.
struct Region {
  void* base = nullptr;
  std::size_t len = 0;
};

void unmap_region(rte_mempool_memhdr*, void* opaque) {
  auto* r = static_cast<Region*>(opaque);
  munmap(r->base, r->len);
  delete r;
}

// Bytes of [addr, addr + len) backed by transparent huge pages, from
// /proc/self/smaps (AnonHugePages of the mapping that holds addr).
std::size_t thp_bytes(const void* addr) {
  FILE* f = std::fopen("/proc/self/smaps", "r");
  if (!f) return 0;
  char line[512];
  bool in = false;
  std::size_t kb = 0;
  const auto a = reinterpret_cast<uintptr_t>(addr);
  while (std::fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && std::strchr(line, '-') < std::strchr(line, ' ')) {
      in = a >= lo && a < hi;
      continue;
    }
    unsigned long v;
    if (in && std::sscanf(line, "AnonHugePages: %lu kB", &v) == 1) {
      kb = v;
      break;
    }
  }
  std::fclose(f);
  return kb * 1024;
}

// An empty pktmbuf pool of n objects with `room` bytes of data room.
// RTE_MEMPOOL_F_NO_IOVA_CONTIG: without it DPDK would keep each object
// inside one system page (4 KiB) even in memory populated as 2 MiB pages;
// with IOVA as VA every object is contiguous anyway.
rte_mempool* empty_pool(const std::string& name, unsigned n, unsigned cache, uint16_t room, int socket) {
  rte_mempool* mp = rte_mempool_create_empty(name.c_str(), n, unsigned(sizeof(rte_mbuf)) + room, cache,
                                             sizeof(rte_pktmbuf_pool_private), socket,
                                             RTE_MEMPOOL_F_NO_IOVA_CONTIG);
  if (!mp) return nullptr;
  if (int ret = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), nullptr); ret != 0) {
    rte_mempool_free(mp);
    rte_errno = -ret;
    return nullptr;
  }
  rte_pktmbuf_pool_private priv{};
  priv.mbuf_data_room_size = room;
  priv.mbuf_priv_size = 0;
  rte_pktmbuf_pool_init(mp, &priv);
  return mp;
}

// The pool on memory of its own (see the header), or nullptr (then the
// caller takes DPDK's memory). Needs IOVA as VA: the vdev PMDs never
// translate, and every byte of the mapping is then "contiguous".
rte_mempool* own_memory_pool(const std::string& name, unsigned n, unsigned cache, int socket, PoolMemory* mem) {
  if (rte_eal_iova_mode() != RTE_IOVA_VA) return nullptr;
  rte_mempool* mp = empty_pool(name, n, cache, RTE_MBUF_DEFAULT_BUF_SIZE, socket);
  if (!mp) return nullptr;
  const std::size_t obj = std::size_t(mp->header_size) + mp->elt_size + mp->trailer_size;
  const std::size_t len = (std::size_t(n) * obj + RTE_CACHE_LINE_SIZE + kHuge - 1) & ~(kHuge - 1);
  // 2 MiB aligned: map one huge page more and trim both ends.
  void* raw = mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    rte_mempool_free(mp);
    return nullptr;
  }
  const auto r = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t base = (r + kHuge - 1) & ~uintptr_t(kHuge - 1);
  if (base > r) munmap(raw, base - r);
  if (base + len < r + len + kHuge) munmap(reinterpret_cast<void*>(base + len), r + len + kHuge - (base + len));
  void* addr = reinterpret_cast<void*>(base);
  madvise(addr, len, MADV_HUGEPAGE);  // THP "madvise" mode: huge pages at first touch
  auto* region = new Region{addr, len};
  const int got = rte_mempool_populate_virt(mp, static_cast<char*>(addr), len, kHuge, unmap_region, region);
  if (got <= 0 || mp->populated_size != n) {
    // A chunk that made it into the pool owns the region (unmap_region runs
    // in rte_mempool_free); otherwise it is still ours.
    if (mp->nb_mem_chunks == 0) {
      delete region;
      munmap(addr, len);
    }
    rte_mempool_free(mp);
    return nullptr;
  }
  rte_mempool_obj_iter(mp, rte_pktmbuf_init, nullptr);
  // Pages faulted in as 4 KiB (THP defrag off, fragmentation) are merged
  // now, while no lcore of ours runs; EINVAL on kernels before 6.1. Only
  // if there are any: MADV_COLLAPSE drains every CPU's LRU lists and waits
  // for a kworker on each, and with other processes' lcores busy-polling
  // every CPU that wait has held a bench_gen in D state for over a minute
  // (__lru_add_drain_all; the memif churn test). With THP's defrag in
  // "madvise" mode (Debian's default) the first touch already gave huge
  // pages, so the call is skipped.
  std::size_t huge = thp_bytes(addr);
  if (huge < len) {
    madvise(addr, len, MADV_COLLAPSE);
    huge = thp_bytes(addr);
  }
  if (mem) *mem = PoolMemory{true, len, huge};
  return mp;
}

}  // namespace

rte_mempool* create_mbuf_pool(const std::string& name, unsigned n, unsigned cache, int socket, PoolMemory* mem) {
  if (mem) *mem = PoolMemory{};
  if (rte_eal_has_hugepages())
    return rte_pktmbuf_pool_create(name.c_str(), n, cache, 0, RTE_MBUF_DEFAULT_BUF_SIZE, socket);
  if (rte_mempool* mp = own_memory_pool(name, n, cache, socket, mem)) return mp;
  return rte_pktmbuf_pool_create(name.c_str(), n, cache, 0, page_sized_room(), socket);
}

}  // namespace agq::dataplane
