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
//
// The data path reads the handful of fields it needs in place (MACs as
// 48-bit integers, the ARP opcode block as one 64-bit compare) and looks them
// up in flat open-addressing tables (flat_table.hpp); the ARP answer is
// written into the frame directly. reference/forwarding_reference.* is the
// implementation this replaced, kept as the model the differential test
// compares against.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "pipeline/drop_reason.hpp"
#include "pipeline/flat_table.hpp"
#include "pipeline/parser.hpp"
#include "proto/headers.hpp"
#include "tna/intrinsic.hpp"
#include "tna/program.hpp"

namespace agq::pipeline {

// Where a program sends its MAC-learning digests (TNA's learn digest): the
// dataplane hands them to the control thread, which installs the entry in
// every program instance (Forwarding::apply_mac_digest). Called on the packet
// path: push() must not block and must not call back into the program.
struct MacDigestSink {
  virtual ~MacDigestSink() = default;
  virtual void push(const tna::MacDigest& d) = 0;
};

struct ForwardingConfig {
  bool learning = true;
  uint64_t ageing_ns = 300ull * 1000000000ull;  // 0: learned entries never age
  std::size_t mac_capacity = 65536;
  std::size_t route_capacity = 65536;
  std::size_t arp_capacity = 4096;
};

class Forwarding {
 public:
  // PRE group that holds every port; floods prune the ingress port.
  static constexpr tna::McastGroupId kFloodGroup = 0xFFFF;

  // Action data of the dmac/smac table (one table, as on a real switch).
  struct MacEntry {
    tna::PortId port = tna::kNoPort;
    bool is_static = false;
    uint64_t last_seen_ns = 0;
  };

  explicit Forwarding(ForwardingConfig cfg = {});

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
  // One instance's view: age_out(now) == expire(idle_learned(now)).
  std::size_t age_out(uint64_t now_ns);
  // Ageing over shared-nothing instances. Each instance refreshes only the
  // entries its own packets hit, so one instance's idle entry may be a busy
  // station on another lcore. The control plane therefore asks every
  // instance for its idle learned entries (MAC keys, ascending), removes
  // those idle on all of them (control::ControlPlane::age_macs) and pushes
  // the removal to every instance with expire(), so the tables stay equal.
  std::vector<uint64_t> idle_learned(uint64_t now_ns) const;
  // Removes the learned entries among `keys` (static ones stay); returns
  // how many and counts them in fwd_aged.
  std::size_t expire(std::span<const uint64_t> keys);
  // One instance's part of ControlPlane::age_macs, race-free: removes the
  // learned entries among `keys` (collected at `now_ns` by idle_learned on
  // every instance) that are *still* idle at `now_ns` here, the check and
  // the removal in one step on this instance's lcore, and counts them in
  // fwd_aged. A station whose packet refreshed it since the keys were
  // collected keeps its entry; those entries (key, port) are returned, and
  // the control plane puts them back into the instances that removed them
  // (restore_learned), so the tables stay equal and a station that never
  // stopped talking is neither aged nor learned again.
  std::vector<std::pair<uint64_t, tna::PortId>> expire_idle(std::span<const uint64_t> keys, uint64_t now_ns);
  // Puts back an entry expire_idle removed here but another instance kept:
  // a learned entry stamped `now_ns`, not counted in fwd_learned, its count
  // in fwd_aged given back. False (nothing changes) if the MAC is present.
  bool restore_learned(uint64_t key, tna::PortId port, uint64_t now_ns);
  // Counters of table state every instance holds alike, because the control
  // plane applies the change to every instance (installed digests:
  // fwd_learned, fwd_moved; fwd_aged; table sizes). A sum over instances
  // takes them from one instance; every other counter is per packet and is
  // summed. (With one instance and no digest sink, learning is direct and
  // the instance's own counts are the switch's.)
  static bool is_table_counter(std::string_view name);
  const ForwardingConfig& config() const { return cfg_; }

