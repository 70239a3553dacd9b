// The agq pipeline as the switch runs it: the same P4 program as the TNA
// model (pipeline/agq/, the reference), stage for stage and register action
// for register action, at the cost of a hand-written DPDK path:
//   - headers read and written in place at fixed offsets (wire.hpp); lanes
//     byte-swapped only where they are added and written back;
//   - job_t an array indexed by job id, worker_t by [job][worker_id];
//   - one 16-byte record per slot (slot_bitmap, slot_count, slot_window
//     pairs), one record per row whose lane cells are contiguous per half,
//     so the lane_adds of a pass are 2-4 SIMD operations (lanes_simd.hpp);
//   - the constant tables as small arrays (fast_tables.hpp), shifts by
//     their constant amounts;
//   - a burst runs stage by stage (VPP-style): admission (parser, job_t,
//     worker_t, slot_row_t) for every packet with prefetches of its slot
//     record and row -- a DATA of the job just seen by one masked compare
//     of its header against the job's template (JobMemo) --, then the
//     register stages packet by packet in arrival order -- both passes of
//     a first contribution back to back, as the model's process() does --
//     each packet's agq_forward_t and header writes right after its own.
//     So every register sees the burst's packets in arrival order, and two
//     packets of one burst on the same slot or row give the sequential
//     result (tests/unit/agq_fast_diff_test.cpp proves equality with the
//     model, frame by frame and cell by cell);
//   - incremental IPv4 checksums (RFC 1624), also per replica in egress().
// No locks, no allocation on the packet path; one instance per lcore.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/agq/agq_program.hpp"
#include "pipeline/agq/job_book.hpp"
#include "pipeline/agq/program_counters.hpp"
#include "pipeline/agq/tables.hpp"
#include "pipeline/agq_fast/fast_tables.hpp"
#include "pipeline/agq_fast/lanes_simd.hpp"
#include "pipeline/agq_fast/row_layout.hpp"
#include "pipeline/agq_fast/wire.hpp"

namespace agq::pipeline::agq::fast {

// egress_worker_t's rewrite of one worker's replica, ready to apply to an
// untagged RESULT: its first 64 bytes with the worker's MAC at 0-5, its
// IPv4 address at 30-33 and its worker_id at 46 (kBytes: which), blended
// over the RESULT's; and the address's one's-complement addend for the
// IPv4 checksum.
struct ReplicaPatch {
  alignas(32) uint8_t line[64];
  uint32_t dst_sum;  // (ipv4 >> 16) + (ipv4 & 0xFFFF)
  static constexpr uint64_t kBytes = 0x3Full | 0xFull << 30 | 1ull << 46;
};

// job_t's action data, the job's worker_t / egress_worker_t entries, and
// the registers of its rows that this instance holds (row_layout.hpp).
struct JobEntry {
  JobAction job;
  JobRows rows;
  std::array<WorkerAction, kMaxWorkers> worker;
  // worker_t's checks of a DATA in one compare: for a hit, the ingress port
  // << 32 | the IPv4 source address as the frame holds it (network order,
  // loaded little-endian) -- what a DATA of that worker must carry; for a
  // miss kNoWorker, which no port and address make.
  static constexpr uint64_t kNoWorker = ~0ull;
  std::array<uint64_t, kMaxWorkers> worker_check = [] {
    std::array<uint64_t, kMaxWorkers> a;
    a.fill(kNoWorker);
    return a;
  }();
  std::array<ReplicaPatch, kMaxWorkers> patch;  // by worker_id, for the hits of `worker`
  // The lane pass's grant_t (key w, the job's guard), align_t and
  // extract_t (key end = pos + w) entries for each window pos | w << 3,
  // gathered from the constant tables at add_job: one lookup per pass
  // instead of three, the same entries (trunc and the pass's add/extract
  // are the packet's).
  std::array<LaneOp, 128> window_op;
};

class AgqFastProgram final : public AgqSwitchProgram {
 public:
  AgqFastProgram(AgqConfig cfg, ForwardingConfig fwd_cfg, tna::ReplicationEngine& pre);
  ~AgqFastProgram() override;

