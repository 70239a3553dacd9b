// The packet-mbuf pool of a process (switch, workers, bench_gen), laid out
// for the packet path. With hugepages it is rte_pktmbuf_pool_create's pool.
// Without them (--no-huge: CI, containers, laptops) DPDK's own memory is a
// shared memfd of 4 KiB pages, and two costs follow that hugepages avoid:
//   - geometry: DPDK keeps each object inside one page, so a default mbuf
//     gets a page of its own and all headers share one L1 set;
//   - translation: every mbuf touch is a 4 KiB TLB entry, and a pool of
//     thousands of mbufs is far more pages than the L1 TLB holds.
// So without hugepages the pool is built on memory of its own: anonymous,
// 2 MiB aligned and advised for transparent huge pages (MADV_HUGEPAGE, then
// MADV_COLLAPSE where the kernel has it), populated as 2 MiB pages so
// objects pack back to back. Where THP is off the memory stays 4 KiB pages,
// still packed. The vdev PMDs (pcap, null, ring, memif without zero-copy,
// tap, af_packet) copy frames or pass pointers and never need the pool in
// DPDK's memseg list; --no-huge already rules out secondary processes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

struct rte_mempool;

namespace agq::dataplane {

// How a pool's memory was obtained (the switch's start-up banner, tests).
struct PoolMemory {
  bool own = false;          // built on memory of its own (no hugepages)
  std::size_t bytes = 0;     // mapped for the objects
  std::size_t huge_bytes = 0;  // of which backed by transparent huge pages at creation
};

// A pool of `n` packet mbufs (no private area, at least the default data
// room), `cache` per-lcore cache, on `socket`. nullptr with rte_errno set on
// failure. `mem` (optional) says how it was laid out.
rte_mempool* create_mbuf_pool(const std::string& name, unsigned n, unsigned cache, int socket,
                              PoolMemory* mem = nullptr);
// rte_mempool_free() frees it, its own memory included.

}  // namespace agq::dataplane
