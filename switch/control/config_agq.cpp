// The configuration of pipeline "agq": [agq] (register space) and [[job]]
// with its [[job.worker]] tables (docs/PROTOCOL.md §6, conf/README.md).
// Ranges and cross-field rules are checked here with the line of the
// offending value; AgqProgram::add_job still has the last word (space left,
// conflicts between jobs), reported at the job's [[job]] line.
#include <algorithm>
#include <map>
#include <mutex>
#include <string>

#include "control/config_reader.hpp"
#include "control/job_spec.hpp"
#include "pipeline/agq/agq_program.hpp"
#include "pipeline/agq_fast/agq_fast_program.hpp"
// The compiled sizes of the Tofino program (p4src/agq): one source of truth
// for this loader, the P4 and p4src/bfrt/setup_agq.py.
#include "../../p4src/agq/agq_limits.h"

namespace agq::control {
namespace {

using pipeline::agq::JobSpec;
using pipeline::agq::ResultDelivery;
using pipeline::agq::WorkerSpec;

class AgqLoader {
 public:
  AgqLoader(TomlReader& r, SwitchConfig& cfg) : r_(r), cfg_(cfg) {}

  void load(const toml::table& root) {
    const toml::table* agq = r_.table_at(root, "agq");
    const auto jobs = r_.tables_at(root, "job");
    if (cfg_.pipeline != "agq") {
      const std::string why = " is for pipeline \"agq\" (switch.pipeline is \"" + cfg_.pipeline + "\")";
      if (agq) r_.fail(line_of(*agq), "agq", "section [agq]" + why);
      if (!jobs.empty()) r_.fail(line_of(*jobs[0]), "job[0]", "[[job]]" + why);
      return;
    }
    if (agq) load_agq(*agq);
    std::map<uint16_t, int> ids;  // job id -> line
    for (size_t i = 0; i < jobs.size(); ++i) {
      JobEntry e{load_job(*jobs[i], "job[" + std::to_string(i) + "]"), line_of(*jobs[i])};
      const int id_line = line_of(*jobs[i]->get("id"));
      if (auto [it, fresh] = ids.emplace(e.spec.job_id, id_line); !fresh)
        r_.fail(id_line, "job[" + std::to_string(i) + "].id",
                "duplicate job id " + std::to_string(e.spec.job_id) + " (first at line " + std::to_string(it->second) + ")");
      if (auto warn = job_capacity_warning(e.spec))
        cfg_.warnings.push_back(cfg_.path + ":" + std::to_string(e.line) + ": job[" + std::to_string(i) + "]: " + *warn);
      cfg_.jobs.push_back(std::move(e));
    }
    check_p4_sizes(jobs);
  }

 private:
  void load_agq(const toml::table& t) {
    r_.check_keys(t, "agq", {"total_rows", "total_slots"});
    if (auto* n = t.get("total_rows")) {
      cfg_.agq.total_rows = uint32_t(r_.integer(*n, "agq.total_rows", 1, kMaxTotalRows));
      if (cfg_.agq.total_rows > AGQ_ROWS)
        r_.fail(line_of(*n), "agq.total_rows", std::to_string(cfg_.agq.total_rows) +
                " rows: the Tofino program's row registers hold " + std::to_string(AGQ_ROWS) +
                " (p4src/agq/agq_limits.h AGQ_ROWS)");
    }
    if (auto* n = t.get("total_slots")) {
      cfg_.agq.total_slots = uint32_t(r_.integer(*n, "agq.total_slots", 1, kMaxTotalSlots));
      if (cfg_.agq.total_slots > AGQ_SLOTS)
        r_.fail(line_of(*n), "agq.total_slots", std::to_string(cfg_.agq.total_slots) +
                " slots: the Tofino program's slot registers hold " + std::to_string(AGQ_SLOTS) +
                " (p4src/agq/agq_limits.h AGQ_SLOTS)");
    }
  }

