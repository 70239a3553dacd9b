#include "observe/telemetry.hpp"

#include <rte_telemetry.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "control/ctl_protocol.hpp"
#include "control/json.hpp"
#include "observe/tel_json.hpp"

namespace agq::observe {
namespace {

struct Command {
  const char* name;    // telemetry command
  const char* line;    // control-socket command
  int params;          // max comma-separated numeric parameters (0: none allowed)
  int required;        // min parameters
  const char* help;
};

constexpr Command kCommands[] = {
    {"/agq/counters", "counters", 0, 0, "Program and dataplane counters. Takes no parameters"},
    {"/agq/ports", "ports", 0, 0, "Per-port link state and statistics, one array per column. Takes no parameters"},
    {"/agq/jobs", "job list", 0, 0, "The agq jobs, one array per field. Takes no parameters"},
    {"/agq/job", "job get", 1, 1, "One agq job as its workers get it (PROTOCOL.md section 12). Parameters: int job_id"},
    {"/agq/dump", "dump", 2, 1,
     "Register cells of aggregator rows. Parameters: int row[,int count] (count <= 4)"},
    {"/agq/routes", "route list", 0, 0, "IPv4 host routes. Takes no parameters"},
    {"/agq/macs", "mac list", 0, 0, "MAC table. Takes no parameters"},
    {"/agq/arp", "arp list", 0, 0, "ARP proxy entries. Takes no parameters"},
    {"/agq/drops", "drop list", 0, 0, "Drop simulator per port. Takes no parameters"},
    {"/agq/queues", "queues", 0, 0,
     "Shaped ports' egress queues (rate, depth, enqueued/dequeued/dropped, ECN marks), one array per column. "
     "Takes no parameters"},
    {"/agq/captures", "capture list", 0, 0, "Running packet captures. Takes no parameters"},
};
// A dump of more rows would not fit telemetry's 256 dict entries... nor its
// 16 KiB answer; a few rows are what a dashboard shows anyway.
constexpr unsigned long kMaxDumpRows = 4;

// Our own control socket; set once before the first registration, read by
// the telemetry thread (telemetry callbacks carry no user argument).
std::string g_ctl_socket;

int on_command(const char* cmd, const char* params, rte_tel_data* d) {
  const std::string line = telemetry_to_ctl(cmd, params ? params : "");
  if (line.empty()) return -EINVAL;
  try {
    const control::CtlReply r = control::ctl_request(g_ctl_socket, line + " --json", 2000);
    if (!r.ok) {
      rte_tel_data_string(d, ("error: " + r.message).substr(0, RTE_TEL_MAX_SINGLE_STRING_LEN - 1).c_str());
      return 0;
    }
    return json_to_tel(control::Json::parse(r.body), d);
  } catch (const std::exception&) {
    return -EIO;  // switch stopping, or not JSON
  }
}

}  // namespace

std::string telemetry_to_ctl(const std::string& cmd, const std::string& params) {
  for (const Command& c : kCommands) {
    if (cmd != c.name) continue;
    std::string line = c.line;
    int n = 0;
    size_t at = 0;
    if (!params.empty()) {
      for (;;) {
        const size_t comma = params.find(',', at);
        const std::string p = params.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        if (p.empty() || p.size() > 9 || p.find_first_not_of("0123456789") != std::string::npos) return "";
        if (std::string_view(c.line) == "dump" && n == 1 && std::stoul(p) > kMaxDumpRows) return "";
        line += " " + p;
        ++n;
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
    }
    if (n < c.required || n > c.params) return "";
    return line;
  }
  return "";
}

void register_telemetry(const std::string& ctl_socket) {
  g_ctl_socket = ctl_socket;
  for (const Command& c : kCommands)
    if (rte_telemetry_register_cmd(c.name, on_command, c.help) != 0)
      throw std::runtime_error(std::string("telemetry: cannot register ") + c.name);
}

}  // namespace agq::observe
