// 'job' commands: agq jobs registered and removed on a running switch
// (docs/PROTOCOL.md §6). They exist only when the program is an agq program;
// add_job/remove_job run on every lcore's program instance between two of its
// bursts (Pipes::all), so a job appears or vanishes between two packets.
#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "control/command_util.hpp"
#include "control/job_info.hpp"
#include "control/job_spec.hpp"
#include "control/json_text.hpp"
#include "control/text.hpp"
#include "pipeline/agq/agq_program.hpp"

namespace agq::control {
namespace {

using pipeline::agq::AgqSwitchProgram;
using pipeline::agq::JobSpec;
using pipeline::agq::ResultDelivery;
using pipeline::agq::WorkerSpec;

[[noreturn]] void bad(const std::string& what) { throw CommandError{what, kUsageJob}; }

uint64_t number(const std::string& key, const std::string& v, uint64_t lo, uint64_t hi) {
  auto n = parse_uint(v);
  if (!n) bad(key + ": '" + v + "' is not a number");
  if (*n < lo || *n > hi) bad(key + ": " + v + " is out of range " + std::to_string(lo) + ".." + std::to_string(hi));
  return *n;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t c = s.find(',', start);
    out.push_back(s.substr(start, c - start));
    if (c == std::string::npos) return out;
    start = c + 1;
  }
}

// "<port>,<ip>,<mac>" (ps=) or "<id>,<port>,<ip>,<mac>" (worker=).
struct Endpoint {
  tna::PortId port;
  uint32_t ip;
  proto::Mac mac;
};
Endpoint endpoint(DataplaneView& dp, const std::string& key, const std::vector<std::string>& f, size_t at) {
  const tna::PortId port = existing_port(dp, f[at], kUsageJob);
  auto ip = parse_ipv4(f[at + 1]);
  if (!ip) bad(key + ": '" + f[at + 1] + "' is not an IPv4 address (a.b.c.d)");
  auto mac = parse_mac(f[at + 2]);
  if (!mac) bad(key + ": '" + f[at + 2] + "' is not a MAC address (xx:xx:xx:xx:xx:xx)");
  return {port, *ip, *mac};
}

JobSpec parse_job_add(DataplaneView& dp, const std::vector<std::string>& w) {
  JobSpec job;
  job.job_id = uint16_t(number("id", w[2], 1, uint64_t(kMaxJobId)));
  std::set<std::string> given;
  for (size_t i = 3; i < w.size(); ++i) {
    const size_t eq = w[i].find('=');
    if (eq == std::string::npos || eq == 0) bad("'" + w[i] + "' is not key=value");
    const std::string key = w[i].substr(0, eq), v = w[i].substr(eq + 1);
    if (key != "worker" && !given.insert(key).second) bad(key + " given twice");
    if (key == "workers") {
      job.num_workers = uint8_t(number(key, v, 1, uint64_t(kMaxJobWorkers)));
    } else if (key == "slots") {
      job.slots = uint32_t(number(key, v, 1, uint64_t(kMaxJobSlots)));
    } else if (key == "rows") {
      job.rows = uint32_t(number(key, v, 1, uint64_t(kMaxTotalRows)));
    } else if (key == "max_width") {
      job.max_width = uint8_t(number(key, v, uint64_t(kMinWidth), uint64_t(kMaxWidth)));
    } else if (key == "lanes") {
      job.lanes = uint8_t(number(key, v, uint64_t(kMinLanes), uint64_t(kMaxLanes)));
    } else if (key == "delivery") {
      if (v == "multicast") job.delivery = ResultDelivery::Multicast;
      else if (v == "ps") job.delivery = ResultDelivery::Ps;
      else bad("delivery: '" + v + "' is not multicast or ps");
    } else if (key == "ps") {
      const auto f = split_commas(v);
      if (f.size() != 3) bad("ps: expected <port>,<ip>,<mac>, got '" + v + "'");
      const Endpoint e = endpoint(dp, key, f, 0);
      job.ps_port = e.port;
      job.ps_ipv4 = e.ip;
      job.ps_mac = e.mac;
    } else if (key == "worker") {
      const auto f = split_commas(v);
      if (f.size() != 4) bad("worker: expected <id>,<port>,<ip>,<mac>, got '" + v + "'");
      WorkerSpec ws;
      ws.worker_id = uint8_t(number("worker id", f[0], 0, uint64_t(kMaxJobWorkers - 1)));
      const Endpoint e = endpoint(dp, key, f, 1);
      ws.port = e.port;
      ws.ipv4 = e.ip;
      ws.mac = e.mac;
      job.workers.push_back(ws);
    } else {
      bad("unknown key '" + key + "' (known: workers, slots, rows, delivery, ps, max_width, lanes, worker)");
    }
  }
  for (const char* k : {"workers", "slots", "rows"})
    if (!given.count(k)) bad(std::string(k) + "=... is required");
  // The worker ids in the order the operator gave them do not matter.
  std::sort(job.workers.begin(), job.workers.end(),
            [](const WorkerSpec& a, const WorkerSpec& b) { return a.worker_id < b.worker_id; });
  if (auto e = check_job(job)) bad(*e);
  return job;
}

// The job's lane profile once JobSpec has one (PROTOCOL.md §10), else 32.
template <class Spec>
uint8_t lanes_of(const Spec& s) {
  if constexpr (requires { s.lanes; }) return uint8_t(s.lanes);
  else return 32;
}

// 'job get': the job as its workers need it (PROTOCOL.md §12).
JobInfo job_info(const JobSpec& s, const pipeline::agq::JobPlacement& p, DataplaneView& dp) {
  JobInfo j;
  j.id = s.job_id;
  j.workers = s.num_workers;
  j.slots = s.slots;
  j.rows = p.rows;
  j.row_shift = p.row_shift;
  j.guard = p.guard;
  j.max_width = s.max_width;
  j.lanes = lanes_of(s);
  j.delivery = delivery_name(s.delivery);
  if (s.ps_port != tna::kNoPort) j.ps = JobEndpoint{s.ps_port, s.ps_ipv4, s.ps_mac};
  for (const WorkerSpec& w : s.workers) j.worker_table.push_back({w.worker_id, {w.port, w.ipv4, w.mac}});
  j.epoch = dp.boot_epoch();
  j.lcores = dp.lcore_count();
  j.rings = dp.memif_queues();
  return j;
}

}  // namespace

