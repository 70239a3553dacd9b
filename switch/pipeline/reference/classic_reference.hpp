// The classic pipeline as it was before the fast path: the published AGQ
// program in TNA vocabulary (classic/ingress.cpp, one RegisterAction per
// register per pass, parse -> ingress -> deparse, a re-parse for the
// resubmitted pass), with its non-AGQ traffic through ForwardingReference.
// Kept unchanged as the reference model of classic::ClassicProgram:
// tests/unit/classic_differential_test wants every output frame, decision,
// counter and register cell equal over seeded random traces, and
// bench_pipeline times it beside the fast path. Not used by the switch.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "pipeline/classic/classic_program.hpp"
#include "pipeline/reference/forwarding_reference.hpp"
#include "tna/pre.hpp"
#include "tna/program.hpp"

namespace agq::pipeline::reference {

using classic::ClassicConfig;

class ClassicReference final : public tna::Program {
 public:
  static constexpr tna::McastGroupId kWorkerGroup = classic::ClassicProgram::kWorkerGroup;

  ClassicReference(ClassicConfig cfg, ForwardingConfig fwd_cfg, tna::ReplicationEngine& pre);
  ~ClassicReference() override;

  ForwardingReference& forwarding() { return forwarding_; }
  const ForwardingReference& forwarding() const { return forwarding_; }

  std::string_view name() const override { return "classic"; }
  tna::Decision process(std::span<uint8_t> bytes, const tna::IngressIntrinsicMd& md) override;
  void visit_counters(const tna::CounterVisitor& visit) const override;
  void clear_counters() override;
  void clear_state() override;
  uint32_t aggregator_count() const;
  using NamedCells = SwitchProgram::NamedCells;
  NamedCells dump_aggregator(uint32_t index) const;

  // Typed register reads, the same types as the fast program's.
  using SeqSlot = classic::ClassicProgram::SeqSlot;
  using Aggregator = classic::ClassicProgram::Aggregator;
  SeqSlot seq_slot(uint32_t hash_id) const;
  Aggregator aggregator(uint32_t hash1) const;

  const ClassicConfig& config() const { return cfg_; }

 private:
  struct Impl;  // registers, tables and counters (classic/ingress.cpp)
  ForwardingReference forwarding_;
  ClassicConfig cfg_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace agq::pipeline::reference
