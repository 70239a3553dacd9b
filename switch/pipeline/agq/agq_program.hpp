// The agq pipeline (docs/PROTOCOL.md, stage map in docs/PIPELINE.md): packed
// aggregation with non-overlapping, occupancy-aware windows, guard bits,
// per-worker bitmaps, shadow copies, multicast results, many jobs and PS
// fallback.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/switch_program.hpp"
#include "proto/headers.hpp"

namespace agq::pipeline::agq {

struct WorkerSpec {
  uint8_t worker_id = 0;   // bit in the slot bitmap, 0..num_workers-1
  tna::PortId port = 0;    // the worker sends and receives on this port
  uint32_t ipv4 = 0;       // must be the source of its DATA; destination of its RESULTs
  proto::Mac mac{};        // destination MAC of its RESULTs
};

// Decision::drop_reason of the agq path (program-defined; above pipeline::DropReason).
enum class AgqDrop : uint16_t {
  None = 0,
  Malformed = 0x100,  // ver != 1, type not DATA/PS_RESULT, n_lanes not the job's lanes
  UnknownJob,
  BadWorker,
  BadSlot,
  BadWidth,
  Absorbed,   // not an error: a contribution consumed by its sequence
  Duplicate,  // not an error: a retransmitted pending contribution
};

enum class ResultDelivery : uint8_t { Multicast, Ps };

struct JobSpec {
  uint16_t job_id = 0;                 // 1..65535
  uint8_t num_workers = 0;             // 1..32
  std::vector<WorkerSpec> workers;     // exactly num_workers, ids 0..N-1
  uint32_t slots = 0;                  // aggregation contexts (each with 2 versions)
  uint32_t rows = 0;                   // memory quota in rows (32 lanes x 2 halves x 32 bits)
  ResultDelivery delivery = ResultDelivery::Multicast;
  tna::PortId ps_port = tna::kNoPort;  // PS for fallback (and for delivery = Ps)
  uint32_t ps_ipv4 = 0;
  proto::Mac ps_mac{};
  uint8_t max_width = 32;              // memory-pressure cap on granted bits
  uint8_t lanes = 32;                  // lane profile 32 | 16 (PROTOCOL §10): n_lanes of its packets
};

struct AgqConfig {
  uint32_t total_rows = 4096;   // register capacity: rows shared by all jobs
  uint32_t total_slots = 32768; // slot register capacity shared by all jobs
};

// Where add_job put a job (for tools, dumps and tests).
struct JobPlacement {
  uint16_t job_index = 0;        // dense index; PRE group = kJobGroupBase + index
  tna::McastGroupId mcast_grp = 0;
  uint32_t row_base = 0, rows = 0;    // rows carved (<= the quota)
  uint32_t slot_base = 0, slots = 0;
  uint8_t row_shift = 0;         // row = row_base + (slot >> row_shift)
  uint8_t guard = 0;             // g = ceil(log2 N)
};

// A register cell pair: half v (0 or 1, the version bit of the frame's
// flags) is the cell the _v<v> RegisterAction uses. Indexed, not selected:
// half(v) is an address computation, no branch or conditional move.
template <typename T>
struct Pair {
  T cell[2]{};
  T& half(unsigned v) { return cell[v]; }
  T& other(unsigned v) { return cell[v ^ 1]; }
  T lo() const { return cell[0]; }
  T hi() const { return cell[1]; }
  bool operator==(const Pair&) const = default;
};

// Read access to every register cell of an agq program (docs/PROTOCOL.md
// §3), whatever its memory layout: dumps, tests. An instance that holds only
// some lcore's rows (own_shards) says which: a cell it does not hold reads
// as zero, and the owner instance has its value.
class RegisterCells {
 public:
  virtual ~RegisterCells() = default;
  virtual Pair<uint32_t> slot_bitmap(uint32_t slot_index) const = 0;
  virtual Pair<uint8_t> slot_count(uint32_t slot_index) const = 0;
  virtual Pair<uint16_t> slot_window(uint32_t slot_index) const = 0;
  virtual Pair<uint8_t> row_occupancy(uint32_t row) const = 0;
  virtual Pair<uint32_t> lane(uint32_t row, unsigned k) const = 0;  // lane00..lane31
  // Whether this instance holds the row (its row_occupancy and lanes) / the
  // slot. A row or slot of no job is held by no instance of a partitioned
  // program (it reads as zero everywhere).
  virtual bool owns_row(uint32_t /*row*/) const { return true; }
  virtual bool owns_slot(uint32_t /*slot_index*/) const { return true; }
};

class JobBook;

// What the control plane needs of an agq program: jobs. Two programs
// implement it with equal semantics: AgqProgram, the TNA model (the
// reference), and fast::AgqFastProgram (switch/pipeline/agq_fast/, what the
// switch runs); tests/unit/agq_fast_diff_test.cpp proves them equal.
class AgqSwitchProgram : public SwitchProgram {
 public:
  static constexpr tna::McastGroupId kJobGroupBase = 0x1000;
  static constexpr uint32_t kMaxJobs = 4096;

