// Rules and text form of an agq job (docs/PROTOCOL.md §6), shared by the
// configuration file ([[job]]) and the control socket ('job add'), so both
// accept the same jobs and refuse them with the same words. AgqProgram's
// add_job has the last word (space, conflicts with other jobs); these are
// the rules that need no switch state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "pipeline/agq/agq_program.hpp"

namespace agq::control {

inline constexpr int64_t kMaxJobId = 65535;       // job_id is 16 bits; 0 is invalid
inline constexpr int64_t kMaxJobWorkers = 32;     // one bit per worker in a 32-bit bitmap
inline constexpr int64_t kMaxJobSlots = 65536;    // the header's slot field is 16 bits
inline constexpr int64_t kMinWidth = 4, kMaxWidth = 32;  // one to eight 4-bit units
inline constexpr int64_t kMinLanes = 16, kMaxLanes = 32;  // the lane profiles (PROTOCOL §10)
inline constexpr int64_t kMaxTotalRows = 65536;
inline constexpr int64_t kMaxTotalSlots = 1 << 20;

// nullopt when `job` obeys every rule that needs no switch state: ranges,
// worker ids 0..N-1 each exactly once, a PS for delivery "ps", unicast MACs.
// (rows is a quota: the program packs 2^k slots per row, the fewest rows
// within it, and refuses a job that does not fit.)
std::optional<std::string> check_job(const pipeline::agq::JobSpec& job);

// One line in 'job add' syntax (without "job add"), e.g.
// "1 workers=2 slots=64 rows=8 delivery=multicast max_width=32 worker=0,1,10.0.0.1,02:00:00:00:00:01 ..."
// lanes=16 only for the 16-lane profile (32 is the default).
std::string format_job(const pipeline::agq::JobSpec& job);

const char* delivery_name(pipeline::agq::ResultDelivery d);

// PROTOCOL.md §6: a job whose rows cannot hold its slots' windows gets a
// warning (at 'job add' and at config load) naming the numbers: slots per
// row = 2^row_shift share 8 units per row half, so at max_width at most
// 8 / (max_width / 4) of a row's slots aggregate in the switch at once and
// the rest go to the PS; "PS only" when max_width is below w_min (no window
// can ever be granted). nullopt: every slot of a row fits at max_width.
// The text starts with "job <id>: warning: ".
std::optional<std::string> job_capacity_warning(const pipeline::agq::JobSpec& job);

}  // namespace agq::control
