// Application options of agq-worker (everything after the EAL's "--").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/agq_job.hpp"
#include "lib/job.hpp"

namespace agq::worker {

enum class Role { Worker, Ps };
enum class Protocol { Classic, Agq };

struct Options {
  Role role = Role::Worker;
  Protocol protocol = Protocol::Classic;  // --protocol; classic stays the default
  JobSpec job;
  AgqJobSpec agq;                 // --protocol agq: job, slots, window, rounds, rows
  int init_width = 16;
  double init_scale = 4.0;
  double error_budget = 1e-3;
  double margin = 2.0;
  int min_width_slack = 0;        // agq: AllreduceTuning::min_width_slack
  int fixed_width = 0;            // agq: AllreduceTuning::fixed_width (0: adaptive)
  std::string error_feedback = "auto";  // agq: auto (on iff --verify off) | on | off
  bool error_feedback_on = false;       // parsed --error-feedback
  double rto_ms = 20.0;
  double rto_min_ms = 5.0;
  double reo_min_us = 200.0;  // AllreduceTuning::reo_min_ns
  double rto_max_ms = 640.0;
  std::string verify = "all";     // agq: all | sample:K | off
  uint32_t verify_every = 1;      // parsed --verify
  unsigned lanes = 32;            // agq: lane profile 32 | 16
  unsigned max_retries = 25;
  double retry_time_s = 5.0;
  unsigned handoff_ring = 4096;   // agq, several lcores: entries of each lcore's hand-off ring
  std::string source = "normal";
  uint64_t seed = 1;
  double range = 4.0;
  std::vector<unsigned> ids{0};   // logical workers; id i uses port i mod nb_ports
  bool join = false;
  bool fresh_switch = false;
  double reply_timeout_s = 5.0;
  double stall_timeout_s = 20.0;
  double connect_timeout_s = 10.0;
  double retry_ms = 1000.0;
  double progress_s = 1.0;        // 0: no progress lines
  unsigned idle_sleep_us = 50;    // 0: busy-poll
  bool json = false;
  std::string output;             // PS: dequantized aggregate as .npy
  unsigned max_print = 10;

  // agq: the job from the switch (--switch-ctl SOCKET --job ID, or --job-file
  // PATH written by `agqctl job get ID --json`), docs/PROTOCOL.md §12.
  std::string switch_ctl, job_file;
  std::vector<std::string> given;   // long names of the flags on the command line
  bool from_switch = false;         // filled in by apply_switch_job
  unsigned max_width = 32, row_shift = 0, switch_lcores = 1;
  unsigned switch_rings = 0;  // from the switch: the most rings a memif client may connect with (0: not said)
  struct Host {
    unsigned id = 0;
    uint8_t mac[6] = {};
    uint32_t ip = 0;
  };
  std::vector<Host> hosts;          // worker table (from the switch)
  bool have_ps = false;
  Host ps;
  bool flag_given(const char* name) const {
    for (const auto& g : given)
      if (g == name) return true;
    return false;
  }
};

// --switch-ctl/--job-file: takes the job from the switch; a flag given on
// the command line that disagrees is an error naming the field. Returns
// false with the message in err.
bool apply_switch_job(Options& o, std::string& err);

// Parses argv (application part). Returns -1 to continue, else the exit
// code (0 after --help, 2 on a bad flag, with the message printed).
int parse_options(int argc, char** argv, Options& o);

}  // namespace agq::worker
