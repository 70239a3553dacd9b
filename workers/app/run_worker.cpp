#include <cstdio>

#include "app/poll_loop.hpp"
#include "app/run.hpp"
#include "lib/worker_engine.hpp"

namespace agq::worker {

volatile bool g_stop = false;

int run_worker(const Options& o, Ports& ports) {
  WorkerConfig cfg;
  cfg.job = o.job;
  cfg.source = o.source;
  cfg.seed = o.seed;
  cfg.range = o.range;
  cfg.ids = o.ids;
  cfg.ports.clear();
  for (size_t i = 0; i < o.ids.size(); ++i) cfg.ports.push_back(uint16_t(i % ports.count()));
  cfg.port_names = ports.names();
  cfg.join = o.join;
  cfg.reply_timeout_ns = uint64_t(o.reply_timeout_s * 1e9);
  cfg.stall_timeout_ns = uint64_t(o.stall_timeout_s * 1e9);
  WorkerEngine eng;
  std::string err;
  if (!eng.init(cfg, err)) {
    std::fprintf(stderr, "agq-worker: %s\n", err.c_str());
    return 2;
  }
  const uint64_t t0 = now_ns();
  poll_loop(eng, ports, o, "worker");
  const double secs = double(now_ns() - t0) * 1e-9;
  const Counters& c = eng.counters();

  auto [rc, status] = outcome_of(eng, false);
  std::string ids;
  for (unsigned id : o.ids) {
    if (!ids.empty()) ids += ',';  // piecewise: GCC 12's -Wrestrict false positive on "lit" + string
    ids += std::to_string(id);
  }
  if (o.json) {
    std::printf("%s\n", Json()
                            .str("role", "worker").str("status", status).str("ids", ids)
                            .num("job_id", uint64_t(o.job.job_id)).num("chunks", o.job.chunks())
                            .num("seconds", secs).num("elements_done", eng.elements_done())
                            .num("mpps", secs > 0 ? double(c.tx_pkts + c.rx_pkts) / secs * 1e-6 : 0.0)
                            .num("finished_by_announcement", uint64_t(eng.finished_by_announcement()))
                            .raw("counters", counters_json(c))
                            .done().c_str());
  } else {
    std::printf("worker %s: %s in %.2f s: %llu of %llu chunks ACKed per logical worker, tx %llu rx %llu "
                "pkts (%.3f Mpps), retries %llu, retransmissions %llu, stale %llu, foreign %llu%s\n",
                ids.c_str(), status.c_str(), secs, (unsigned long long)(c.chunks_done / o.ids.size()),
                (unsigned long long)o.job.chunks(),
                (unsigned long long)c.tx_pkts, (unsigned long long)c.rx_pkts,
                secs > 0 ? double(c.tx_pkts + c.rx_pkts) / secs * 1e-6 : 0.0, (unsigned long long)c.retries,
                (unsigned long long)c.retransmissions, (unsigned long long)c.stale, (unsigned long long)c.foreign,
                eng.finished_by_announcement() ? " (finished by the PS's end-of-job announcement)" : "");
  }
  std::fflush(stdout);
  return rc;
}

}  // namespace agq::worker
