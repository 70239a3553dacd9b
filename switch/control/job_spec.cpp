#include "control/job_spec.hpp"

#include <vector>

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
