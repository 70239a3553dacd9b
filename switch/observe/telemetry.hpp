// The switch's rte_telemetry commands (/agq/counters, /agq/ports,
// /agq/jobs, /agq/job,<id>, /agq/dump,<row>[,<count>], /agq/routes,
// /agq/macs, /agq/arp, /agq/drops, /agq/captures), readable with DPDK's
// dpdk-telemetry.py or anything that speaks the telemetry socket
// (/var/run/dpdk/<file-prefix>/dpdk_telemetry.v2).
//
// Each command is the control-socket command of the same data with
// --json, sent to the switch's own control socket: the telemetry thread
// never reads program or dataplane state itself, it gets exactly what
// agqctl gets, from the control thread that owns that state (and applies
// whatever locking or per-lcore propagation the control plane does).
// The JSON becomes rte_tel_data (observe/tel_json.hpp).
#pragma once

#include <string>

namespace agq::observe {

// Registers the commands; they ask the control socket at `ctl_socket`.
// Call once, after rte_eal_init (a no-op for the socket when EAL runs with
// --no-telemetry: the commands exist, nobody can ask). Throws
// std::runtime_error if DPDK refuses a registration.
void register_telemetry(const std::string& ctl_socket);

// The control-socket line a telemetry command stands for, or "" when the
// command or its parameters are not valid (exposed for tests).
std::string telemetry_to_ctl(const std::string& cmd, const std::string& params);

}  // namespace agq::observe
