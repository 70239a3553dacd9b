// ClassicProgram, the fast implementation (see classic_program.hpp): parse
// view -> ingress pass (stages 0-11 of the published program, reference
// §3.4, in their order and with their register-action names) -> a second
// pass for a resubmitted first packet -> data0..3 written back in place ->
// traffic manager decision. Non-AGQ traffic goes through the shared
// Forwarding control on the same parse view.
#include "pipeline/classic/classic_program.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include "pipeline/classic/tables.hpp"
#include "pipeline/parser.hpp"
#include "proto/bytes.hpp"
#include "proto/headers.hpp"

namespace agq::pipeline::classic {

namespace {

constexpr std::size_t kDropReasons = std::size_t(DropReason::Count);
constexpr int kLanes = proto::kAgqClassicAggLanes;

// Offsets in the AGQ header (proto::AgqClassic).
constexpr unsigned kOffJobAndSeq = 0, kOffTotalWorkers = 3, kOffData = 4, kOffIsAck = 68,
                   kOffHashId = 69, kOffHash12 = 71;

// The action data of split_t / get_length_t / ack_t as one flat record per
// (bitmap, position) key, copied from the TNA tables (tables.cpp, the
// formulas shared with the P4 generator). A key without an entry holds the
// all-zero default action data, which is what a miss leaves in the metadata.
struct WindowInfo {
  uint32_t mask_clear = 0, mask_extract = 0, mask_compress = 0;
  uint8_t L = 0;
};
struct FlatTables {
  std::array<WindowInfo, 2048> split_t, get_length_t, ack_t;
  std::array<uint8_t, 8> posi_2_bitmap_t0, posi_2_bitmap_t1;
};

FlatTables build_flat_tables() {
  const ConstTables& t = const_tables();
  FlatTables f;
  for (std::size_t key = 0; key < 2048; ++key) {
    const SplitInfo& s = t.split_t.apply(key);
    f.split_t[key] = {s.mask_clear, s.mask_extract, s.mask_compress, s.L};
    const LengthInfo& l = t.get_length_t.apply(key);
    f.get_length_t[key] = {0, l.mask_extract, l.mask_compress, l.L};
    const AckInfo& a = t.ack_t.apply(key);
    f.ack_t[key] = {a.mask_clear, 0, a.mask_compress, a.L};
  }
  for (unsigned p = 0; p < 8; ++p) {
    f.posi_2_bitmap_t0[p] = t.posi_2_bitmap_t0.apply(p).insert_bitmap;
    f.posi_2_bitmap_t1[p] = t.posi_2_bitmap_t1.apply(p).insert_bitmap;
  }
  return f;
}

const FlatTables& flat_tables() {
  static const FlatTables t = build_flat_tables();  // immutable once built; shared by every lcore
  return t;
}

// "reg[index]". Built by appends: GCC 12's -Wrestrict misfires on
// operator+ chains of std::string.
std::string indexed_name(const char* reg, uint32_t index) {
  std::string s = reg;
  s += '[';
  s += std::to_string(index);
  s += ']';
  return s;
}

// The AGQ header fields the ingress reads (the PHV), from the frame.
struct AgqFields {
  uint16_t job_and_seq;
  uint8_t total_workers;
  uint8_t is_ack;
  uint16_t hash_id;  // per-seq registers
  uint16_t hash1;    // per-aggregator registers (13 bits)
};
AgqFields read_fields(const uint8_t* a) {
  return {proto::load_be16(a + kOffJobAndSeq), a[kOffTotalWorkers], a[kOffIsAck],
          proto::load_be16(a + kOffHashId), uint16_t(proto::load_be16(a + kOffHash12) >> 3)};
}

// What one ingress pass leaves for the deparser and the traffic manager.
struct PassResult {
  uint8_t ina_action = 2;  // the P4 parser's initial value: drop
  bool drop_ctl = false;
  bool resubmit = false;
  DropReason drop_reason = DropReason::None;
};

}  // namespace

struct ClassicProgram::Impl {
  // Per sequence slot (hashID): job_and_seq_reg, start_posi, worker_agg.
  struct Slot {
    uint16_t job_and_seq;
    uint8_t start_posi;
    uint8_t worker_agg;
  };
  // Per aggregator (hash1): reg0..reg3, insert_posi, data_isEmpty; 32-byte
  // aligned so a pass's aggregator state is one cache line.
  struct alignas(32) Agg {
    uint32_t reg[kLanes];
    uint8_t insert_posi;
    uint8_t data_isEmpty;
  };
  // What the passes count. contributions (= completions + absorbed) and
  // acks (= acks_released + acks_no_owner) are sums of these, formed when
  // read. One struct so that agq_vector can count into a local copy: the
  // byte stores into the registers may alias any member of *this, a local
  // whose address never escapes cannot be aliased, so its increments stay
  // out of memory.
  struct Counters {
    uint64_t agq_packets = 0, resubmits = 0, allocations = 0, completions = 0, absorbed = 0, collisions = 0,
             acks_released = 0, acks_no_owner = 0;
  };

