// The classic pipeline: the published AGQ Tofino program, bit for bit
// (../shared/reference/agq-published-program.md, "NEW" version), with the
// PS port and worker ports taken from configuration instead of 160/176.
//
// This is the fast implementation: the header is read and data0..3 written
// in place at fixed offsets (parse_view), the registers are two flat arrays
// (one 4-byte record per seq slot, one 32-byte record per aggregator: a pass
// touches at most two cache lines of state), the constant tables are plain
// arrays, the align/extract actions are shifts, a pass is straight-line
// code per stage-0 outcome, and a first packet and its resubmitted pass run
// as one pass (exact: pass 2 reads only what pass 1 wrote). Stages keep
// the P4 order and names (classic_program.cpp). classic/ingress.cpp is the
// same program in TNA vocabulary; reference/classic_reference.* runs it as the model this
// program is tested against, frame by frame and cell by cell.
//
// One instance per lcore (shared-nothing); no locks. A classic aggregation
// packet's shard is its aggregator, hash1 & 0xFFF (docs/PROTOCOL.md section
// 10): with L lcores each instance is one Tofino pipe that holds the
// aggregators of its shards and, by the published host invariant hashID ==
// hash1 << 3 | hash2, their seq slots. With one lcore (the default) it is
// the published program's single register space.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "pipeline/switch_program.hpp"
#include "proto/headers.hpp"

namespace agq::pipeline::classic {

struct ClassicConfig {
  tna::PortId ps_port = 0;                   // ina_action 1: completed aggregate -> PS
  std::vector<tna::PortId> worker_ports;     // ina_action 3: ACK -> every worker port
  uint32_t register_capacity = 35000;        // cells per register, as published
};

class ClassicProgram final : public SwitchProgram {
 public:
  // PRE group that carries ACKs to every worker port.
  static constexpr tna::McastGroupId kWorkerGroup = 1;

  ClassicProgram(ClassicConfig cfg, ForwardingConfig fwd_cfg, tna::ReplicationEngine& pre);
  ~ClassicProgram() override;

  std::string_view name() const override { return "classic"; }
  tna::Decision process(std::span<uint8_t> bytes, const tna::IngressIntrinsicMd& md) override;
  void process_burst(tna::BurstPacket* pkts, unsigned n) override;
  // An ordinary frame (the parser reads bytes < 44 of it, Forwarding the
  // MACs and the IPv4 destination) is a run; aggregation traffic, ARP and
  // parser errors are declined (tna::Program::process_run).
  bool process_run(tna::BurstPacket& first, unsigned n) override;
  uint32_t shard_of(std::span<const uint8_t> bytes) const override;
  // Every instance holds every aggregator; with several lcores an instance
  // processes only its shards' packets and hands the others back
  // (Decision::handoff) before reading a register or counting anything.
  void own_shards(unsigned index, unsigned count) override;
  bool checks_ownership() const override { return true; }
  void visit_counters(const tna::CounterVisitor& visit) const override;
  void clear_counters() override;
  void clear_state() override;
  uint32_t aggregator_count() const override;
  // Aggregator `index` (hash1) and its 8 seq slots live in its shard's instance.
  uint32_t aggregator_shard(uint32_t index) const override { return proto::classic_shard(uint16_t(index)); }
  NamedCells dump_aggregator(uint32_t index) const override;

  // Typed register reads for tests and tools.
  struct SeqSlot {
    uint16_t job_and_seq;
    uint8_t start_posi;
    uint8_t worker_agg;
  };
  struct Aggregator {
    uint8_t insert_posi;   // rotating start cursor
    uint8_t data_isEmpty;  // start-position bitmap, bit (7-p) = a live seq starts at p
    std::array<uint32_t, 4> reg;
  };
  SeqSlot seq_slot(uint32_t hash_id) const;
  Aggregator aggregator(uint32_t hash1) const;

  const ClassicConfig& config() const { return cfg_; }

 private:
  struct Impl;  // registers, tables and counters (classic_program.cpp)
  ClassicConfig cfg_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace agq::pipeline::classic