std::string job_command(Pipes& pipes, DataplaneView& dp, const std::vector<std::string>& w, bool json) {
  // name() is fixed for the program's life: any thread may ask.
  const pipeline::SwitchProgram& prog = pipes.instance(0);
  if (prog.name() != "agq")
    throw CommandError{"jobs need the agq pipeline (this switch runs \"" + std::string(prog.name()) +
                           "\"; set [switch] pipeline = \"agq\")",
                       ""};
  auto agq = [](pipeline::SwitchProgram& p) -> AgqSwitchProgram& { return static_cast<AgqSwitchProgram&>(p); };
  check_arg_count(w, 2, size_t(-1), kUsageJob);
  if (w[1] == "list") {
    check_arg_count(w, 2, 2, kUsageJob);
    std::vector<JobSpec> jobs = pipes.on(0, [&](pipeline::SwitchProgram& p) { return agq(p).jobs(); });
    std::sort(jobs.begin(), jobs.end(), [](const JobSpec& a, const JobSpec& b) { return a.job_id < b.job_id; });
    if (json) {
      Json out = Json::array();
      for (const auto& j : jobs) {
        const auto p = pipes.on(0, [&](pipeline::SwitchProgram& q) { return agq(q).placement(j.job_id); });
        if (p) out.push_back(to_json(job_info(j, *p, dp)));  // else removed in between
      }
      return out.dump() + "\n";
    }
    std::string out;
    for (const auto& j : jobs) out += format_job(j) + "\n";
    return out;
  }
  if (w[1] == "get") {
    check_arg_count(w, 3, 3, kUsageJobGet);
    const auto id = uint16_t(number("id", w[2], 1, uint64_t(kMaxJobId)));
    std::optional<JobSpec> spec;
    std::optional<pipeline::agq::JobPlacement> place;
    pipes.on(0, [&](pipeline::SwitchProgram& p) {
      for (auto& j : agq(p).jobs())
        if (j.job_id == id) spec = std::move(j);
      place = agq(p).placement(id);
    });
    if (!spec || !place) throw CommandError{"no job " + w[2], ""};
    const Json j = to_json(job_info(*spec, *place, dp));
    return json ? j.dump() + "\n" : json_as_text(j);
  }
  if (w[1] == "reset") {
    // A restarted job must find its slots and rows zero. remove_job zeroes
    // them; adding the same spec back in the same command (one closure per
    // lcore, between two bursts) restores the tables as they were, so no
    // packet sees the job missing.
    check_arg_count(w, 3, 3, kUsageJobGet);
    const auto id = uint16_t(number("id", w[2], 1, uint64_t(kMaxJobId)));
    std::optional<JobSpec> spec;
    pipes.on(0, [&](pipeline::SwitchProgram& p) {
      for (auto& j : agq(p).jobs())
        if (j.job_id == id) spec = std::move(j);
    });
    if (!spec) throw CommandError{"no job " + w[2], ""};
    const auto err = pipes.all([&](pipeline::SwitchProgram& p) -> std::optional<std::string> {
      agq(p).remove_job(id);
      return agq(p).add_job(*spec);
    });
    if (err) throw CommandError{"internal: job " + w[2] + " not restored: " + *err, ""};
    return "";
  }
  if (w[1] == "add") {
    check_arg_count(w, 3, size_t(-1), kUsageJob);
    const JobSpec job = parse_job_add(dp, w);
    if (auto err = pipes.all([&](pipeline::SwitchProgram& p) { return agq(p).add_job(job); }))
      throw CommandError{*err, ""};  // add_job names the job
    // Added, but its rows cannot hold its slots' windows (PROTOCOL.md §6):
    // the answer says so (agqctl prints it), and so does the switch's log.
    if (auto warn = job_capacity_warning(job)) {
      std::fprintf(stderr, "agq-switch: %s\n", warn->c_str());
      return *warn + "\n";
    }
    return "";
  }
  if (w[1] == "del") {
    check_arg_count(w, 3, 3, kUsageJob);
    const auto id = uint16_t(number("id", w[2], 1, uint64_t(kMaxJobId)));
    if (!pipes.all([&](pipeline::SwitchProgram& p) { return agq(p).remove_job(id); }))
      throw CommandError{"no job " + w[2], ""};
    return "";
  }
  throw CommandError{"unknown job subcommand '" + w[1] + "'", kUsageJob};
}

}  // namespace agq::control
