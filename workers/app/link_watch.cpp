#include "app/link_watch.hpp"

#include <rte_rcu_qsbr.h>

#include <cstdlib>
#include <cstring>

namespace agq::worker {

PortGate::PortGate(unsigned lcores, uint16_t ports) : closed_(new std::atomic<uint8_t>[ports]) {
  for (uint16_t p = 0; p < ports; ++p) closed_[p].store(0, std::memory_order_relaxed);
  // Plain aligned memory (no EAL needed: the unit test runs without one).
  const size_t need = rte_rcu_qsbr_get_memsize(lcores);
  if (lcores == 0 || need <= 1) return;
  const size_t sz = (need + RTE_CACHE_LINE_SIZE - 1) / RTE_CACHE_LINE_SIZE * RTE_CACHE_LINE_SIZE;
  auto* v = static_cast<rte_rcu_qsbr*>(std::aligned_alloc(RTE_CACHE_LINE_SIZE, sz));
  if (!v) return;
  std::memset(static_cast<void*>(v), 0, sz);
  if (rte_rcu_qsbr_init(v, lcores) != 0) {
    std::free(v);
    return;
  }
  for (unsigned j = 0; j < lcores; ++j) rte_rcu_qsbr_thread_register(v, j);
  qs_ = v;
}

PortGate::~PortGate() { std::free(qs_); }

void PortGate::online(unsigned j) { rte_rcu_qsbr_thread_online(qs_, j); }
void PortGate::offline(unsigned j) { rte_rcu_qsbr_thread_offline(qs_, j); }
void PortGate::quiescent(unsigned j) { rte_rcu_qsbr_quiescent(qs_, j); }

void PortGate::close(uint16_t p) {
  closed_[p].store(1, std::memory_order_release);
  // The token is published with release order after the flag: a reader that
  // reports a quiescent state for it (acquire) sees the port closed next.
  token_ = rte_rcu_qsbr_start(qs_);
}

bool PortGate::quiet(unsigned owner) {
  rte_rcu_qsbr_quiescent(qs_, owner);  // the owner itself is between its port accesses
  return rte_rcu_qsbr_check(qs_, token_, false) == 1;
}

LinkWatch::LinkWatch(Ports& ports, bool may_restart)
    : ports_(ports), owner_(may_restart), up_(ports.count(), 1), next_restart_(ports.count(), 0) {}

LinkWatch::LinkWatch(Ports& ports, PortGate& gate, unsigned self)
    : ports_(ports), gate_(&gate), self_(self), owner_(self == 0), up_(ports.count(), 1),
      next_restart_(ports.count(), 0) {}

void LinkWatch::restart(uint16_t p) {
  if (ports_.reconnect(p))
    ++restarts_;
  else
    ++failed_restarts_;
}

}  // namespace agq::worker
