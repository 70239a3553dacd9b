// Per-lcore command rings: how the control thread reaches the program
// instances without stopping the lcores (control::Executor, pipes.hpp).
//
// A command is a pointer on the lcore's rte_ring (single producer: the
// control thread, serialised by Pipes; single consumer: the lcore). The lcore
// drains its ring at the top of every poll round, idle or not, runs each
// command on its own instance and marks it done; the control thread waits
// for every ack with a timeout. Nobody waits on the lcore side.
//
// The command's state decides who may still touch it: Pending -> Running ->
// Done by the lcore, or Pending -> Cancelled by a control thread that gave up
// waiting (then the lcore skips it and frees it). So a closure never runs
// after its caller returned, and never runs twice.
//
// An lcore that is not polling (not started yet, or stopped) runs nothing:
// the control thread then runs the closure itself, under the lcore's
// hand-over mutex, which the lcore takes only to start and stop polling.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "control/pipes.hpp"

struct rte_ring;

namespace agq::dataplane {

class CommandRings final : public control::Executor {
 public:
  // One ring per lcore. Throws std::runtime_error when a ring cannot be made.
  CommandRings(unsigned lcores, std::chrono::milliseconds timeout);
  ~CommandRings() override;
  CommandRings(const CommandRings&) = delete;
  CommandRings& operator=(const CommandRings&) = delete;

  void run(const std::vector<unsigned>& instances, const std::function<void(unsigned)>& fn) override;

  // --- lcore side ---
  // Runs every command waiting on lcore i's ring; returns how many ran and,
  // when any did, adds the TSC cycles they took to *cycles (the lcore's
  // pause for the control plane).
  unsigned serve(unsigned i, uint64_t* cycles = nullptr);
  // Called by lcore i when it starts (true) and stops (false) polling; on
  // stop it runs what is still queued.
  void set_polling(unsigned i, bool on);

 private:
  struct Command;
  struct alignas(64) Lane {
    rte_ring* ring = nullptr;
    std::mutex handover;
    bool polling = false;  // under handover
  };
  std::unique_ptr<Lane[]> lanes_;
  unsigned n_;
  std::chrono::milliseconds timeout_;
};

}  // namespace agq::dataplane