  // More jobs or workers than the Tofino program's job_t / worker_t hold:
  // refused at the first [[job]] beyond the size (same limits as setup_agq.py).
  void check_p4_sizes(const std::vector<const toml::table*>& jobs) {
    size_t workers = 0;
    for (size_t i = 0; i < cfg_.jobs.size(); ++i) {
      const std::string f = "job[" + std::to_string(i) + "]";
      if (i >= AGQ_MAX_JOBS)
        r_.fail(line_of(*jobs[i]), f, std::to_string(cfg_.jobs.size()) + " jobs: the Tofino program's job_t holds " +
                std::to_string(AGQ_MAX_JOBS) + " (p4src/agq/agq_limits.h AGQ_MAX_JOBS)");
      workers += cfg_.jobs[i].spec.workers.size();
      if (workers > AGQ_MAX_WORKERS)
        r_.fail(line_of(*jobs[i]), f + ".workers", std::to_string(workers) +
                " workers in jobs 0.." + std::to_string(i) + ": the Tofino program's worker_t holds " +
                std::to_string(AGQ_MAX_WORKERS) + " (p4src/agq/agq_limits.h AGQ_MAX_WORKERS)");
    }
  }

  JobSpec load_job(const toml::table& t, const std::string& f) {
    r_.check_keys(t, f, {"id", "workers", "slots", "rows", "delivery", "ps_port", "ps_ip", "ps_mac", "max_width",
                         "lanes", "worker"});
    JobSpec j;
    j.job_id = uint16_t(r_.integer(r_.required(t, "id", f + ".id"), f + ".id", 1, kMaxJobId));
    const toml::node& wn = r_.required(t, "workers", f + ".workers");
    j.num_workers = uint8_t(r_.integer(wn, f + ".workers", 1, kMaxJobWorkers));
    const toml::node& sn = r_.required(t, "slots", f + ".slots");
    j.slots = uint32_t(r_.integer(sn, f + ".slots", 1, kMaxJobSlots));
    const toml::node& rn = r_.required(t, "rows", f + ".rows");
    j.rows = uint32_t(r_.integer(rn, f + ".rows", 1, kMaxTotalRows));
    if (auto* n = t.get("max_width")) {
      j.max_width = uint8_t(r_.integer(*n, f + ".max_width", kMinWidth, kMaxWidth));
      if (j.max_width % 4) r_.fail(line_of(*n), f + ".max_width", "must be a multiple of 4 (4-bit units)");
    }
    if (auto* n = t.get("lanes")) {
      j.lanes = uint8_t(r_.integer(*n, f + ".lanes", kMinLanes, kMaxLanes));
      if (j.lanes != kMinLanes && j.lanes != kMaxLanes)
        r_.fail(line_of(*n), f + ".lanes", std::to_string(j.lanes) + " is not 32 or 16 (the lane profiles)");
    }
    if (auto* n = t.get("delivery")) {
      const std::string d = r_.string(*n, f + ".delivery");
      if (d == "multicast") j.delivery = ResultDelivery::Multicast;
      else if (d == "ps") j.delivery = ResultDelivery::Ps;
      else r_.fail(line_of(*n), f + ".delivery", "\"" + d + "\" is not \"multicast\" or \"ps\"");
    }
    load_ps(t, f, j);
    load_workers(t, f, j, line_of(wn));
    // Backstop: the rules the command 'job add' applies, so both agree.
    if (auto e = check_job(j)) r_.fail(line_of(t), f, *e);
    return j;
  }

  // ps_port, ps_ip and ps_mac come together or not at all.
  void load_ps(const toml::table& t, const std::string& f, JobSpec& j) {
    const toml::node* p = t.get("ps_port");
    const toml::node* ip = t.get("ps_ip");
    const toml::node* mac = t.get("ps_mac");
    if (!p && !ip && !mac) {
      if (j.delivery == ResultDelivery::Ps)
        r_.fail(line_of(*t.get("delivery")), f + ".delivery", "\"ps\" needs ps_port, ps_ip and ps_mac");
      return;
    }
    j.ps_port = r_.port(r_.required(t, "ps_port", f + ".ps_port"), f + ".ps_port");
    j.ps_ipv4 = r_.ipv4(r_.required(t, "ps_ip", f + ".ps_ip"), f + ".ps_ip");
    const toml::node& mn = r_.required(t, "ps_mac", f + ".ps_mac");
    j.ps_mac = r_.mac(mn, f + ".ps_mac");
    if (j.ps_mac[0] & 1) r_.fail(line_of(mn), f + ".ps_mac", proto::mac_to_string(j.ps_mac) + " is a multicast address");
  }

