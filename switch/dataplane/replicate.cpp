// The dataplane's multicast paths: the PRE's replicas of a packet, shared
// (mbuf refcount) when the program has no egress control, and otherwise a
// buffer each -- this lcore's spare absorbed DATA first, the pool for the
// rest -- reset by stores alone and rewritten by the program's egress
// (Program::egress_replicas / egress_groups). docs/ARCHITECTURE.md,
// "Multicast".
#include <rte_branch_prediction.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "dataplane/lcore.hpp"
#include "dataplane/replica_passes.hpp"

namespace agq::dataplane {

namespace {
// A replica buffer made a fresh one-segment mbuf of `len` bytes: what
// rte_pktmbuf_reset() and the lengths would write, by stores only, and the
// data pointer it would then give. For mbufs of the switch's pool (no
// private area, a data room larger than the headroom: checked in setup())
// that are either spares (run_program's conditions: direct, one segment,
// refcount 1) or fresh from the pool (rte_mempool_get_bulk: the pool keeps
// its free mbufs so). perf: rte_pktmbuf_alloc_bulk's reset and
// rte_pktmbuf_mtod read buf_len and buf_addr of a line not yet in cache,
// the multicast's hottest loads; stores wait for no line. The second cache
// line is left alone: `next` is already null, `tx_offload` means nothing
// without the TX flags cleared here.
inline uint8_t* init_replica(rte_mbuf* r, uint16_t len, uint16_t port) {
  r->data_off = RTE_PKTMBUF_HEADROOM;
  r->port = port;
  r->ol_flags = 0;
  r->packet_type = 0;
  r->pkt_len = len;
  r->data_len = len;
  r->vlan_tci = 0;
  r->vlan_tci_outer = 0;
  return reinterpret_cast<uint8_t*>(r) + sizeof(rte_mbuf) + RTE_PKTMBUF_HEADROOM;  // buf_addr + data_off
}

// init_replica()'s stores as one 32-byte template for every replica of one
// length and input port: rte_mbuf bytes 16-47 (data_off, refcnt, nb_segs,
// port; ol_flags; packet_type, pkt_len, data_len, vlan_tci; hash.rss),
// then vlan_tci_outer -- two stores per replica instead of eight. refcnt
// and nb_segs are written as the 1 they already are (the same
// preconditions as init_replica's).
struct ReplicaInit {
  static constexpr std::size_t kAt = 16;
  uint64_t word[4];
  uint16_t len, port;
  ReplicaInit(uint16_t l, uint16_t p) : len(l), port(p) {
    static_assert(offsetof(rte_mbuf, data_off) == kAt && offsetof(rte_mbuf, refcnt) == 18 &&
                  offsetof(rte_mbuf, nb_segs) == 20 && offsetof(rte_mbuf, port) == 22 &&
                  offsetof(rte_mbuf, ol_flags) == 24 && offsetof(rte_mbuf, packet_type) == 32 &&
                  offsetof(rte_mbuf, pkt_len) == 36 && offsetof(rte_mbuf, data_len) == 40 &&
                  offsetof(rte_mbuf, vlan_tci) == 42 && offsetof(rte_mbuf, hash) == 44);
    static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);
    word[0] = uint64_t(RTE_PKTMBUF_HEADROOM) | uint64_t(1) << 16 | uint64_t(1) << 32 | uint64_t(p) << 48;
    word[1] = 0;                   // ol_flags
    word[2] = uint64_t(l) << 32;   // packet_type 0, pkt_len
    word[3] = l;                   // data_len; vlan_tci, hash.rss 0
  }
  uint8_t* apply(rte_mbuf* r) const {
    std::memcpy(reinterpret_cast<uint8_t*>(r) + kAt, word, sizeof word);
    r->vlan_tci_outer = 0;
    return reinterpret_cast<uint8_t*>(r) + sizeof(rte_mbuf) + RTE_PKTMBUF_HEADROOM;  // buf_addr + data_off
  }
};

}  // namespace

