// Packet capture from the control plane into pcapng files with DPDK's own
// rte_pcapng: `agqctl capture PORT rx|tx|both FILE.pcapng [--count N]
// [--snaplen B]`, `capture stop [PORT]`, `capture list`. Works for every
// port kind (memif, tap, pcap, NIC) and with --no-huge, where dpdk-pdump
// cannot attach (it needs a secondary process).
//
// How: the control thread installs an ethdev rx and/or tx callback on every
// configured queue of the port (nothing is installed, so nothing is paid,
// while no capture runs). On the lcore, the callback copies each packet
// with rte_pcapng_copy into the capture's own mempool and enqueues the
// copies on an rte_ring; a copy that finds the pool empty or the ring full
// is dropped and counted (per lcore, no shared writes), never waited for.
// A writer thread drains the rings into the files (rte_pcapng_write_packets)
// and ends a capture after N packets; `capture stop` or switch exit end it
// too, with a statistics block (packets seen, dropped) in the file.
//
// Removed callbacks may still be running on an lcore for a moment, so a
// port's ring, pool and callback memory live until the manager is
// destroyed, after the lcores have stopped (ethdev's documented rule for
// rte_eth_remove_*_callback); a new capture of the port reuses them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "control/json.hpp"

namespace agq::observe {

class CaptureManager {
 public:
  CaptureManager();
  ~CaptureManager();  // ends every capture; call only once the lcores have stopped
  CaptureManager(const CaptureManager&) = delete;
  CaptureManager& operator=(const CaptureManager&) = delete;

  // The 'capture ...' control command (ControlPlane::CommandHandler).
  // Throws control::CommandError on bad input, leaving the switch as it was.
  std::string command(const std::vector<std::string>& words, bool json);

  // Ends every running capture (files complete); idempotent.
  void stop_all();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace agq::observe
