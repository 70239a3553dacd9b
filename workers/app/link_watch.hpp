// Link loss and reconnection of a worker's or PS's ports (docs/PROTOCOL.md
// §11, workers/README.md "Link loss and switch restarts").
//
// A memif client whose server went away (agq-switch killed) sees its link
// go down and never reconnects by itself: the port must be stopped and
// started again, which connects to whatever serves the socket now. Stopping
// a port frees the memif rings that rx_burst/tx_burst read, so no other
// thread may be inside the port's burst functions meanwhile (pitfall P7's
// crash, on purpose). Hence:
//   - one thread per process restarts ports (the `owner`: lcore 0 of a
//     multi-lcore worker, the only thread otherwise);
//   - with several lcores, the owner first closes the port in a PortGate
//     and waits -- without blocking anyone, polling rte_rcu_qsbr's check --
//     until every other lcore has passed a quiescent state (the end of a
//     loop iteration) since; from then on they see the port closed and keep
//     off it; the owner stops/starts it and opens the gate again. No lcore
//     ever waits for another: a closed port is simply down for them.
// Every lcore's engine sees every change (down, then up after the restart),
// so each one keeps its retransmission timers counting while the link is
// down and redoes its in-flight sequences when it comes back.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "app/ports.hpp"
#include "dataplane/port_readers.hpp"

struct rte_rcu_qsbr;

namespace agq::worker {

// The lcores of one process that use the same ports. Reader side: every
// lcore j calls online(j) on its own thread before touching a port,
// quiescent(j) after each loop iteration's last port access (LinkWatch::poll
// does), offline(j) once it is done with the ports for good.
class PortGate {
 public:
  PortGate(unsigned lcores, uint16_t ports);
  ~PortGate();
  PortGate(const PortGate&) = delete;
  PortGate& operator=(const PortGate&) = delete;
  bool ok() const { return qs_ != nullptr; }

  void online(unsigned j);
  void offline(unsigned j);
  void quiescent(unsigned j);
  bool closed(uint16_t p) const { return closed_[p].load(std::memory_order_acquire) != 0; }

  // Owner side: close p (the others keep off it once quiet() is true), then
  // open it again after the restart.
  void close(uint16_t p);
  bool quiet(unsigned owner);  // every other online lcore passed a quiescent state since close()
  void open(uint16_t p) { closed_[p].store(0, std::memory_order_release); }

 private:
  rte_rcu_qsbr* qs_ = nullptr;
  std::unique_ptr<std::atomic<uint8_t>[]> closed_;
  uint64_t token_ = 0;
};

// One lcore's view of the link of every port, looked at every 20 ms (and
// at every call for ports the owner closed). It also makes its thread a
// port reader (dataplane/port_readers.hpp) for its lifetime: construct it
// on the polling thread, before the first burst call. A change goes to
// on_change(port, up); up(p) says whether this lcore may poll and transmit
// on p now. The owner restarts a port that stays down: 300 ms after it went
// down, then every 500 ms until the link is back.
class LinkWatch {
 public:
  // Single thread on the ports (a PS, libagq's poll thread, a one-lcore
  // worker): it restarts ports itself when may_restart.
  LinkWatch(Ports& ports, bool may_restart);
  // Lcore `self` of a multi-lcore process: lcore 0 restarts ports through
  // the gate; the others follow it.
  LinkWatch(Ports& ports, PortGate& gate, unsigned self);

  bool up(uint16_t p) const { return up_[p] != 0; }
  uint64_t restarts() const { return restarts_; }          // port restarts that connected
  uint64_t failed_restarts() const { return failed_restarts_; }  // dev_start failed (nobody serves the socket yet)

  // Call at the end of every loop iteration, after the last port access.
  template <typename F>
  void poll(uint64_t now, F&& on_change) {
    reader_.quiescent();
    if (gate_) {
      gate_->quiescent(self_);
      if (self_ != 0) {
        for (uint16_t p = 0; p < ports_.count(); ++p)
          if (up_[p] && gate_->closed(p)) change(p, false, now, on_change);
      } else if (closing_ >= 0 && gate_->quiet(0)) {
        restart(uint16_t(closing_));
        gate_->open(uint16_t(closing_));
        closing_ = -1;
      }
    }
    if (now < next_) return;
    next_ = now + 20'000'000;
    for (uint16_t p = 0; p < ports_.count(); ++p) {
      bool u = ports_.link_up(p) && !(gate_ && gate_->closed(p));
      if (owner_ && !u && !up_[p] && now >= next_restart_[p] && closing_ < 0) {
        next_restart_[p] = now + 500'000'000;
        if (gate_) {
          gate_->close(p);  // restarted by a later call, once the others keep off it
          closing_ = p;
          continue;
        }
        restart(p);
        u = ports_.link_up(p);
      }
      if (u != up(p)) change(p, u, now, on_change);
    }
  }

 private:
  template <typename F>
  void change(uint16_t p, bool u, uint64_t now, F& on_change) {
    if (!u) next_restart_[p] = now + 300'000'000;
    up_[p] = u;
    on_change(p, u);
  }
  void restart(uint16_t p);

  dataplane::PortReader reader_;
  Ports& ports_;
  PortGate* gate_ = nullptr;
  unsigned self_ = 0;
  bool owner_;
  int closing_ = -1;  // owner: the port closed in the gate, waiting for the others
  std::vector<uint8_t> up_;
  std::vector<uint64_t> next_restart_;
  uint64_t next_ = 0, restarts_ = 0, failed_restarts_ = 0;
};

}  // namespace agq::worker