void SwitchDataplane::multicast(Lcore& c, rte_mbuf* m, const tna::Decision& d, bool sim_tx) {
  auto& reps = c.replicas;
  unsigned n = 0;
  const std::vector<tna::Replica>* gp = c.pre->find(d.group);
  if (unlikely(gp == nullptr)) {  // an unknown group: no member
    rte_pktmbuf_free(m);
    return;
  }
  const std::vector<tna::Replica>& group = *gp;
  const uint16_t nports = ports_.count();
  const unsigned take = unsigned(std::min<std::size_t>(group.size(), kMaxReplicas));
  // One test per member in the common case (a member on a port that
  // exists, not the excluded one).
  for (unsigned i = 0; i < take; ++i) {
    const tna::Replica r = group[i];
    if (unlikely(r.port >= nports || r.port == d.exclude_port)) {
      if (r.port != d.exclude_port) c.counters.bad_port_drops.add(1);
      continue;
    }
    reps[n++] = r;
  }
  if (unlikely(group.size() > take)) {  // members past the replica array
    for (std::size_t i = take; i < group.size(); ++i) {
      const tna::Replica& r = group[i];
      if (r.port == d.exclude_port) continue;
      if (r.port >= nports)
        c.counters.bad_port_drops.add(1);
      else if (n == kMaxReplicas)
        c.counters.replica_overflow.add(1);
      else
        reps[n++] = r;
    }
  }
  if (n == 0) {  // e.g. a flood from the only port
    rte_pktmbuf_free(m);
    return;
  }
  if (!egress_) {
    // Every member gets the same bytes (Tofino's PRE without an egress
    // rewrite): the replicas are the one mbuf, its refcount raised; each
    // transmit (or drop) gives one reference back.
    if (n > 1) {
      rte_mbuf_refcnt_update(m, int16_t(n - 1));
      c.counters.clones.add(n - 1);
    }
    for (unsigned i = 0; i < n; ++i) transmit(c, reps[i].port, m, sim_tx);
    return;
  }
  // The egress control rewrites every replica (agq: destination MAC/IP and
  // worker_id), so each gets bytes of its own: n-1 buffers -- spares (this
  // lcore's absorbed DATA) first, the pool for the rest -- each reset as a
  // fresh mbuf; the original is the last replica's. The program fills them
  // all in one call (one flat copy of the frame each, 190 bytes for a
  // 32-lane RESULT, plus its rewrite), the original last.
  auto& bufs = c.copies;
  unsigned k = n - 1;
  if (c.nspare < k) {
    // The stash runs dry (RESULTs with no absorbed DATA in this lcore's
    // recent bursts): refilled up to a burst in one pool operation rather
    // than one per RESULT -- the pool's per-lcore cache hands back the
    // mbufs the tx side just freed, as warm as any spare.
    rte_mempool* const pool = ports_.pool();
    const unsigned want = std::max<unsigned>(opt_.burst, k) - c.nspare;
    if (rte_mempool_get_bulk(pool, reinterpret_cast<void**>(c.spare.data() + c.nspare), want) == 0)
      c.nspare = uint16_t(c.nspare + want);
    else if (rte_mempool_get_bulk(pool, reinterpret_cast<void**>(c.spare.data() + c.nspare), k - c.nspare) == 0)
      c.nspare = uint16_t(k);
  }
  if (likely(c.nspare >= k)) {
    for (unsigned i = 0; i < k; ++i) bufs[i] = c.spare[--c.nspare];
  } else {  // the pool is empty: only the original goes, to the last member
    c.counters.clone_failures.add(k);
    reps[0] = reps[n - 1];
    k = 0;
  }
  const uint16_t len = m->data_len;
  const uint8_t* src = rte_pktmbuf_mtod(m, const uint8_t*);
  auto& out = c.replica_bytes;
  const uint16_t in_port = m->port;
  for (unsigned i = 0; i < k; ++i) out[i] = init_replica(bufs[i], len, in_port);
  if (k) c.counters.copies.add(k);
  reps[k] = reps[n - 1];
  bufs[k] = m;
  out[k] = rte_pktmbuf_mtod(m, uint8_t*);
  c.prog->egress_replicas(src, len, reps.data(), out.data(), k + 1);
  if (unlikely(sim_tx)) {
    for (unsigned i = 0; i <= k; ++i) transmit_sim(c, reps[i].port, bufs[i]);
    return;
  }
  TxRun run(c.tx.get());  // replicas of one group mostly share a port
  for (unsigned i = 0; i <= k; ++i) run.send(reps[i].port, bufs[i]);
}

