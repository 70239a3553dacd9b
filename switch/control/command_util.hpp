// Internal to the control-socket interpreter (commands*.cpp): the error a
// command throws, argument checks and the column formatter, shared so that
// the command families can live in files of their own.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "control/columns.hpp"
#include "control/control_plane.hpp"
#include "pipeline/switch_program.hpp"
#include "tna/intrinsic.hpp"

namespace agq::control {

struct CommandError {
  std::string message;
  std::string usage;  // empty: no usage line
};

// Throws "missing arguments" / "too many arguments" unless lo <= w.size() <= hi.
inline void check_arg_count(const std::vector<std::string>& w, size_t lo, size_t hi, const char* usage) {
  if (w.size() < lo || w.size() > hi)
    throw CommandError{w.size() < lo ? "missing arguments" : "too many arguments", usage};
}

// Removes a trailing "--json" from `w`; true if it was there.
inline bool take_json_flag(std::vector<std::string>& w) {
  if (w.size() < 2 || w.back() != "--json") return false;
  w.pop_back();
  return true;
}

// A port number that exists on the running switch, else CommandError.
tna::PortId existing_port(DataplaneView& dp, const std::string& s, const char* usage);

// The agq job commands ('job list|add|del', commands_agq.cpp).
// `json`: the command line carried --json (data as JSON, control/json.hpp).
std::string job_command(Pipes& pipes, DataplaneView& dp, const std::vector<std::string>& w, bool json);
// The drop simulator commands ('drop <port> <rx|tx> <p>|list|clear', commands_drop.cpp).
std::string drop_command(DataplaneView& dp, const std::vector<std::string>& w, bool json = false);

// The shaped ports' queues ('queues', commands_queues.cpp).
std::string queues_command(DataplaneView& dp, const std::vector<std::string>& w, bool json = false);

inline constexpr const char* kUsageQueues = "queues";
inline constexpr const char* kUsageJob =
    "job list | job del <id> | job add <id> workers=<n> slots=<s> rows=<r> [delivery=multicast|ps] "
    "[ps=<port>,<ip>,<mac>] [max_width=<bits>] [lanes=32|16] worker=<id>,<port>,<ip>,<mac> ...";
inline constexpr const char* kUsageJobGet = "job get <id> [--json] | job reset <id>";
inline constexpr const char* kUsageDrop = "drop <port> <rx|tx> <probability 0..1> | drop list | drop clear";

}  // namespace agq::control
