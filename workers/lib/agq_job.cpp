#include "lib/agq_job.hpp"

#include "proto/agq.hpp"

namespace agq::worker {

static_assert(kAgqLanes == proto::kAgqLanes);

std::string AgqJobSpec::validate() const {
  if (job_id < 1) return "--job-id must be 1..65535 (0 is invalid in the agq header)";
  if (num_workers < 1 || num_workers > 32) return "--workers must be 1..32 (the switch's slot bitmap has 32 bits)";
  if (elements < 1) return "--elements must be at least 1";
  if (slots < 1 || slots > 65536) return "--slots must be 1..65536 (16-bit slot field)";
  if (window > slots) return "--window (outstanding slots) must be <= --slots";
  if (rounds < 1) return "--rounds must be at least 1";
  if (rows && slots % rows) return "--rows must divide --slots (slots_per_row = slots / rows)";
  return {};
}

}  // namespace agq::worker
