#include "dataplane/rate_reporter.hpp"

#include <chrono>
#include <cinttypes>
#include <thread>

namespace agq::dataplane {

std::string RateReporter::line(const std::vector<std::pair<std::string, uint64_t>>& prev,
                               const std::vector<std::pair<std::string, uint64_t>>& cur, double dt_s) {
  auto delta = [&](const char* name) -> uint64_t {
    for (size_t i = 0; i < cur.size(); ++i)
      if (cur[i].first == name) return cur[i].second - (i < prev.size() ? prev[i].second : 0);
    return 0;
  };
  const double dt = dt_s > 0 ? dt_s : 1;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "stats: rx %.3f Mpps  processed %.3f Mpps  tx %.3f Mpps  handoff %.3f Mpps  clones %.3f Mpps  drops/s program %.0f tx %.0f "
                "bad_port %.0f multiseg %.0f clone_fail %.0f handoff %.0f  idle_sleeps/s %.0f",
                delta("rx") / dt / 1e6, (double(delta("rx")) - double(delta("handoff_drops"))) / dt / 1e6, delta("tx") / dt / 1e6,
                delta("handoff") / dt / 1e6, delta("clones") / dt / 1e6,
                delta("program_drops") / dt, delta("tx_dropped") / dt, delta("bad_port_drops") / dt,
                delta("multiseg_drops") / dt, delta("clone_failures") / dt, delta("handoff_drops") / dt,
                delta("idle_sleeps") / dt);
  return buf;
}

void RateReporter::run(const std::atomic<bool>& stop) {
  using clock = std::chrono::steady_clock;
  auto prev = dp_.totals();
  auto t0 = clock::now();
  while (!stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto now = clock::now();
    const double dt = std::chrono::duration<double>(now - t0).count();
    if (dt < interval_s_) continue;
    auto cur = dp_.totals();
    std::fprintf(out_, "%s\n", line(prev, cur, dt).c_str());
    std::fflush(out_);
    prev = std::move(cur);
    t0 = now;
  }
}

}  // namespace agq::dataplane
