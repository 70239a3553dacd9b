// A thread of the switch's own control side (the control socket, the rate
// reporter), started with rte_ctrl_thread_create so that it runs where
// DPDK runs its own control threads: on the CPUs the EAL was allowed that
// no lcore polls (the main lcore's CPU only when every CPU polls). A plain
// std::thread started after rte_eal_init inherits the main lcore's
// affinity and would wake up on a dataplane CPU, taking it from the lcore
// and refilling its caches on every wake-up (the control socket polls every
// 10 ms). Threads these threads start (capture writers, the meter's lease)
// inherit their affinity in turn.
#pragma once

#include <rte_lcore.h>

#include <pthread.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <utility>

namespace agq::control {

class ControlThread {
 public:
  ControlThread() = default;
  ControlThread(const char* name, std::function<void()> body) : body_(std::move(body)) {
    if (rte_ctrl_thread_create(&tid_, name, nullptr, &ControlThread::entry, this) != 0)
      throw std::runtime_error(std::string("cannot start control thread ") + name);
    started_ = true;
  }
  ControlThread(const ControlThread&) = delete;
  ControlThread& operator=(const ControlThread&) = delete;
  ~ControlThread() { join(); }

  bool joinable() const { return started_; }
  void join() {
    if (!started_) return;
    pthread_join(tid_, nullptr);
    started_ = false;
  }

 private:
  static void* entry(void* self) {
    static_cast<ControlThread*>(self)->body_();
    return nullptr;
  }
  std::function<void()> body_;
  pthread_t tid_{};
  bool started_ = false;
};

}  // namespace agq::control
