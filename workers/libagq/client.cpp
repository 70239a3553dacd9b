#include "libagq/client.hpp"

#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_ring.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <unordered_map>

#include "app/ports.hpp"
#include "dataplane/idle_backoff.hpp"
#include "libagq/eal_once.hpp"

namespace agq::libagq {

namespace {
constexpr unsigned kRingSize = 4096;  // submissions queued for the poll thread

using Deadline = std::chrono::steady_clock::time_point;
Deadline deadline_of(double s) {
  return std::chrono::steady_clock::now() + std::chrono::microseconds(int64_t(s * 1e6));
}
}  // namespace

bool Future::ready() const {
  std::lock_guard lk(h_->mu);
  return h_->done;
}

bool Future::wait(double timeout_s) const {
  std::unique_lock lk(h_->mu);
  if (timeout_s < 0) {
    h_->cv.wait(lk, [&] { return h_->done; });
    return true;
  }
  return h_->cv.wait_until(lk, deadline_of(timeout_s), [&] { return h_->done; });
}

const OpStats& Future::get() const {
  wait();
  if (!h_->ok) throw ClientError(h_->error);
  return h_->stats;
}

Client::Client(const ClientOptions& opt) : opt_(opt) {}

std::unique_ptr<Client> Client::open(const ClientOptions& opt) {
  std::string err;
  if (opt.vdev.empty()) throw ClientError("libagq: no port: set ClientOptions::vdev (e.g. a net_memif client)");
  EngineConfig probe = opt.engine;
  {
    OpEngine e;  // validates the job before the EAL starts
    if (!e.init(probe, err)) throw ClientError("libagq: " + err);
  }
  std::vector<std::string> args = {"libagq", "--no-pci", "--no-telemetry", "--log-level=" + opt.log_level,
                                   "--file-prefix",
                                   opt.file_prefix.empty() ? "agqlib" + std::to_string(getpid()) : opt.file_prefix,
                                   "-l", "0", "--vdev=" + opt.vdev};
  if (opt.eal_extra.empty()) {
    args.push_back("--no-huge");
    args.push_back("-m");
    args.push_back(std::to_string(opt.mem_mb));
  } else {
    args.insert(args.end(), opt.eal_extra.begin(), opt.eal_extra.end());
  }
  if (!start_eal_once(args, err)) throw ClientError("libagq: " + err);
  std::unique_ptr<Client> c(new Client(opt));
  c->ports_ = std::make_unique<worker::Ports>();
  if (!c->ports_->open(opt.connect_timeout_s, err))
    throw ClientError("libagq: job " + std::to_string(opt.engine.job.job_id) + " worker " +
                      std::to_string(opt.engine.job.worker_id) + ": " + err);
  if (c->ports_->count() != 1)
    throw ClientError("libagq: expected exactly one port towards the switch, the EAL has " +
                      std::to_string(c->ports_->count()));
  const std::string ring_name = "agqsub" + std::to_string(getpid());
  c->submit_ring_ = rte_ring_lookup(ring_name.c_str());
  if (!c->submit_ring_) c->submit_ring_ = rte_ring_create(ring_name.c_str(), kRingSize, SOCKET_ID_ANY, RING_F_SC_DEQ);
  if (!c->submit_ring_) throw ClientError(std::string("libagq: rte_ring_create: ") + rte_strerror(rte_errno));
  c->poller_ = std::thread([p = c.get()] { p->poll_main(); });
  return c;
}

Client::~Client() { close(); }

std::string Client::diagnostic() const {
  std::lock_guard lk(done_mu_);
  return diagnostic_;
}

Future Client::allreduce(std::span<const float> in, std::span<float> out, float scale, uint32_t tag,
                         std::span<float> bound) {
  if (out.size() != in.size())
    throw std::invalid_argument("allreduce: output has " + std::to_string(out.size()) + " elements, input " +
                                std::to_string(in.size()));
  if (!bound.empty() && bound.size() != in.size())
    throw std::invalid_argument("allreduce: bound has " + std::to_string(bound.size()) + " elements, input " +
                                std::to_string(in.size()));
  if (!std::isfinite(scale)) throw std::invalid_argument("allreduce: scale must be finite");
  // NaN/Inf would be clipped into garbage (encode() reports them as clips):
  // refuse them here, in the caller's thread, with where they are.
  uint64_t bad = 0, first = 0;
  for (uint64_t i = 0; i < in.size(); ++i)
    if (!std::isfinite(in[i])) {
      if (!bad) first = i;
      ++bad;
    }
  if (bad)
    throw std::invalid_argument("allreduce: the tensor holds " + std::to_string(bad) + " NaN/Inf value" +
                                (bad > 1 ? "s" : "") + " (first at element " + std::to_string(first) + ": " +
                                std::to_string(in[first]) + "); agq aggregates finite values only");
  if (stop_.load()) throw ClientError("libagq: allreduce on a closed client");
  auto h = std::make_shared<OpHandle>();
  h->id = next_id_.fetch_add(1);
  h->op = {in.data(), out.data(), bound.empty() ? nullptr : bound.data(), in.size(), scale, tag, h->id};
  auto* box = new std::shared_ptr<OpHandle>(h);
  // Multi-producer enqueue: lock-free; only a full ring (4096 queued
  // operations) makes the caller wait.
  while (rte_ring_mp_enqueue(submit_ring_, box) != 0) {
    if (stop_.load()) {
      delete box;
      throw ClientError("libagq: allreduce on a closed client");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return Future(h);
}

void Client::finish(const std::shared_ptr<OpHandle>& h, bool ok, const std::string& err, const OpStats& st) {
  {
    std::lock_guard lk(h->mu);
    h->ok = ok;
    h->error = err;
    h->stats = st;
    h->done = true;
  }
  h->cv.notify_all();
  if (opt_.completion_queue) {
    {
      std::lock_guard lk(done_mu_);
      completed_.push_back(h);
    }
    done_cv_.notify_all();
  }
}

std::vector<std::shared_ptr<OpHandle>> Client::take_completed(double timeout_s) {
  std::unique_lock lk(done_mu_);
  done_cv_.wait_until(lk, deadline_of(timeout_s), [&] { return !completed_.empty() || stop_.load(); });
  std::vector<std::shared_ptr<OpHandle>> out(completed_.begin(), completed_.end());
  completed_.clear();
  return out;
}

void Client::poll_main() {
  rte_thread_register();  // an lcore id, so mempool caches work for this thread
  OpEngine eng;
  std::string err;
  eng.init(opt_.engine, err);  // validated in open()
  std::unordered_map<uint64_t, std::shared_ptr<OpHandle>> live;
  dataplane::IdleBackoff idle(opt_.idle_sleep_us);
  void* boxes[32];
  bool reported = false;
  while (!stop_.load(std::memory_order_relaxed)) {
    const uint64_t now = worker::now_ns();
    unsigned work = 0;
    const unsigned n = rte_ring_sc_dequeue_burst(submit_ring_, boxes, 32, nullptr);
    for (unsigned i = 0; i < n; ++i) {
      auto* box = static_cast<std::shared_ptr<OpHandle>*>(boxes[i]);
      live.emplace((*box)->id, *box);
      eng.submit((*box)->op, now);
      delete box;
    }
    work += n;
    work += ports_->poll(0, [&](uint16_t, std::span<const uint8_t> b) { eng.on_frame(b, now); });
    work += eng.tick(now, *ports_, 0);
    work += ports_->flush();
    auto& done = eng.completions();
    for (auto& c : done) {
      auto it = live.find(c.cookie);
      if (it == live.end()) continue;
      finish(it->second, c.ok, c.ok ? std::string() : "libagq: " + c.error, c.stats);
      live.erase(it);
    }
    work += unsigned(done.size());
    done.clear();
    if (eng.failed() && !reported) {
      reported = true;
      std::lock_guard lk(done_mu_);
      diagnostic_ = eng.diagnostic();
    }
    if (work)
      idle.reset();
    else
      idle.idle();
  }
  // Whatever is still queued or in flight fails: nobody will answer it now.
  const unsigned n = rte_ring_sc_dequeue_burst(submit_ring_, boxes, 32, nullptr);
  for (unsigned i = 0; i < n; ++i) {
    auto* box = static_cast<std::shared_ptr<OpHandle>*>(boxes[i]);
    live.emplace((*box)->id, *box);
    delete box;
  }
  for (auto& [id, h] : live) finish(h, false, "libagq: client closed before the operation completed", h->stats);
  rte_thread_unregister();
}

void Client::close() {
  if (stop_.exchange(true)) return;
  if (poller_.joinable()) poller_.join();
  done_cv_.notify_all();
  if (ports_) ports_->close();
  if (submit_ring_) {
    rte_ring_free(submit_ring_);
    submit_ring_ = nullptr;
  }
}

}  // namespace agq::libagq
