// The control-plane thread: serves the control socket (ctl_protocol.hpp),
// interprets its commands, ages the MAC table and applies learned MACs. It
// never touches packets, and never program state directly: every access goes
// through Pipes (pipes.hpp), which runs it on the lcore that owns the
// instance, between two bursts.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "control/job_listener.hpp"
#include "control/pipes.hpp"
#include "pipeline/switch_program.hpp"
#include "tna/intrinsic.hpp"
#include "tna/program.hpp"

namespace agq::control {

struct PortStatsRow {
  tna::PortId id;
  std::string name;
  std::string mac;
  bool link_up;
  uint64_t rx_packets, rx_bytes, tx_packets, tx_bytes, rx_dropped, tx_dropped;
};

// One shaped port's egress queue ([[port]] rate/queue/ecn_threshold):
// its configuration and counters (monotonic since start or the last
// 'clear ports'; depth now, max_depth since start).
struct QueueRow {
  tna::PortId port;
  uint64_t rate_bps;
  uint64_t limit;  // frames, or bytes when limit_in_bytes
  bool limit_in_bytes;
  bool ecn;
  uint64_t ecn_threshold;  // frames, or bytes when ecn_in_bytes
  bool ecn_in_bytes;
  uint64_t burst_bytes;
  uint64_t depth_packets, depth_bytes, max_depth_packets, max_depth_bytes;
  uint64_t enqueued_packets, enqueued_bytes, dequeued_packets, dequeued_bytes, dropped_packets, dropped_bytes;
  uint64_t ecn_marked, ecn_not_ect, ecn_unmarkable;
};

enum class SimDirection : uint8_t { Rx, Tx };

// The drop simulator's state on one port.
struct SimDropRow {
  tna::PortId port;
  double rx_probability, tx_probability;
  uint64_t rx_drops, tx_drops;  // since start or the last 'clear ports'
};

// What the control plane may see of the dataplane; implemented by it.
class DataplaneView {
 public:
  virtual ~DataplaneView() = default;
  virtual std::vector<PortStatsRow> port_stats() = 0;
  virtual void clear_port_stats() = 0;
  // Dataplane counters (tx drops, clones, idle sleeps...), stable order.
  virtual void visit_counters(const tna::CounterVisitor& v) = 0;
  // Drop simulator: packets of `port` are dropped with `probability`
  // (0..1, validated by the caller) right after rx / right before tx.
  // Takes effect on the lcores' next packet; no lock.
  virtual void set_sim_drop(tna::PortId port, SimDirection dir, double probability) = 0;
  virtual SimDropRow sim_drop(tna::PortId port) = 0;
  // What workers are told with their job (docs/PROTOCOL.md §10-12): the
  // dataplane lcores (= queues per port) and the switch's boot epoch (0:
  // none yet).
  virtual uint16_t lcore_count() { return 1; }
  virtual uint16_t boot_epoch() { return 0; }
  // Queue pairs of every memif port (the rings a memif client connects with).
  virtual uint16_t memif_queues() { return 1; }
  // The shaped ports' queues, by port number.
  virtual std::vector<QueueRow> queues() { return {}; }
  // Learned MACs the lcores reported since the last call (MAC digests).
  virtual std::vector<tna::MacDigest> take_mac_digests() { return {}; }
};

class ControlPlane {
 public:
  ControlPlane(Pipes& pipes, DataplaneView& dp, std::string socket_path);
  // One instance, no lcores (unit tests): closures run on the caller's thread.
  ControlPlane(pipeline::SwitchProgram& prog, DataplaneView& dp, std::string socket_path);
  ~ControlPlane();
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  // Creates the socket: missing parent directory made 0700, socket 0600,
  // a stale socket file replaced; refuses when a live process listens on it
  // or the path is not a socket. Throws std::runtime_error.
  void start();
  // Serves until `stop` is set (checked at least every ~10 ms); applies the
  // lcores' MAC digests to every instance and ages the MAC table once a second.
  void run(const std::atomic<bool>& stop);
  // Closes the socket and removes its file (if it is still ours).
  void stop_and_unlink();
  // The read-only TCP job endpoint (job_listener.hpp) on `address`
  // ("a.b.c.d:port"), served by run() beside the socket. Throws
  // std::runtime_error naming the address. Returns the address bound.
  std::string listen_jobs(const std::string& address);
  const JobListener* job_endpoint() const { return jobs_.get(); }

  // One command line -> full response ("ok\n..." or "error: ...\n...").
  std::string execute(const std::string& line);
  // Program counters then dataplane counters, "name value" per line.
  std::string format_counters();

  // MAC ageing over the instances (run() calls it once a second): a learned
  // entry idle on every instance (each refreshes only what its own packets
  // hit) is removed from every instance. Returns how many entries.
  std::size_t age_macs(uint64_t now_ns);

  const std::string& socket_path() const { return socket_path_; }
  Pipes& pipes() { return pipes_; }

  // Command families served outside this interpreter (packet capture needs
  // DPDK, which agq_control does not link). The handler gets the words
  // (without a trailing --json) and whether --json was given; it runs on
  // the control thread and throws CommandError (command_util.hpp) to refuse.
  using CommandHandler = std::function<std::string(const std::vector<std::string>& words, bool json)>;
  void add_command(const std::string& name, CommandHandler handler) { extra_[name] = std::move(handler); }
  const CommandHandler* extra_command(const std::string& name) const {
    auto it = extra_.find(name);
    return it == extra_.end() ? nullptr : &it->second;
  }

 private:
  std::map<std::string, CommandHandler> extra_;
  void serve_one(int conn);
  void apply_mac_digests();

  std::unique_ptr<JobListener> jobs_;  // --job-listen; null: off
  std::unique_ptr<Pipes> own_pipes_;  // the single-instance constructor's
  Pipes& pipes_;
  DataplaneView& dp_;
  std::string socket_path_;
  int listen_fd_ = -1;
  ino_t socket_ino_ = 0;  // to unlink only the socket file we created
  dev_t socket_dev_ = 0;
};

}  // namespace agq::control
