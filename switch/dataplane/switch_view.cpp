#include "dataplane/switch_view.hpp"

#include <rte_ethdev.h>

#include <cinttypes>
#include <cstdio>

#include "dataplane/port_readers.hpp"

namespace agq::dataplane {

std::vector<control::PortStatsRow> SwitchView::port_stats() {
  std::vector<control::PortStatsRow> rows;
  for (uint16_t p = 0; p < ports_.count(); ++p) {
    control::PortStatsRow r{};
    r.id = p;
    r.name = ports_.info(p).name;
    rte_ether_addr mac{};
    char buf[RTE_ETHER_ADDR_FMT_SIZE] = "?";
    if (rte_eth_macaddr_get(p, &mac) == 0) rte_ether_format_addr(buf, sizeof buf, &mac);
    r.mac = buf;
    rte_eth_link link{};
    r.link_up = rte_eth_link_get_nowait(p, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
    rte_eth_stats s{};
    if (rte_eth_stats_get(p, &s) == 0) {
      r.rx_packets = s.ipackets;
      r.rx_bytes = s.ibytes;
      r.tx_packets = s.opackets;
      r.tx_bytes = s.obytes;
      r.rx_dropped = s.imissed + s.ierrors + s.rx_nombuf;
      r.tx_dropped = s.oerrors;
    }
    const uint64_t base = p < tx_dropped_base_.size() ? tx_dropped_base_[p] : 0;
    r.tx_dropped += dp_.tx_dropped(p) - base;
    rows.push_back(std::move(r));
  }
  return rows;
}

void SwitchView::clear_port_stats() {
  dp_.reset_port_stats();
  base_ = dp_.totals();
  tx_dropped_base_.assign(ports_.count(), 0);
  for (uint16_t p = 0; p < ports_.count(); ++p) tx_dropped_base_[p] = dp_.tx_dropped(p);
  queue_base_.assign(ports_.count(), ShaperStats{});
  for (uint16_t p = 0; p < ports_.count(); ++p)
    if (const PortShaper* q = dp_.shaper(p)) queue_base_[p] = q->stats();
  sim_base_.assign(size_t(ports_.count()) * 2, 0);
  for (uint16_t p = 0; p < ports_.count(); ++p)
    for (SimDir d : {SimDir::Rx, SimDir::Tx}) sim_base_[DropSim::index(p, d)] = dp_.sim_drops(p, d);
}

uint64_t SwitchView::sim_drops(uint16_t port, SimDir d) const {
  const size_t i = DropSim::index(port, d);
  return dp_.sim_drops(port, d) - (i < sim_base_.size() ? sim_base_[i] : 0);
}

void SwitchView::set_sim_drop(tna::PortId port, control::SimDirection dir, double probability) {
  dp_.drop_sim().set(port, dir == control::SimDirection::Rx ? SimDir::Rx : SimDir::Tx, probability);
}

control::SimDropRow SwitchView::sim_drop(tna::PortId port) {
  const DropSim& s = dp_.drop_sim();
  return {port, s.get(port, SimDir::Rx), s.get(port, SimDir::Tx), sim_drops(port, SimDir::Rx),
          sim_drops(port, SimDir::Tx)};
}

void SwitchView::visit_counters(const tna::CounterVisitor& v) {
  const auto totals = dp_.totals();
  for (size_t i = 0; i < totals.size(); ++i) {
    const uint64_t base = i < base_.size() ? base_[i].second : 0;
    v("dp." + totals[i].first, totals[i].second - base);
  }
  // Since start (process-wide, not cleared): unmaps of port memory that
  // waited for the lcores to leave their burst calls, waits that gave up
  // after their bound, the longest wait (port_readers.hpp).
  const PortReaderWaits w = port_reader_waits();
  v("dp.unmap_waits", w.waited);
  v("dp.unmap_wait_timeouts", w.gave_up);
  v("dp.unmap_wait_longest_us", w.longest_us);
  for (uint16_t p = 0; p < ports_.count(); ++p) {
    const std::string prefix = "dp.sim_drops." + std::to_string(p);
    v(prefix + ".rx", sim_drops(p, SimDir::Rx));
    v(prefix + ".tx", sim_drops(p, SimDir::Tx));
  }
  // The shaped ports' queues (only those): as 'queues' shows them.
  for (const control::QueueRow& q : queues()) {
    const std::string prefix = "dp.queue." + std::to_string(q.port) + ".";
    v(prefix + "depth_packets", q.depth_packets);
    v(prefix + "depth_bytes", q.depth_bytes);
    v(prefix + "max_depth_packets", q.max_depth_packets);
    v(prefix + "enqueued_packets", q.enqueued_packets);
    v(prefix + "enqueued_bytes", q.enqueued_bytes);
    v(prefix + "dequeued_packets", q.dequeued_packets);
    v(prefix + "dequeued_bytes", q.dequeued_bytes);
    v(prefix + "dropped_packets", q.dropped_packets);
    v(prefix + "dropped_bytes", q.dropped_bytes);
    v(prefix + "ecn_marked", q.ecn_marked);
    v(prefix + "ecn_not_ect", q.ecn_not_ect);
  }
}

std::vector<control::QueueRow> SwitchView::queues() {
  std::vector<control::QueueRow> rows;
  for (uint16_t p = 0; p < ports_.count(); ++p) {
    const PortShaper* q = dp_.shaper(p);
    if (!q) continue;
    const ShaperSpec& sp = q->spec();
    const ShaperStats s = q->stats();
    const ShaperStats b = p < queue_base_.size() ? queue_base_[p] : ShaperStats{};
    control::QueueRow r{};
    r.port = p;
    r.rate_bps = sp.rate_bps;
    r.limit_in_bytes = sp.queue_packets == 0;
    r.limit = r.limit_in_bytes ? sp.queue_bytes : sp.queue_packets;
    r.ecn = sp.ecn;
    r.ecn_in_bytes = sp.ecn_in_bytes;
    r.ecn_threshold = sp.ecn_in_bytes ? sp.ecn_bytes : sp.ecn_packets;
    r.burst_bytes = sp.burst();
    r.depth_packets = s.depth_packets;
    r.depth_bytes = s.depth_bytes;
    r.max_depth_packets = s.max_depth_packets;
    r.max_depth_bytes = s.max_depth_bytes;
    r.enqueued_packets = s.enqueued_packets - b.enqueued_packets;
    r.enqueued_bytes = s.enqueued_bytes - b.enqueued_bytes;
    r.dequeued_packets = s.dequeued_packets - b.dequeued_packets;
    r.dequeued_bytes = s.dequeued_bytes - b.dequeued_bytes;
    r.dropped_packets = s.dropped_packets - b.dropped_packets;
    r.dropped_bytes = s.dropped_bytes - b.dropped_bytes;
    r.ecn_marked = s.ecn_marked - b.ecn_marked;
    r.ecn_not_ect = s.ecn_not_ect - b.ecn_not_ect;
    r.ecn_unmarkable = s.ecn_unmarkable - b.ecn_unmarkable;
    rows.push_back(r);
  }
  return rows;
}

std::string format_port_stats(const std::vector<control::PortStatsRow>& rows) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-4s %-16s %-17s %-4s %12s %14s %12s %14s %10s %10s\n", "port",
                "name", "mac", "link", "rx_packets", "rx_bytes", "tx_packets", "tx_bytes",
                "rx_drop", "tx_drop");
  out += line;
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line,
                  "%-4u %-16s %-17s %-4s %12" PRIu64 " %14" PRIu64 " %12" PRIu64 " %14" PRIu64
                  " %10" PRIu64 " %10" PRIu64 "\n",
                  unsigned(r.id), r.name.c_str(), r.mac.c_str(), r.link_up ? "up" : "down",
                  r.rx_packets, r.rx_bytes, r.tx_packets, r.tx_bytes, r.rx_dropped, r.tx_dropped);
    out += line;
  }
  return out;
}

}  // namespace agq::dataplane
