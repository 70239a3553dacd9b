#include "dataplane/command_rings.hpp"

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include <exception>
#include <stdexcept>
#include <string>
#include <thread>

namespace agq::dataplane {

namespace {
constexpr unsigned kRingSize = 64;  // commands in flight per lcore (one per request in practice)
enum State : int { kPending, kRunning, kDone, kCancelled };
}  // namespace

struct CommandRings::Command {
  const std::function<void(unsigned)>* fn;
  unsigned instance;
  std::atomic<int> state{kPending};
  std::exception_ptr error;  // what the closure threw on the lcore (e.g. bad_alloc)
};

CommandRings::CommandRings(unsigned lcores, std::chrono::milliseconds timeout)
    : lanes_(new Lane[lcores]), n_(lcores), timeout_(timeout) {
  for (unsigned i = 0; i < n_; ++i) {
    const std::string name = "agq_cmd" + std::to_string(i);
    lanes_[i].ring = rte_ring_create(name.c_str(), kRingSize, int(rte_socket_id()), RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (!lanes_[i].ring)
      throw std::runtime_error("command ring " + name + ": " + rte_strerror(rte_errno) + " (raise EAL -m)");
  }
}

CommandRings::~CommandRings() {
  for (unsigned i = 0; i < n_; ++i) {
    if (!lanes_[i].ring) continue;
    void* p;
    while (rte_ring_dequeue(lanes_[i].ring, &p) == 0) delete static_cast<Command*>(p);  // only cancelled ones
    rte_ring_free(lanes_[i].ring);
  }
}

unsigned CommandRings::serve(unsigned i, uint64_t* cycles) {
  rte_ring* r = lanes_[i].ring;
  if (rte_ring_empty(r)) return 0;  // the common case: two loads
  const uint64_t start = rte_rdtsc();
  void* p[8];
  unsigned ran = 0;
  for (unsigned n; (n = rte_ring_dequeue_burst(r, p, 8, nullptr)) != 0;) {
    for (unsigned k = 0; k < n; ++k) {
      auto* c = static_cast<Command*>(p[k]);
      int expected = kPending;
      if (!c->state.compare_exchange_strong(expected, kRunning, std::memory_order_acq_rel)) {
        delete c;  // cancelled by a control thread that stopped waiting
        continue;
      }
      try {
        (*c->fn)(c->instance);
      } catch (...) {
        c->error = std::current_exception();  // rethrown on the control thread
      }
      c->state.store(kDone, std::memory_order_release);  // c belongs to the control thread again
      ++ran;
    }
  }
  if (cycles) *cycles += rte_rdtsc() - start;
  return ran;
}

void CommandRings::set_polling(unsigned i, bool on) {
  std::lock_guard g(lanes_[i].handover);
  lanes_[i].polling = on;
  if (!on) serve(i);
}

void CommandRings::run(const std::vector<unsigned>& instances, const std::function<void(unsigned)>& fn) {
  std::vector<Command*> sent;
  std::string failure;
  for (unsigned i : instances) {
    if (i >= n_) throw std::runtime_error("no lcore " + std::to_string(i));
    Lane& lane = lanes_[i];
    std::lock_guard g(lane.handover);
    if (!lane.polling) {  // the lcore cannot start polling while we hold handover
      fn(i);
      continue;
    }
    auto* c = new Command{&fn, i, {kPending}, nullptr};
    if (rte_ring_enqueue(lane.ring, c) != 0) {
      delete c;
      failure = "command ring of lcore " + std::to_string(i) + " is full";
      break;
    }
    sent.push_back(c);
  }
  // Wait for every ack; the lcores run their commands in parallel.
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  std::vector<unsigned> late;
  std::exception_ptr error;
  for (Command* c : sent) {
    while (c->state.load(std::memory_order_acquire) != kDone) {
      if (std::chrono::steady_clock::now() >= deadline) {
        int expected = kPending;
        if (c->state.compare_exchange_strong(expected, kCancelled, std::memory_order_acq_rel)) {
          late.push_back(c->instance);  // the lcore frees it when it gets to it
          c = nullptr;
          break;
        }
        // Running: it is about to finish; wait for it, the closure uses our stack.
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    if (c && c->error && !error) error = c->error;
    delete c;
  }
  if (!late.empty()) {
    std::string who;
    for (unsigned i : late) who += (who.empty() ? "" : ", ") + std::to_string(i);
    throw std::runtime_error("lcore(s) " + who + " did not answer within " + std::to_string(timeout_.count()) +
                             " ms; the change reached only the other instances");
  }
  if (error) std::rethrow_exception(error);
  if (!failure.empty()) throw std::runtime_error(failure);
}

}  // namespace agq::dataplane
