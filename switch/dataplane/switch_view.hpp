// What the control plane sees of the DPDK dataplane (control::DataplaneView):
// per-port ethdev statistics and the lcores' counters summed. Called from the
// control thread while the lcores run; it only reads.
#pragma once

#include <string>
#include <vector>

#include "control/control_plane.hpp"
#include "dataplane/ports.hpp"
#include "dataplane/switch_dataplane.hpp"

namespace agq::dataplane {

class SwitchView final : public control::DataplaneView {
 public:
  SwitchView(const Ports& ports, SwitchDataplane& dp, uint16_t epoch) : ports_(ports), dp_(dp), epoch_(epoch) {}

  // rx/tx from rte_eth_stats_get; rx_dropped = imissed + ierrors + rx_nombuf;
  // tx_dropped = oerrors + the lcores' tx-buffer drops on that port.
  std::vector<control::PortStatsRow> port_stats() override;
  // Resets the ethdev statistics and zeroes the dataplane counters (the
  // lcores' counters are single-writer, so "zero" is a baseline subtracted
  // on read).
  void clear_port_stats() override;
  // "dp.rx", "dp.tx", "dp.tx_dropped", ... (LcoreCounters::for_each order).
  // ... then "dp.sim_drops.<port>.rx" and ".tx" for every port.
  void visit_counters(const tna::CounterVisitor& v) override;
  void set_sim_drop(tna::PortId port, control::SimDirection dir, double probability) override;
  control::SimDropRow sim_drop(tna::PortId port) override;
  uint16_t lcore_count() override { return uint16_t(dp_.lcore_count()); }
  uint16_t boot_epoch() override { return epoch_; }
  uint16_t memif_queues() override { return ports_.options().memif_queues; }
  std::vector<tna::MacDigest> take_mac_digests() override { return dp_.take_mac_digests(); }
  // The shaped ports' queues, counters minus the last clear's baseline.
  std::vector<control::QueueRow> queues() override;

 private:
  const Ports& ports_;
  SwitchDataplane& dp_;
  uint16_t epoch_;  // the boot epoch, fixed for the process's life
  std::vector<std::pair<std::string, uint64_t>> base_;  // totals at the last clear
  std::vector<uint64_t> tx_dropped_base_;                // per port
  std::vector<uint64_t> sim_base_;                       // per DropSim::index
  std::vector<ShaperStats> queue_base_;                  // per port
  uint64_t sim_drops(uint16_t port, SimDir d) const;      // minus the baseline
};

// A fixed-width table of port_stats(), one port per line, for the final report.
std::string format_port_stats(const std::vector<control::PortStatsRow>& rows);

}  // namespace agq::dataplane