  std::string_view name() const override { return "agq"; }
  tna::Decision process(std::span<uint8_t> bytes, const tna::IngressIntrinsicMd& md) override;
  void process_burst(tna::BurstPacket* pkts, unsigned n) override;
  // An ordinary frame (the parser reads bytes < 44 of it, Forwarding the
  // MACs and the IPv4 destination) is a run; aggregation traffic, ARP and
  // parser errors are declined (tna::Program::process_run).
  bool process_run(tna::BurstPacket& first, unsigned n) override;
  uint32_t shard_of(std::span<const uint8_t> bytes) const override;
  // admit() finds a DATA's row and whether this instance holds it: a row of
  // another instance is handed back (Decision::handoff) untouched.
  bool checks_ownership() const override { return true; }
  bool has_egress() const override { return true; }
  void egress(std::span<uint8_t> bytes, tna::PortId egress_port, uint16_t rid) override;
  void egress_replicas(const uint8_t* src, uint16_t len, const tna::Replica* reps, uint8_t* const* out,
                       unsigned n) override;
  void egress_groups(const ReplicaGroup* g, unsigned count) override;
  // egress_worker_t rewrites whole the fields it owns (destination MAC and
  // IPv4, worker_id) and the checksum by RFC 1624 from the fields it does
  // not touch, so a rewrite over another worker's gives the same bytes.
  bool egress_reapplies() const override { return true; }
  void egress_member(uint8_t* const* frames, const uint16_t* lens, unsigned n, const tna::Replica& r,
                     bool same_frames) override;

  void visit_counters(const tna::CounterVisitor& visit) const override;
  void clear_counters() override;
  void clear_state() override;
  void set_epoch(uint16_t epoch) override { epoch_ = epoch; }
  // This instance is lcore `index` of `count` (PROTOCOL §10): it holds the
  // registers of the rows whose shard % count == index, and no others. The
  // registers of jobs already installed are laid out anew, zeroed.
  void own_shards(unsigned index, unsigned count) override;
  ShardOwner shard_owner() const { return owner_; }
  // Register memory this instance holds (the jobs' owned rows and slots).
  std::size_t register_bytes() const;

  std::optional<std::string> add_job(const JobSpec& job) override;
  bool remove_job(uint16_t job_id) override;
  std::vector<JobSpec> jobs() const override;
  std::optional<JobPlacement> placement(uint16_t job_id) const override;
  const AgqConfig& config() const override { return book_.config(); }
  const RegisterCells& cells() const override { return view_; }

  // The lane kernels in use (default: the best the CPU has). False, and no
  // change, when the CPU lacks `s`.
  bool set_simd(Simd s);
  Simd simd() const { return simd_; }

  static constexpr unsigned kChunk = 64;  // packets per stage-by-stage round

 protected:
  const JobBook& book() const override { return book_; }

 private:
  struct Meta;
  struct Pass;
  // Register reads by global index (the model's), through the layout: a
  // cell of a row this instance does not hold reads as zero (owns_*: false).
  class View final : public RegisterCells {
   public:
    explicit View(const AgqFastProgram& p) : p_(p) {}
    Pair<uint32_t> slot_bitmap(uint32_t i) const override;
    Pair<uint8_t> slot_count(uint32_t i) const override;
    Pair<uint16_t> slot_window(uint32_t i) const override;
    Pair<uint8_t> row_occupancy(uint32_t row) const override;
    Pair<uint32_t> lane(uint32_t row, unsigned k) const override;
    bool owns_row(uint32_t row) const override;
    bool owns_slot(uint32_t slot_index) const override;

   private:
    const SlotRecord* slot(uint32_t i) const;
    const JobEntry* row_job(uint32_t row, uint32_t& local) const;
    const AgqFastProgram& p_;
  };