  using SwitchProgram::SwitchProgram;

  // Control plane (never concurrent with process()). add_job carves
  // rows/slots from the free space and installs the job's tables and PRE
  // group; returns an error message or nullopt.
  virtual std::optional<std::string> add_job(const JobSpec& job) = 0;
  virtual bool remove_job(uint16_t job_id) = 0;  // clears the job's registers, frees its space
  virtual std::vector<JobSpec> jobs() const = 0;
  virtual std::optional<JobPlacement> placement(uint16_t job_id) const = 0;

  virtual const AgqConfig& config() const = 0;
  virtual const RegisterCells& cells() const = 0;
  // Register cells of a row and of the slots of the job that owns it, by
  // name ("lane07.v1", "slot_count[12].v0", ...): the same for both programs.
  uint32_t aggregator_count() const final;
  NamedCells dump_aggregator(uint32_t row) const final;

  // (job_id + row - row_base) & 0xFFF of the job that holds `row`
  // (docs/PROTOCOL.md section 10; shards.cpp): the lcore whose instance
  // holds the row's registers.
  uint32_t aggregator_shard(uint32_t row) const override;
  // A DATA's shard, (job_id + (slot >> row_shift)) & 0xFFF, from fixed
  // offsets and the job's placement (shards.cpp); everything else kAnyShard.
  // A fast program overrides it with its own dense job table.
  uint32_t shard_of(std::span<const uint8_t> bytes) const override;

 protected:
  virtual const JobBook& book() const = 0;
};

struct Registers;

class AgqProgram final : public AgqSwitchProgram {
 public:
  AgqProgram(AgqConfig cfg, ForwardingConfig fwd_cfg, tna::ReplicationEngine& pre);
  ~AgqProgram() override;

  std::string_view name() const override { return "agq"; }
  tna::Decision process(std::span<uint8_t> bytes, const tna::IngressIntrinsicMd& md) override;
  void visit_counters(const tna::CounterVisitor& visit) const override;
  void clear_counters() override;
  void clear_state() override;
  // Replicas of a job's multicast: rewrites Ethernet/IPv4 destination and
  // worker_id of a RESULT for worker `rid` of the packet's job.
  bool has_egress() const override { return true; }
  void egress(std::span<uint8_t> bytes, tna::PortId egress_port, uint16_t rid) override;
  void set_epoch(uint16_t epoch) override;

  std::optional<std::string> add_job(const JobSpec& job) override;
  bool remove_job(uint16_t job_id) override;
  std::vector<JobSpec> jobs() const override;
  std::optional<JobPlacement> placement(uint16_t job_id) const override;

  const AgqConfig& config() const override;
  const RegisterCells& cells() const override;
  const Registers& registers() const;

 protected:
  const JobBook& book() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace agq::pipeline::agq
