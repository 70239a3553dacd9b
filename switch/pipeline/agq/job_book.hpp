// Where the jobs of an agq program live in its register space: the one
// piece of code that carves rows and slots (first fit), picks a job's dense
// index and row_shift, and turns a job into its table entries. Both agq
// programs (the TNA model and the fast one) use it, so the same job gets the
// same placement in both.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>

#include "pipeline/agq/agq_program.hpp"
#include "pipeline/agq/tables.hpp"

namespace agq::pipeline::agq {

// Slots per row = 2^row_shift: the smallest k with ceil(slots / 2^k) <=
// rows (a row of a slot is then a constant shift, slot_row_t), at most
// kMaxRowShift.
constexpr uint8_t row_shift_for(uint32_t slots, uint32_t rows) {
  uint8_t shift = 0;
  while (shift < kMaxRowShift && ((uint64_t(slots) + (1u << shift) - 1) >> shift) > rows) ++shift;
  return shift;
}

struct JobRecord {
  JobSpec spec;
  JobPlacement place;
};

class JobBook {
 public:
  explicit JobBook(const AgqConfig& cfg) : cfg_(cfg) {}

  // The placement `job` would get now, or why it cannot be added.
  std::variant<JobPlacement, std::string> plan(const JobSpec& job) const;
  void commit(const JobSpec& job, const JobPlacement& place) { jobs_[job.job_id] = JobRecord{job, place}; }
  // Forgets the job; returns its record (nullopt: no such job).
  std::optional<JobRecord> erase(uint16_t job_id);

  const AgqConfig& config() const { return cfg_; }
  const std::map<uint16_t, JobRecord>& records() const { return jobs_; }
  const JobRecord* find(uint16_t job_id) const {
    auto it = jobs_.find(job_id);
    return it == jobs_.end() ? nullptr : &it->second;
  }

 private:
  AgqConfig cfg_;
  std::map<uint16_t, JobRecord> jobs_;  // by job_id
};

// set_job's action data (job_t) and set_worker's (worker_t, egress_worker_t).
JobAction job_action(const JobSpec& job, const JobPlacement& place);
WorkerAction worker_action(const WorkerSpec& w);

}  // namespace agq::pipeline::agq
