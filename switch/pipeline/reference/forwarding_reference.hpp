// The ordinary-forwarding control as it was before the fast path (parsed
// Headers in, std::unordered_map tables through tna::ExactTable), kept
// unchanged as the reference model: tests/unit/forwarding_differential_test
// runs random frames through it and through pipeline::Forwarding and wants
// the same decisions, bytes, tables and counters; bench_pipeline times it
// beside the fast path. Not used by the switch.
//
// Ordinary ToR switching for traffic that is not aggregation traffic: one
// control, used by every program (as an `apply` in its ingress).
//
//   table ipv4_host   key: ipv4.dst (exact)      actions: send(port) | NoAction
//   table dmac        key: ethernet.dst (exact)  actions: send(port) | flood   (static + learned)
//   table smac        learning: (src MAC -> ingress port, last seen), aged by the control plane
//   table arp_proxy   key: arp.tpa (exact)       actions: answer(mac) | flood
//
// Order: ARP request for a proxied address -> answered back out of the
// ingress port; IPv4 with a host route -> that port; otherwise L2: broadcast,
// multicast and unknown unicast flood to every other port (PRE group
// kFloodGroup pruned at the ingress port), known unicast goes to its port,
// and a destination behind the ingress port is dropped (l2_same_port).
// Routes are host routes on one flat L2 domain, as in the published program:
// no MAC rewrite, no TTL decrement.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <variant>

#include "pipeline/drop_reason.hpp"
#include "pipeline/forwarding.hpp"
#include "pipeline/parser.hpp"
#include "proto/headers.hpp"
#include "tna/intrinsic.hpp"
#include "tna/program.hpp"
#include "tna/table.hpp"

namespace agq::pipeline::reference {

struct MacHash {
  size_t operator()(const proto::Mac& m) const {
    uint64_t v = 0;
    for (uint8_t b : m) v = v << 8 | b;
    return std::hash<uint64_t>{}(v);
  }
};

class ForwardingReference {
 public:
  // PRE group that holds every port; floods prune the ingress port.
  static constexpr tna::McastGroupId kFloodGroup = 0xFFFF;

  // Action data of the dmac/smac table (one table, as on a real switch).
  struct MacEntry {
    tna::PortId port = tna::kNoPort;
    bool is_static = false;
    uint64_t last_seen_ns = 0;
  };

  explicit ForwardingReference(ForwardingConfig cfg = {});

  // --- control plane ---
  bool add_route(uint32_t ipv4_dst, tna::PortId port);  // false if present or full
  bool remove_route(uint32_t ipv4_dst);
  bool add_static_mac(const proto::Mac& mac, tna::PortId port);  // replaces a learned entry
  bool remove_mac(const proto::Mac& mac);
  bool add_arp_proxy(uint32_t ip, const proto::Mac& mac);
  bool remove_arp_proxy(uint32_t ip);
  void set_learning(bool on) { cfg_.learning = on; }
  // With a sink, the data plane no longer writes its own MAC table on a new
  // or moved source: it pushes a digest (at most one per (MAC, port) until
  // kDigestRepeatNs has passed, per instance) and the control plane installs
  // the entry with apply_mac_digest(). Without one (null), it learns
  // directly. Ageing is the control plane's job either way.
  void set_digest_sink(MacDigestSink* sink) { sink_ = sink; }
  MacDigestSink* digest_sink() const { return sink_; }
  // A digest that is not acted on (ring full, control thread busy) is pushed
  // again by the next packet after this long.
  static constexpr uint64_t kDigestRepeatNs = 100'000'000;  // 100 ms
  // Control plane: installs a learned entry reported by a digest (any
  // instance's). Same rules as direct learning: a static entry wins, a group
  // address or kNoPort is refused, a full table refuses a new station.
  enum class DigestResult : uint8_t { Learned, Moved, Refreshed, Refused };
  DigestResult apply_mac_digest(const tna::MacDigest& d, uint64_t now_ns);
  void set_ageing_ns(uint64_t ns) { cfg_.ageing_ns = ns; }
  // Removes learned entries not seen for the ageing time; returns how many.
  std::size_t age_out(uint64_t now_ns);
  const ForwardingConfig& config() const { return cfg_; }

  template <typename Fn> void for_each_route(Fn&& fn) const { ipv4_host_.for_each(fn); }
  template <typename Fn> void for_each_mac(Fn&& fn) const { dmac_.for_each(fn); }
  template <typename Fn> void for_each_arp_proxy(Fn&& fn) const { arp_proxy_.for_each(fn); }

  // --- data plane ---
  // Decides where a non-aggregation packet goes. May rewrite `hdr` (ARP
  // reply); the program deparses afterwards.
  tna::Decision apply(Headers& hdr, const tna::IngressIntrinsicMd& md);

  void visit_counters(const tna::CounterVisitor& visit) const;
  void clear_counters();

 private:
  struct Counters {
    uint64_t routed = 0, l2_unicast = 0, flooded = 0, arp_answered = 0, learned = 0,
             moved = 0, aged = 0, digests = 0;
  };
  void learn(const proto::Mac& src, tna::PortId port, uint64_t now_ns);
  DigestResult install_learned(const proto::Mac& src, tna::PortId port, uint64_t now_ns);
  // Digest mode: reports (src, port) unless the filter says it was reported
  // less than kDigestRepeatNs ago.
  void push_digest(const proto::Mac& src, tna::PortId port, uint64_t now_ns);

  // The per-instance digest filter (the P4 learn-digest idiom: a small
  // direct-mapped register remembering what was reported recently), so a
  // flow from an unknown station pushes one digest, not one per packet.
  static constexpr std::size_t kDigestFilterSize = 256;
  struct DigestFilterCell {
    // MAC (48 bits) << 16 | port. Empty: all ones, which would be the
    // broadcast MAC, never learned.
    uint64_t key = ~0ull;
    uint64_t pushed_ns = 0;
  };
  DigestFilterCell digest_filter_[kDigestFilterSize];
  MacDigestSink* sink_ = nullptr;

  ForwardingConfig cfg_;
  tna::ExactTable<uint32_t, tna::PortId> ipv4_host_;
  tna::ExactTable<proto::Mac, MacEntry, MacHash> dmac_;
  tna::ExactTable<uint32_t, proto::Mac> arp_proxy_;
  Counters c_;
};

}  // namespace agq::pipeline::reference
