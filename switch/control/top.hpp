// `agqctl top`: a live view of a running switch, refreshed in place every
// interval until Ctrl-C (or N refreshes): per port rx/tx packets and bits
// per second and drops; per job results/s, elements/s, RESULTs resent/s,
// PS fallbacks/s and the granted widths of its RESULTs; switch-wide drops
// by reason. Everything comes from the control socket with --json (ports,
// counters, job list, and the switch's job meter, observe/job_meter.hpp,
// which top switches on while it runs and off when it exits).
#pragma once

#include <cstdio>
#include <string>

namespace agq::control {

struct TopOptions {
  std::string socket;
  double interval_s = 1.0;
  unsigned iterations = 0;  // 0: until Ctrl-C
};

// Returns agqctl's exit code: 0 (Ctrl-C or N refreshes), 1 (the switch
// stopped answering), 2 (not reachable at start).
int run_top(const TopOptions& opt);

}  // namespace agq::control
