// A Program is one P4 program: parser, ingress control(s), deparser. It takes
// the bytes of one packet, may rewrite them in place (never changes their
// length), and returns the traffic manager's decision. Resubmission is run
// inside process(): the ingress sees the original bytes again with
// resubmit_flag set, exactly as on Tofino where the deparser does not emit a
// resubmitted packet.
//
// Programs hold no DPDK types and no lock. Concurrency: one instance per
// dataplane lcore; process() and the control-plane methods of one instance
// run on that lcore only (control-plane changes arrive as commands between
// bursts; see docs/ARCHITECTURE.md).
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "tna/intrinsic.hpp"
#include "tna/pre.hpp"

namespace agq::tna {

// One packet of a burst handed to Program::process_burst(): the frame's bytes
// (rewritten in place, length never changes), its intrinsic metadata, and the
// traffic manager's decision, filled in by the program.
struct BurstPacket {
  uint8_t* bytes = nullptr;
  uint16_t len = 0;
  IngressIntrinsicMd md;
  Decision decision;
};

// Shard of a frame (docs/PROTOCOL.md section 10); kAnyShard: no shard state,
// any lcore may process it.
inline constexpr uint32_t kAnyShard = 0xFFFFFFFFu;

// A learned (source MAC, ingress port) the program reports to the control
// plane instead of writing its own table (TNA's digest).
struct MacDigest {
  uint8_t mac[6];
  PortId port;
};

// A named counter visitor: called once per counter.
using CounterVisitor = std::function<void(std::string_view name, uint64_t value)>;

class Program {
 public:
  virtual ~Program() = default;
  virtual std::string_view name() const = 0;

  // Runs one packet to completion (all passes). `bytes` holds the frame.
  virtual Decision process(std::span<uint8_t> bytes, const IngressIntrinsicMd& md) = 0;

  // A whole rx burst, stage by stage over the vector (VPP-style; equal to
  // calling process() on each packet in order, which is Tofino's semantics:
  // every register sees the packets in arrival order). The default loops.
  virtual void process_burst(BurstPacket* pkts, unsigned n) {
    for (unsigned i = 0; i < n; ++i)
      pkts[i].decision = process(std::span<uint8_t>(pkts[i].bytes, pkts[i].len), pkts[i].md);
  }

  // A run: n >= 1 frames of one rx burst, all with first's length, ingress
  // port and time stamp and equal to first's bytes in [0, kRunKeyBytes)
  // except the free ones (run_key_free below; the dataplane compared them;
  // the frames are not passed). A program
  // whose pipeline, for a frame like `first`, reads no byte past
  // kRunKeyBytes and keeps no state that the run's packets would see
  // differently (ordinary forwarding: MAC learning is idempotent within a
  // time stamp, the lookups read the same entries) decides `first` once,
  // counts all n as process_burst() would over the n frames, and returns
  // true: every frame of the run then takes first.decision (the frames are
  // not rewritten). Otherwise it returns false having done nothing, and the
  // caller runs process_burst(). VPP's cached key taken to the whole vector:
  // the dataplane hands the run to one tx batch without a per-packet
  // decision. The default declines.
  static constexpr unsigned kRunKeyBytes = 44;
  // The bytes of [0, kRunKeyBytes) in which a run's frames may differ from
  // its first: which ones depends only on the first frame's compared bytes
  // (so on every frame's). A real flow changes the IPv4 identification and
  // header checksum per packet, and the UDP checksum with its payload; no
  // program reads them to decide an ordinary frame (Forwarding rewrites
  // nothing: no TTL, no MAC rewrite; aggregation frames, whose pipelines do
  // read their checksums, are declined by process_run on the UDP port,
  // which is compared). Only for an untagged IPv4 frame with a 20-byte
  // header (ethertype and version/IHL are compared, so the offsets are
  // fixed); anything else is compared in full.
  enum class RunKeyFree : uint8_t { kNone, kIpv4, kIpv4Udp };
  static RunKeyFree run_key_free(const uint8_t* first) {
    if (first[12] != 0x08 || first[13] != 0x00 || first[14] != 0x45) return RunKeyFree::kNone;
    return first[23] == 17 ? RunKeyFree::kIpv4Udp : RunKeyFree::kIpv4;
  }
  // Whether byte `i` of [0, kRunKeyBytes) is free under `f`: 18-19 the IPv4
  // identification, 24-25 its header checksum, 40-41 the UDP checksum.
  static constexpr bool run_key_byte_free(RunKeyFree f, unsigned i) {
    if (f == RunKeyFree::kNone) return false;
    if (i == 18 || i == 19 || i == 24 || i == 25) return true;
    return f == RunKeyFree::kIpv4Udp && (i == 40 || i == 41);
  }
  virtual bool process_run(BurstPacket& /*first*/, unsigned /*n*/) { return false; }

