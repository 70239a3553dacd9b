// libagq: allreduce through an agq-switch from a training process.
//
//   ClientOptions o;  o.vdev = "net_memif0,role=client,id=0,socket=/run/agq/w0.sock,socket-abstract=no";
//   o.job = {...};                             // or from `agqctl job get ID --json` (python: agq_torch.job_from_switch)
//   auto c = Client::open(o);
//   Future f = c->allreduce(in, out, 1.0f / world, tag);   // many in flight
//   f.get();                                   // throws ClientError with the diagnostic
//
// A Client owns the process's DPDK EAL (its own --file-prefix, started
// once), one port (a memif client of the switch in tests, a NIC queue in
// production) and a poll thread that runs the workers' allreduce engine
// (workers/lib/allreduce_engine.hpp, the same one agq-worker runs: widths
// and exponents per chunk, retransmission, PS fallback, OVERFLOW redo,
// switch restarts): it drains submissions from an rte_ring, receives,
// sends, services timers and backs off when idle. Callers are never blocked
// by it except when they wait on a Future; buffers must stay alive and
// untouched until their Future is ready.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "lib/allreduce_engine.hpp"

struct rte_ring;
namespace agq::worker { class Ports; }

namespace agq::libagq {

// The job as the switch holds it (`job get`, PROTOCOL.md §12) and this
// process's place in it.
struct JobParams {
  worker::AllreduceJob job;       // id, N, slots, window, lanes, row_shift, max_width
  unsigned worker_id = 0;         // this process's worker id (its rank)
  worker::Endpoint self{}, ps{};  // addresses; ip 0 = lib/agq_wire's default identities
  std::string validate() const;
};

// Training defaults: a tensor's first operation asks for 32 bits at a fine
// step (no previous aggregate to size it), the error budget is 1e-4 of the
// tensor's largest value and the margin 4x (gradients change from step to
// step more than synthetic rounds do: fewer OVERFLOW redos).
worker::AllreduceTuning training_tuning();

struct OpStats {
  worker::OpStats engine;         // chunks, widths, fallbacks, redos, retransmissions, error bound (scaled)
  uint64_t elements = 0;
  double seconds = 0;             // submit to completion, on the poll thread's clock
};

class ClientError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ClientOptions {
  std::string vdev;                  // the --vdev of the port towards the switch
  std::string file_prefix;           // EAL --file-prefix; empty = "agqlib<pid>"
  std::vector<std::string> eal_extra;  // more EAL arguments (e.g. hugepage flags instead of --no-huge)
  int mem_mb = 128;                  // --no-huge -m
  std::string log_level = "warning";
  double connect_timeout_s = 5.0;    // memif connect + link up
  uint32_t idle_sleep_us = 200;      // poll thread back-off cap
  bool completion_queue = false;     // keep finished handles for take_completed() (the Python binding)
  JobParams job;
  worker::AllreduceTuning tuning = training_tuning();
};

// One operation's state, shared by the caller's Future and the poll thread.
struct OpHandle {
  uint64_t id = 0;
  std::span<const float> in;
  std::span<float> out, bound;
  float scale = 1.0f;
  uint32_t tag = 0;
  worker::OpPtr keep;  // poll thread only: the engine's op while it runs
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool ok = false;
  std::string error;
  OpStats stats;
};

class Future {
 public:
  Future() = default;
  explicit Future(std::shared_ptr<OpHandle> h) : h_(std::move(h)) {}
  bool valid() const { return bool(h_); }
  bool ready() const;
  // Waits up to timeout_s (< 0: forever); true if ready.
  bool wait(double timeout_s = -1) const;
  // Waits; throws ClientError if the operation failed. The result is in the output buffer.
  const OpStats& get() const;
  const std::shared_ptr<OpHandle>& handle() const { return h_; }

 private:
  std::shared_ptr<OpHandle> h_;
};

class Client {
 public:
  // Throws ClientError naming what is missing (switch socket, link, job).
  static std::unique_ptr<Client> open(const ClientOptions& opt);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sum over the job's workers of `in`, times `scale`, into `out` (which may
  // be `in`); `bound` (optional, same length) receives each element's error
  // bound. Throws std::invalid_argument on NaN/Inf or mismatched lengths.
  Future allreduce(std::span<const float> in, std::span<float> out, float scale = 1.0f, uint32_t tag = 0,
                   std::span<float> bound = {});

  // Operations completed since the last call, oldest first; waits up to
  // timeout_s for one if none. For a completion thread (the Python binding).
  std::vector<std::shared_ptr<OpHandle>> take_completed(double timeout_s);

  // Stops the poll thread (pending operations fail with "client closed") and
  // disconnects the port in order (the switch stops polling it first, P7).
  void close();
  bool closed() const { return stop_.load(); }
  const JobParams& job() const { return opt_.job; }
  // Engine diagnostic once it failed (the switch stopped answering, ...).
  std::string diagnostic() const;

 private:
  explicit Client(const ClientOptions& opt);
  void poll_main();
  void finish(const std::shared_ptr<OpHandle>& h, bool ok, const std::string& err, const OpStats& st);

  ClientOptions opt_;
  std::unique_ptr<worker::Ports> ports_;
  rte_ring* submit_ring_ = nullptr;
  std::thread poller_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> next_id_{1};
  mutable std::mutex done_mu_;
  std::condition_variable done_cv_;
  std::deque<std::shared_ptr<OpHandle>> completed_;
  std::string diagnostic_;
};

}  // namespace agq::libagq
