#include "control/job_spec.hpp"

#include <algorithm>
#include <vector>

#include "pipeline/agq/encoding.hpp"
#include "pipeline/agq/job_book.hpp"
#include "proto/headers.hpp"

namespace agq::control {

using pipeline::agq::JobSpec;
using pipeline::agq::ResultDelivery;

const char* delivery_name(ResultDelivery d) { return d == ResultDelivery::Ps ? "ps" : "multicast"; }

std::optional<std::string> check_job(const JobSpec& job) {
  const auto range = [](const char* what, int64_t v, int64_t lo, int64_t hi) -> std::optional<std::string> {
    if (v >= lo && v <= hi) return std::nullopt;
    return std::string(what) + " " + std::to_string(v) + " is out of range " + std::to_string(lo) + ".." +
           std::to_string(hi);
  };
  if (auto e = range("job id", job.job_id, 1, kMaxJobId)) return e;
  if (auto e = range("workers", job.num_workers, 1, kMaxJobWorkers)) return e;
  if (auto e = range("slots", job.slots, 1, kMaxJobSlots)) return e;
  if (auto e = range("rows", job.rows, 1, kMaxTotalRows)) return e;
  if (auto e = range("max_width", job.max_width, kMinWidth, kMaxWidth)) return e;
  if (job.max_width % 4 != 0) return "max_width " + std::to_string(job.max_width) + " is not a multiple of 4";
  if (job.lanes != kMinLanes && job.lanes != kMaxLanes)
    return "lanes " + std::to_string(job.lanes) + " is not 32 or 16 (the lane profiles)";
  if (job.delivery == ResultDelivery::Ps && job.ps_port == tna::kNoPort)
    return std::string("delivery \"ps\" needs a PS (ps_port, ps_ip, ps_mac)");
  if (job.ps_port != tna::kNoPort && (job.ps_mac[0] & 1))
    return "PS MAC " + proto::mac_to_string(job.ps_mac) + " is a multicast address";
  if (job.workers.size() != job.num_workers)
    return std::to_string(job.workers.size()) + " workers listed, workers = " + std::to_string(job.num_workers);
  std::vector<bool> seen(job.num_workers, false);
  for (const auto& w : job.workers) {
    if (w.worker_id >= job.num_workers)
      return "worker id " + std::to_string(w.worker_id) + " is out of range 0.." + std::to_string(job.num_workers - 1);
    if (seen[w.worker_id]) return "worker id " + std::to_string(w.worker_id) + " is listed twice";
    seen[w.worker_id] = true;
    if (w.mac[0] & 1)
      return "worker " + std::to_string(w.worker_id) + ": MAC " + proto::mac_to_string(w.mac) +
             " is a multicast address";
  }
  return std::nullopt;
}

std::optional<std::string> job_capacity_warning(const JobSpec& job) {
  namespace pa = pipeline::agq;
  const std::string id = "job " + std::to_string(job.job_id) + ": warning: ";
  // A sequence that gets no window goes to the PS; without one it can only
  // be retried until the workers give up.
  const std::string no_ps = job.ps_port == tna::kNoPort
                                ? "; this job has no PS (ps_port): a sequence that gets no window cannot complete "
                                  "(add a PS, or rows)"
                                : "";
  const unsigned g = pa::guard_bits(job.num_workers);
  const unsigned w_min = pa::kUnitBits * pa::min_grant_units(g);  // the narrowest min_width a DATA may carry
  if (job.max_width < w_min)
    return id + "PS only: max_width " + std::to_string(job.max_width) + " bits is below w_min " +
           std::to_string(w_min) + " bits (g = " + std::to_string(g) + " guard bits for " +
           std::to_string(job.num_workers) + " workers + 2 value bits): no window is ever granted, every " +
           "sequence goes to the PS (raise max_width to " + std::to_string(w_min) + ")" + no_ps;
  const uint8_t shift = pa::row_shift_for(job.slots, job.rows);
  const uint64_t per_row = std::min<uint64_t>(uint64_t(1) << shift, job.slots);  // slots sharing a row
  const unsigned units = job.max_width / pa::kUnitBits;
  const unsigned fit = pa::kUnits / units;  // windows of max_width in one row half
  if (per_row <= fit) return std::nullopt;
  // The rows that would hold every slot at max_width: 2^k <= fit slots per row.
  unsigned k = 0;
  while ((2u << k) <= fit) ++k;
  const uint64_t rows_needed = (uint64_t(job.slots) + (uint64_t(1) << k) - 1) >> k;
  return id + std::to_string(per_row) + " slots per row (2^" + std::to_string(shift) + ", " +
         std::to_string(job.slots) + " slots in " + std::to_string(job.rows) + " rows) share 8 units per row " +
         "half: with windows of max_width " + std::to_string(job.max_width) + " bits (" + std::to_string(units) +
         " units) at most " + std::to_string(fit) + " of a row's " + std::to_string(per_row) +
         " slots aggregate in the switch at once, the rest go to the PS (rows = " + std::to_string(rows_needed) +
         " hold every slot at " + std::to_string(job.max_width) + " bits)" + no_ps;
}

std::string format_job(const JobSpec& job) {
  std::string s = std::to_string(job.job_id) + " workers=" + std::to_string(job.num_workers) +
                  " slots=" + std::to_string(job.slots) + " rows=" + std::to_string(job.rows) +
                  " delivery=" + delivery_name(job.delivery);
  if (job.ps_port != tna::kNoPort)
    s += " ps=" + std::to_string(job.ps_port) + "," + proto::ipv4_to_string(job.ps_ipv4) + "," +
         proto::mac_to_string(job.ps_mac);
  s += " max_width=" + std::to_string(job.max_width);
  if (job.lanes != kMaxLanes) s += " lanes=" + std::to_string(job.lanes);  // 32 is the default
  for (const auto& w : job.workers)
    s += " worker=" + std::to_string(w.worker_id) + "," + std::to_string(w.port) + "," +
         proto::ipv4_to_string(w.ipv4) + "," + proto::mac_to_string(w.mac);
  return s;
}

}  // namespace agq::control
