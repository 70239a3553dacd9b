// AgqProgram's private state, shared by agq_program.cpp (data plane) and
// jobs.cpp (control plane).
#pragma once

#include <array>
#include <cstdint>
#include <map>

#include "pipeline/agq/agq_program.hpp"
#include "pipeline/agq/ingress.hpp"
#include "pipeline/agq/job_book.hpp"
#include "pipeline/agq/program_counters.hpp"
#include "pipeline/drop_reason.hpp"

namespace agq::pipeline::agq {

struct AgqProgram::Impl {
  explicit Impl(const AgqConfig& c)
      : cfg(c), book(c), ingress(c.total_slots, c.total_rows), egress_worker_t("egress_worker_t", 4096 * kMaxWorkers, WorkerAction{}) {}

  AgqConfig cfg;
  JobBook book;
  Ingress ingress;
  // The egress pipeline's own copy of the worker addresses, key (job_id, rid).
  tna::ExactTable<uint32_t, WorkerAction> egress_worker_t;

  Registers::View cells{ingress.registers()};
  ProgramCounters counters;  // .ingress lives in `ingress` (its own counters)
};

}  // namespace agq::pipeline::agq
