// Jobs of the agq programs: JobBook (placement, shared by both programs) and
// AgqProgram's control plane. A job gets a contiguous run of rows and of
// slots (first fit), a dense index (its PRE group), job_t / worker_t /
// egress_worker_t entries. Removing a job zeroes its rows and slots, so the
// next job finds the invariant "a unit not in a live window is zero" true.
#include <algorithm>
#include <set>
#include <string>
#include <variant>

#include "pipeline/agq/agq_program.hpp"
#include "pipeline/agq/job_book.hpp"
#include "pipeline/agq/program_impl.hpp"

namespace agq::pipeline::agq {

namespace {

std::optional<std::string> check_spec(const JobSpec& j) {
  const std::string id = "job " + std::to_string(j.job_id) + ": ";
  if (j.job_id == 0) return "job id 0 is reserved";
  if (j.num_workers == 0 || j.num_workers > kMaxWorkers)
    return id + "num_workers must be 1.." + std::to_string(kMaxWorkers);
  if (j.workers.size() != j.num_workers)
    return id + "needs exactly " + std::to_string(j.num_workers) + " workers, got " +
           std::to_string(j.workers.size());
  std::set<uint8_t> ids;
  for (const WorkerSpec& w : j.workers) {
    if (w.worker_id >= j.num_workers) return id + "worker_id " + std::to_string(w.worker_id) + " >= num_workers";
    if (!ids.insert(w.worker_id).second) return id + "worker_id " + std::to_string(w.worker_id) + " twice";
    if (w.port == tna::kNoPort) return id + "worker " + std::to_string(w.worker_id) + " has no port";
  }
  if (j.slots == 0 || j.slots > 65536) return id + "slots must be 1..65536";
  if (j.rows == 0) return id + "rows must be >= 1";
  if (j.max_width < 4 || j.max_width > 32 || j.max_width % 4 != 0)
    return id + "max_width must be 4..32, a multiple of 4";
  if (j.lanes != proto::kAgqLanes && j.lanes != proto::kAgqLanesT1) return id + "lanes must be 32 or 16";
  if (j.ps_port == tna::kNoPort && j.delivery == ResultDelivery::Ps) return id + "delivery = ps needs ps_port";
  return std::nullopt;
}

// First fit of `need` units in [0, capacity) between the used intervals.
std::optional<uint32_t> first_fit(std::vector<std::pair<uint32_t, uint32_t>> used, uint32_t need,
                                  uint32_t capacity) {
  std::sort(used.begin(), used.end());
  uint32_t at = 0;
  for (const auto& [base, len] : used) {
    if (base >= at && base - at >= need) return at;
    at = std::max(at, base + len);
  }
  if (at <= capacity && capacity - at >= need) return at;
  return std::nullopt;
}

}  // namespace

std::variant<JobPlacement, std::string> JobBook::plan(const JobSpec& job) const {
  if (auto err = check_spec(job)) return *err;
  const std::string id = "job " + std::to_string(job.job_id) + ": ";
  if (jobs_.count(job.job_id)) return id + "already registered (overlap)";

  // Slots per row = 2^row_shift, the smallest that fits the row quota: the
  // row of a slot is then a constant shift (slot_row_t).
  const uint8_t shift = row_shift_for(job.slots, job.rows);
  const uint32_t rows = uint32_t((uint64_t(job.slots) + (1u << shift) - 1) >> shift);

  std::vector<std::pair<uint32_t, uint32_t>> used_rows, used_slots;
  std::set<uint16_t> used_index;
  for (const auto& [jid, rec] : jobs_) {
    used_rows.emplace_back(rec.place.row_base, rec.place.rows);
    used_slots.emplace_back(rec.place.slot_base, rec.place.slots);
    used_index.insert(rec.place.job_index);
  }
  const auto row_base = first_fit(used_rows, rows, cfg_.total_rows);
  if (!row_base) return id + "no space: " + std::to_string(rows) + " free contiguous rows needed";
  const auto slot_base = first_fit(used_slots, job.slots, cfg_.total_slots);
  if (!slot_base) return id + "no space: " + std::to_string(job.slots) + " free contiguous slots needed";
  uint16_t index = 0;
  while (index < AgqSwitchProgram::kMaxJobs && used_index.count(index)) ++index;
  if (index == AgqSwitchProgram::kMaxJobs)
    return id + "no space: " + std::to_string(AgqSwitchProgram::kMaxJobs) + " jobs registered";

  JobPlacement p;
  p.job_index = index;
  p.mcast_grp = tna::McastGroupId(AgqSwitchProgram::kJobGroupBase + index);
  p.row_base = *row_base;
  p.rows = rows;
  p.slot_base = *slot_base;
  p.slots = job.slots;
  p.row_shift = shift;
  p.guard = uint8_t(guard_bits(job.num_workers));
  return p;
}

std::optional<JobRecord> JobBook::erase(uint16_t job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return std::nullopt;
  JobRecord rec = it->second;
  jobs_.erase(it);
  return rec;
}

JobAction job_action(const JobSpec& job, const JobPlacement& p) {
  JobAction a;
  a.hit = true;
  a.job_index = p.job_index;
  a.num_workers = job.num_workers;
  a.guard = p.guard;
  a.w_min_units = uint8_t(min_grant_units(p.guard));
  a.max_units = uint8_t(job.max_width / 4);
  a.lanes = job.lanes;
  a.slots = job.slots;
  a.slot_base = p.slot_base;
  a.row_base = p.row_base;
  a.row_shift = p.row_shift;
  a.delivery = job.delivery;
  a.ps_port = job.ps_port;
  a.ps_ipv4 = job.ps_ipv4;
  a.ps_mac = job.ps_mac;
  a.mcast_grp = p.mcast_grp;
  return a;
}

WorkerAction worker_action(const WorkerSpec& w) { return WorkerAction{true, 1u << w.worker_id, w.port, w.ipv4, w.mac}; }

std::optional<std::string> AgqProgram::add_job(const JobSpec& job) {
  Impl& s = *impl_;
  auto planned = s.book.plan(job);
  if (auto* err = std::get_if<std::string>(&planned)) return *err;
  const JobPlacement p = std::get<JobPlacement>(planned);
  if (!s.ingress.job_t.add(job.job_id, job_action(job, p)))
    return "job " + std::to_string(job.job_id) + ": job_t is full";
  std::vector<tna::Replica> replicas;
  for (const WorkerSpec& w : job.workers) {
    s.ingress.worker_t.upsert(worker_key(job.job_id, w.worker_id), worker_action(w));
    s.egress_worker_t.upsert(worker_key(job.job_id, w.worker_id), worker_action(w));
    replicas.push_back({w.port, w.worker_id});
  }
  pre().set_group(p.mcast_grp, std::move(replicas));
  s.book.commit(job, p);
  return std::nullopt;
}

bool AgqProgram::remove_job(uint16_t job_id) {
  Impl& s = *impl_;
  const auto rec = s.book.erase(job_id);
  if (!rec) return false;
  s.ingress.job_t.remove(job_id);
  for (const WorkerSpec& w : rec->spec.workers) {
    s.ingress.worker_t.remove(worker_key(job_id, w.worker_id));
    s.egress_worker_t.remove(worker_key(job_id, w.worker_id));
  }
  pre().remove_group(rec->place.mcast_grp);
  Registers& r = s.ingress.registers();
  for (uint32_t i = rec->place.slot_base; i < rec->place.slot_base + rec->place.slots; ++i) {
    r.slot_bitmap.write(i, {});
    r.slot_count.write(i, {});
    r.slot_window.write(i, {});
  }
  for (uint32_t row = rec->place.row_base; row < rec->place.row_base + rec->place.rows; ++row) {
    r.row_occupancy.write(row, {});
    for (auto& lane : r.lanes) lane.write(row, {});
  }
  return true;
}

std::vector<JobSpec> AgqProgram::jobs() const {
  std::vector<JobSpec> out;
  for (const auto& [id, rec] : impl_->book.records()) out.push_back(rec.spec);
  return out;
}

std::optional<JobPlacement> AgqProgram::placement(uint16_t job_id) const {
  const JobRecord* rec = impl_->book.find(job_id);
  if (!rec) return std::nullopt;
  return rec->place;
}

}  // namespace agq::pipeline::agq
