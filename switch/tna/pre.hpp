// The packet replication engine: multicast group id -> member ports.
// Configured by the control plane, read by the dataplane to clone a packet
// to every member except the pruned port.
#pragma once

#include <map>
#include <vector>

#include "tna/intrinsic.hpp"

namespace agq::tna {

class ReplicationEngine {
 public:
  void set_group(McastGroupId g, std::vector<PortId> ports) { groups_[g] = std::move(ports); }
  void remove_group(McastGroupId g) { groups_.erase(g); }
  bool has_group(McastGroupId g) const { return groups_.count(g) != 0; }

  // Member ports of `g` minus `exclude`; empty for an unknown group.
  const std::vector<PortId>& members(McastGroupId g) const {
    static const std::vector<PortId> none;
    auto it = groups_.find(g);
    return it == groups_.end() ? none : it->second;
  }
  const std::map<McastGroupId, std::vector<PortId>>& groups() const { return groups_; }

 private:
  std::map<McastGroupId, std::vector<PortId>> groups_;
};

}  // namespace agq::tna
