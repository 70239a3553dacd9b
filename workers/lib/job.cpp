#include "lib/job.hpp"

namespace agq::worker {

int64_t JobSpec::slot_of_hash_id(uint16_t hash_id) const {
  const uint32_t a = hash_id >> 3, sub = hash_id & 7;
  if (a < slot_base || sub >= seqs_per_agg) return -1;
  const uint64_t slot = uint64_t(a - slot_base) * seqs_per_agg + sub;
  return slot < window ? int64_t(slot) : -1;
}

std::string JobSpec::validate() const {
  if (job_id < 1 || job_id > 31) return "--job-id must be 1..31 (it is the top 5 bits of jobAndSeq, which must not be 0)";
  if (total_workers < 1) return "--workers must be 1..255 (the switch counts contributions in 8 bits)";
  if (elements < 1) return "--elements must be at least 1";
  if (window < 1) return "--window must be at least 1";
  if (seqs_per_agg < 1 || seqs_per_agg > 8) return "--seqs-per-agg must be 1..8 (8 sub-slots per aggregator)";
  const uint64_t aggs = (uint64_t(window) + seqs_per_agg - 1) / seqs_per_agg;
  if ((slot_base + aggs) * 8 > kHashIdLimit)
    return "--slot-base + window/seqs-per-agg aggregators exceed the switch's 35000 hashIDs (" +
           std::to_string(kHashIdLimit / 8) + " aggregators)";
  return {};
}

}  // namespace agq::worker
