// Per-packet intrinsic metadata, named after TNA's structs, and the
// forwarding decision a program hands back to the dataplane.
#pragma once

#include <cstdint>

namespace agq::tna {

using PortId = uint16_t;
inline constexpr PortId kNoPort = 0xFFFF;
using McastGroupId = uint16_t;  // 0 = no multicast

// ingress_intrinsic_metadata_t (subset)
struct IngressIntrinsicMd {
  PortId ingress_port = kNoPort;
  uint64_t ingress_mac_tstamp_ns = 0;
  bool resubmit_flag = false;  // this pass is a resubmitted packet
};

// ingress_intrinsic_metadata_for_tm_t (subset)
struct IngressIntrinsicMdForTm {
  PortId ucast_egress_port = kNoPort;
  McastGroupId mcast_grp_a = 0;
  PortId level2_exclusion_port = kNoPort;  // replicas to this port are pruned (TNA: level2_exclusion_id)
};

// ingress_intrinsic_metadata_for_deparser_t (subset)
struct IngressIntrinsicMdForDeparser {
  uint8_t drop_ctl = 0;          // bit 0 set: no unicast, no multicast, no resubmit
  bool resubmit = false;         // armed by writing resubmit_type
};

// What leaves the traffic manager for one packet.
struct Decision {
  // Handoff: the packet belongs to state another pipe (lcore) holds; the
  // dataplane gives it, untouched, to the owner of `shard` (the program's
  // own ownership check, Program::checks_ownership()).
  enum class Kind : uint8_t { Drop, Unicast, Multicast, Handoff };
  Kind kind = Kind::Drop;
  PortId port = kNoPort;            // Unicast
  McastGroupId group = 0;           // Multicast
  PortId exclude_port = kNoPort;    // Multicast: prune this port
  uint16_t drop_reason = 0;         // program-defined, when Kind::Drop
  uint16_t shard = 0;               // Handoff (docs/PROTOCOL.md section 10)

  static Decision drop(uint16_t reason) { return {Kind::Drop, kNoPort, 0, kNoPort, reason, 0}; }
  static Decision unicast(PortId p) { return {Kind::Unicast, p, 0, kNoPort, 0, 0}; }
  static Decision multicast(McastGroupId g, PortId exclude = kNoPort) {
    return {Kind::Multicast, kNoPort, g, exclude, 0, 0};
  }
  static Decision handoff(uint32_t shard) { return {Kind::Handoff, kNoPort, 0, kNoPort, 0, uint16_t(shard)}; }
};

}  // namespace agq::tna
