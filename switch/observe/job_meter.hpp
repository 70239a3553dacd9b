// Per-job rates for `agqctl top`, measured on the frames the switch
// transmits (an ethdev tx callback on every queue of every port, installed
// only while a `top` is watching): per job, RESULT frames (first sends),
// RESULTs resent to a retransmitting worker (RESULT with RETRANSMIT),
// RESULTs computed by the PS (FALLBACK), FALLBACK_DATA sent to the PS, and
// the granted widths of the RESULTs. Counted per lcore into plain arrays
// (no shared writes, no hashing: the entry is job_id mod 1024, so two jobs
// whose ids agree mod 1024 share counters; the reply names the last id
// seen). The program keeps no per-job counters; drops by reason are the
// program's counters (agqctl counters), switch-wide.
//
// Control commands: 'meter on' (starts, or renews), 'meter off', 'meter'
// (cumulative counts since 'on'; --json). A meter nobody has read for 10 s
// switches itself off (a top killed with SIGKILL costs nothing for long).
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace agq::observe {

class JobMeter {
 public:
  JobMeter();
  ~JobMeter();  // call only once the lcores have stopped
  JobMeter(const JobMeter&) = delete;
  JobMeter& operator=(const JobMeter&) = delete;

  std::string command(const std::vector<std::string>& words, bool json);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace agq::observe