// The replicas of frames f[0..n), all decisions for one clean group
// (members[0..nr): existing ports, none pruned) whose every member's port
// copies a frame out inside tx_burst (TxPort::copies_out), made from the
// frames themselves, member after member (replica_passes.hpp): the
// program's egress rewrites each frame in place for member r (it writes
// whole the fields it owns, the IPv4 checksum from the fields it does not
// touch), the port copies it out, and the frame is rewritten for r+1. No
// buffer taken, no frame copied, no mbuf reset, no replica freed: the
// copies, resets and free calls of the other path, and the spare stash's
// working set. Each (port, worker) still receives in arrival order;
// replicas of different frames to one port leave member-major rather than
// frame-major, an order Tofino's PRE does not promise either. A port that
// keeps a frame past tx_burst turns reuse off for itself.
void SwitchDataplane::replicate_in_place(Lcore& c, rte_mbuf** f, unsigned n, const tna::Replica* members,
                                         unsigned nr) {
  // What these ports queued earlier leaves first: every port still sends
  // in arrival order.
  for (unsigned r = 0; r < nr; ++r) c.tx[members[r].port].flush();
  uint8_t** const bytes = c.replica_bytes.data();
  uint16_t* const lens = c.lens.data();
  for (unsigned j = 0; j < n; ++j) bytes[j] = rte_pktmbuf_mtod(f[j], uint8_t*);
  ReplicaPassStats st;
  replica_passes(
      *c.lender, f, bytes, n, nr,
      [&](unsigned r, uint8_t** b, rte_mbuf** fr, unsigned k, bool same) {
        if (!same)
          for (unsigned j = 0; j < k; ++j) lens[j] = fr[j]->data_len;
        c.prog->egress_member(b, lens, k, members[r], same);
      },
      [&](unsigned r, rte_mbuf** fr, unsigned k) {
        TxPort& tx = c.tx[members[r].port];
        const uint16_t sent = rte_eth_tx_burst(tx.port, tx.queue, fr, uint16_t(k));
        if (unlikely(sent < k)) tx.dropped.add(k - sent);  // the port's own count; the lcore's below
        return unsigned(sent);
      },
      [&](unsigned r, unsigned) { c.tx[members[r].port].copies_out = false; },
      [&]() -> rte_mbuf* { return c.nspare ? c.spare[--c.nspare] : rte_pktmbuf_alloc(ports_.pool()); }, st);
  c.counters.tx.add(st.sent);
  if (unlikely(st.refused)) c.counters.tx_dropped.add(st.refused);
  c.counters.reused.add(st.reused);
  if (unlikely(st.held)) {
    c.counters.reuse_held.add(st.held);
    c.counters.copies.add(st.copies);
    c.counters.clone_failures.add(st.lost);
  }
}

