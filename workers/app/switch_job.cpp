// The job as the switch knows it (docs/PROTOCOL.md §12) applied to the
// options: what the command line left out is taken from the switch; what it
// gave must agree, else the error names the flag and the switch's value.
#include <cstring>

#include "app/options.hpp"
#include "control/ctl_protocol.hpp"
#include "control/job_info.hpp"

namespace agq::worker {

namespace {

bool check(const Options& o, const char* flag, uint64_t mine, uint64_t theirs, const char* field, uint16_t job,
           std::string& err) {
  if (!o.flag_given(flag) || mine == theirs) return true;
  err = std::string(flag) + " " + std::to_string(mine) + " disagrees with the switch: job " + std::to_string(job) +
        " has " + field + " = " + std::to_string(theirs);
  return false;
}

}  // namespace

bool apply_switch_job(Options& o, std::string& err) {
  if (o.switch_ctl.empty() && o.job_file.empty()) return true;
  if (o.protocol != Protocol::Agq) {
    err = "--switch-ctl/--job-file need --protocol agq";
    return false;
  }
  control::JobInfo j;
  try {
    if (!o.switch_ctl.empty()) {
      j = control::fetch_job_info(o.switch_ctl, o.agq.job_id);
    } else {
      FILE* f = std::fopen(o.job_file.c_str(), "rb");
      if (!f) {
        err = o.job_file + ": " + std::strerror(errno);
        return false;
      }
      std::string text;
      char buf[4096];
      for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
      std::fclose(f);
      j = control::parse_job_info_text(text);
      if (o.flag_given("--job-id") && j.id != o.agq.job_id) {
        err = "--job-id " + std::to_string(o.agq.job_id) + " disagrees with " + o.job_file + ": id = " +
              std::to_string(j.id);
        return false;
      }
    }
  } catch (const std::exception& e) {
    err = (o.job_file.empty() ? "" : o.job_file + ": ") + e.what();
    return false;
  }
  const uint16_t id = j.id;
  if (!check(o, "--workers", o.agq.num_workers, j.workers, "workers", id, err) ||
      !check(o, "--slots", o.agq.slots, j.slots, "slots", id, err) ||
      !check(o, "--rows", o.agq.rows, j.rows, "rows", id, err) ||
      !check(o, "--lanes", o.lanes, j.lanes, "lanes", id, err) ||
      !check(o, "--switch-lcores", o.switch_lcores, j.lcores, "lcores", id, err))
    return false;
  o.agq.job_id = j.id;
  o.agq.num_workers = j.workers;
  o.agq.slots = j.slots;
  o.agq.rows = j.rows;
  o.lanes = j.lanes;
  o.max_width = j.max_width;
  o.row_shift = j.row_shift;
  o.switch_lcores = j.lcores;
  o.switch_rings = j.rings;
  if (o.agq.window > o.agq.slots) {
    err = "--window " + std::to_string(o.agq.window) + " exceeds the switch's slots = " + std::to_string(j.slots);
    return false;
  }
  for (unsigned w : o.ids)
    if (w >= j.workers) {
      err = "--ids: worker " + std::to_string(w) + " is not in the switch's job " + std::to_string(id) + " (workers = " +
            std::to_string(j.workers) + ")";
      return false;
    }
  o.hosts.clear();
  for (const auto& w : j.worker_table) {
    Options::Host h;
    h.id = w.id;
    std::memcpy(h.mac, w.at.mac.data(), 6);
    h.ip = w.at.ipv4;
    o.hosts.push_back(h);
  }
  o.have_ps = j.ps.has_value();
  if (j.ps) {
    o.ps.id = 254;
    std::memcpy(o.ps.mac, j.ps->mac.data(), 6);
    o.ps.ip = j.ps->ipv4;
  } else if (o.role == Role::Ps) {
    err = "job " + std::to_string(id) + " has no PS on the switch (no ps_port): nothing for --role ps to serve";
    return false;
  }
  o.from_switch = true;
  return true;
}

}  // namespace agq::worker
