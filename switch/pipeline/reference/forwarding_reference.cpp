// Ordinary ToR switching (see forwarding.hpp for the tables and their order).
//
// Everything here runs under the owning Program's lock, so the tables need no
// synchronisation of their own. The only per-packet allocation is the node a
// newly learned MAC takes in the exact table.
#include "pipeline/reference/forwarding_reference.hpp"

#include <algorithm>

namespace agq::pipeline::reference {

using proto::Mac;

namespace {

// The I/G bit (least significant bit of the first octet on the wire) marks
// group addresses: multicast and broadcast. On Tofino this is one ternary
// entry 01:00:00:00:00:00 &&& 01:00:00:00:00:00 in front of dmac; a bit test
// is the same match without a table walk.
bool is_group(const Mac& m) { return (m[0] & 0x01) != 0; }

uint16_t reason(DropReason r) { return static_cast<uint16_t>(r); }

uint64_t mac_key(const Mac& m) {
  uint64_t v = 0;
  for (uint8_t b : m) v = v << 8 | b;
  return v;
}

}  // namespace

ForwardingReference::ForwardingReference(ForwardingConfig cfg)
    : cfg_(cfg),
      // Default actions: kNoPort is NoAction for ipv4_host and "flood" for
      // dmac; a zero MAC for arp_proxy is never used (a miss is checked with
      // get(), not by comparing the default).
      ipv4_host_("ipv4_host", cfg.route_capacity, tna::kNoPort),
      dmac_("dmac", cfg.mac_capacity, MacEntry{}),
      arp_proxy_("arp_proxy", cfg.arp_capacity, Mac{}) {}

// --- control plane ---------------------------------------------------------

bool ForwardingReference::add_route(uint32_t ipv4_dst, tna::PortId port) {
  // kNoPort is the table's NoAction default: an entry carrying it would be
  // indistinguishable from a miss.
  if (port == tna::kNoPort) return false;
  return ipv4_host_.add(ipv4_dst, port);
}

bool ForwardingReference::remove_route(uint32_t ipv4_dst) { return ipv4_host_.remove(ipv4_dst); }

bool ForwardingReference::add_static_mac(const Mac& mac, tna::PortId port) {
  // Group addresses are flooded before dmac is looked up, so an entry for
  // one would never match; reject it rather than accept a dead entry.
  if (port == tna::kNoPort || is_group(mac)) return false;
  const MacEntry e{port, /*is_static=*/true, 0};
  // get(), not apply_mut(): the control plane must not count as table hits.
  if (const auto cur = dmac_.get(mac)) {
    if (cur->is_static) return false;  // present, like add_route
    return dmac_.modify(mac, e);       // the operator's word beats learning
  }
  return dmac_.add(mac, e);
}

bool ForwardingReference::remove_mac(const Mac& mac) { return dmac_.remove(mac); }

bool ForwardingReference::add_arp_proxy(uint32_t ip, const Mac& mac) {
  // A reply claiming a group address as a station's address is bogus
  // (RFC 1812 3.3.2 tells routers not to believe one); refuse to send it.
  if (is_group(mac)) return false;
  return arp_proxy_.add(ip, mac);
}

bool ForwardingReference::remove_arp_proxy(uint32_t ip) { return arp_proxy_.remove(ip); }

std::size_t ForwardingReference::age_out(uint64_t now_ns) {
  if (cfg_.ageing_ns == 0) return 0;
  const uint64_t limit = cfg_.ageing_ns;
  const std::size_t n = dmac_.remove_if([&](const Mac&, const MacEntry& e) {
    // last_seen comes from a NIC/lcore clock and `now` from the control
    // thread; if they disagree so that last_seen is in the future, the entry
    // is fresh, not 2^64 ns old.
    return !e.is_static && now_ns > e.last_seen_ns && now_ns - e.last_seen_ns > limit;
  });
  c_.aged += n;
  return n;
}

// --- data plane ------------------------------------------------------------

void ForwardingReference::learn(const Mac& src, tna::PortId port, uint64_t now_ns) {
  // A group address is never a valid source (IEEE 802); an entry for it
  // could never match, since group destinations flood before dmac, and would
  // only take a slot. kNoPort (no ingress port known) is not a place to send.
  if (is_group(src) || port == tna::kNoPort) return;
  if (MacEntry* e = dmac_.apply_mut(src)) {
    if (e->is_static) return;  // static entries are never touched by learning
    if (e->port != port) {
      if (sink_) return push_digest(src, port, now_ns);  // the control plane moves it
      e->port = port;  // the station moved (or a loop): follow it
      ++c_.moved;
    }
    // The hit state ageing reads (TNA's idle timeout): this instance's own.
    e->last_seen_ns = now_ns;
    return;
  }
  if (sink_) return push_digest(src, port, now_ns);
  // add() refuses when the table is full: the station stays unknown and its
  // traffic is flooded, which is what a hardware switch does too.
  if (dmac_.add(src, MacEntry{port, false, now_ns})) ++c_.learned;
}

void ForwardingReference::push_digest(const Mac& src, tna::PortId port, uint64_t now_ns) {
  const uint64_t key = mac_key(src) << 16 | port;
  // Fibonacci hashing of the 64-bit key onto the filter's 256 cells.
  DigestFilterCell& cell = digest_filter_[(key * 0x9E3779B97F4A7C15ull) >> 56];
  if (cell.key == key && now_ns >= cell.pushed_ns && now_ns - cell.pushed_ns < kDigestRepeatNs) return;
  cell.key = key;
  cell.pushed_ns = now_ns;
  tna::MacDigest d;
  std::copy(src.begin(), src.end(), d.mac);
  d.port = port;
  ++c_.digests;
  sink_->push(d);
}

ForwardingReference::DigestResult ForwardingReference::apply_mac_digest(const tna::MacDigest& d, uint64_t now_ns) {
  Mac src;
  std::copy(d.mac, d.mac + 6, src.begin());
  return install_learned(src, d.port, now_ns);
}

ForwardingReference::DigestResult ForwardingReference::install_learned(const Mac& src, tna::PortId port, uint64_t now_ns) {
  if (is_group(src) || port == tna::kNoPort) return DigestResult::Refused;
  if (const auto cur = dmac_.get(src)) {
    if (cur->is_static) return DigestResult::Refused;
    const bool moved = cur->port != port;
    dmac_.modify(src, MacEntry{port, false, now_ns});
    if (!moved) return DigestResult::Refreshed;
    ++c_.moved;
    return DigestResult::Moved;
  }
  if (!dmac_.add(src, MacEntry{port, false, now_ns})) return DigestResult::Refused;
  ++c_.learned;
  return DigestResult::Learned;
}

tna::Decision ForwardingReference::apply(Headers& hdr, const tna::IngressIntrinsicMd& md) {
  const tna::PortId in = md.ingress_port;
  if (cfg_.learning) learn(hdr.ethernet.src, in, md.ingress_mac_tstamp_ns);

  // ARP proxy. Only Ethernet/IPv4 requests are answered (the parser does not
  // check htype/ptype, and a reply to anything else would be garbage), and
  // not gratuitous ones (spa == tpa): those announce an address, they do not
  // ask for it, and must reach every host.
  if (hdr.arp_valid) {
    proto::Arp& a = hdr.arp;
    if (a.oper == 1 && a.htype == 1 && a.ptype == proto::kEtherTypeIpv4 && a.hlen == 6 &&
        a.plen == 4 && a.spa != a.tpa) {
      if (const auto mac = arp_proxy_.get(a.tpa)) {
        // RFC 826: swap sender and target, put the answer in the sender
        // fields, send it back to the requester on the port it came from.
        const Mac requester_mac = a.sha;
        const uint32_t requester_ip = a.spa;
        hdr.ethernet.dst = requester_mac;
        hdr.ethernet.src = *mac;
        a.oper = 2;
        a.sha = *mac;
        a.spa = a.tpa;
        a.tha = requester_mac;
        a.tpa = requester_ip;
        ++c_.arp_answered;
        return tna::Decision::unicast(in);
      }
    }
  }

  // IPv4 host routes take precedence over L2, whatever the destination MAC.
  if (hdr.ipv4_valid) {
    const tna::PortId out = ipv4_host_.apply(hdr.ipv4.dst);
    if (out != tna::kNoPort) {
      if (out == in) return tna::Decision::drop(reason(DropReason::L2SamePort));
      ++c_.routed;
      return tna::Decision::unicast(out);
    }
  }

  // L2.
  const Mac& dst = hdr.ethernet.dst;
  if (!is_group(dst)) {
    const MacEntry& e = dmac_.apply(dst);
    if (e.port != tna::kNoPort) {
      if (e.port == in) return tna::Decision::drop(reason(DropReason::L2SamePort));
      ++c_.l2_unicast;
      return tna::Decision::unicast(e.port);
    }
  }
  // Broadcast, multicast, unknown unicast. Whether any port is left after
  // pruning is the PRE's business (the program turns that into L2NoPorts).
  ++c_.flooded;
  return tna::Decision::multicast(kFloodGroup, in);
}

void ForwardingReference::visit_counters(const tna::CounterVisitor& visit) const {
  visit("fwd_routed", c_.routed);
  visit("fwd_l2_unicast", c_.l2_unicast);
  visit("fwd_flooded", c_.flooded);
  visit("fwd_arp_answered", c_.arp_answered);
  visit("fwd_learned", c_.learned);
  visit("fwd_moved", c_.moved);
  visit("fwd_aged", c_.aged);
  visit("fwd_digests", c_.digests);
  visit("fwd_mac_entries", dmac_.size());
  visit("fwd_routes", ipv4_host_.size());
}

void ForwardingReference::clear_counters() { c_ = Counters{}; }

}  // namespace agq::pipeline::reference
