// 'drop' commands: the dataplane's drop simulator (issue 4 §5), which the
// agq loss tests use to lose packets on ports that never lose any.
// Probabilities are plain atomics in the dataplane: no program lock.
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "control/command_util.hpp"

namespace agq::control {
namespace {

// "0", "0.25", "1", "1e-3": a finite decimal in [0, 1], nothing trailing.
double probability_arg(const std::string& s) {
  double p = 0;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, p);
  if (s.empty() || ec != std::errc{} || ptr != end || !std::isfinite(p) || p < 0 || p > 1)
    throw CommandError{"'" + s + "' is not a probability (a number from 0 to 1)", kUsageDrop};
  return p;
}

}  // namespace

std::string drop_command(DataplaneView& dp, const std::vector<std::string>& w, bool json) {
  check_arg_count(w, 2, 4, kUsageDrop);
  if (w[1] == "list") {
    check_arg_count(w, 2, 2, kUsageDrop);
    Columns t;
    t.row({"port", "rx_probability", "tx_probability", "rx_drops", "tx_drops"});
    const size_t n = dp.port_stats().size();
    for (size_t p = 0; p < n; ++p) {
      const SimDropRow r = dp.sim_drop(tna::PortId(p));
      t.row({p, r.rx_probability, r.tx_probability, r.rx_drops, r.tx_drops});
    }
    return t.output(json);
  }
  if (w[1] == "clear") {
    check_arg_count(w, 2, 2, kUsageDrop);
    const size_t n = dp.port_stats().size();
    for (size_t p = 0; p < n; ++p)
      for (SimDirection d : {SimDirection::Rx, SimDirection::Tx}) dp.set_sim_drop(tna::PortId(p), d, 0.0);
    return "";
  }
  check_arg_count(w, 4, 4, kUsageDrop);
  const tna::PortId port = existing_port(dp, w[1], kUsageDrop);
  SimDirection dir;
  if (w[2] == "rx") dir = SimDirection::Rx;
  else if (w[2] == "tx") dir = SimDirection::Tx;
  else throw CommandError{"direction must be rx or tx, not '" + w[2] + "'", kUsageDrop};
  dp.set_sim_drop(port, dir, probability_arg(w[3]));
  return "";
}

}  // namespace agq::control
