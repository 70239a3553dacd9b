// The packet replication engine: multicast group id -> replicas, each a
// (port, rid) pair as on Tofino (the rid reaches the egress control, which
// can rewrite that replica; one port may appear with several rids).
// Configured by the control plane, read by the dataplane to clone a packet
// to every member except the pruned port.
#pragma once

#include <cstddef>
#include <map>
#include <vector>

#include "tna/intrinsic.hpp"

namespace agq::tna {

struct Replica {
  PortId port = kNoPort;
  uint16_t rid = 0;
  bool operator==(const Replica&) const = default;
};

class ReplicationEngine {
 public:
  ReplicationEngine() = default;
  // flat_ points into groups_: a copy would point into the original.
  ReplicationEngine(const ReplicationEngine&) = delete;
  ReplicationEngine& operator=(const ReplicationEngine&) = delete;
  void set_group(McastGroupId g, std::vector<Replica> replicas) {
    auto& v = groups_[g];
    v = std::move(replicas);
    if (flat_.size() <= g) flat_.resize(std::size_t(g) + 1, nullptr);
    flat_[g] = &v;
  }
  // A group whose replicas all have rid 0.
  void set_group(McastGroupId g, const std::vector<PortId>& ports) {
    std::vector<Replica> r;
    for (PortId p : ports) r.push_back({p, 0});
    set_group(g, std::move(r));
  }
  void remove_group(McastGroupId g) {
    groups_.erase(g);
    if (g < flat_.size()) flat_[g] = nullptr;
  }
  bool has_group(McastGroupId g) const { return groups_.count(g) != 0; }

  // Replicas of `g`; empty for an unknown group. One array index (the
  // dataplane asks once per multicast packet), no tree walk.
  const std::vector<Replica>& members(McastGroupId g) const {
    static const std::vector<Replica> none;
    return g < flat_.size() && flat_[g] ? *flat_[g] : none;
  }
  // The same, null for an unknown group: the dataplane's lookup per
  // multicast packet (no function-local static, whose guard is a load and
  // a branch per call).
  const std::vector<Replica>* find(McastGroupId g) const { return g < flat_.size() ? flat_[g] : nullptr; }
  std::vector<PortId> member_ports(McastGroupId g) const {
    std::vector<PortId> out;
    for (const Replica& r : members(g)) out.push_back(r.port);
    return out;
  }
  const std::map<McastGroupId, std::vector<Replica>>& groups() const { return groups_; }

 private:
  std::map<McastGroupId, std::vector<Replica>> groups_;
  // By group id: the group's node in groups_ (stable while it exists), or null.
  std::vector<const std::vector<Replica>*> flat_;
};

}  // namespace agq::tna
