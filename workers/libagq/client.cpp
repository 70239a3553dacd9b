#include "libagq/client.hpp"

#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_ring.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "app/link_watch.hpp"
#include "app/mbuf_frame_io.hpp"
#include "app/ports.hpp"
#include "dataplane/idle_backoff.hpp"
#include "lib/buffer_frame_io.hpp"
#include "libagq/eal_once.hpp"

namespace agq::libagq {

namespace {
constexpr unsigned kRingSize = 4096;  // submissions queued for the poll thread

using Deadline = std::chrono::steady_clock::time_point;
Deadline deadline_of(double s) {
  return std::chrono::steady_clock::now() + std::chrono::microseconds(int64_t(s * 1e6));
}
// The engine of this process's one logical worker.
worker::EngineConfig engine_config(const ClientOptions& o) {
  worker::EngineConfig c;
  c.job = o.job.job;
  c.tuning = o.tuning;
  c.workers = {worker::WorkerIdentity::defaults(o.job.job.job_id, o.job.worker_id, 0)};
  if (o.job.self.ip) c.workers[0].self = o.job.self;
  if (o.job.ps.ip) c.workers[0].dst = o.job.ps;
  return c;
}

// Writes each element's error bound as its chunk's final RESULT is accepted
// (PROTOCOL.md §2: N * (1/2 + 2^d - 1) * 2^e, times the op's scale; a
// chunk still clipped after the redos has none).
class BoundWriter final : public worker::ChunkObserver {
 public:
  std::unordered_map<const worker::AllreduceOp*, OpHandle*> ops;  // ops with a bound buffer
  unsigned n = 2;
  void on_chunk(const worker::ChunkResult& r) override {
    if (r.redo) return;
    auto it = ops.find(r.op);
    if (it == ops.end()) return;
    const OpHandle& h = *it->second;
    const float b = r.overflow ? std::numeric_limits<float>::infinity()
                               : float(worker::agqc::error_bound(n, r.p.exponent, r.p.width - r.width) *
                                       double(std::fabs(h.scale)));
    const uint64_t i0 = r.chunk * r.n_lanes;
    for (unsigned k = 0; k < r.n_valid; ++k) h.bound[i0 + k] = b;
  }
};
}  // namespace

worker::AllreduceTuning training_tuning() {
  worker::AllreduceTuning t;
  t.init_width = 32;
  t.init_scale = 16.0;
  t.error_budget = 1e-4;
  t.margin = 4.0;
  return t;
}

std::string JobParams::validate() const {
  std::string e = job.validate();
  if (!e.empty()) return "job " + std::to_string(job.job_id) + ": " + e;
  if (worker_id >= job.num_workers)
    return "job " + std::to_string(job.job_id) + ": worker id " + std::to_string(worker_id) + " is not below N = " +
           std::to_string(job.num_workers);
  return {};
}

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
  {
    // The job and tuning are checked before the EAL starts.
    if (err = opt.job.validate(); !err.empty()) throw ClientError("libagq: " + err);
    worker::AllreduceEngine e;
    worker::BufferFrameIo io(opt.job.job.slots, worker::agq_frame_len(opt.job.job.lanes));
    if (!e.init(engine_config(opt), io, err))
      throw ClientError("libagq: job " + std::to_string(opt.job.job.job_id) + ": " + err);
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
  // One mbuf per slot stays with the engine (app/mbuf_frame_io.hpp).
  if (!c->ports_->open(opt.connect_timeout_s, err, 1, opt.job.job.slots))
    throw ClientError("libagq: job " + std::to_string(opt.job.job.job_id) + " worker " +
                      std::to_string(opt.job.worker_id) + ": " + err);
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
  h->in = in;
  h->out = out;
  h->bound = bound;
  h->scale = scale;
  h->tag = tag;
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
  const worker::EngineConfig cfg = engine_config(opt_);
  // agq-worker's packet path: an mbuf per slot, a RESULT rewritten in place
  // into the slot's next DATA, tx bursts, bulk free, link watch.
  worker::MbufFrameIo io(*ports_, cfg.job.slots, 0);
  worker::AllreduceEngine eng;
  std::string err;
  if (!io.ok()) err = "no mbufs for " + std::to_string(cfg.job.slots) + " slots (raise ClientOptions::mem_mb)";
  if (err.empty()) eng.init(cfg, io, err);  // validated in open()
  if (!err.empty()) eng.fail("libagq: " + err);
  worker::LinkWatch links(*ports_, true);
  BoundWriter bounds;
  bounds.n = cfg.job.num_workers;
  eng.set_observer(&bounds);
  // Handles whose op the engine holds; completions found by the done callback.
  std::unordered_map<const worker::AllreduceOp*, std::shared_ptr<OpHandle>> live;
  std::vector<std::shared_ptr<OpHandle>> finished;  // completed during the last engine call
  dataplane::IdleBackoff idle(opt_.idle_sleep_us);
  void* boxes[32];
  bool reported = false;
  uint64_t now = worker::now_ns();
  auto submit = [&](const std::shared_ptr<OpHandle>& h) {
    h->keep = worker::make_op(h->tag, h->in, h->out, [&, hp = h.get()](worker::AllreduceOp& o) {
      // On this thread, inside submit(), tick() or on_frame(): apply the
      // scale (DDP: 1 / world size); the handle is finished after the call.
      if (!o.failed && hp->scale != 1.0f)
        for (float& v : hp->out) v *= hp->scale;
      bounds.ops.erase(&o);
      auto it = live.find(&o);
      if (it == live.end()) return;
      finished.push_back(std::move(it->second));
      live.erase(it);
    });
    h->keep->submit_ns = now;
    live.emplace(h->keep.get(), h);
    if (!h->bound.empty()) bounds.ops.emplace(h->keep.get(), h.get());
    eng.submit(h->keep);  // an empty or rejected op completes inside
  };
  auto report = [&] {
    for (auto& h : finished) {
      const worker::AllreduceOp& o = *h->keep;
      OpStats st;
      st.engine = o.stats;
      st.engine.error_bound *= std::fabs(double(h->scale));
      st.elements = h->in.size();
      st.seconds = double(worker::now_ns() - o.submit_ns) * 1e-9;
      finish(h, !o.failed, o.failed ? "libagq: " + o.error : std::string(), st);
      h->keep.reset();
    }
    const unsigned n = unsigned(finished.size());
    finished.clear();
    return n;
  };
  while (!stop_.load(std::memory_order_relaxed)) {
    now = worker::now_ns();
    unsigned work = 0;
    const unsigned n = rte_ring_sc_dequeue_burst(submit_ring_, boxes, 32, nullptr);
    for (unsigned i = 0; i < n; ++i) {
      auto* box = static_cast<std::shared_ptr<OpHandle>*>(boxes[i]);
      submit(*box);
      delete box;
    }
    work += n;
    bool drained = true;
    if (links.up(0))
      work += worker::drain_rx(
          *ports_, 0, 0, [&](rte_mbuf* m) { worker::keep_or_free(io, m, eng.on_frame(worker::bytes_of(m), now)); },
          drained);
    io.free_now();
    work += eng.tick(now, drained);  // timers only once the rx ring is empty
    work += io.flush();
    links.poll(now, [&](uint16_t p, bool up) {
      io.set_link(p, up);
      eng.on_link(up, now);
    });
    work += report();
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
  eng.fail("client closed before the operation completed");
  report();
  unsigned n;
  while ((n = rte_ring_sc_dequeue_burst(submit_ring_, boxes, 32, nullptr)) > 0)
    for (unsigned i = 0; i < n; ++i) {
      auto* box = static_cast<std::shared_ptr<OpHandle>*>(boxes[i]);
      finish(*box, false, "libagq: client closed before the operation completed", (*box)->stats);
      delete box;
    }
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
