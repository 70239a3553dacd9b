#include "dataplane/frame_lender.hpp"

#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>

namespace agq::dataplane {
namespace {

// What a lender's pool knows: the frames' home, and whether a frame
// freed into it is the lender's again (lent) or goes home (given up).
struct LendConfig {
  rte_mempool* home;
  bool gone;
};

// The handler's enqueue: where rte_pktmbuf_free / rte_mempool_put of a
// frame whose m->pool is a lender's pool ends (no cache: cache_size 0).
int lend_enqueue(rte_mempool* mp, void* const* objs, unsigned n) {
  const auto* cfg = static_cast<const LendConfig*>(mp->pool_config);
  for (unsigned i = 0; i < n; ++i) static_cast<rte_mbuf*>(objs[i])->pool = cfg->home;
  if (cfg->gone) rte_mempool_put_bulk(cfg->home, objs, n);
  return 0;
}
// The pools hold nothing of their own: nothing to allocate, hand out or count.
int lend_alloc(rte_mempool*) { return 0; }
void lend_free(rte_mempool*) {}
int lend_dequeue(rte_mempool*, void**, unsigned) { return -ENOBUFS; }
unsigned lend_count(const rte_mempool*) { return 0; }

constexpr const char* kOps = "agq_frame_lender";

void register_ops() {
  static std::once_flag once;
  static int result = 0;
  std::call_once(once, [] {
    static rte_mempool_ops ops{};
    std::snprintf(ops.name, sizeof ops.name, "%s", kOps);
    ops.alloc = lend_alloc;
    ops.free = lend_free;
    ops.enqueue = lend_enqueue;
    ops.dequeue = lend_dequeue;
    ops.get_count = lend_count;
    result = rte_mempool_register_ops(&ops);
  });
  if (result < 0)
    throw std::runtime_error(std::string("frame lender: rte_mempool_register_ops: ") + rte_strerror(-result));
}

// The size a pool must declare for a cache of kCache (DPDK's check: the
// flush threshold, 1.5x the cache, fits in the pool); never populated.
constexpr unsigned kCache = RTE_MEMPOOL_CACHE_MAX_SIZE;
constexpr unsigned kDeclared = kCache * 2;

rte_mempool* lender_pool(rte_mempool* home, const std::string& name, bool gone) {
  // The lent pool: the largest cache, which a send of up to kMaxBurst
  // frames never flushes; the gone pool: no cache, every free straight to
  // the handler (and home). The home pool's pktmbuf private area (data
  // room, private size) in case a driver reads it through m->pool.
  rte_mempool* mp = rte_mempool_create_empty(name.c_str(), gone ? 1 : kDeclared, home->elt_size, gone ? 0 : kCache,
                                             home->private_data_size, home->socket_id, 0);
  if (!mp) throw std::runtime_error("frame lender: cannot create pool " + name + ": " + rte_strerror(rte_errno));
  auto* cfg = new LendConfig{home, gone};
  if (int ret = rte_mempool_set_ops_byname(mp, kOps, cfg); ret != 0) {
    rte_mempool_free(mp);
    delete cfg;
    throw std::runtime_error("frame lender: cannot set the handler of " + name + ": " + rte_strerror(-ret));
  }
  std::memcpy(rte_mempool_get_priv(mp), rte_mempool_get_priv(home), home->private_data_size);
  return mp;
}

void free_lender_pool(rte_mempool* mp) {
  if (!mp) return;
  auto* cfg = static_cast<LendConfig*>(mp->pool_config);
  rte_mempool_free(mp);
  delete cfg;
}

}  // namespace

FrameLender::FrameLender(rte_mempool* home, const std::string& name) : home_(home) {
  register_ops();
  lent_ = lender_pool(home, name + "_l", false);
  try {
    gone_ = lender_pool(home, name + "_g", true);
  } catch (...) {
    free_lender_pool(lent_);
    throw;
  }
}

FrameLender::~FrameLender() {
  free_lender_pool(lent_);
  // A frame given up may still be in a port's queue, and come back
  // through gone_ when the port is stopped, possibly after us: then gone_
  // stays (a few hundred bytes until the EAL's cleanup).
  if (given_up_ == 0) free_lender_pool(gone_);
}

}  // namespace agq::dataplane