  const JobEntry* job_of(uint16_t job_id) const {
    const uint16_t i = job_slot_[job_id];
    return i ? &jobs_[i - 1] : nullptr;
  }
  // job_t's last lookup inside one process_burst() call (0x10000: none),
  // and what a DATA of that job carries whatever its worker and slot:
  // agq header bytes 0-7 as a little-endian word under kDataMask
  // (version/type, job_id, num_workers) must equal `data`, and bytes 12-19
  // under kTailMask (req_width, min_width, n_lanes) must equal `tail`, the
  // widths of the last DATA of the job that passed every check, whose
  // req_units and min_units the memo keeps. A frame that matches passes every check of admit()
  // but worker_t's and the slot's exactly as the field-by-field path
  // would (tests/unit/agq_fast_diff_test.cpp); kNoData and kNoTail never
  // match.
  //
  // `frame` holds that DATA's first 64 bytes when it had the untagged
  // shape: every byte locate_agq()'s fast shape and the checks above read
  // lies in them (kFrameBytes), so a frame of the same length equal to it
  // in those bytes is agq traffic of the memo's job with the same result
  // of every such check -- one 64-byte compare on the vector pipes
  // (Lanes::frame_matches) instead of ~25 integer operations, which are
  // what admission's time is made of (docs/ARCHITECTURE.md, "Per-core cost
  // model"). frame_len 0: no template.
  struct JobMemo {
    static constexpr uint64_t kDataMask = 0x0000FF00FFFF00FFull;
    static constexpr uint64_t kNoData = 0x100;  // a bit outside kDataMask
    static constexpr uint64_t kTailMask = 0x0000FF000000FFFFull;
    static constexpr uint64_t kNoTail = 0x10000;  // a bit outside kTailMask
    // Ethernet type and IPv4 version/IHL (12-14), flags and fragment
    // offset (20-21), protocol (23), UDP destination port (36-37); agq
    // version/type (42), job_id (44-45), num_workers (47), req_width (54),
    // min_width (55), n_lanes (59).
    static constexpr uint64_t kFrameBytes = 1ull << 12 | 1ull << 13 | 1ull << 14 | 1ull << 20 | 1ull << 21 |
                                            1ull << 23 | 1ull << 36 | 1ull << 37 | 1ull << 42 | 1ull << 44 |
                                            1ull << 45 | 1ull << 47 | 1ull << 54 | 1ull << 55 | 1ull << 59;
    uint32_t id = 0x10000;
    const JobEntry* job = nullptr;
    uint64_t data = kNoData;
    uint64_t tail = kNoTail;
    uint8_t req_units = 0;
    uint8_t min_units = 0;
    uint8_t trunc_row = 0;  // Meta::trunc_row of that req_width
    uint16_t frame_len = 0;
    alignas(64) uint8_t frame[64];
  };
  // The stages of one packet; inlined into process_burst()'s loops.
  // False: decided at admission (a row of another instance: the packet's
  // decision is Decision::handoff), no register stage, no meta.
  template <bool kKnown> [[gnu::always_inline]] bool admit(tna::BurstPacket& p, const AgqFrame& f, Meta& m, JobMemo& memo);
  template <class Lanes> [[gnu::always_inline]] void registers(Meta& m, Pass& r);
  template <class Lanes> [[gnu::always_inline]] void lanes(Meta& m, const Pass& r, bool add, bool extract,
                                                       uint32_t keep = ~0u);
  [[gnu::always_inline]] void forward(tna::BurstPacket& p, Meta& m, Pass& r);
  // process_burst() once per lane kernel (lanes_simd.hpp), each compiled
  // for the kernel's target with the lane pass inlined; simd_ picks one.
  template <class Lanes> [[gnu::always_inline]] void run_burst(tna::BurstPacket* pkts, unsigned n);
  void burst_scalar(tna::BurstPacket* pkts, unsigned n);
#if defined(__x86_64__)
  AGQ_TARGET_AVX2 void burst_avx2(tna::BurstPacket* pkts, unsigned n);
  AGQ_TARGET_AVX512 void burst_avx512(tna::BurstPacket* pkts, unsigned n);
#endif

  JobBook book_;
  const FastTables& t_;
  Simd simd_;
  uint16_t epoch_ = 0;
  // job_t: job id -> 1 + index into jobs_ (0: job_miss).
  std::vector<uint16_t> job_slot_;
  std::vector<JobEntry> jobs_;  // by job index (the PRE group's offset)
  // The registers: in each job's JobRows, for the rows this instance owns.
  ShardOwner owner_;
  View view_{*this};
  // process_burst()'s parse views of the frames that are not agq traffic:
  // scratch, written by parse_view() before every read, so a burst does not
  // zero a 64-entry array on the stack (FrameView has member initialisers).
  FrameView views_[kChunk];
  // egress_member()'s look at each frame, kept while the dataplane sends
  // the same frames to the next member: its job (null: not a RESULT of a
  // known job, sent unchanged), the checksum's part without the
  // destination, where the fields are, and their original values (what a
  // member that is no worker of the job gets, as from egress_replicas).
  struct MemberPlan {
    const JobEntry* job;
    uint32_t sum;
    uint16_t l3;
    bool blend;  // untagged and >= 64 bytes: the 64-byte ReplicaPatch blend
    uint8_t wid;
    uint8_t mac[6];
    uint8_t ip[4];
    uint8_t csum[2];
  };
  std::array<MemberPlan, 256> plan_;
  ProgramCounters c_;
  // Register reads (View, control plane only): first row / first slot of a
  // job -> its index in jobs_.
  std::map<uint32_t, uint16_t> by_row_, by_slot_;
};

}  // namespace agq::pipeline::agq::fast
