// Which lcore's instance holds a row's registers (docs/PROTOCOL.md section
// 10): the control plane reads a row from its owner. Built only on the public
// job list, so it follows whatever layout add_job chose.
#include "pipeline/agq/agq_program.hpp"

namespace agq::pipeline::agq {

uint32_t AgqSwitchProgram::aggregator_shard(uint32_t row) const {
  for (const JobSpec& j : jobs()) {
    const auto p = placement(j.job_id);
    if (p && row >= p->row_base && row - p->row_base < p->rows) return (j.job_id + (row - p->row_base)) & 0x0FFFu;
  }
  return tna::kAnyShard;  // a free row: every instance holds it zeroed
}

}  // namespace agq::pipeline::agq
