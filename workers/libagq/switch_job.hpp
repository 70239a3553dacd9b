// libagq's job from a running switch (PROTOCOL.md §12): `job get ID --json`
// on its control socket, through the control library's one reader of that
// schema (control/job_info.hpp), turned into the Client's JobParams for one
// worker id (its MAC/IPv4 from the switch's worker table).
#pragma once

#include <string>

#include "libagq/client.hpp"

namespace agq::libagq {

// Throws ClientError naming the job and what went wrong (switch unreachable,
// "no job 7", a field the switch answered that does not fit).
JobParams job_from_switch(const std::string& ctl_socket, uint16_t job_id, unsigned worker_id);

}  // namespace agq::libagq
