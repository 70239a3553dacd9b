// The agq protocol's roles around the DPDK-free engines (lib/agq_*):
// options -> engine config, the shared poll loop, the summary (text or JSON).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>

#include <sys/resource.h>

#include <rte_lcore.h>
#include <rte_launch.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_ring.h>

#include "app/link_watch.hpp"
#include "app/mbuf_frame_io.hpp"
#include "app/poll_loop.hpp"
#include "app/ps_address_check.hpp"
#include "dataplane/idle_backoff.hpp"
#include "app/run.hpp"
#include "lib/agq_ps_engine.hpp"
#include "lib/agq_worker_engine.hpp"
#include "lib/npy.hpp"

namespace agq::worker {

namespace {

std::string hist_json(const std::array<uint64_t, 9>& h) {
  Json j;
  for (int i = 1; i <= 8; ++i)
    if (h[i]) j.num(std::to_string(4 * i).c_str(), h[i]);
  return j.done();
}

// The engine's recovered uses by cause: count, mean and longest ms.
std::string recovered_json(const EngineStats& es) {
  static const char* const kWhy[3] = {"rack", "probe", "timer"};
  Json j;
  for (size_t k = 0; k < 3; ++k)
    j.raw(kWhy[k], Json()
                       .num("uses", es.recovered[k])
                       .num("mean_ms", es.recovered[k] ? double(es.recovered_ns[k]) / double(es.recovered[k]) * 1e-6 : 0.0)
                       .num("max_ms", double(es.recovered_max_ns[k]) * 1e-6)
                       .done());
  return j.done();
}

std::string hist_text(const std::array<uint64_t, 9>& h) {
  std::string s;
  for (int i = 1; i <= 8; ++i)
    if (h[i]) {
      if (!s.empty()) s += ' ';  // piecewise: GCC 12's -Wrestrict false positive on "lit" + string
      s += std::to_string(4 * i);
      s += "b:";
      s += std::to_string(h[i]);
    }
  return s.empty() ? "-" : s;
}

std::string per_round_json(const AgqStats& s) {
  std::string out = "[";
  for (size_t r = 0; r < s.round_seqs.size(); ++r) {
    if (r) out += ',';
    char b[32];
    std::snprintf(b, sizeof b, "%.4g", s.round_seqs[r] ? double(s.round_granted_sum[r]) / double(s.round_seqs[r]) : 0.0);
    out += b;
  }
  return out + "]";
}

// One lcore's part of an agq worker process (PROTOCOL.md §10): its engine
// (the slots of the shards s with (s mod Q) mod L == j), its queue j on
// every port, its mbufs, and the ring other lcores hand it RESULTs on.
struct Part {
  unsigned j = 0, queue = 0;
  std::unique_ptr<MbufFrameIo> io;
  AgqWorkerEngine eng;
  rte_ring* ring = nullptr;
  uint64_t handed_off = 0;
  uint64_t handoff_drops = 0;  // the owner's ring was full: dropped as if lost (its timers recover)
  uint64_t port_restarts = 0, failed_restarts = 0;  // lcore 0 restarts ports
};

struct Process {
  std::vector<std::unique_ptr<Part>> parts;
  Ports* ports = nullptr;
  const Options* o = nullptr;
  // Several lcores: lcore 0 restarts a port whose link stays down, the
  // others kept off it (app/link_watch.hpp).
  std::unique_ptr<PortGate> gate;
  std::atomic<unsigned> finished{0};
  std::atomic<bool> failed{false};
  // The main lcore's view of the job (round 0's start to its end): process
  // CPU time, poll rounds, empty ones, idle sleeps -- whether the job was
  // CPU-bound or waited (several processes share a core on small hosts).
  uint64_t cpu_start_ns = 0, cpu_end_ns = 0, polls = 0, empty_polls = 0, sleeps = 0;
};

// The job's CPU time and poll loop figures (Process), and the whole
// process's context switches (getrusage).
std::string process_json(const Process& pr) {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return Json()
      .num("job_cpu_s", pr.cpu_end_ns > pr.cpu_start_ns ? double(pr.cpu_end_ns - pr.cpu_start_ns) * 1e-9 : 0.0)
      .num("job_polls", pr.polls).num("job_empty_polls", pr.empty_polls).num("job_sleeps", pr.sleeps)
      .num("voluntary_switches", uint64_t(ru.ru_nvcsw))
      .num("involuntary_switches", uint64_t(ru.ru_nivcsw))
      .done();
}

uint64_t process_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

// A received frame's owner part: RESULTs of another part's slot go to it
// (a switch lcore that is not the shard's owner, a PS_RESULT); the rest here.
unsigned owner_of(Part& me, const Process& pr, rte_mbuf* m) {
  if (pr.parts.size() == 1) return me.j;
  const uint8_t* h = find_agq_header(bytes_of(m));
  if (!h) return me.j;
  const EngineConfig& c = me.eng.engine().config();
  const uint32_t slot = uint32_t(h[6] << 8 | h[7]);
  return slot < c.job.slots ? c.part_of(slot) : me.j;
}

// The agq worker's poll loop on the mbuf io, one per lcore: rx drained
// first (bursts, prefetch, a RESULT adopted as its slot's next DATA, the
// rest freed in bulk), then the engine's sends and timers, tx bursts, link
// watch (every lcore's engine sees the link go down and come back; lcore 0
// restarts the port). A part that is done keeps serving its queue
// (hand-offs to the others) until every part is done or one failed.
void agq_worker_loop(Process& pr, Part& me) {
  Ports& ports = *pr.ports;
  const Options& o = *pr.o;
  AgqWorkerEngine& eng = me.eng;
  MbufFrameIo& io = *me.io;
  const bool main_part = me.j == 0, single = pr.parts.size() == 1;
  dataplane::IdleBackoff idle(o.idle_sleep_us);
  Progress progress;
  const uint64_t period = main_part ? uint64_t(o.progress_s * 1e9) : 0;
  uint64_t next_progress = now_ns() + period;
  if (pr.gate) pr.gate->online(me.j);
  LinkWatch links = single ? LinkWatch(ports, true) : LinkWatch(ports, *pr.gate, me.j);
  auto on_link = [&](uint16_t p, bool u) {
    io.set_link(p, u);
    const uint64_t t = now_ns();
    eng.on_link(u, t);
    if (main_part)
      std::fprintf(stderr, "[worker] link %s on %s: %s\n", u ? "up" : "DOWN", ports.names()[p].c_str(),
                   u ? "resending every sequence in flight (every lcore)"
                     : "retransmission timers keep counting; restarting the port every 500 ms");
  };
  progress.line("worker", eng.counters(), eng.elements_done(), eng.outstanding(), now_ns());
  if (main_part) {
    std::string names;
    for (const auto& n : ports.names()) names += (names.empty() ? "" : " ") + n;
    std::fprintf(stderr, "[worker] ready: link up on %s (%zu lcore%s)\n", names.c_str(), pr.parts.size(),
                 single ? "" : "s");
  }
  constexpr unsigned kRx = 32;
  rte_mbuf* m[kRx];
  bool counted = false;
  while (!g_stop && !pr.failed.load(std::memory_order_relaxed) &&
         pr.finished.load(std::memory_order_acquire) < pr.parts.size()) {
    uint64_t now = now_ns();
    unsigned work = 0;
    bool drained = true;  // every rx queue came back short: no RESULT sits unread
    for (uint16_t p = 0; p < ports.count(); ++p)
      if (links.up(p))
        work += drain_rx(
          ports, p, uint16_t(me.queue),
          [&](rte_mbuf* x) {
            const unsigned owner = owner_of(me, pr, x);
            if (owner == me.j)
              keep_or_free(io, x, eng.on_frame(p, bytes_of(x), now));
            else if (rte_ring_enqueue(pr.parts[owner]->ring, x) == 0)
              ++me.handed_off;  // the owner's ring (PROTOCOL.md §10's hand-off)
            else {
              ++me.handoff_drops;  // full: as lost, never a wait; the owner's timers recover
              io.release(x);
            }
          },
          drained);
    if (me.ring) {
      // Frames other lcores received for our slots (the port index does
      // not matter to the engine: one identity per logical worker).
      const unsigned n = rte_ring_dequeue_burst(me.ring, reinterpret_cast<void**>(m), kRx, nullptr);
      for (unsigned i = 0; i < n; ++i) keep_or_free(io, m[i], eng.on_frame(0, bytes_of(m[i]), now));
      if (n == kRx) drained = false;
      work += n;
    }
    io.free_now();
    now = now_ns();
    work += eng.tick(now, drained);  // timers only once the rx ring is empty
    work += io.flush();
    if (eng.failed()) {
      pr.failed.store(true, std::memory_order_relaxed);
      break;
    }
    if (eng.finished() && !counted) {
      counted = true;
      pr.finished.fetch_add(1, std::memory_order_acq_rel);
    }
    links.poll(now, on_link);  // after the iteration's last port access (a quiescent state)
    if (period && now >= next_progress) {
      std::fprintf(stderr, "%s\n", progress.line("worker", eng.counters(), eng.elements_done(), eng.outstanding(), now).c_str());
      next_progress = now + period;
    }
    const bool in_job = main_part && eng.start_ns() && !counted;
    if (in_job && !pr.cpu_start_ns) pr.cpu_start_ns = process_cpu_ns();
    if (in_job) ++pr.polls, pr.empty_polls += !work;
    if (work)
      idle.reset();
    else if (idle.idle() && in_job)
      ++pr.sleeps;
    if (main_part && counted && !pr.cpu_end_ns) pr.cpu_end_ns = process_cpu_ns();
  }
  links.poll(now_ns(), on_link);  // ports lcore 0 closed meanwhile are left alone
  for (int i = 0; i < 100 && io.flush(); ++i) {
  }
  me.port_restarts = links.restarts();
  me.failed_restarts = links.failed_restarts();
  if (pr.gate) pr.gate->offline(me.j);
}

int part_main(void* arg) {
  auto* a = static_cast<std::pair<Process*, Part*>*>(arg);
  agq_worker_loop(*a->first, *a->second);
  return 0;
}

}  // namespace

int run_agq_worker(const Options& o, Ports& ports) {
  AgqWorkerConfig cfg;
  cfg.job = o.agq;
  cfg.source = o.source;
  cfg.seed = o.seed;
  cfg.ids = o.ids;
  cfg.ports.clear();
  for (size_t i = 0; i < o.ids.size(); ++i) cfg.ports.push_back(uint16_t(i % ports.count()));
  cfg.port_names = ports.names();
  cfg.init_width = o.init_width;
  cfg.init_scale = o.init_scale;
  cfg.error_budget = o.error_budget;
  cfg.margin = o.margin;
  cfg.min_width_slack = o.min_width_slack;
  cfg.fixed_width = o.fixed_width;
  cfg.error_feedback = o.error_feedback_on;
  cfg.rto_ns = uint64_t(o.rto_ms * 1e6);
  cfg.rto_min_ns = uint64_t(o.rto_min_ms * 1e6);
  cfg.reo_min_ns = uint64_t(o.reo_min_us * 1e3);
  cfg.verify_every = o.verify_every;
  cfg.lanes = uint8_t(o.lanes);
  cfg.rto_max_ns = uint64_t(o.rto_max_ms * 1e6);
  cfg.max_retries = o.max_retries;
  cfg.retry_time_ns = uint64_t(o.retry_time_s * 1e9);
  cfg.reply_timeout_ns = uint64_t(o.reply_timeout_s * 1e9);
  cfg.max_print = o.max_print;
  cfg.barrier = true;
  cfg.max_width = uint8_t(o.max_width);
  cfg.row_shift = uint8_t(o.row_shift);
  cfg.switch_lcores = uint16_t(o.switch_lcores);
  for (const auto& h : o.hosts) {
    WorkerIdentity w = WorkerIdentity::defaults(o.agq.job_id, h.id);
    std::memcpy(w.self.mac.data(), h.mac, 6);
    w.self.ip = h.ip;
    if (o.have_ps) {
      std::memcpy(w.dst.mac.data(), o.ps.mac, 6);
      w.dst.ip = o.ps.ip;
    }
    cfg.identities.push_back(w);
  }
  // One part per EAL lcore (-l), each on its own queue of every port.
  std::vector<unsigned> lcores{rte_get_main_lcore()};
  unsigned lc;
  RTE_LCORE_FOREACH_WORKER(lc) lcores.push_back(lc);
  const unsigned L = unsigned(lcores.size());
  for (uint16_t p = 0; p < ports.count(); ++p)
    if (ports.queues(p) < L) {
      std::fprintf(stderr, "agq-worker: port %s has %u queues for %u lcores\n", ports.names()[p].c_str(),
                   ports.queues(p), L);
      return 2;
    }
  cfg.parts = L;
  cfg.queues = L;
  std::string err;
  auto grads = AgqWorkerEngine::make_gradients(cfg, err);
  if (!grads) {
    std::fprintf(stderr, "agq-worker: %s\n", err.c_str());
    return 2;
  }
  auto rounds = AgqRounds::make(cfg, *grads);
  Process pr;
  pr.ports = &ports;
  pr.o = &o;
  if (L > 1) {
    pr.gate = std::make_unique<PortGate>(L, ports.count());
    if (!pr.gate->ok()) {
      std::fprintf(stderr, "agq-worker: cannot create the port gate (rte_rcu_qsbr) for %u lcores\n", L);
      return 2;
    }
  }
  for (unsigned j = 0; j < L; ++j) {
    auto part = std::make_unique<Part>();
    part->j = part->queue = j;
    part->io = std::make_unique<MbufFrameIo>(ports, uint32_t(o.ids.size()) * o.agq.slots, j);
    if (!part->io->ok()) {
      std::fprintf(stderr, "agq-worker: no mbufs for %zu x %u slots (raise EAL -m)\n", o.ids.size(), o.agq.slots);
      return 2;
    }
    AgqWorkerConfig pc = cfg;
    pc.part = j;
    if (!part->eng.init(pc, err, part->io.get(), grads, rounds)) {
      std::fprintf(stderr, "agq-worker: %s\n", err.c_str());
      return 2;
    }
    if (L > 1) {
      const std::string name = "agqw_handoff" + std::to_string(j);
      part->ring = rte_ring_create(name.c_str(), o.handoff_ring, int(rte_socket_id()), RING_F_SC_DEQ);
      if (!part->ring) {
        std::fprintf(stderr, "agq-worker: cannot create the hand-off ring %s\n", name.c_str());
        return 2;
      }
    }
    pr.parts.push_back(std::move(part));
  }
  std::vector<std::pair<Process*, Part*>> args;
  for (auto& p : pr.parts) args.push_back({&pr, p.get()});
  for (unsigned j = 1; j < L; ++j) rte_eal_remote_launch(part_main, &args[j], lcores[j]);
  part_main(&args[0]);
  rte_eal_mp_wait_lcore();
  for (auto& p : pr.parts)
    if (p->ring) {
      void* x;
      while (rte_ring_dequeue(p->ring, &x) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(x));
      rte_ring_free(p->ring);
    }

  // The process's figures: every part's, summed.
  AgqWorkerEngine& eng = pr.parts[0]->eng;
  Counters c = eng.counters();
  AgqStats s = eng.stats();
  EngineStats es = eng.engine_stats();
  uint64_t start = eng.start_ns(), last = eng.last_result_ns(), elements_done = eng.elements_done(), handoff = 0;
  const AgqWorkerEngine* failed = eng.failed() ? &eng : nullptr;
  for (size_t j = 1; j < pr.parts.size(); ++j) {
    AgqWorkerEngine& e = pr.parts[j]->eng;
    add_counters(c, e.counters());
    s.add(e.stats());
    const EngineStats& x = e.engine_stats();
    es.fast_retransmissions += x.fast_retransmissions;
    es.tail_probes += x.tail_probes;
    es.timer_scans += x.timer_scans;
    es.spurious += x.spurious;
    es.below_min_width += x.below_min_width;
    es.chunks_over_1ms += x.chunks_over_1ms;
    es.chunks_over_5ms += x.chunks_over_5ms;
    es.max_chunk_ns = std::max(es.max_chunk_ns, x.max_chunk_ns);
    for (size_t k = 0; k < 3; ++k) {
      es.recovered[k] += x.recovered[k];
      es.recovered_ns[k] += x.recovered_ns[k];
      es.recovered_max_ns[k] = std::max(es.recovered_max_ns[k], x.recovered_max_ns[k]);
    }
    for (size_t k = 0; k < 4; ++k) es.last_op_progress_ns[k] = std::max(es.last_op_progress_ns[k], x.last_op_progress_ns[k]);
    es.switch_restarts = std::max(es.switch_restarts, x.switch_restarts);
    es.link_downs = std::max(es.link_downs, x.link_downs);
    start = std::min(start, e.start_ns());
    last = std::max(last, e.last_result_ns());
    elements_done += e.elements_done();
    if (!failed && e.failed()) failed = &e;
  }
  uint64_t handoff_drops = 0, port_restarts = 0, failed_restarts = 0;
  std::string downs = "[", restarts_seen = "[";
  for (auto& p : pr.parts) {
    handoff += p->handed_off;
    handoff_drops += p->handoff_drops;
    port_restarts += p->port_restarts;
    failed_restarts += p->failed_restarts;
    if (p->j) {  // piecewise: GCC 12's -Wrestrict false positive on "lit" + string
      downs += ',';
      restarts_seen += ',';
    }
    downs += std::to_string(p->eng.engine_stats().link_downs);
    restarts_seen += std::to_string(p->eng.engine_stats().switch_restarts);
  }
  downs += "]";
  restarts_seen += "]";
  // Throughput from the first DATA to the last RESULT: start-up and linger excluded.
  // (from round 0's start, after the barrier op every worker had to reach)
  const double secs = last > start ? double(last - start) * 1e-9 : 0.0;
  auto [rc, status] = outcome_of(failed ? *failed : eng, s.mismatches || s.bad_header);
  if (failed && pr.parts.size() > 1 && !g_stop) {
    // The message above lists the slots of the lcore that gave up first;
    // the others stopped with it.
    std::string others;
    for (auto& p : pr.parts)
      if (&p->eng != failed) {
        if (!others.empty()) others += ", ";
        others += "lcore " + std::to_string(p->j) + ": " + std::to_string(p->eng.outstanding()) + " in flight";
      }
    for (auto& p : pr.parts)
      if (&p->eng == failed)
        std::fprintf(stderr,
                     "agq-worker: that was lcore %u of %zu (the slots of the shards s with s mod %zu == %u); the "
                     "other lcores stopped with it (%s)\n",
                     p->j, pr.parts.size(), pr.parts.size(), p->j, others.c_str());
  }
  if (failed && !g_stop && !o.from_switch && s.results == 0) {
    // Nothing came back to a worker on its default identity: the usual cause
    // is a switch whose job lists other addresses (its DATA are dropped as
    // drops_agq_bad_worker). Name what this process sent with.
    for (unsigned id : o.ids) {
      const Endpoint me = agq_worker_endpoint(o.agq.job_id, id);
      const uint8_t* m = me.mac.data();
      std::fprintf(stderr,
                   "agq-worker: worker %u sent as ip %u.%u.%u.%u, mac %02x:%02x:%02x:%02x:%02x:%02x (its default "
                   "address: no --switch-ctl/--job-file); a switch whose job %u lists another ip, mac or port for "
                   "worker %u drops its DATA (agqctl counters: drops_agq_bad_worker): take the job from the switch "
                   "with --switch-ctl SOCKET|tcp:HOST:PORT --job %u\n",
                   id, me.ip >> 24, (me.ip >> 16) & 255, (me.ip >> 8) & 255, me.ip & 255, m[0], m[1], m[2], m[3], m[4],
                   m[5], unsigned(o.agq.job_id), id, unsigned(o.agq.job_id));
    }
  }
  if (!o.output.empty() && s.rounds_done == o.agq.rounds) {
    // The last round's aggregate as the job sees it: identical in every worker.
    std::vector<float> agg = eng.aggregate(0);
    agg.resize(o.agq.elements);
    if (!save_float32_npy(o.output, agg, err)) {
      std::fprintf(stderr, "agq-worker: %s\n", err.c_str());
      if (rc == 0) rc = 1;
    }
  }
  std::string ids;
  for (unsigned id : o.ids) {
    if (!ids.empty()) ids += ',';
    ids += std::to_string(id);
  }
  const double eps = secs > 0 ? double(o.agq.elements) * o.agq.rounds * o.ids.size() / secs : 0.0;
  const double avg = s.avg_granted_bits();
  const double saving = avg > 0 ? 32.0 / avg : 0.0;
  const double row_seqs = s.row_samples ? double(s.row_seqs_sum) / double(s.row_samples) : 0.0;
  const double row_bits = s.row_samples ? double(s.row_bits_sum) / double(s.row_samples) : 0.0;
  if (o.json) {
    std::printf(
        "%s\n",
        Json()
            .str("role", "worker").str("protocol", "agq").str("status", status).str("ids", ids)
            .num("job_id", uint64_t(o.agq.job_id)).num("workers", uint64_t(o.agq.num_workers))
            .num("rounds", uint64_t(o.agq.rounds)).num("chunks", o.agq.chunks())
            .num("rounds_done", s.rounds_done).num("seconds", secs).num("elements_done", elements_done)
            .raw("process", process_json(pr))
            .num("lcores", uint64_t(pr.parts.size())).num("handed_off", handoff).num("handoff_drops", handoff_drops)
            .num("elements_per_s", eps).num("results", s.results).str("verify", o.verify)
            .str("error_feedback", o.error_feedback_on ? "on" : "off")
            .num("min_width_slack", uint64_t(o.min_width_slack)).num("fixed_width", uint64_t(o.fixed_width))
            .num("below_min_width", es.below_min_width)
            .num("checked", s.checked).num("exact", s.exact)
            .num("mismatches", s.mismatches).num("bad_header", s.bad_header).num("fallbacks", s.fallbacks)
            .num("overflow_results", s.overflow_results).num("redos", s.redos)
            .num("retransmissions", s.retransmissions).num("max_retries_seen", s.max_retries_seen)
            .num("duplicate_results", s.duplicate_results)
            .raw("req_widths", hist_json(s.req_hist)).raw("granted_widths", hist_json(s.granted_hist))
            .raw("avg_granted_bits_per_round", per_round_json(s))
            .raw("memory", Json()
                               .num("sequences", s.seqs).num("aggregated_in_switch", s.seqs_aggregated)
                               .num("avg_req_bits", s.avg_req_bits()).num("avg_granted_bits", avg)
                               .num("baseline_bits", uint64_t(32)).num("saving_x", saving)
                               .num("seqs_per_row_half_mean", row_seqs).num("seqs_per_row_half_max", s.row_seqs_max)
                               .num("bits_per_row_half_mean", row_bits).num("bits_per_row_half_max", s.row_bits_max)
                               .done())
            .raw("quantization_error", Json()
                                           .num("elements", s.error.elements).num("clipped", s.error.clipped)
                                           .num("max_abs", s.error.max_abs).num("rms", s.error.rms())
                                           .num("max_over_bound", s.error.max_over_bound)
                                           .num("bound", s.error_bound)
                                           .done())
            .raw("engine", Json()
                               .num("srtt_us", es.srtt_ns * 1e-3).num("rttvar_us", es.rttvar_ns * 1e-3)
                               .num("rto_us", double(es.rto_ns) * 1e-3).num("rtt_samples", es.rtt_samples)
                               .num("min_rtt_us", es.min_rtt_ns * 1e-3).num("rtt_peak_us", es.rtt_peak_ns * 1e-3).num("reo_wnd_us", double(es.reo_wnd_ns) * 1e-3)
                               .num("fast_retransmissions", es.fast_retransmissions).num("tail_probes", es.tail_probes).num("timer_scans", es.timer_scans)
                               .num("spurious_retransmissions", es.spurious).num("descheduled", es.away)
                               .num("chunks_over_1ms", es.chunks_over_1ms).num("chunks_over_5ms", es.chunks_over_5ms)
                               .num("max_chunk_ms", double(es.max_chunk_ns) * 1e-6)
                               .num("switch_restarts", es.switch_restarts).num("link_downs", es.link_downs)
                               .num("epoch", uint64_t(es.epoch))
                               .raw("recovered", recovered_json(es)).num("lag_at_half", es.lag_at_half)
                               .raw("last_op_progress_ms", Json()
                                                               .num("p50", es.last_op_progress_ns[0] * 1e-6)
                                                               .num("p90", es.last_op_progress_ns[1] * 1e-6)
                                                               .num("p99", es.last_op_progress_ns[2] * 1e-6)
                                                               .num("p100", es.last_op_progress_ns[3] * 1e-6)
                                                               .done())
                               .done())
            .raw("link", Json()
                             .num("port_restarts", port_restarts).num("failed_restarts", failed_restarts)
                             .raw("downs_per_lcore", downs).raw("switch_restarts_per_lcore", restarts_seen)
                             .done())
            .raw("counters", counters_json(c))
            .done()
            .c_str());
  } else {
    std::printf(
        "worker %s: %s in %.2f s: %llu/%u rounds, %llu results, verify %s: %llu checked (%llu exact, %llu "
        "MISMATCHES), %.3g elem/s\n"
        "worker %s: widths requested [%s] granted [%s]; per round avg granted %s bits\n"
        "worker %s: switch memory: %.2f bits per element vs 32 -> %.2fx less; a row half holds %.2f sequences "
        "(max %llu), %.1f of 32 bits (max %llu)\n"
        "worker %s: retransmissions %llu, fallbacks to the PS %llu, overflow results %llu (redone %llu), "
        "duplicate results %llu\n"
        "worker %s: error vs float sum: max %.3g, rms %.3g (%.2f of the bound), %llu clipped elements\n",
        ids.c_str(), status.c_str(), secs, (unsigned long long)s.rounds_done, o.agq.rounds,
        (unsigned long long)s.results, o.verify.c_str(), (unsigned long long)s.checked, (unsigned long long)s.exact, (unsigned long long)s.mismatches, eps,
        ids.c_str(), hist_text(s.req_hist).c_str(), hist_text(s.granted_hist).c_str(), per_round_json(s).c_str(),
        ids.c_str(), avg, saving, row_seqs, (unsigned long long)s.row_seqs_max, row_bits,
        (unsigned long long)s.row_bits_max, ids.c_str(), (unsigned long long)s.retransmissions,
        (unsigned long long)s.fallbacks, (unsigned long long)s.overflow_results, (unsigned long long)s.redos,
        (unsigned long long)s.duplicate_results, ids.c_str(), s.error.max_abs, s.error.rms(),
        s.error.max_over_bound, (unsigned long long)s.error.clipped);
  }
  std::fflush(stdout);
  return rc;
}

int run_agq_ps(const Options& o, Ports& ports) {
  AgqPsEngine eng;
  std::string err;
  AgqPsConfig pc;
  pc.job = o.agq;
  pc.lanes = o.lanes;
  pc.row_shift = o.row_shift ? o.row_shift : AllreduceJob::row_shift_for(o.agq.slots, o.agq.rows);
  if (o.have_ps) {
    pc.have_self = true;
    std::memcpy(pc.self.mac.data(), o.ps.mac, 6);
    pc.self.ip = o.ps.ip;
  }
  if (!eng.init(pc, err)) {
    std::fprintf(stderr, "agq-worker: %s\n", err.c_str());
    return 2;
  }
  PsAddressCheck<AgqPsEngine> checked(eng, o.agq.job_id, pc.have_self ? pc.self : agq_ps_endpoint(o.agq.job_id),
                                       o.from_switch);
  poll_loop(checked, ports, o, "ps");
  if (!checked.error().empty()) {
    std::fprintf(stderr, "agq-worker: %s\n", checked.error().c_str());
    return 2;
  }
  // The agq PS serves until it is stopped: SIGINT/SIGTERM is its normal end.
  const AgqPsStats& s = eng.stats();
  const Counters& c = eng.counters();
  // Where the switch's frames came in: one count per ring of port 0 (the
  // switch's lcore i sends on ring i).
  std::string rxq = "[";
  if (ports.count())
    for (uint64_t n : ports.rx_per_queue(0)) {
      if (rxq.size() > 1) rxq += ',';
      rxq += std::to_string(n);
    }
  rxq += ']';
  if (o.json) {
    std::printf("%s\n", Json()
                            .str("role", "ps").str("protocol", "agq").str("status", "ok")
                            .num("job_id", uint64_t(o.agq.job_id)).num("fallback_data", s.fallback_data)
                            .num("sequences", s.sequences).num("ps_results", s.ps_results).num("resent", s.resent)
                            .num("duplicates", s.duplicates).num("relayed", s.relayed).num("overflow", s.overflow)
                            .num("bad", s.bad).raw("rx_per_queue", rxq).raw("counters", counters_json(c))
                            .done().c_str());
  } else {
    std::printf("ps: job %u: %llu fallback contributions -> %llu sequences summed, %llu PS_RESULTs resent, "
                "%llu duplicates, %llu results relayed (delivery = ps), %llu bad\n",
                o.agq.job_id, (unsigned long long)s.fallback_data, (unsigned long long)s.sequences,
                (unsigned long long)s.resent, (unsigned long long)s.duplicates, (unsigned long long)s.relayed,
                (unsigned long long)s.bad);
  }
  std::fflush(stdout);
  return s.bad ? 1 : 0;
}

}  // namespace agq::worker
