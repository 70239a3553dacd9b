// The switch's configuration file (TOML, documented in conf/README.md).
//
// Loading is strict on purpose: a typo in a key ("learnin") or a port that
// does not exist would otherwise silently give a switch that forwards
// differently from what the operator wrote. Every error names the file, the
// line and the field. The same file is read by the Tofino (bfrt) set-up
// script with Python's tomllib, so the format stays plain TOML.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "pipeline/agq/agq_program.hpp"
#include "pipeline/classic/classic_program.hpp"
#include "pipeline/forwarding.hpp"
#include "pipeline/switch_program.hpp"
#include "proto/headers.hpp"
#include "tna/intrinsic.hpp"
#include "tna/pre.hpp"

namespace agq::control {

// Message format: "FILE:LINE: FIELD: what is wrong" (or "FILE: ..." when
// there is no line, e.g. the file cannot be opened).
struct ConfigError : std::runtime_error {
  using runtime_error::runtime_error;
};

struct RouteEntry {
  uint32_t ip;
  tna::PortId port;
  int line;
};
struct MacEntry {
  proto::Mac mac;
  tna::PortId port;
  int line;
};
struct ArpProxyEntry {
  uint32_t ip;
  proto::Mac mac;
  int line;
};

// One [[port]]: an egress link rate and queue (conf/README.md "Links with
// rates"); the dataplane's ShaperSpec is made from it (main.cpp).
struct PortLinkEntry {
  tna::PortId port = 0;
  uint64_t rate_bps = 0;
  uint32_t queue_packets = 0;  // the queue's limit: frames, or
  uint64_t queue_bytes = 0;    // bytes (exactly one is nonzero)
  bool ecn = false;
  uint32_t ecn_packets = 0;  // mark above this many frames, or
  uint64_t ecn_bytes = 0;    // bytes
  bool ecn_in_bytes = false;
  uint64_t burst_bytes = 0;  // 0: the default (1 ms of the rate)
  uint16_t overhead = 24;
  int line = 0;
};

// One [[job]] of pipeline "agq"; `line` is where its [[job]] header is.
struct JobEntry {
  pipeline::agq::JobSpec spec;
  int line;
};

struct SwitchConfig {
  std::string path;
  std::string pipeline = "classic";
  std::string ctl_socket;  // empty = not set
  std::string job_listen;  // [switch] job_listen "a.b.c.d:port"; empty = no job endpoint
  // The boot epoch (docs/PROTOCOL.md §11), nonzero: [switch] epoch, or a
  // random one chosen by load_config (a new one at every start).
  uint16_t epoch = 1;
  bool epoch_fixed = false;  // given in the file (tests compare frames byte for byte)
  pipeline::classic::ClassicConfig classic;
  pipeline::agq::AgqConfig agq;  // [agq]
  std::vector<JobEntry> jobs;    // [[job]], pipeline "agq" only
  // Accepted, but worth telling the operator (agq-switch prints each to its
  // log at start): "FILE:LINE: job[i]: job <id>: warning: ..." (PROTOCOL §6).
  std::vector<std::string> warnings;
  pipeline::ForwardingConfig forwarding;
  std::vector<RouteEntry> routes;
  std::vector<MacEntry> macs;
  std::vector<ArpProxyEntry> arp_proxy;
  std::vector<PortLinkEntry> links;  // [[port]], at most one per port
  // Every port number the file mentions, with its line and field name, so
  // check_ports can point at the line once DPDK has said how many ports exist.
  struct PortRef {
    tna::PortId port;
    int line;
    std::string field;
  };
  std::vector<PortRef> port_refs;
};

SwitchConfig load_config(const std::string& path);  // throws ConfigError
// Throws ConfigError "FILE:LINE: route[1].port: port 7 does not exist (3 ports: 0..2)".
void check_ports(const SwitchConfig& cfg, uint16_t port_count);
std::unique_ptr<pipeline::SwitchProgram> make_program(const SwitchConfig& cfg,
                                                      tna::ReplicationEngine& pre);
// The boot epoch (set_epoch), the agq jobs (add_job; its refusal names the
// job's line), routes, static MACs and ARP proxy entries; throws ConfigError
// when the program refuses one (duplicate, table full, no space for a job).
// Every program instance built from one SwitchConfig gets the same epoch.
void install_entries(const SwitchConfig& cfg, pipeline::SwitchProgram& prog);

}  // namespace agq::control
