#include "libagq/switch_job.hpp"

#include "control/ctl_protocol.hpp"
#include "control/job_info.hpp"

namespace agq::libagq {

JobParams job_from_switch(const std::string& ctl_socket, uint16_t job_id, unsigned worker_id) {
  control::JobInfo j;
  try {
    j = control::fetch_job_info(ctl_socket, job_id);
  } catch (const control::CtlTransportError& e) {
    const std::string hint = control::is_tcp_target(ctl_socket)
                                 ? " (is agq-switch running with --job-listen " + ctl_socket.substr(4) +
                                       ", reachable from this host?)"
                                 : " (is agq-switch running with --ctl-socket " + ctl_socket + "?)";
    throw ClientError("libagq: job " + std::to_string(job_id) + ": cannot ask the switch at " + ctl_socket + ": " +
                      e.what() + hint);
  } catch (const control::JobInfoError& e) {
    throw ClientError("libagq: " + std::string(e.what()));
  }
  if (worker_id >= j.workers)
    throw ClientError("libagq: job " + std::to_string(job_id) + " has " + std::to_string(j.workers) +
                      " workers; worker id " + std::to_string(worker_id) + " is not one of them");
  JobParams p;
  p.job.job_id = j.id;
  p.job.num_workers = j.workers;
  p.job.slots = j.slots;
  p.job.lanes = j.lanes;
  p.job.row_shift = j.row_shift;
  p.job.max_width = j.max_width;
  p.worker_id = worker_id;
  const control::JobWorker& me = j.worker_table.at(worker_id);
  p.self = {me.at.mac, me.at.ipv4};
  if (j.ps) p.ps = {j.ps->mac, j.ps->ipv4};
  return p;
}

}  // namespace agq::libagq
