#include <cstdio>

#include "app/poll_loop.hpp"
#include "app/run.hpp"
#include "lib/npy.hpp"
#include "lib/ps_engine.hpp"

namespace agq::worker {

namespace {

std::string error_json(const ErrorStats& e) {
  return Json()
      .num("elements", e.elements).num("clipped", e.clipped).num("max_abs", e.max_abs).num("rms", e.rms())
      .num("max_over_bound", e.max_over_bound)
      .done();
}

std::string widths_text(const VerifyStats& v) {
  std::string s;
  for (int i = 8; i >= 1; --i)
    if (v.width_hist[i]) {
      // Appended piecewise: GCC 12 warns falsely (-Wrestrict) on "lit" + std::string.
      if (!s.empty()) s += ", ";
      s += std::to_string(4 * i);
      s += "b:";
      s += std::to_string(v.width_hist[i]);
    }
  return s.empty() ? "-" : s;
}

bool write_output(const PsEngine& eng, const Options& o) {
  std::vector<float> out(o.job.elements, 0.0f);
  const Quantizer& q = eng.verifier().quantizer();
  for (const Recorded& r : eng.recorded())
    for (int k = 0; k < kLanes; ++k)
      if (r.chunk * kLanes + k < o.job.elements)
        out[r.chunk * kLanes + k] = float(q.dequantize_sum(r.lanes[k], o.job.total_workers));
  std::string err;
  if (!save_float32_npy(o.output, out, err)) {
    std::fprintf(stderr, "agq-worker: %s\n", err.c_str());
    return false;
  }
  return true;
}

}  // namespace

int run_ps(const Options& o, Ports& ports) {
  PsConfig cfg;
  cfg.job = o.job;
  cfg.source = o.source;
  cfg.seed = o.seed;
  cfg.range = o.range;
  cfg.port = 0;
  cfg.port_name = ports.names().empty() ? "" : ports.names()[0];
  cfg.assume_fresh_switch = o.fresh_switch;
  cfg.retry_ns = uint64_t(o.retry_ms * 1e6);
  cfg.stall_timeout_ns = uint64_t(o.stall_timeout_s * 1e9);
  cfg.max_print = o.max_print;
  cfg.record = !o.output.empty();
  PsEngine eng;
  std::string err;
  if (!eng.init(cfg, err)) {
    std::fprintf(stderr, "agq-worker: %s\n", err.c_str());
    return 2;
  }
  const uint64_t t0 = now_ns();
  poll_loop(eng, ports, o, "ps");
  const double secs = double(now_ns() - t0) * 1e-9;
  const Counters& c = eng.counters();
  const VerifyStats& v = eng.verify_stats();

  auto [rc, status] = outcome_of(eng, v.mismatches);
  if (!o.output.empty() && !write_output(eng, o) && rc == 0) rc = 1;
  const double eps = secs > 0 ? double(eng.elements_done()) / secs : 0.0;
  if (o.json) {
    Json w;
    for (int i = 1; i <= 8; ++i) w.num(std::to_string(4 * i).c_str(), v.width_hist[i]);
    std::printf("%s\n", Json()
                            .str("role", "ps").str("status", status).num("job_id", uint64_t(o.job.job_id))
                            .num("workers", uint64_t(o.job.total_workers)).num("chunks", o.job.chunks())
                            .num("seconds", secs).num("elements_done", eng.elements_done())
                            .num("elements_per_s", eps)
                            .num("mpps", secs > 0 ? double(c.tx_pkts + c.rx_pkts) / secs * 1e-6 : 0.0)
                            .num("checked", v.checked).num("exact", v.exact).num("mismatches", v.mismatches)
                            .num("order_dependent", v.order_dependent).num("cursor_resyncs", v.resyncs)
                            .raw("window_widths", w.done())
                            .raw("quantization_error", error_json(v.exact_results))
                            .raw("order_dependent_error", error_json(v.order_dependent_results))
                            .raw("counters", counters_json(c))
                            .done().c_str());
  } else {
    const auto& e = v.exact_results;
    std::printf(
        "ps: %s in %.2f s: %llu/%llu chunks (%llu elements, %.3g elem/s), ACKs %llu, retries %llu, duplicates %llu\n"
        "ps: verification: %llu checked, %llu exact, %llu MISMATCHES, %llu order-dependent, %llu cursor resyncs; "
        "window widths %s\n"
        "ps: quantization error vs float sum: max %.3g, rms %.3g (%.2f of the bound), %llu clipped elements\n",
        status.c_str(), secs, (unsigned long long)c.chunks_done, (unsigned long long)o.job.chunks(),
        (unsigned long long)eng.elements_done(), eps, (unsigned long long)c.acks, (unsigned long long)c.retries,
        (unsigned long long)c.duplicates, (unsigned long long)v.checked, (unsigned long long)v.exact,
        (unsigned long long)v.mismatches, (unsigned long long)v.order_dependent, (unsigned long long)v.resyncs,
        widths_text(v).c_str(), e.max_abs, e.rms(), e.max_over_bound, (unsigned long long)e.clipped);
    if (v.order_dependent)
      std::printf("ps: order-dependent results (packed windows): max error %.3g, rms %.3g\n",
                  v.order_dependent_results.max_abs, v.order_dependent_results.rms());
  }
  std::fflush(stdout);
  return rc;
}

}  // namespace agq::worker
