// Why a program dropped a packet. Every drop is counted under one of these.
#pragma once

#include <cstdint>

namespace agq::pipeline {

enum class DropReason : uint16_t {
  None = 0,
  ParserError,        // truncated frame, bad IPv4 header
  AgqBadIndex,        // hashID / hash1 outside the register capacity
  AgqCollision,       // classic: hashID owned by another jobAndSeq (ID == 0)
  AgqAbsorbed,        // classic: a contribution that did not complete its sequence (ina_action 2)
  AgqAckNoOwner,      // classic: ACK whose jobAndSeq does not own the slot
  L2SamePort,         // destination MAC is behind the ingress port
  L2NoPorts,          // flood with no other port
  Count
};

inline const char* to_string(DropReason r) {
  switch (r) {
    case DropReason::None: return "none";
    case DropReason::ParserError: return "parser_error";
    case DropReason::AgqBadIndex: return "agq_bad_index";
    case DropReason::AgqCollision: return "agq_collision";
    case DropReason::AgqAbsorbed: return "agq_absorbed";
    case DropReason::AgqAckNoOwner: return "agq_ack_no_owner";
    case DropReason::L2SamePort: return "l2_same_port";
    case DropReason::L2NoPorts: return "l2_no_ports";
    case DropReason::Count: break;
  }
  return "?";
}

}  // namespace agq::pipeline
