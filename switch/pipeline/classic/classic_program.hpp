// The classic pipeline: the published AGQ Tofino program, bit for bit
// (../shared/reference/agq-published-program.md, "NEW" version), with the
// PS port and worker ports taken from configuration instead of 160/176.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "pipeline/switch_program.hpp"

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
  void visit_counters(const tna::CounterVisitor& visit) const override;
  void clear_counters() override;
  void clear_state() override;
  uint32_t aggregator_count() const override;
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
  struct Impl;  // registers, tables and counters (classic/ingress.cpp)
  ClassicConfig cfg_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace agq::pipeline::classic
