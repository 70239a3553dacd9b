// 'queues': the shaped ports' egress queues ([[port]] with a rate,
// docs/OBSERVE.md): configuration, depth and the counters of what entered,
// left, was dropped and marked. Read from the dataplane's single-writer
// counters; no lcore is asked anything.
#include <string>
#include <vector>

#include "control/command_util.hpp"

namespace agq::control {

std::string queues_command(DataplaneView& dp, const std::vector<std::string>& w, bool json) {
  check_arg_count(w, 1, 1, kUsageQueues);
  Columns t;
  t.row({"port", "rate_bps", "limit", "limit_unit", "ecn_threshold", "ecn_unit", "burst_bytes", "depth_packets", "depth_bytes",
         "max_depth_packets", "max_depth_bytes", "enqueued_packets", "enqueued_bytes", "dequeued_packets",
         "dequeued_bytes", "dropped_packets", "dropped_bytes", "ecn_marked", "ecn_not_ect", "ecn_unmarkable"});
  for (const QueueRow& q : dp.queues()) {
    Cell k = nullptr, unit = nullptr;
    if (q.ecn) {
      k = Cell(q.ecn_threshold);
      unit = Cell(q.ecn_in_bytes ? "bytes" : "packets");
    }
    t.row({q.port, q.rate_bps, q.limit, q.limit_in_bytes ? "bytes" : "packets", std::move(k), std::move(unit),
           q.burst_bytes,
           q.depth_packets, q.depth_bytes, q.max_depth_packets, q.max_depth_bytes, q.enqueued_packets,
           q.enqueued_bytes, q.dequeued_packets, q.dequeued_bytes, q.dropped_packets, q.dropped_bytes, q.ecn_marked,
           q.ecn_not_ect, q.ecn_unmarkable});
  }
  return t.output(json);
}

}  // namespace agq::control