  void load_workers(const toml::table& t, const std::string& f, JobSpec& j, int workers_line) {
    const auto ws = r_.tables_at(t, "worker");
    if (ws.size() != j.num_workers)
      r_.fail(ws.empty() ? workers_line : line_of(*ws.back()), f + ".worker",
              std::to_string(ws.size()) + " [[job.worker]] tables, but workers = " + std::to_string(j.num_workers) +
                  " (line " + std::to_string(workers_line) + ")");
    std::map<uint8_t, int> ids;
    for (size_t i = 0; i < ws.size(); ++i) {
      const toml::table& w = *ws[i];
      const std::string g = f + ".worker[" + std::to_string(i) + "]";
      r_.check_keys(w, g, {"id", "port", "ip", "mac"});
      WorkerSpec s;
      const toml::node& idn = r_.required(w, "id", g + ".id");
      s.worker_id = uint8_t(r_.integer(idn, g + ".id", 0, int64_t(j.num_workers) - 1));
      if (auto [it, fresh] = ids.emplace(s.worker_id, line_of(idn)); !fresh)
        r_.fail(line_of(idn), g + ".id",
                "duplicate worker id " + std::to_string(s.worker_id) + " (first at line " + std::to_string(it->second) + ")");
      s.port = r_.port(r_.required(w, "port", g + ".port"), g + ".port");
      s.ipv4 = r_.ipv4(r_.required(w, "ip", g + ".ip"), g + ".ip");
      const toml::node& mn = r_.required(w, "mac", g + ".mac");
      s.mac = r_.mac(mn, g + ".mac");
      if (s.mac[0] & 1) r_.fail(line_of(mn), g + ".mac", proto::mac_to_string(s.mac) + " is a multicast address");
      j.workers.push_back(s);
    }
    std::sort(j.workers.begin(), j.workers.end(),
              [](const WorkerSpec& a, const WorkerSpec& b) { return a.worker_id < b.worker_id; });
  }

  TomlReader& r_;
  SwitchConfig& cfg_;
};

}  // namespace

void load_agq_sections(TomlReader& r, const toml::table& root, SwitchConfig& cfg) { AgqLoader(r, cfg).load(root); }

std::unique_ptr<pipeline::SwitchProgram> make_agq_program(const SwitchConfig& cfg, tna::ReplicationEngine& pre) {
  // The fast program (pipeline/agq_fast/); pipeline::agq::AgqProgram is its
  // reference model, proven equal by tests/unit/agq_fast_diff_test.cpp.
  return std::make_unique<pipeline::agq::fast::AgqFastProgram>(cfg.agq, cfg.forwarding, pre);
}

void install_jobs(const SwitchConfig& cfg, pipeline::SwitchProgram& prog) {
  if (cfg.jobs.empty()) return;
  if (prog.name() != "agq")  // load_config never lets this happen
    throw ConfigError(cfg.path + ":" + std::to_string(cfg.jobs[0].line) + ": job[0]: the program is \"" +
                      std::string(prog.name()) + "\", jobs need \"agq\"");
  auto& agq = static_cast<pipeline::agq::AgqSwitchProgram&>(prog);
  for (size_t i = 0; i < cfg.jobs.size(); ++i) {
    const JobEntry& e = cfg.jobs[i];
    if (auto err = agq.add_job(e.spec))
      throw ConfigError(cfg.path + ":" + std::to_string(e.line) + ": job[" + std::to_string(i) + "]: " + *err);
  }
}

}  // namespace agq::control
