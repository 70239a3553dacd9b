// What an agq program does with a frame that is not agq traffic: parser
// errors are counted and dropped, ordinary traffic goes through the shared
// Forwarding control. One function for both agq programs.
#pragma once

#include <optional>
#include <span>

#include "pipeline/agq/program_counters.hpp"
#include "pipeline/forwarding.hpp"
#include "pipeline/parser.hpp"

namespace agq::pipeline::agq {

// Parses `bytes` into `hdr`. Returns the decision for a parser error or a
// frame without a valid agq header; nullopt for an agq frame (in `hdr`).
std::optional<tna::Decision> ordinary_traffic(Forwarding& fwd, std::span<uint8_t> bytes,
                                              const tna::IngressIntrinsicMd& md, Headers& hdr,
                                              ProgramCounters& c);

}  // namespace agq::pipeline::agq
