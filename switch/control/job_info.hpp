// A job as the switch describes it to its workers (docs/PROTOCOL.md §12):
// `agqctl job get ID --json` (control socket "job get ID --json") prints
// to_json(JobInfo); a worker or PS reads it back with parse_job_info, from
// the socket (fetch_job_info) or from a file saved with
// `agqctl job get ID --json > job.json`. One schema, written and read by
// this file only.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "control/json.hpp"
#include "proto/headers.hpp"
#include "tna/intrinsic.hpp"

namespace agq::control {

struct JobEndpoint {
  tna::PortId port = tna::kNoPort;
  uint32_t ipv4 = 0;  // host order
  proto::Mac mac{};
  friend bool operator==(const JobEndpoint&, const JobEndpoint&) = default;
};

struct JobWorker {
  uint8_t id = 0;
  JobEndpoint at;
  friend bool operator==(const JobWorker&, const JobWorker&) = default;
};

struct JobInfo {
  uint16_t id = 0;
  uint8_t workers = 0;  // N
  uint32_t slots = 0, rows = 0;  // rows: the rows the switch carved (<= the quota asked for)
  uint8_t row_shift = 0, guard = 0, max_width = 32, lanes = 32;
  std::string delivery = "multicast";  // "multicast" | "ps"
  std::optional<JobEndpoint> ps;       // absent: the job has no PS
  std::vector<JobWorker> worker_table;  // by id, 0..N-1
  uint16_t epoch = 0;   // the switch's boot epoch (§11); 0: this switch has none
  uint16_t lcores = 1;  // dataplane lcores = queues per port (§10)
  // Queue pairs of the switch's memif ports (--memif-queues) = the rings a
  // memif client may connect with (more: the server refuses the client).
  // Optional in the document (job files saved before it existed): 0 = not said.
  uint16_t rings = 0;
  friend bool operator==(const JobInfo&, const JobInfo&) = default;
};

// A JSON document that is not a job description: names the field.
struct JobInfoError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

Json to_json(const JobInfo& j);
// Every field is required and range-checked; throws JobInfoError naming
// the field ("job: worker_table[1].mac: '...' is not a MAC address").
JobInfo parse_job_info(const Json& j);
JobInfo parse_job_info_text(std::string_view text);
// Asks a running switch (its control socket) for job `id`. Throws
// CtlTransportError (switch unreachable) or JobInfoError (the switch
// answered an error, e.g. "no job 7", or something that is not a job).
JobInfo fetch_job_info(const std::string& ctl_socket, uint16_t id);

}  // namespace agq::control