  // The control plane's reads. They run on the owning lcore, which polls
  // nothing meanwhile: each costs what the table holds (FlatTable's key
  // list), never a walk of its slots.
  template <typename Fn> void for_each_route(Fn&& fn) const {
    ipv4_host_.for_each([&](uint64_t k, const tna::PortId& p) { fn(uint32_t(k), p); });
  }
  template <typename Fn> void for_each_mac(Fn&& fn) const {
    dmac_.for_each([&](uint64_t k, const MacEntry& e) { fn(mac_of(k), e); });
  }
  template <typename Fn> void for_each_arp_proxy(Fn&& fn) const {
    arp_proxy_.for_each([&](uint64_t k, const uint64_t& m) { fn(uint32_t(k), mac_of(m)); });
  }
  std::optional<tna::PortId> find_route(uint32_t ipv4_dst) const {
    const tna::PortId* p = ipv4_host_.find(ipv4_dst);
    return p ? std::optional(*p) : std::nullopt;
  }
  std::optional<MacEntry> find_mac(const proto::Mac& mac) const {
    const MacEntry* e = dmac_.find(mac_key(mac));
    return e ? std::optional(*e) : std::nullopt;
  }
  std::optional<proto::Mac> find_arp_proxy(uint32_t ip) const {
    const uint64_t* m = arp_proxy_.find(ip);
    return m ? std::optional(mac_of(*m)) : std::nullopt;
  }

  // --- data plane ---
  // Decides where a non-aggregation packet goes, reading the frame at the
  // offsets parse_view() found (`v.error` must be None). May rewrite the
  // frame in place (ARP reply); nothing else is written.
  // The decision is written to `out` (the burst's slot): building the
  // 10-byte Decision on the stack and copying it costs a store-forwarding
  // stall per packet.
  void apply(uint8_t* frame, const FrameView& v, const tna::IngressIntrinsicMd& md, tna::Decision& out);
  tna::Decision apply(uint8_t* frame, const FrameView& v, const tna::IngressIntrinsicMd& md) {
    tna::Decision d;
    apply(frame, v, md, d);
    return d;
  }
  // The same for a program that works on parsed Headers (the TNA-model agq
  // program): rewrites `hdr` for an ARP reply; the program deparses after.
  tna::Decision apply(Headers& hdr, const tna::IngressIntrinsicMd& md);
  // The ordinary frames of a burst, stage by stage (VPP-style; l3fwd's
  // lookup-burst idea): `idx` lists, in arrival order, the burst indices of
  // the frames to forward -- each parsed without error into views[index] and
  // not aggregation traffic. Stage 1 reads every frame's keys and prefetches
  // the MAC and route slots it will read; stage 2 decides frame by frame in
  // arrival order (what packet i learns is visible to packet i+1). Equal to
  // apply() on each listed frame in order (forwarding_differential_test).
  // At most kBurstMax frames per call.
  static constexpr unsigned kBurstMax = 64;
  void apply_burst(tna::BurstPacket* pkts, const FrameView* views, const uint8_t* idx, unsigned n);
  // A vector of one flow, VPP-style (a node that looked the key up once for
  // the whole frame): pkts[0..n), every one parsed into `v` and with the
  // decision inputs of pkts[0] (the caller checked same_inputs() on each).
  // pkts[0] is decided as apply_burst() would; the others get its decision
  // and its count. Equal to apply_burst() over the n frames.
  void apply_run(tna::BurstPacket* pkts, const FrameView& v, unsigned n);
  // The same for a run whose other frames the caller never shows (the
  // dataplane's fused path, Program::process_run): `first` (parsed into
  // `v`) stands for n frames with its decision inputs; it is decided once,
  // the decision left in first.decision, and counted n times. False, with
  // nothing done, for an ARP frame (an answered request rewrites every
  // frame of the run, not one).
  bool decide_run(tna::BurstPacket& first, const FrameView& v, unsigned n);
  // Whether packet b (view vb) has exactly the decision inputs of packet a
  // (view va): see repeats(). For a caller that builds runs (apply_run).
  bool same_inputs(const tna::BurstPacket& a, const FrameView& va, const tna::BurstPacket& b,
                   const FrameView& vb) const {
    return repeats(a, va, b, vb, hoisted());
  }

