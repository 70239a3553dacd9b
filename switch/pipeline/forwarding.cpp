// Ordinary ToR switching (see forwarding.hpp for the tables and their order).
//
// An instance belongs to one lcore (or to the single-threaded tests), so the
// tables need no synchronisation. Nothing here allocates on the packet path:
// the flat tables are sized at construction.
#include "pipeline/forwarding.hpp"

#include <algorithm>

namespace agq::pipeline {

using proto::Mac;

namespace {

// The I/G bit (least significant bit of the first octet on the wire) marks
// group addresses: multicast and broadcast. On Tofino this is one ternary
// entry 01:00:00:00:00:00 &&& 01:00:00:00:00:00 in front of dmac; a bit test
// is the same match without a table walk.
bool is_group(uint64_t mac_key) { return (mac_key >> 40 & 1) != 0; }

uint16_t reason(DropReason r) { return static_cast<uint16_t>(r); }

// htype 1 (Ethernet), ptype 0x0800, hlen 6, plen 4, oper 1 (request): the
// first 8 bytes of an ARP request we may answer, as one big-endian word.
constexpr uint64_t kArpEthIpv4Request = 0x0001080006040001ull;

uint64_t load_be64(const uint8_t* p) {
  uint64_t v;
  __builtin_memcpy(&v, p, 8);
  return __builtin_bswap64(v);
}
void store_mac(uint8_t* p, uint64_t k) {
  const uint16_t hi = __builtin_bswap16(uint16_t(k >> 32));
  const uint32_t lo = __builtin_bswap32(uint32_t(k));
  __builtin_memcpy(p, &hi, 2);
  __builtin_memcpy(p + 2, &lo, 4);
}

}  // namespace

Forwarding::Forwarding(ForwardingConfig cfg)
    : cfg_(cfg), ipv4_host_(cfg.route_capacity), dmac_(cfg.mac_capacity), arp_proxy_(cfg.arp_capacity) {}

// --- control plane ---------------------------------------------------------

bool Forwarding::add_route(uint32_t ipv4_dst, tna::PortId port) {
  // kNoPort means "no route" in the data path: an entry carrying it would be
  // indistinguishable from a miss.
  if (port == tna::kNoPort) return false;
  return ipv4_host_.insert(ipv4_dst, port);
}

bool Forwarding::remove_route(uint32_t ipv4_dst) { return ipv4_host_.erase(ipv4_dst); }

bool Forwarding::add_static_mac(const Mac& mac, tna::PortId port) {
  const uint64_t k = mac_key(mac);
  // Group addresses are flooded before dmac is looked up, so an entry for
  // one would never match; reject it rather than accept a dead entry.
  if (port == tna::kNoPort || is_group(k)) return false;
  const MacEntry e{port, /*is_static=*/true, 0};
  if (MacEntry* cur = dmac_.find(k)) {
    if (cur->is_static) return false;  // present, like add_route
    *cur = e;                          // the operator's word beats learning
    return true;
  }
  return dmac_.insert(k, e);
}

bool Forwarding::remove_mac(const Mac& mac) { return dmac_.erase(mac_key(mac)); }

bool Forwarding::add_arp_proxy(uint32_t ip, const Mac& mac) {
  // A reply claiming a group address as a station's address is bogus
  // (RFC 1812 3.3.2 tells routers not to believe one); refuse to send it.
  const uint64_t k = mac_key(mac);
  if (is_group(k)) return false;
  return arp_proxy_.insert(ip, k);
}

bool Forwarding::remove_arp_proxy(uint32_t ip) { return arp_proxy_.erase(ip); }

std::vector<uint64_t> Forwarding::idle_learned(uint64_t now_ns) const {
  std::vector<uint64_t> idle;
  if (cfg_.ageing_ns == 0) return idle;
  const uint64_t limit = cfg_.ageing_ns;
  // O(entries) through dmac_'s key list: this runs on the lcore (the
  // ageing command, once a second). Walking the slots instead (131072, 3 MB
  // at the default capacity) stalled a memif lcore 1-16 ms each time.
  dmac_.for_each([&](uint64_t k, const MacEntry& e) {
    if (e.is_static) return;
    // last_seen comes from a NIC/lcore clock and `now` from the control
    // thread; if they disagree so that last_seen is in the future, the entry
    // is fresh, not 2^64 ns old.
    if (now_ns > e.last_seen_ns && now_ns - e.last_seen_ns > limit) idle.push_back(k);
  });
  std::sort(idle.begin(), idle.end());
  return idle;
}

std::size_t Forwarding::expire(std::span<const uint64_t> keys) {
  std::size_t n = 0;
  for (uint64_t k : keys) {
    MacEntry* e = dmac_.find(k);
    if (!e || e->is_static) continue;
    n += dmac_.erase(k);
  }
  c_.aged += n;
  return n;
}

std::vector<std::pair<uint64_t, tna::PortId>> Forwarding::expire_idle(std::span<const uint64_t> keys,
                                                                        uint64_t now_ns) {
  std::vector<std::pair<uint64_t, tna::PortId>> kept;
  std::size_t n = 0;
  for (uint64_t k : keys) {
    MacEntry* e = dmac_.find(k);
    if (!e || e->is_static) continue;
    // idle_learned()'s rule: an entry stamped at or after `now` is fresh.
    if (cfg_.ageing_ns != 0 && now_ns > e->last_seen_ns && now_ns - e->last_seen_ns > cfg_.ageing_ns) {
      n += dmac_.erase(k);
    } else {
      kept.emplace_back(k, e->port);
    }
  }
  c_.aged += n;
  return kept;
}

bool Forwarding::restore_learned(uint64_t key, tna::PortId port, uint64_t now_ns) {
  if (is_group(key) || port == tna::kNoPort || dmac_.find(key)) return false;
  if (!dmac_.insert(key, MacEntry{port, false, now_ns})) return false;
  if (c_.aged) --c_.aged;
  return true;
}

std::size_t Forwarding::age_out(uint64_t now_ns) { return expire(idle_learned(now_ns)); }

bool Forwarding::is_table_counter(std::string_view name) {
  return name == "fwd_learned" || name == "fwd_moved" || name == "fwd_aged" || name == "fwd_mac_entries" ||
         name == "fwd_routes";
}

// --- learning --------------------------------------------------------------

template <bool kMemo>
void Forwarding::learn(uint64_t src, tna::PortId port, uint64_t now_ns) {
  // A group address is never a valid source (IEEE 802); an entry for it
  // could never match, since group destinations flood before dmac, and would
  // only take a slot. kNoPort (no ingress port known) is not a place to send.
  if (is_group(src) || port == tna::kNoPort) return;
  MacEntry* e = find_mac<kMemo>(src_memo_, src);
  if (e && e->port == port && !e->is_static) {
    // The hit state ageing reads (TNA's idle timeout): this instance's own.
    // The dataplane stamps a whole poll round with one time, so this stores
    // only on the round's first packet of the station: no line dirtied per
    // packet.
    if (e->last_seen_ns != now_ns) e->last_seen_ns = now_ns;
    return;
  }
  learn_slow(src, port, now_ns, e);
}

void Forwarding::learn_slow(uint64_t src, tna::PortId port, uint64_t now_ns, MacEntry* e) {
  if (e) {
    if (e->is_static) return;  // static entries are never touched by learning
    // The station moved (or a loop).
    if (sink_) return push_digest(src, port, now_ns);  // the control plane moves it
    e->port = port;  // follow it
    e->last_seen_ns = now_ns;
    ++c_.moved;
    return;
  }
  if (sink_) return push_digest(src, port, now_ns);
  // insert() refuses when the table is full: the station stays unknown and
  // its traffic is flooded, which is what a hardware switch does too.
  if (dmac_.insert(src, MacEntry{port, false, now_ns})) {
    ++c_.learned;
  }
}

void Forwarding::push_digest(uint64_t src, tna::PortId port, uint64_t now_ns) {
  const uint64_t key = src << 16 | port;
  // Fibonacci hashing of the 64-bit key onto the filter's 256 cells.
  DigestFilterCell& cell = digest_filter_[(key * 0x9E3779B97F4A7C15ull) >> 56];
  if (cell.key == key && now_ns >= cell.pushed_ns && now_ns - cell.pushed_ns < kDigestRepeatNs) return;
  cell.key = key;
  cell.pushed_ns = now_ns;
  tna::MacDigest d;
  const Mac m = mac_of(src);
  std::copy(m.begin(), m.end(), d.mac);
  d.port = port;
  ++c_.digests;
  sink_->push(d);
}

Forwarding::DigestResult Forwarding::apply_mac_digest(const tna::MacDigest& d, uint64_t now_ns) {
  Mac src;
  std::copy(d.mac, d.mac + 6, src.begin());
  return install_learned(mac_key(src), d.port, now_ns);
}

Forwarding::DigestResult Forwarding::install_learned(uint64_t src, tna::PortId port, uint64_t now_ns) {
  if (is_group(src) || port == tna::kNoPort) return DigestResult::Refused;
  if (MacEntry* cur = dmac_.find(src)) {
    if (cur->is_static) return DigestResult::Refused;
    const bool moved = cur->port != port;
    cur->port = port;
    cur->last_seen_ns = now_ns;
    if (!moved) return DigestResult::Refreshed;
    ++c_.moved;
    return DigestResult::Moved;
  }
  if (!dmac_.insert(src, MacEntry{port, false, now_ns})) return DigestResult::Refused;
  ++c_.learned;
  return DigestResult::Learned;
}

// --- data plane ------------------------------------------------------------

template <bool kMemo>
Forwarding::Counted Forwarding::decide(Fields& f, Hoisted h, const tna::IngressIntrinsicMd& md,
                                       tna::Decision& out, DecisionCounts& n) {
  const tna::PortId in = md.ingress_port;
  if (h.learning) learn<kMemo>(f.src, in, md.ingress_mac_tstamp_ns);

  // ARP proxy. Only Ethernet/IPv4 requests are answered (the parser does not
  // check htype/ptype, and a reply to anything else would be garbage), and
  // not gratuitous ones (spa == tpa): those announce an address, they do not
  // ask for it, and must reach every host.
  if (h.arp_proxies && f.arp_request) {
    if (const uint64_t* mac = arp_proxy_.find(f.arp_tpa)) {
      f.arp_answer = *mac;
      f.arp_answered = true;
      ++n.n[kCountedArp];
      out = tna::Decision::unicast(in);
      return kCountedArp;
    }
  }

  // IPv4 host routes take precedence over L2, whatever the destination MAC.
  if (h.routes && f.ipv4) {
    if (const tna::PortId* port = ipv4_host_.find(f.ipv4_dst)) {
      if (*port == in) {
        out = tna::Decision::drop(reason(DropReason::L2SamePort));
        return kCountedNone;
      }
      ++n.n[kCountedRouted];
      out = tna::Decision::unicast(*port);
      return kCountedRouted;
    }
  }

  // L2.
  if (!is_group(f.dst)) {
    if (const MacEntry* e = find_mac<kMemo>(dst_memo_, f.dst)) {
      if (e->port == in) {
        out = tna::Decision::drop(reason(DropReason::L2SamePort));
        return kCountedNone;
      }
      ++n.n[kCountedL2];
      out = tna::Decision::unicast(e->port);
      return kCountedL2;
    }
  }
  // Broadcast, multicast, unknown unicast. Whether any port is left after
  // pruning is the PRE's business (the program turns that into L2NoPorts).
  ++n.n[kCountedFlooded];
  out = tna::Decision::multicast(kFloodGroup, in);
  return kCountedFlooded;
}

void Forwarding::read_fields(const uint8_t* frame, const FrameView& v, Fields& f) {
  f.dst = load_mac(frame);
  f.src = load_mac(frame + 6);
  const uint8_t* l3 = frame + v.l3_offset;
  f.arp_request = false;
  f.arp_tpa = 0;
  if (v.arp_valid) {
    // spa (offset 14) != tpa (offset 24): not gratuitous.
    f.arp_request = load_be64(l3) == kArpEthIpv4Request && __builtin_memcmp(l3 + 14, l3 + 24, 4) != 0;
    f.arp_tpa = proto::load_be32(l3 + 24);
  }
  f.ipv4 = v.ipv4_valid;
  f.ipv4_dst = v.ipv4_valid ? proto::load_be32(l3 + 16) : 0;
  f.arp_answered = false;
  f.arp_answer = 0;
}

void Forwarding::write_arp_reply(uint8_t* frame, uint8_t* arp, uint64_t answer) {
  // RFC 826: swap sender and target, put the answer in the sender fields,
  // send it back to the requester on the port it came from.
  uint8_t requester[10];  // sha (6) + spa (4), adjacent in the ARP body
  __builtin_memcpy(requester, arp + 8, 10);
  __builtin_memcpy(frame, requester, 6);  // ethernet.dst = requester MAC
  store_mac(frame + 6, answer);           // ethernet.src = answer
  arp[7] = 2;                             // oper = reply (high byte is 0)
  store_mac(arp + 8, answer);             // sha
  __builtin_memcpy(arp + 14, arp + 24, 4);  // spa = old tpa
  __builtin_memcpy(arp + 18, requester, 10);  // tha, tpa = requester
}

void Forwarding::apply(uint8_t* frame, const FrameView& v, const tna::IngressIntrinsicMd& md, tna::Decision& out) {
  Fields f;
  read_fields(frame, v, f);
  DecisionCounts n;
  decide(f, hoisted(), md, out, n);
  add(n);
  if (f.arp_answered) write_arp_reply(frame, frame + v.l3_offset, f.arp_answer);
}

void Forwarding::apply_burst(tna::BurstPacket* pkts, const FrameView* views, const uint8_t* idx, unsigned n) {
  Fields f[kBurstMax];
  const Hoisted h = hoisted();
  // Stage 1: the keys of every frame (read once: stage 2 does not touch the
  // frames again), and the table slots they will read started loading. A key
  // equal to the previous frame's is not prefetched again: a burst of one
  // flow hits the lookup memos (find_mac) or repeats a decision.
  uint64_t prev_src = ~0ull, prev_dst = ~0ull;
  unsigned repeated = 0;  // frames whose source or destination is the previous frame's
  for (unsigned j = 0; j < n; ++j) {
    const unsigned i = idx[j];
    read_fields(pkts[i].bytes, views[i], f[j]);
    const bool same_src = f[j].src == prev_src, same_dst = f[j].dst == prev_dst;
    if (h.learning && !same_src) dmac_.prefetch(f[j].src);
    if (!same_dst && !is_group(f[j].dst)) dmac_.prefetch(f[j].dst);
    if (h.routes && f[j].ipv4) ipv4_host_.prefetch(f[j].ipv4_dst);
    repeated += same_src | same_dst;
    prev_src = f[j].src;
    prev_dst = f[j].dst;
  }
  // Stage 2: the control, in arrival order. Cold traffic (no key equal to
  // its predecessor's: a memo would not hit, no decision repeats) takes
  // plain lookups and no repeat check.
  DecisionCounts counts;
  if (repeated == 0) {
    for (unsigned j = 0; j < n; ++j) {
      tna::BurstPacket& p = pkts[idx[j]];
      decide<false>(f[j], h, p.md, p.decision, counts);
      if (f[j].arp_answered) write_arp_reply(p.bytes, p.bytes + views[idx[j]].l3_offset, f[j].arp_answer);
    }
  } else {
    // A frame with the previous frame's decision inputs (same MACs, port and
    // time stamp, neither an ARP frame, and with host routes the same IPv4
    // destination: see repeats()) takes its decision and its count; the
    // others are decided with the lookup memos. (Here, not in a function of
    // its own: on a local `f` the compiler keeps its keys in registers
    // across the decision stores.)
    const tna::BurstPacket* prev = nullptr;
    const FrameView* prev_view = nullptr;
    Counted prev_counted = kCountedNone;
    for (unsigned j = 0; j < n; ++j) {
      tna::BurstPacket& p = pkts[idx[j]];
      const FrameView& v = views[idx[j]];
      if (prev && f[j].dst == f[j - 1].dst && f[j].src == f[j - 1].src && !v.arp_valid && !prev_view->arp_valid &&
          p.md.ingress_port == prev->md.ingress_port &&
          p.md.ingress_mac_tstamp_ns == prev->md.ingress_mac_tstamp_ns &&
          (!h.routes || (f[j].ipv4 == f[j - 1].ipv4 && f[j].ipv4_dst == f[j - 1].ipv4_dst))) {
        p.decision = prev->decision;
        ++counts.n[prev_counted];
        continue;
      }
      prev_counted = decide(f[j], h, p.md, p.decision, counts);
      prev = &p;
      prev_view = &v;
      if (f[j].arp_answered) {
        write_arp_reply(p.bytes, p.bytes + v.l3_offset, f[j].arp_answer);
        prev = nullptr;  // its bytes are the reply's now
      }
    }
  }
  add(counts);
}

void Forwarding::apply_run(tna::BurstPacket* pkts, const FrameView& v, unsigned n) {
  if (n == 0) return;
  if (!decide_run(pkts[0], v, n)) {  // ARP (same_inputs excludes it): frame by frame
    for (unsigned j = 0; j < n; ++j) apply(pkts[j].bytes, v, pkts[j].md, pkts[j].decision);
    return;
  }
  const tna::Decision d = pkts[0].decision;
  for (unsigned j = 1; j < n; ++j) pkts[j].decision = d;
}

bool Forwarding::decide_run(tna::BurstPacket& first, const FrameView& v, unsigned n) {
  if (v.arp_valid || n == 0) return false;
  Fields f;
  read_fields(first.bytes, v, f);
  DecisionCounts counts;
  const Counted counted = decide(f, hoisted(), first.md, first.decision, counts);
  // The other n-1 frames: learning a no-op (the same source, port and time
  // stamp was just learned, refreshed or reported), the lookups the same.
  counts.n[counted] += n - 1;
  add(counts);
  return true;
}

tna::Decision Forwarding::apply(Headers& hdr, const tna::IngressIntrinsicMd& md) {
  Fields f{};
  f.dst = mac_key(hdr.ethernet.dst);
  f.src = mac_key(hdr.ethernet.src);
  if (hdr.arp_valid) {
    const proto::Arp& a = hdr.arp;
    f.arp_request = a.oper == 1 && a.htype == 1 && a.ptype == proto::kEtherTypeIpv4 && a.hlen == 6 &&
                    a.plen == 4 && a.spa != a.tpa;
    f.arp_tpa = a.tpa;
  }
  if (hdr.ipv4_valid) {
    f.ipv4 = true;
    f.ipv4_dst = hdr.ipv4.dst;
  }
  tna::Decision d;
  DecisionCounts n;
  decide(f, hoisted(), md, d, n);
  add(n);
  if (f.arp_answered) {
    proto::Arp& a = hdr.arp;
    const Mac mac = mac_of(f.arp_answer);
    const Mac requester_mac = a.sha;
    const uint32_t requester_ip = a.spa;
    hdr.ethernet.dst = requester_mac;
    hdr.ethernet.src = mac;
    a.oper = 2;
    a.sha = mac;
    a.spa = a.tpa;
    a.tha = requester_mac;
    a.tpa = requester_ip;
  }
  return d;
}

void Forwarding::visit_counters(const tna::CounterVisitor& visit) const {
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

void Forwarding::clear_counters() { c_ = Counters{}; }

}  // namespace agq::pipeline