  Impl(const ClassicConfig& cfg)
      : capacity(cfg.register_capacity), slots(capacity, Slot{}), aggs(capacity, Agg{}), t(flat_tables()) {
    const tna::ConstTable<InaForward> ina = make_ina_send_or_drop(cfg);
    for (unsigned a = 0; a < tm.size(); ++a) tm[a] = traffic_manager_entry(ina.apply(a));
    owned.fill(~uint64_t(0));  // one instance owns every shard until own_shards() says otherwise
  }

  // ina_send_or_drop's action for one ina_action, resolved once into what
  // the traffic manager does with it: drop_ctl, or the decision itself (a
  // Send/Multicast without a port/group is a drop), or "back out of the
  // ingress port" (the only per-packet input).
  struct TmEntry {
    tna::Decision decision;
    bool drop_ctl = true;
    bool send_back = false;
  };
  static TmEntry traffic_manager_entry(const InaForward& f) {
    TmEntry e;
    e.drop_ctl = f.kind == InaForward::Kind::Drop;
    e.send_back = f.kind == InaForward::Kind::SendBack;
    const tna::Decision none = tna::Decision::drop(uint16_t(DropReason::None));  // no port assigned
    switch (f.kind) {
      case InaForward::Kind::SendBack: e.decision = none; break;  // replaced per packet
      case InaForward::Kind::Send: e.decision = f.port == tna::kNoPort ? none : tna::Decision::unicast(f.port); break;
      case InaForward::Kind::Multicast:
        e.decision = f.mcast_grp == 0 ? none : tna::Decision::multicast(f.mcast_grp);
        break;
      case InaForward::Kind::Drop: e.decision = none; break;  // drop_ctl: never read
    }
    return e;
  }

  // Inlined at both call sites of agq (the first pass and the resubmitted
  // one): the PHV's data0..3 then stay in a vector register.
  [[gnu::always_inline]] inline PassResult ingress(const AgqFields& in, uint32_t* data, Counters& c, bool resubmit);
  // The cases of a pass (see their definitions).
  struct Allocation {
    unsigned posi, bitmap, insert_bitmap;
    const WindowInfo& w;
  };
  [[gnu::always_inline]] inline Allocation allocate(Slot& s, Agg& g, Counters& c);
  [[gnu::always_inline]] inline PassResult first_pass(Slot& s, Agg& g, uint32_t* data, Counters& c);
  [[gnu::always_inline]] inline PassResult first_and_resubmitted(const AgqFields& in, Slot& s, Agg& g,
                                                                 uint32_t* data, Counters& c);
  [[gnu::always_inline]] inline PassResult contribution(const AgqFields& in, Slot& s, Agg& g, unsigned posi,
                                                        unsigned bitmap, uint32_t clear, uint32_t* data,
                                                        Counters& c);
  // Both write the decision to `out` (the burst's slot) rather than return
  // it: see Forwarding::apply.
  // Inlined into process_burst's AGQ-vector loop (a call per packet, with
  // its register saves, showed in the profile).
  // Several lcores: a packet of another lcore's aggregator (a stray on a
  // steered queue) gets Decision::handoff(its shard) and nothing else --
  // no register read, no counter. Checked outside agq() so that the one-
  // lcore loop's code stays as it was (with the test inside agq(), GCC's
  // code for the one-lcore vector loop ran 10% slower: run.py, classic).
  bool stray(const uint8_t* payload, tna::Decision& out) const {
    const uint32_t shard = proto::classic_shard(read_fields(payload).hash1);
    if (owns(shard)) return false;
    out = tna::Decision::handoff(shard);
    return true;
  }
  bool owns(uint32_t shard) const { return (owned[shard >> 6] >> (shard & 63)) & 1; }
  [[gnu::always_inline]] inline void agq(uint8_t* payload, const tna::IngressIntrinsicMd& md,
                                         tna::Decision& out, Counters& c);
  void run(uint8_t* bytes, const FrameView& v, Forwarding& fwd, const tna::IngressIntrinsicMd& md,
           tna::Decision& out);
  // A vector of classic AGQ frames of one shape (frame 0 a valid AGQ frame,
  // every other frame same_parse of it: run.py's classic replay, a host's
  // stream): one compare pass, then the passes in arrival order -- no
  // views, no classification. False (nothing done) for any other vector.
  [[gnu::noinline]] bool agq_vector(tna::BurstPacket* b, unsigned m);
  // Starts loading the register records an AGQ packet's pass will touch.
  // Inlined into process_burst's parse pass (a call per packet showed in
  // the profile on its own).
  [[gnu::always_inline]] inline void prefetch(const uint8_t* bytes, const FrameView& v) const;