  // The frame's shard (docs/PROTOCOL.md section 10): the dataplane gives it
  // to lcore shard % lcores, whose instance of the program owns that state.
  // Read-only, cheap (fixed offsets plus a job lookup), any thread.
  virtual uint32_t shard_of(std::span<const uint8_t> /*bytes*/) const { return kAnyShard; }
  // True: an instance that owns part of the shards (several lcores) checks
  // ownership itself, where it finds the state anyway, and decides
  // Decision::handoff(shard) for a packet of another instance's shard --
  // before touching any state or counter, its bytes unchanged. The
  // dataplane then gives every received packet to the local instance and
  // hands back only those, instead of calling shard_of() per packet.
  virtual bool checks_ownership() const { return false; }

  // Egress control, run once per replica of a multicast decision (TNA's
  // egress pipeline with eg_intr_md.egress_rid). A program that rewrites
  // replicas returns true from has_egress(); the dataplane then gives every
  // replica its own copy of the bytes instead of a shared clone.
  virtual bool has_egress() const { return false; }
  virtual void egress(std::span<uint8_t> /*bytes*/, PortId /*egress_port*/, uint16_t /*rid*/) {}

  // All replicas of one multicast decision: out[i] (n buffers of at least
  // `len` bytes) gets `src` as egress() would leave it for reps[i]. out[n-1]
  // may be `src` itself (rewritten last, after every copy was taken); no
  // other buffer may overlap it. Equal to a copy plus egress() per replica
  // (the default); a program overrides it when one look at the frame serves
  // the whole group (agq: the RESULT's header is decoded once for N
  // replicas, each then a copy plus a few bytes).
  virtual void egress_replicas(const uint8_t* src, uint16_t len, const Replica* reps, uint8_t* const* out,
                               unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
      if (out[i] != src) std::memcpy(out[i], src, len);
      egress(std::span<uint8_t>(out[i], len), reps[i].port, reps[i].rid);
    }
  }

  // Several multicast decisions' replicas at once (the dataplane gives a
  // run of RESULTs of one burst together): group g is egress_replicas(
  // g.src, g.len, g.reps, g.out, g.n), in order. A program overrides it
  // when what one group learns serves the next (agq: the job of the
  // previous RESULT), and so that one call serves a burst's groups.
  struct ReplicaGroup {
    const uint8_t* src;
    uint16_t len;
    unsigned n;
    const Replica* reps;
    uint8_t* const* out;
  };
  virtual void egress_groups(const ReplicaGroup* g, unsigned count) {
    for (unsigned i = 0; i < count; ++i) egress_replicas(g[i].src, g[i].len, g[i].reps, g[i].out, g[i].n);
  }

  // Replicas made member after member from the frames themselves (the
  // dataplane's replicate_in_place, on ports that copy a frame out as they
  // send it): egress_member rewrites frames[0..n) (n <= 256) in place for
  // replica r, each frame holding either the original or another member's
  // rewrite. Only for a program whose egress_reapplies(): its egress of r
  // over any member's rewrite gives the bytes it gives over the original.
  // same_frames: the frames are those of the previous call (same buffers,
  // rewritten only by it), so what the program learned of them then still
  // holds. The default is egress_replicas per frame, each its own source.
  virtual bool egress_reapplies() const { return false; }
  virtual void egress_member(uint8_t* const* frames, const uint16_t* lens, unsigned n, const Replica& r,
                             bool /*same_frames*/) {
    for (unsigned j = 0; j < n; ++j) egress_replicas(frames[j], lens[j], &r, &frames[j], 1);
  }

  // Every counter of the program, in a stable order.
  virtual void visit_counters(const CounterVisitor& visit) const = 0;
  virtual void clear_counters() = 0;
  // Clears the aggregation state (registers), not the tables.
  virtual void clear_state() = 0;
};

}  // namespace agq::tna
