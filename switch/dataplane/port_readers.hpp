// The threads that call ports' rx/tx burst functions ("port readers"), and
// the wait an unmap of port memory does for them (pitfall P7).
//
// When a memif peer leaves, DPDK 22.11's memif PMD runs memif_disconnect on
// the EAL interrupt thread: it clears the port's connected flag, then
// munmaps the shared regions (rings and buffers) and frees their records.
// An lcore already inside rte_eth_tx_burst or rx_burst, past its check of
// that flag, then reads unmapped memory: SIGSEGV in eth_memif_tx, in about
// one run in fifteen of a two-lcore CI test whose workers leave while the
// switch still sends to them. The PMD raises no event before the unmap, so
// the application cannot stop its lcores first; but it can make the unmap
// wait. agq-switch and agq-worker interpose munmap (interpose/munmap.cpp):
// a munmap first waits for an RCU grace period (rte_rcu_qsbr) over the port
// readers. Every reader reports a quiescent state between its loop rounds,
// where it is inside no burst call; once each has reported since the unmap
// began, none can still be in a call that saw the flag set, and later calls
// see it clear and return 0. The wait costs the unmapping thread (never an
// lcore) at most one loop round plus one idle back-off sleep, and the
// readers one load and one store of their own cache line per round.
#pragma once

#include <rte_rcu_qsbr.h>

namespace agq::dataplane {

// One port reader: constructed on the reader's own thread before its first
// burst call (it goes online), destroyed after its last (offline). A thread
// may hold several (nested loops): they share one registration.
class PortReader {
 public:
  PortReader();
  ~PortReader();
  PortReader(const PortReader&) = delete;
  PortReader& operator=(const PortReader&) = delete;

  // Between loop rounds, in no burst call.
  void quiescent() const { rte_rcu_qsbr_quiescent(qs_, id_); }

 private:
  rte_rcu_qsbr* qs_;
  unsigned id_;
};

// Returns once every online port reader other than the calling thread has
// passed a quiescent state since the call began (at once when there is
// none). Bounded: after `limit_ms` it gives up and returns false, so a
// reader stuck elsewhere (a debugger, an exit path) never hangs an unmap.
bool wait_for_port_readers(unsigned limit_ms = 1000) noexcept;

// Since start: waits that found a reader mid-round, waits that gave up,
// and the longest wait (the switch's dp.unmap_* counters).
struct PortReaderWaits {
  unsigned long waited, gave_up, longest_us;
};
PortReaderWaits port_reader_waits() noexcept;

}  // namespace agq::dataplane