  void count(const tna::Decision& d) {
    if (d.kind == tna::Decision::Kind::Drop && d.drop_reason < kDropReasons) ++drops[d.drop_reason];
  }
  void count_run(const tna::Decision& d, unsigned n) {
    if (d.kind == tna::Decision::Kind::Drop && d.drop_reason < kDropReasons) drops[d.drop_reason] += n;
  }

  uint32_t capacity;
  std::vector<Slot> slots;
  std::vector<Agg> aggs;
  const FlatTables& t;
  std::array<TmEntry, 4> tm;  // by ina_action, which is only ever 1, 2 or 3

  // own_shards: this instance's shards are those with shard % own_count
  // == own_index (docs/PROTOCOL.md section 10).
  uint32_t own_index = 0, own_count = 1;
  // The same as a bitmap by shard (12 bits): the ownership test is a load
  // and a bit test, not a division.
  std::array<uint64_t, (proto::kShardMask + 1) / 64> owned;
  Counters n;
  uint64_t parser_errors = 0;
  std::array<uint64_t, kDropReasons> drops{};

  // process_burst's scratch, here so that nothing is initialised per call.
  static constexpr unsigned kChunk = 32;
  FrameView views[kChunk];
  uint8_t ordinary[kChunk];
};

// One ingress pass (reference §3.4; classic/ingress.cpp has the same stages
// as TNA register actions, in the P4's flag-per-stage form). Here the pass
// is split by what stage 0 returns -- a first packet (ID 1), a contribution
// (ID 2), a collision (ID 0), an ACK that releases its slot or one that
// does not -- and each case runs its stages in their order as straight-line
// code: which register action each stage runs follows from that one
// result. `data` is the PHV's data0..3. A first packet that is resubmitted
// (`resubmit`: not drop_ctl'd, not itself a resubmitted packet) runs its
// resubmitted pass in the same call (first_and_resubmitted); the result
// then is that second pass's.
inline PassResult ClassicProgram::Impl::ingress(const AgqFields& in, uint32_t* data, Counters& c, bool resubmit) {
  PassResult r;
  const uint32_t h = in.hash_id, a = in.hash1;
  // Deviation (documented): on Tofino an index past the register size is
  // undefined behaviour; here it is a counted drop.
  if (h >= capacity || a >= capacity) {
    r.drop_reason = DropReason::AgqBadIndex;
    r.drop_ctl = true;
    return r;
  }
  Slot& s = slots[h];
  Agg& g = aggs[a];
  // Metadata as 32-bit locals holding 8-bit values (every write below is
  // an 8-bit value): a byte spilled and reloaded as a dword by the vector
  // code misses store forwarding, which the profile showed as the pass's
  // hottest spot.
  if (in.is_ack == 0) {
    // ---- stage 0: job_and_seq_detect
    const unsigned owner = s.job_and_seq;
    if (owner == 0) {
      s.job_and_seq = in.job_and_seq;  // ID 1
      // A resubmitted pass of jobAndSeq 0 finds the cell 0 again and
      // allocates again: only a nonzero one is merged with its second pass.
      if (resubmit && in.job_and_seq != 0) return first_and_resubmitted(in, s, g, data, c);
      return first_pass(s, g, data, c);
    }
    if (owner == in.job_and_seq) return contribution(in, s, g, s.start_posi, g.data_isEmpty, ~0u, data, c);  // ID 2
    // ID 0: another jobAndSeq owns the slot; nothing happens (ina_action
    // stays 2: dropped).
    r.drop_reason = DropReason::AgqCollision;
    ++c.collisions;
    r.drop_ctl = tm[r.ina_action].drop_ctl;
    return r;
  }
  // ---- stage 0: job_and_seq_clear
  if (s.job_and_seq != in.job_and_seq) {  // insert_len 0: nothing else happens
    r.drop_reason = DropReason::AgqAckNoOwner;
    ++c.acks_no_owner;
    r.drop_ctl = tm[r.ina_action].drop_ctl;
    return r;
  }
  s.job_and_seq = 0;  // insert_len 1
  // ---- stage 1: worker_agg_clear
  s.worker_agg = 0;
  r.ina_action = 3;
  // ---- stage 2: start_posi_read_clear
  const unsigned posi = s.start_posi;
  s.start_posi = 0;
  // ---- stage 3: posi_2_bitmap_t1 (the ACK path's copy of t0)
  const unsigned insert_bitmap = t.posi_2_bitmap_t1[posi & 7];
  // ---- stage 4: data_isEmpty_remove
  const unsigned bitmap = g.data_isEmpty;
  g.data_isEmpty = uint8_t(bitmap - insert_bitmap);  // arithmetic: an absent bit borrows (quirk §5.1)
  // ---- stage 5: ack_t
  const WindowInfo& w = t.ack_t[bitmap_position_key(uint8_t(bitmap), posi)];
  ++c.acks_released;
  r.drop_ctl = tm[r.ina_action].drop_ctl;
  const unsigned shift = 4 * (posi & 7u);  // align_t / data_extract_t: one constant shift per p
  // ---- stage 6: compress; stage 7: align_t (>> 4p) -- on the ACK path
  // even with L == 0
  for (int k = 0; k < kLanes; ++k) data[k] = (data[k] & w.mask_compress) >> shift;
  if (in.is_ack == 1) {
    // ---- stages 8-9: reg_clear
    for (int k = 0; k < kLanes; ++k) g.reg[k] &= w.mask_clear;
    return r;  // the clear action returns nothing into the PHV
  }
  // ---- stages 8-11 for isACK >= 2: reg_agg, extract (ack_t's
  // mask_extract), data_extract_t (quirk §5)
  for (int k = 0; k < kLanes; ++k) {
    g.reg[k] += data[k];
    data[k] = (g.reg[k] & w.mask_extract) << shift;
  }
  return r;
}

// Stages 1-5 of a first packet's pass 1 (stage 0 has written the owner):
// the start position from the rotating cursor, the bitmap bit set, split_t.
// Returns the position and the bitmap before the set.
inline ClassicProgram::Impl::Allocation ClassicProgram::Impl::allocate(Slot& s, Agg& g, Counters& c) {
  // ---- stage 1: insert_posi_advance
  const unsigned posi = g.insert_posi;
  g.insert_posi = posi > 4 ? uint8_t(posi - 5) : uint8_t(posi + 3);
  // ---- stage 2: start_posi_write + posi_2_bitmap_t0
  s.start_posi = uint8_t(posi);
  const unsigned insert_bitmap = t.posi_2_bitmap_t0[posi & 7];
  // ---- stage 4: data_isEmpty_set
  const unsigned bitmap = g.data_isEmpty;
  g.data_isEmpty = uint8_t(bitmap | insert_bitmap);
  ++c.allocations;
  // ---- stage 5: split_t
  return {posi, bitmap, insert_bitmap, t.split_t[bitmap_position_key(uint8_t(bitmap), posi)]};
}

// A first packet's pass 1 that is not resubmitted (drop_ctl, or a packet
// that is itself a resubmitted one): its own result goes out.
inline PassResult ClassicProgram::Impl::first_pass(Slot& s, Agg& g, uint32_t* data, Counters& c) {
  const Allocation al = allocate(s, g, c);
  PassResult r;
  r.resubmit = true;  // even with L == 0 (quirk §5.1)
  r.ina_action = 1;
  r.drop_ctl = tm[r.ina_action].drop_ctl;
  if (al.w.L == 0) return r;
  const unsigned shift = 4 * (al.posi & 7u);
  // ---- stage 6: compress; stage 7: align_t (>> 4p)
  for (int k = 0; k < kLanes; ++k) data[k] = (data[k] & al.w.mask_compress) >> shift;
  // ---- stages 8-9: reg_clear
  for (int k = 0; k < kLanes; ++k) g.reg[k] &= al.w.mask_clear;
  return r;  // the clear action returns nothing into the PHV
}

// A first packet (stage 0 has written the nonzero owner) and its
// resubmitted pass as one call. Exact, because every value pass 2 reads is
// known once pass 1 has written it: stage 0 finds the cell equal to
// jobAndSeq (ID 2), start_posi is pass 1's position, data_isEmpty pass 1's
// new bitmap, and pass 2 starts from the frame's original data0..3 (a
// resubmitted packet is the original packet; pass 1's PHV is discarded).
// The lanes are read and written once: pass 1's reg_clear (if its L != 0)
// is the mask under pass 2's reg_agg.
inline PassResult ClassicProgram::Impl::first_and_resubmitted(const AgqFields& in, Slot& s, Agg& g, uint32_t* data,
                                                              Counters& c) {
  const Allocation al = allocate(s, g, c);  // pass 1, stages 1-5; ina_action 1 and the resubmit
  ++c.resubmits;
  return contribution(in, s, g, al.posi, uint8_t(al.bitmap | al.insert_bitmap), al.w.L != 0 ? al.w.mask_clear : ~0u,
                      data, c);
}

// Stages 1-11 of a contribution (stage 0 returned 2) at start position
// `posi` with bitmap `bitmap` (stages 2 and 4 read them: the caller passes
// what start_posi_read and data_isEmpty_read return). `clear` is what the
// window's cells are masked with before the add: all ones, or the merged
// first pass's reg_clear.
inline PassResult ClassicProgram::Impl::contribution(const AgqFields& in, Slot& s, Agg& g, unsigned posi,
                                                     unsigned bitmap, uint32_t clear, uint32_t* data, Counters& c) {
  PassResult r;
  // ---- stage 1: worker_agg_count
  const unsigned worker_num = ++s.worker_agg;  // 8-bit, wraps (quirk)
  // ---- stage 5: get_length_t, the completion test
  const WindowInfo& w = t.get_length_t[bitmap_position_key(uint8_t(bitmap), posi)];
  if (worker_num == in.total_workers) {
    r.ina_action = 1;
    ++c.completions;
  } else {
    r.drop_reason = DropReason::AgqAbsorbed;
    ++c.absorbed;
  }
  r.drop_ctl = tm[r.ina_action].drop_ctl;
  if (w.L == 0) {
    if (clear != ~0u)
      for (int k = 0; k < kLanes; ++k) g.reg[k] &= clear;
    return r;
  }
  const unsigned shift = 4 * (posi & 7u);
  // ---- stages 6-11: compress, align_t (>> 4p), reg_agg (a plain 32-bit
  // wrap, quirk §5.2), extract, data_extract_t (<< 4p)
  for (int k = 0; k < kLanes; ++k) {
    g.reg[k] = (g.reg[k] & clear) + ((data[k] & w.mask_compress) >> shift);
    data[k] = (g.reg[k] & w.mask_extract) << shift;
  }
  return r;
}

inline void ClassicProgram::Impl::agq(uint8_t* payload, const tna::IngressIntrinsicMd& md, tna::Decision& out,
                                      Counters& c) {
  ++c.agq_packets;
  const AgqFields in = read_fields(payload);
  uint32_t original[kLanes];
  for (int k = 0; k < kLanes; ++k) original[k] = proto::load_be32(payload + kOffData + 4 * k);
  uint32_t data[kLanes] = {original[0], original[1], original[2], original[3]};
  // drop_ctl cancels a resubmit; a resubmitted packet is not resubmitted
  // again, so there are at most two passes.
  const bool resubmit = !tm[1].drop_ctl && !md.resubmit_flag;
  PassResult r = ingress(in, data, c, resubmit);
  // Only a first packet of jobAndSeq 0 still has its resubmit to run. The
  // second pass starts from the frame's bytes: a resubmitted packet is the
  // original packet, not the previous pass's PHV.
  if (r.resubmit && resubmit) {
    ++c.resubmits;
    for (int k = 0; k < kLanes; ++k) data[k] = original[k];
    r = ingress(in, data, c, false);
  }
  // The traffic manager.
  if (r.drop_ctl) {
    out = tna::Decision::drop(uint16_t(r.drop_reason));
    return;
  }
  const TmEntry& e = tm[r.ina_action];
  if (e.send_back) {
    out = md.ingress_port == tna::kNoPort ? e.decision : tna::Decision::unicast(md.ingress_port);
  } else {
    out = e.decision;
  }
  if (out.kind == tna::Decision::Kind::Drop) return;  // no port assigned
  // The deparser: only data0..3 can have changed.
  for (int k = 0; k < kLanes; ++k) proto::store_be32(payload + kOffData + 4 * k, data[k]);
}

void ClassicProgram::Impl::run(uint8_t* bytes, const FrameView& v, Forwarding& fwd,
                               const tna::IngressIntrinsicMd& md, tna::Decision& out) {
  if (v.error != ParserError::None) {
    ++parser_errors;
    out = tna::Decision::drop(uint16_t(DropReason::ParserError));
  } else if (!v.agq_classic_valid) {
    fwd.apply(bytes, v, md, out);
  } else if (own_count == 1 || !stray(bytes + v.payload_offset, out)) {
    agq(bytes + v.payload_offset, md, out, n);
  }
  count(out);
}

void ClassicProgram::Impl::prefetch(const uint8_t* bytes, const FrameView& v) const {
  if (v.error != ParserError::None || !v.agq_classic_valid) return;
  const AgqFields in = read_fields(bytes + v.payload_offset);
  if (in.hash_id < capacity) __builtin_prefetch(&slots[in.hash_id], 1);
  if (in.hash1 < capacity) __builtin_prefetch(&aggs[in.hash1], 1);
}

bool ClassicProgram::Impl::agq_vector(tna::BurstPacket* b, unsigned m) {
  constexpr unsigned kAhead = 4;
  const uint8_t* f0 = b[0].bytes;
  // A cheap look first (untagged IPv4/UDP to a classic AGQ port), so that
  // other traffic pays three compares per vector, not a parse.
  if (b[0].len < kSameParseMinLen || proto::load_be16(f0 + 12) != proto::kEtherTypeIpv4 || f0[23] != 17 ||
      !is_agq_classic_port(proto::load_be16(f0 + 36)))
    return false;
  FrameView v0;
  if (parse_view(f0, b[0].len, v0) != ParserError::None || !v0.agq_classic_valid) return false;
  for (unsigned i = 1; i < m; ++i)
    if (!same_parse(f0, b[0].len, v0, b[i].bytes, b[i].len)) return false;
  const uint16_t off = v0.payload_offset;
  // Note: GCC 12 emits no instruction for these two prefetches in this
  // function (objdump of agq_vector: no prefetch at all), so the records
  // are not prefetched. Made real (asm prefetcht0) they cost more than they
  // saved (bench_pipeline steady_w2 +0.6 ns/packet, pcap replay 0.98x), as
  // did prefetching each frame's second cache line in the compare pass
  // (0.975x): in a replay the records and frames sit in L2 and the core
  // overlaps those loads across packets by itself. Deleting the lambda
  // changes GCC's register allocation and vectorization of the ACK path
  // (+4 instructions per packet in callgrind, +0.3 ns), so it stays.
  auto prefetch_cells = [&](const uint8_t* payload) {
    const AgqFields in = read_fields(payload);
    if (in.hash_id < capacity) __builtin_prefetch(&slots[in.hash_id], 1);
    if (in.hash1 < capacity) __builtin_prefetch(&aggs[in.hash1], 1);
  };
  for (unsigned i = 0; i < m && i < kAhead; ++i) prefetch_cells(b[i].bytes + off);
  Counters c = n;  // counted in a local (see Counters)
  // Several lcores: a first pass over the vector looks for strays. On
  // steered queues there are none, and the vector then runs the one-lcore
  // loop below, whose code is GCC's best: the same vector through the loop
  // with stray() inside ran 15% slower at 2 lcores (by hand, 2-lcore
  // steered classic replay, 83 vs 95.5 Mpps).
  bool any_stray = false;
  if (own_count != 1)
    for (unsigned i = 0; i < m; ++i) any_stray |= !owns(proto::classic_shard(read_fields(b[i].bytes + off).hash1));
  if (!any_stray) {
    for (unsigned i = 0; i < m; ++i) {
      if (i + kAhead < m) prefetch_cells(b[i + kAhead].bytes + off);
      agq(b[i].bytes + off, b[i].md, b[i].decision, c);
      count(b[i].decision);
    }
  } else {  // several lcores: strays go back to the dataplane (see stray())
    for (unsigned i = 0; i < m; ++i) {
      if (i + kAhead < m) prefetch_cells(b[i + kAhead].bytes + off);
      if (stray(b[i].bytes + off, b[i].decision)) continue;
      agq(b[i].bytes + off, b[i].md, b[i].decision, c);
      count(b[i].decision);
    }
  }
  n = c;
  return true;
}

ClassicProgram::ClassicProgram(ClassicConfig cfg, ForwardingConfig fwd_cfg, tna::ReplicationEngine& pre)
    : SwitchProgram(fwd_cfg, pre), cfg_(std::move(cfg)), impl_(std::make_unique<Impl>(cfg_)) {
  this->pre().set_group(kWorkerGroup, cfg_.worker_ports);
}

ClassicProgram::~ClassicProgram() = default;

tna::Decision ClassicProgram::process(std::span<uint8_t> bytes, const tna::IngressIntrinsicMd& md) {
  FrameView v;
  parse_view(bytes.data(), bytes.size(), v);
  tna::Decision d;
  impl_->run(bytes.data(), v, forwarding(), md, d);
  return d;
}

void ClassicProgram::process_burst(tna::BurstPacket* pkts, unsigned n) {
  constexpr unsigned kChunk = Impl::kChunk;
  static_assert(kChunk <= Forwarding::kBurstMax);
  constexpr unsigned kAhead = 4;
  Impl& s = *impl_;
  FrameView* views = s.views;  // scratch: not initialised per call
  uint8_t* ordinary = s.ordinary;  // burst indices of the frames for Forwarding, in arrival order
  for (unsigned base = 0; base < n; base += kChunk) {
    const unsigned m = std::min(kChunk, n - base);
    tna::BurstPacket* b = pkts + base;
    if (s.agq_vector(b, m)) continue;
    // Stage 1: parse every frame; start loading the register records an AGQ
    // packet will touch, a few frames ahead of use; list the ordinary ones.
    // A frame shaped like the last parsed one (a burst of one flow) takes
    // its view without a parse (same_parse: exact). The classification is
    // read from that parsed view, never from the copy just stored (a load
    // of a struct just written by wider overlapping stores stalls on store
    // forwarding, every packet).
    for (unsigned i = 0; i < m && i < kAhead; ++i) __builtin_prefetch(b[i].bytes);
    unsigned k = 0;
    const FrameView* model = nullptr;
    unsigned model_i = 0;
    // `run`: every frame so far is ordinary, shaped like frame 0 and with
    // its forwarding inputs (a vector of one flow: Forwarding::apply_run).
    bool run = true;
    for (unsigned i = 0; i < m; ++i) {
      if (i + kAhead < m) __builtin_prefetch(b[i + kAhead].bytes);
      if (model && same_parse(b[model_i].bytes, b[model_i].len, *model, b[i].bytes, b[i].len)) {
        views[i] = *model;
      } else {
        parse_view(b[i].bytes, b[i].len, views[i]);
        model = &views[i];
        model_i = i;
      }
      if (model->error == ParserError::None && !model->agq_classic_valid) ordinary[k++] = uint8_t(i);
      else s.prefetch(b[i].bytes, *model);
      // (k == i + 1: frames 0..i are all ordinary; an AGQ frame ends the run
      // without comparing its forwarding inputs.)
      if (run && i > 0) run = model_i == 0 && k == i + 1 && forwarding().same_inputs(b[0], views[0], b[i], views[0]);
    }
    if (run && k == m) {
      forwarding().apply_run(b, views[0], m);
      s.count_run(b[0].decision, m);
      continue;
    }
    // Stage 2: the AGQ pipeline (and parser drops), in arrival order (every
    // register sees the packets in the order they came, as on Tofino).
    if (k != m)
      for (unsigned i = 0; i < m; ++i)
        if (views[i].error != ParserError::None || views[i].agq_classic_valid)
          s.run(b[i].bytes, views[i], forwarding(), b[i].md, b[i].decision);
    // Stage 3: ordinary forwarding over its own sub-vector (its tables are
    // not the registers', so running it after the AGQ packets changes no
    // result).
    if (k != 0) {
      forwarding().apply_burst(b, views, ordinary, k);
      for (unsigned j = 0; j < k; ++j) s.count(b[ordinary[j]].decision);
    }
  }
}

bool ClassicProgram::process_run(tna::BurstPacket& first, unsigned n) {
  static_assert(kRunKeyBytes >= 44, "an untagged or tagged IPv4/UDP frame's parsed bytes end before 44");
  FrameView v;
  parse_view(first.bytes, first.len, v);
  // An agq (50100) header's length check reads its lane count, past byte 43.
  if (v.error != ParserError::None || v.agq_classic_valid || v.agq_valid) return false;
  if (!forwarding().decide_run(first, v, n)) return false;
  impl_->count_run(first.decision, n);
  return true;
}

uint32_t ClassicProgram::shard_of(std::span<const uint8_t> bytes) const {
  // The untagged shape first (nearly all classic traffic; the dataplane
  // asks this of every packet of a single-queue port when several lcores
  // run): proto::plain_udp_mismatch() and a classic port, where
  // parse_view() reads the same bytes one by one and takes exactly these
  // branches; the differential tests hold the two equal.
  const uint8_t* p = bytes.data();
  constexpr std::size_t kPayload = 14 + 20 + 8;
  if (bytes.size() >= kPayload + proto::AgqClassic::kLen && proto::plain_udp_mismatch(p) == 0 &&
      is_agq_classic_port(proto::load_be16(p + 36))) [[likely]]
    return proto::classic_shard(read_fields(p + kPayload).hash1);
  FrameView v;
  if (parse_view(bytes.data(), bytes.size(), v) == ParserError::None && v.agq_classic_valid)
    return proto::classic_shard(read_fields(bytes.data() + v.payload_offset).hash1);
  return tna::kAnyShard;
}

void ClassicProgram::own_shards(unsigned index, unsigned count) {
  Impl& s = *impl_;
  s.own_index = count == 0 ? 0 : index;
  s.own_count = count == 0 ? 1 : count;
  s.owned.fill(0);
  for (uint32_t shard = 0; shard <= proto::kShardMask; ++shard)
    if (shard % s.own_count == s.own_index) s.owned[shard >> 6] |= uint64_t(1) << (shard & 63);
}

void ClassicProgram::visit_counters(const tna::CounterVisitor& visit) const {
  const Impl& s = *impl_;
  const Impl::Counters& c = s.n;
  visit("agq_packets", c.agq_packets);
  visit("contributions", c.completions + c.absorbed);
  visit("allocations", c.allocations);
  visit("resubmits", c.resubmits);
  visit("completions", c.completions);
  visit("absorbed", c.absorbed);
  visit("collisions", c.collisions);
  visit("acks", c.acks_released + c.acks_no_owner);
  visit("acks_released", c.acks_released);
  visit("acks_no_owner", c.acks_no_owner);
  visit("parser_errors", s.parser_errors);
  for (std::size_t r = 1; r < kDropReasons; ++r)
    visit(std::string("drops_") + to_string(DropReason(r)), s.drops[r]);
  forwarding().visit_counters(visit);
}

void ClassicProgram::clear_counters() {
  Impl& s = *impl_;
  s.n = Impl::Counters{};
  s.parser_errors = 0;
  s.drops.fill(0);
  forwarding().clear_counters();
}

void ClassicProgram::clear_state() {
  std::fill(impl_->slots.begin(), impl_->slots.end(), Impl::Slot{});
  std::fill(impl_->aggs.begin(), impl_->aggs.end(), Impl::Agg{});
}

uint32_t ClassicProgram::aggregator_count() const {
  // hash1 is 13 bits: only 8192 rows are addressable (reference §2).
  return std::min<uint32_t>(cfg_.register_capacity, 1u << 13);
}

SwitchProgram::NamedCells ClassicProgram::dump_aggregator(uint32_t index) const {
  NamedCells out;
  if (index >= aggregator_count()) return out;
  const Aggregator g = aggregator(index);
  out.emplace_back("insert_posi", g.insert_posi);
  out.emplace_back("data_isEmpty", g.data_isEmpty);
  static const char* const kRegNames[kLanes] = {"reg0", "reg1", "reg2", "reg3"};
  for (int k = 0; k < kLanes; ++k) out.emplace_back(kRegNames[k], g.reg[k]);
  // The aggregator's 8 seq slots (hashID = 8a + hash2).
  for (uint32_t h = 8 * index; h < 8 * index + 8 && h < cfg_.register_capacity; ++h) {
    const SeqSlot s = seq_slot(h);
    out.emplace_back(indexed_name("job_and_seq_reg", h), s.job_and_seq);
    out.emplace_back(indexed_name("start_posi", h), s.start_posi);
    out.emplace_back(indexed_name("worker_agg", h), s.worker_agg);
  }
  return out;
}

ClassicProgram::SeqSlot ClassicProgram::seq_slot(uint32_t hash_id) const {
  const Impl::Slot& s = impl_->slots.at(hash_id);
  return {s.job_and_seq, s.start_posi, s.worker_agg};
}

ClassicProgram::Aggregator ClassicProgram::aggregator(uint32_t hash1) const {
  const Impl::Agg& g = impl_->aggs.at(hash1);
  return {g.insert_posi, g.data_isEmpty, {g.reg[0], g.reg[1], g.reg[2], g.reg[3]}};
}

}  // namespace agq::pipeline::classic