  // MAC <-> 48-bit key (first octet most significant).
  static uint64_t mac_key(const proto::Mac& m) {
    uint64_t v = 0;
    for (uint8_t b : m) v = v << 8 | b;
    return v;
  }
  static proto::Mac mac_of(uint64_t k) {
    return {uint8_t(k >> 40), uint8_t(k >> 32), uint8_t(k >> 24), uint8_t(k >> 16), uint8_t(k >> 8), uint8_t(k)};
  }
  // The MAC at p (6 bytes; p + 8 must be readable: true for both MACs of an
  // Ethernet header, which the parser checked is 14 bytes).
  static uint64_t load_mac(const uint8_t* p) {
    uint16_t hi;
    uint32_t lo;
    __builtin_memcpy(&hi, p, 2);
    __builtin_memcpy(&lo, p + 2, 4);
    return uint64_t(__builtin_bswap16(hi)) << 32 | __builtin_bswap32(lo);
  }

  void visit_counters(const tna::CounterVisitor& visit) const;
  void clear_counters();

 private:
  // What decide() may skip for a whole burst: learning off, no host route,
  // no ARP proxy entry (a lookup in an empty table is a miss). Read once per
  // burst; nothing on the packet path changes them (learning only writes
  // dmac).
  struct Hoisted {
    bool learning, routes, arp_proxies;
  };
  struct Counters {
    uint64_t routed = 0, l2_unicast = 0, flooded = 0, arp_answered = 0, learned = 0,
             moved = 0, aged = 0, digests = 0;
  };
  // The per-packet decision counters, kept on the stack over a burst and
  // added to c_ once at its end (a member incremented per packet is a
  // load-add-store chain through memory). decide() returns which one it
  // counted, so a repeated decision (apply_burst) counts the same.
  enum Counted : uint8_t { kCountedNone, kCountedRouted, kCountedL2, kCountedFlooded, kCountedArp, kCountedN };
  struct DecisionCounts {
    uint32_t n[kCountedN] = {};
  };
  void add(const DecisionCounts& d) {
    c_.routed += d.n[kCountedRouted];
    c_.l2_unicast += d.n[kCountedL2];
    c_.flooded += d.n[kCountedFlooded];
    c_.arp_answered += d.n[kCountedArp];
  }
  // Whether packet `b` (view vb) gets exactly the decision packet `a` (view
  // va, decided just before it, not an answered ARP request) got, with no
  // side effect but its counter: same MACs, same ingress port and time
  // stamp, neither is ARP, and with host routes installed the same IPv4
  // destination (or neither IPv4). Then b's learning is a no-op (a's has
  // just learned, moved or refreshed the same source at the same time, or
  // reported it to a digest filter that holds it back, or found it static
  // or a full table), and its lookups read what a's read.
  [[gnu::always_inline]] static bool repeats(const tna::BurstPacket& a, const FrameView& va,
                                             const tna::BurstPacket& b, const FrameView& vb, Hoisted h) {
    uint64_t a8, b8;
    uint32_t a4, b4;
    __builtin_memcpy(&a8, a.bytes, 8);
    __builtin_memcpy(&b8, b.bytes, 8);
    __builtin_memcpy(&a4, a.bytes + 8, 4);
    __builtin_memcpy(&b4, b.bytes + 8, 4);
    if (((a8 ^ b8) | (a4 ^ b4)) != 0 || va.arp_valid || vb.arp_valid) return false;
    if (a.md.ingress_port != b.md.ingress_port || a.md.ingress_mac_tstamp_ns != b.md.ingress_mac_tstamp_ns)
      return false;
    if (!h.routes) return true;
    if (va.ipv4_valid != vb.ipv4_valid) return false;
    return !va.ipv4_valid || __builtin_memcmp(a.bytes + va.l3_offset + 16, b.bytes + vb.l3_offset + 16, 4) == 0;
  }
  // A one-entry memo of a dmac lookup (VPP l2-input's "cached key", OVS's
  // EMC with one way): the last key looked up in this role and what find()
  // returned for it (the entry, or null for a miss), valid while the table's
  // generation is unchanged -- every insert and erase bumps it (learning,
  // digests, static entries, ageing, removal), so a memo never outlives the
  // state it was read from. Values changed in place (a move, a static entry
  // replacing a learned one, a refresh) are read through the pointer, so
  // they need no bump. A burst of one flow thus does one lookup per role
  // instead of one per packet. One for source (learning), one for
  // destination (forwarding): they alternate within every packet.
  struct MacMemo {
    uint64_t key = ~0ull;
    uint64_t generation = ~0ull;
    MacEntry* entry = nullptr;
  };
  // kMemo false: a plain lookup, the memo left as it is (still exact: it
  // is keyed by the generation). apply_burst takes that for a burst with no
  // key equal to its predecessor's (cold traffic, where a memo never hits
  // and its check and update are pure cost).
  template <bool kMemo = true>
  [[gnu::always_inline]] MacEntry* find_mac(MacMemo& m, uint64_t key) {
    if constexpr (!kMemo) return dmac_.find(key);
    const uint64_t g = dmac_.generation();
    if (key == m.key && g == m.generation) return m.entry;
    m.key = key;
    m.generation = g;
    m.entry = dmac_.find(key);
    return m.entry;
  }
  MacMemo src_memo_, dst_memo_;
  // What the decision needs from a frame, however it was parsed.
  // Trivial (no member initializers), so a burst's array costs nothing to
  // declare: read_fields() writes every member, `Fields f{}` zeroes one.
  struct Fields {
    uint64_t dst, src;  // MAC keys
    uint32_t arp_tpa;
    uint32_t ipv4_dst;
    bool arp_request;   // Ethernet/IPv4 ARP request, not gratuitous
    bool ipv4;
    // Set by decide(): the request is answered with this MAC.
    bool arp_answered;
    uint64_t arp_answer;
  };
  Hoisted hoisted() const { return {cfg_.learning, ipv4_host_.size() != 0, arp_proxy_.size() != 0}; }
  // The fields of a frame parsed into `v`, read in place.
  [[gnu::always_inline]] static inline void read_fields(const uint8_t* frame, const FrameView& v, Fields& f);
  // Rewrites the ARP request at `arp` (inside `frame`) into the reply
  // carrying `answer`, in place.
  static void write_arp_reply(uint8_t* frame, uint8_t* arp, uint64_t answer);
  // The forwarding control proper; on a proxied ARP request it sets
  // f.arp_answer* and the caller rewrites the frame or the headers.
  // Inlined into every apply (defined in forwarding.cpp, the only user).
  template <bool kMemo = true>
  [[gnu::always_inline]] inline Counted decide(Fields& f, Hoisted h, const tna::IngressIntrinsicMd& md,
                                               tna::Decision& out, DecisionCounts& n);
  // Learning: the common case (a known station on its port) refreshes the
  // hit state inline; everything else takes learn_slow().
  template <bool kMemo = true>
  [[gnu::always_inline]] inline void learn(uint64_t src, tna::PortId port, uint64_t now_ns);
  void learn_slow(uint64_t src, tna::PortId port, uint64_t now_ns, MacEntry* e);
  DigestResult install_learned(uint64_t src, tna::PortId port, uint64_t now_ns);
  // Digest mode: reports (src, port) unless the filter says it was reported
  // less than kDigestRepeatNs ago.
  void push_digest(uint64_t src, tna::PortId port, uint64_t now_ns);

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
  FlatTable<tna::PortId> ipv4_host_;  // key: IPv4 destination
  FlatTable<MacEntry> dmac_;           // key: MAC
  FlatTable<uint64_t> arp_proxy_;      // key: IPv4 target -> MAC key
  Counters c_;
};

}  // namespace agq::pipeline
