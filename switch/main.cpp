// agq-switch: EAL arguments, then `--`, then the application's flags.
//
// Start-up order, and why: EAL first (it owns argv up to `--` and probes the
// ports); then the flags and the configuration, checked against the probed
// port count before anything is started; then one program instance per
// lcore, each with its tables and its PRE; then the ports, the control socket
// and finally the lcores. Any
// failure before traffic flows prints one message and exits non-zero with
// nothing left started or bound: the RAII objects of run_switch() unwind
// (socket, lcores' buffers, ports) before rte_eal_cleanup.
//
// CLI11 lives in this file only: it costs ~10 s of compile time per TU.
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>

#include <CLI/CLI.hpp>

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "control/config.hpp"
#include "control/control_plane.hpp"
#include "control/control_thread.hpp"
#include "control/ctl_protocol.hpp"
#include "control/job_listener.hpp"
#include "dataplane/ports.hpp"
#include "dataplane/rate_reporter.hpp"
#include "dataplane/switch_dataplane.hpp"
#include "dataplane/switch_view.hpp"
#include "observe/capture.hpp"
#include "observe/job_meter.hpp"
#include "observe/telemetry.hpp"
#include "pipeline/forwarding.hpp"

namespace {

// Set by SIGINT/SIGTERM; a lock-free atomic store is async-signal-safe.
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_signal(int) { g_stop.store(true); }

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

void block_stop_signals() {
  const sigset_t set = stop_signal_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

struct Flags {
  std::string config;
  std::string ctl_socket;
  std::string job_listen;
  uint32_t idle_sleep_us = 100;
  // 64 and 128 rather than DPDK's usual 32 and 32: over memif, a ring's
  // index lines cross between the CPUs once per rx or tx call, and a burst
  // of agq RESULTs leaves as 4 replicas each (bench/README.md, session
  // 2026-11-27 (IV): agq over memif +3% on the PGO build, the replay
  // unchanged).
  uint16_t burst = 64;
  uint16_t tx_batch = 128;
  uint16_t memif_queues = 1;
  bool copy_replicas = false;
  double stats_interval = 0;
  bool quiet = false;
};

constexpr const char* kFooter = R"(
EAL options (cores, memory, ports) come first, then `--`, then the options
above. Ports are numbered in the order DPDK probes them: --vdev order for
virtual devices. Without a NIC and without hugepages, for example:

  agq-switch --no-huge -m 256 --no-pci -l 0 --file-prefix sw \
      --log-level=warning \
      --vdev=net_memif0,role=server,id=0,socket=/tmp/agq0.sock,socket-abstract=no \
      --vdev=net_memif1,role=server,id=0,socket=/tmp/agq1.sock,socket-abstract=no \
      -- --config conf/classic.toml --ctl-socket /tmp/agq.ctl --stats-interval 1

Replay a capture instead: --vdev=net_pcap0,rx_pcap=in.pcap,tx_pcap=out0.pcap
Every lcore given to -l runs the dataplane with its own program instance. Stop with Ctrl-C (SIGINT) or
SIGTERM: the final counters and per-port statistics are printed.
Query a running switch: agqctl --socket /tmp/agq.ctl counters [--json]
or with DPDK's telemetry client: dpdk-telemetry.py -f sw   (then /agq/counters)
EAL's own options: agq-switch --help -- (or see the DPDK EAL documentation).
Exit codes: 0 stopped by a signal, 1 configuration/port/start-up error,
2 bad command line.)";

void define_flags(CLI::App& app, Flags& f) {
  app.description(
      "agq-switch: DPDK software top-of-rack switch with in-network gradient aggregation.");
  app.add_option("--config", f.config, "switch configuration file (TOML, see conf/README.md)")
      ->required();
  app.add_option("--ctl-socket", f.ctl_socket,
                 std::string("control socket path; overrides the configuration's [switch] "
                             "ctl_socket (default ") +
                     agq::control::kDefaultCtlSocket + ")");
  app.add_option("--job-listen", f.job_listen,
                 "HOST:PORT (IPv4): answer 'job get ID --json' over TCP there, read-only, for hosts that cannot "
                 "reach the control socket (docs/PROTOCOL.md section 12); overrides [switch] job_listen; off by "
                 "default")
      ->check([](const std::string& v) {
        std::string err;
        return agq::control::parse_listen_address(v, err) ? std::string() : err;
      });
  app.add_option("--idle-sleep-us", f.idle_sleep_us,
                 "idle lcores sleep up to this many microseconds between polls; 0 = busy poll")
      ->capture_default_str()
      ->check(CLI::Range(0u, 1000000u));
  app.add_option("--burst", f.burst, "rx burst size")
      ->capture_default_str()
      ->check(CLI::Range(1, int(agq::dataplane::SwitchDataplane::kMaxBurst)));
  app.add_option("--tx-batch", f.tx_batch,
                 "packets a port's tx batch collects before it leaves (it also leaves at the end of every "
                 "round): one rx burst of agq RESULTs makes N replicas each")
      ->capture_default_str()
      ->check(CLI::Range(1, int(agq::dataplane::SwitchDataplane::kMaxBurst)));
  app.add_option("--memif-queues", f.memif_queues,
                 "queue pairs of every memif port; each client should connect with this many rings (DPDK's "
                 "memif server cannot ask; a client with fewer is found on its first packets, logged, and "
                 "served through ring 0 and the software hand-off). The lcore count steers traffic to its "
                 "owner lcore by ring; 1 = one ring and the software hand-off")
      ->capture_default_str()
      ->check(CLI::Range(1, 255));
  app.add_flag("--copy-replicas", f.copy_replicas,
               "give every rewritten multicast replica a buffer of its own, also on ports that copy frames out "
               "as they send them (memif, pcap, af_packet, tap, null), where by default the original is rewritten "
               "and sent again member after member (docs/ARCHITECTURE.md, \"Multicast\")");
  app.add_option("--stats-interval", f.stats_interval,
                 "print a one-line rate summary every S seconds; 0 = never")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--quiet", f.quiet, "no start-up banner and no final report (errors still print)");
  app.footer(kFooter);
}

// `agq-switch --help` (or -h after `--`) must work without EAL: EAL would
// otherwise parse --help itself, or fail for lack of ports.
bool app_help_requested(int argc, char** argv) {
  int first = 1;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--") == 0) first = i + 1;
  for (int i = first; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) return true;
  return false;
}

void print_banner(const agq::dataplane::Ports& ports, const agq::dataplane::SwitchDataplane& dp,
                  const agq::control::SwitchConfig& cfg, const std::string& socket, uint16_t epoch) {
  std::printf("agq-switch: pipeline %s, config %s, control socket %s, %u lcore%s, boot epoch %u (0x%04x)\n",
              cfg.pipeline.c_str(), cfg.path.c_str(), socket.c_str(), dp.lcore_count(),
              dp.lcore_count() == 1 ? "" : "s", unsigned(epoch), unsigned(epoch));
  for (uint16_t p = 0; p < ports.count(); ++p) {
    const auto& i = ports.info(p);
    std::string tx;
    if (i.tx_shared && dp.lcore_count() > 1)
      tx = ", tx queue 0 owned by lcore index " + std::to_string(ports.tx_owner(p)) + " (the others hand off)";
    if (const auto* sh = dp.shaper(p)) {
      const auto& s = sh->spec();
      char link[192];
      std::snprintf(link, sizeof link, ", egress %.6g Mbit/s, queue %llu %s, %s, tx by lcore index %u", double(s.rate_bps) / 1e6,
                    (unsigned long long)(s.queue_packets ? s.queue_packets : s.queue_bytes),
                    s.queue_packets ? "packets" : "bytes",
                    !s.ecn ? "no ECN" : (std::string("ECN above ") + std::to_string(s.ecn_in_bytes ? s.ecn_bytes : s.ecn_packets) + (s.ecn_in_bytes ? " bytes" : " packets")).c_str(),
                    ports.tx_owner(p));
      tx = link;
    }
    std::printf("  port %u: %s (%s), %u rx / %u tx queue%s, steering %s%s\n", unsigned(p), i.name.c_str(),
                i.driver.c_str(), unsigned(i.rx_queues), unsigned(i.tx_queues), i.tx_queues == 1 ? "" : "s",
                i.steering.c_str(), tx.c_str());
  }
  // Without hugepages the pool lives on memory of its own (mbuf_pool.hpp):
  // say how much of it the kernel gave as transparent huge pages.
  if (const auto& m = ports.pool_memory(); m.own)
    std::printf("  mbuf pool: %zu MiB of its own (no hugepages), %zu MiB in transparent huge pages\n",
                m.bytes >> 20, m.huge_bytes >> 20);
  for (const auto& [lcore, rx] : dp.rx_assignment()) {
    std::printf("  lcore %u polls:", lcore);
    if (rx.empty()) std::printf(" no rx queue (processes hand-offs only)");
    for (const auto& q : rx) std::printf(" port %u/q%u", unsigned(q.port), unsigned(q.queue));
    std::printf("\n");
  }
  std::fflush(stdout);
}

// Everything after EAL and the flags. Returns the exit code; every object
// it creates is destroyed (ports stopped, socket removed) when it returns.
int run_switch(const Flags& f) {
  using namespace agq;
  control::SwitchConfig cfg;
  std::vector<std::unique_ptr<control::Pipe>> instances;
  const uint16_t nports = rte_eth_dev_count_avail();
  const unsigned lcores = rte_lcore_count();
  try {
    cfg = control::load_config(f.config);
    for (const std::string& w : cfg.warnings) std::fprintf(stderr, "agq-switch: %s\n", w.c_str());
    if (nports == 0) {
      std::fprintf(stderr,
                   "agq-switch: no ports: give DPDK a NIC or a virtual device, e.g. "
                   "--vdev=net_memif0,role=server,id=0,socket=/tmp/agq0.sock,socket-abstract=no "
                   "(see --help)\n");
      return 1;
    }
    control::check_ports(cfg, nports);
    // One independent instance per lcore (shared-nothing, like Tofino's
    // pipes), all built from the same configuration.
    for (unsigned i = 0; i < lcores; ++i) {
      auto pipe = std::make_unique<control::Pipe>();
      pipe->prog = control::make_program(cfg, pipe->pre);
      pipe->prog->own_shards(i, lcores);  // lcore i's instance holds only its shards' registers
      control::install_entries(cfg, *pipe->prog);
      // Floods (broadcast, unknown unicast) go to every port but the ingress one.
      std::vector<tna::PortId> all(nports);
      for (uint16_t p = 0; p < nports; ++p) all[p] = p;
      pipe->pre.set_group(pipeline::Forwarding::kFloodGroup, all);
      instances.push_back(std::move(pipe));
    }
  } catch (const control::ConfigError& e) {
    std::fprintf(stderr, "agq-switch: %s\n", e.what());
    return 1;
  }
  // The boot epoch (docs/PROTOCOL.md section 11): load_config picked it
  // ([switch] epoch, else random and nonzero); install_entries set it on
  // every instance.
  const uint16_t epoch = cfg.epoch;
  control::Pipes pipes(std::move(instances));
  pipes.set_epoch_value(epoch);

  const std::string socket = !f.ctl_socket.empty()   ? f.ctl_socket
                             : !cfg.ctl_socket.empty() ? cfg.ctl_socket
                                                       : control::kDefaultCtlSocket;
  dataplane::PortOptions popt;
  popt.lcores = lcores;
  popt.burst = f.burst;
  popt.tx_batch = f.tx_batch;
  popt.memif_queues = f.memif_queues;
  popt.cancel = &g_stop;  // Ctrl-C while memif clients wait for their server
  dataplane::LoopOptions lopt;
  // [[port]] links: a shaper each, and mbufs in the pool for its queue.
  lopt.shapers.assign(nports, dataplane::ShaperSpec{});
  for (const control::PortLinkEntry& e : cfg.links) {
    dataplane::ShaperSpec& s = lopt.shapers[e.port];
    s.rate_bps = e.rate_bps;
    s.queue_packets = e.queue_packets;
    s.queue_bytes = e.queue_bytes;
    s.ecn = e.ecn;
    s.ecn_packets = e.ecn_packets;
    s.ecn_bytes = e.ecn_bytes;
    s.ecn_in_bytes = e.ecn_in_bytes;
    s.burst_bytes = e.burst_bytes;
    s.overhead = e.overhead;
    popt.extra_mbufs += s.slots();
  }
  lopt.burst = f.burst;
  lopt.tx_batch = f.tx_batch;
  lopt.idle_sleep_us = f.idle_sleep_us;
  lopt.reuse_replicas = !f.copy_replicas;

  std::unique_ptr<dataplane::Ports> ports;
  std::unique_ptr<dataplane::SwitchDataplane> dp;
  try {
    ports = std::make_unique<dataplane::Ports>(popt);
    dp = std::make_unique<dataplane::SwitchDataplane>(*ports, pipes, lopt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "agq-switch: %s\n", e.what());
    return 1;
  }
  dataplane::SwitchView view(*ports, *dp, epoch);
  // From here on every control-plane access to an instance runs on its lcore
  // (or directly while the lcores do not poll).
  pipes.set_executor(&dp->commands());
  control::ControlPlane cp(pipes, view, socket);
  // After dp and ports: destroyed first, once the lcores have stopped.
  observe::CaptureManager capture;
  cp.add_command("capture", [&capture](const std::vector<std::string>& w, bool json) {
    return capture.command(w, json);
  });
  observe::JobMeter meter;  // per-job rates for agqctl top
  cp.add_command("meter", [&meter](const std::vector<std::string>& w, bool json) { return meter.command(w, json); });
  try {
    cp.start();
    observe::register_telemetry(socket);  // /agq/... answered through the socket just opened
    if (const std::string& jl = !f.job_listen.empty() ? f.job_listen : cfg.job_listen; !jl.empty()) {
      const std::string at = cp.listen_jobs(jl);
      if (!f.quiet) {
        std::printf("agq-switch: job endpoint (read-only: job get ID --json) on tcp:%s\n", at.c_str());
        std::fflush(stdout);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "agq-switch: %s\n", e.what());  // names the socket itself
    return 1;
  }
  if (!f.quiet) print_banner(*ports, *dp, cfg, socket, epoch);

  // From here on traffic flows; a failing control thread stops the switch
  // (exit 1): a switch nobody can configure or stop by socket is not healthy.
  // Both threads run off the lcores' CPUs (control/control_thread.hpp).
  std::atomic<bool> ctl_failed{false};
  std::optional<control::ControlThread> ctl, stats;
  dataplane::RateReporter reporter(*dp, f.stats_interval);
  try {
    ctl.emplace("agq-ctl", [&] {
      block_stop_signals();
      try {
        cp.run(g_stop);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "agq-switch: control plane stopped: %s\n", e.what());
        ctl_failed.store(true);
        g_stop.store(true);
      }
    });
    if (f.stats_interval > 0) stats.emplace("agq-stats", [&] {
      block_stop_signals();
      reporter.run(g_stop);
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "agq-switch: %s\n", e.what());
    g_stop.store(true);
    return 1;
  }

  dp->run(g_stop);  // the main lcore polls too; returns after SIGINT/SIGTERM

  g_stop.store(true);  // also when the lcores returned for another reason
  ctl->join();
  if (stats) stats->join();
  cp.stop_and_unlink();
  capture.stop_all();  // the lcores have stopped: every capture file completed
  if (!f.quiet) {
    std::printf("\nagq-switch: stopped. Counters:\n%s\nPorts:\n%s", cp.format_counters().c_str(),
                dataplane::format_port_stats(view.port_stats()).c_str());
    std::fflush(stdout);
  }
  pipes.set_executor(nullptr);  // the lcores are gone
  return ctl_failed.load() ? 1 : 0;  // then dp, ports: buffers freed, ports stopped and closed
}

}  // namespace

int main(int argc, char** argv) {
  // The name shows in "Usage: agq-switch [EAL options] -- [OPTIONS]".
  CLI::App app{"", "agq-switch [EAL options] --"};
  Flags flags;
  define_flags(app, flags);
  if (app_help_requested(argc, argv)) {
    std::cout << app.help();
    return 0;
  }

  // SIGINT/SIGTERM go to the main thread only, so no helper thread sees
  // EINTR: blocked while EAL creates its threads (they inherit the mask),
  // unblocked in the main thread right after, blocked by our own helper
  // threads for themselves (block_stop_signals).
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  const sigset_t stop_signals = stop_signal_set();
  block_stop_signals();

  // rte_eal_init permutes its argv: give it a copy of the pointers.
  std::vector<char*> eal_argv(argv, argv + argc);
  const int used = rte_eal_init(argc, eal_argv.data());
  if (used < 0) {
    const int err = rte_errno;
    std::fprintf(stderr, "agq-switch: EAL initialisation failed: %s (EAL options come first, then --; see --help)\n",
                 rte_strerror(err));
    return err == EINVAL ? 2 : 1;
  }
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);

  // What EAL did not consume: argv[used] is the program name again.
  int rc;
  try {
    app.parse(argc - used, eal_argv.data() + used);
    rc = run_switch(flags);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    rc = 0;
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the error and a hint to use --help
    rc = 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "agq-switch: %s\n", e.what());
    rc = 1;
  }
  rte_eal_cleanup();
  return rc;
}