// A run of multicast decisions m[i] / d[i] for a program with an egress
// control, the drop simulator's tx side off: multicast()'s work with what
// it pays per decision paid per run. A group whose members are all on
// existing ports other than the pruned one (every agq job's group) is
// used in place, looked up once for consecutive decisions of one group.
// Its decisions, when every member's port copies frames out at tx, gather
// in a segment that replicate_in_place() sends member after member from
// the frames themselves; otherwise the run's buffers come off the spare
// stash in blocks, each replica's mbuf is reset by a template
// (ReplicaInit), the program rewrites the groups gathered so far in one
// egress_groups() call, and they leave in the same order multicast() would
// send them. A decision for any other group -- pruned or bad members, too
// many, empty, unknown -- or one the stash and the pool cannot serve goes
// through multicast() itself, after everything gathered before it.
void SwitchDataplane::multicast_run(Lcore& c, rte_mbuf* const* m, const tna::Decision* const* d, unsigned n) {
  const uint16_t nports = ports_.count();
  tna::Program::ReplicaGroup* const groups = c.groups.data();
  rte_mbuf** const bufs = c.copies.data();
  uint8_t** const out = c.replica_bytes.data();
  rte_mbuf** const spare = c.spare.data();
  unsigned ng = 0, used = 0;
  uint64_t copies = 0;
  auto flush = [&] {
    if (ng == 0) return;
    c.prog->egress_groups(groups, ng);
    TxRun run(c.tx.get());  // replicas of one group mostly share a port
    rte_mbuf* const* b = bufs;
    for (unsigned g = 0; g < ng; ++g) {
      const tna::Replica* reps = groups[g].reps;
      for (unsigned i = 0; i < groups[g].n; ++i) run.send(reps[i].port, b[i]);
      b += groups[g].n;
    }
    ng = used = 0;
  };
  // The segment for replicate_in_place(): frames of the memo's group, in
  // bufs (free while it gathers: flush() ran before its first frame).
  unsigned ns = 0;
  auto flush_segment = [&](const std::vector<tna::Replica>* g) {
    if (ns == 0) return;
    replicate_in_place(c, bufs, ns, g->data(), unsigned(g->size()));
    ns = 0;
  };
  ReplicaInit init(0, 0);
  uint32_t memo_group = ~0u;
  tna::PortId memo_excl = 0;
  const std::vector<tna::Replica>* gp = nullptr;
  bool clean = false, reuse = false;
  for (unsigned j = 0; j < n; ++j) {
    const tna::Decision& dj = *d[j];
    if (dj.group != memo_group || dj.exclude_port != memo_excl) {
      flush_segment(gp);
      memo_group = dj.group;
      memo_excl = dj.exclude_port;
      gp = c.pre->find(dj.group);
      clean = gp != nullptr && !gp->empty() && gp->size() <= kMaxReplicas;
      reuse = clean;
      if (clean)
        for (const tna::Replica& r : *gp) {
          clean &= r.port < nports && r.port != dj.exclude_port;
          reuse &= clean && c.tx[r.port].copies_out && c.tx[r.port].handoff == nullptr;
        }
    }
    if (reuse && c.lender->lendable(m[j])) {
      flush();
      bufs[ns++] = m[j];
      continue;
    }
    const unsigned nr = clean ? unsigned(gp->size()) : 0;
    const unsigned k = nr - 1;
    if (clean && used + nr > kMaxReplicas) flush();
    if (clean && c.nspare < k) {  // as in multicast(): refilled up to a burst in one pool operation
      rte_mempool* const pool = ports_.pool();
      const unsigned want = std::max<unsigned>(opt_.burst, k) - c.nspare;
      if (rte_mempool_get_bulk(pool, reinterpret_cast<void**>(spare + c.nspare), want) == 0)
        c.nspare = uint16_t(c.nspare + want);
      else if (rte_mempool_get_bulk(pool, reinterpret_cast<void**>(spare + c.nspare), k - c.nspare) == 0)
        c.nspare = uint16_t(k);
    }
    if (unlikely(!clean || c.nspare < k)) {
      flush();
      multicast(c, m[j], dj, false);
      continue;
    }
    rte_mbuf** const b = bufs + used;
    uint8_t** const o = out + used;
    c.nspare = uint16_t(c.nspare - k);
    std::memcpy(b, spare + c.nspare, k * sizeof *b);
    const uint16_t len = m[j]->data_len;
    if (len != init.len || m[j]->port != init.port) init = ReplicaInit(len, m[j]->port);
    for (unsigned i = 0; i < k; ++i) o[i] = init.apply(b[i]);
    b[k] = m[j];
    o[k] = rte_pktmbuf_mtod(m[j], uint8_t*);
    groups[ng++] = tna::Program::ReplicaGroup{o[k], len, nr, gp->data(), o};
    used += nr;
    copies += k;
  }
  flush_segment(gp);
  flush();
  if (copies) c.counters.copies.add(copies);
}

}  // namespace agq::dataplane
