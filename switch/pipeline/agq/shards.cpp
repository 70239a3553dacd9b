// Shards of the agq pipeline (docs/PROTOCOL.md section 10): which lcore's
// instance owns a packet and a row. Built on the public job interface
// (placement()), so every AgqSwitchProgram gets a correct answer; a fast
// program overrides shard_of with its own dense tables.
#include "pipeline/agq/agq_program.hpp"
#include "proto/agq.hpp"

namespace agq::pipeline::agq {

namespace {
uint16_t be16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }
}  // namespace

uint32_t AgqSwitchProgram::shard_of(std::span<const uint8_t> b) const {
  // Ethernet (one optional 802.1Q tag), IPv4 with any IHL, UDP to the agq
  // port, an agq DATA: job_id at +2, slot at +6 of the agq header.
  size_t off = 12;
  if (b.size() < 14) return tna::kAnyShard;
  uint16_t type = be16(&b[off]);
  if (type == 0x8100) {
    if (b.size() < 18) return tna::kAnyShard;
    off += 4;
    type = be16(&b[off]);
  }
  off += 2;
  if (type != 0x0800 || b.size() < off + 20 || (b[off] >> 4) != 4 || b[off + 9] != 17) return tna::kAnyShard;
  off += size_t(b[off] & 0x0F) * 4;
  if (b.size() < off + 8 + 8 || be16(&b[off + 2]) != proto::kAgqPort) return tna::kAnyShard;
  off += 8;
  if ((b[off] & 0x0F) != uint8_t(proto::AgqType::Data)) return tna::kAnyShard;  // PS_RESULT: shard-less
  const uint16_t job = be16(&b[off + 2]), slot = be16(&b[off + 6]);
  const auto p = placement(job);
  if (!p) return tna::kAnyShard;  // unknown job: dropped wherever it lands
  return (uint32_t(job) + (uint32_t(slot) >> p->row_shift)) & 0x0FFFu;
}

uint32_t AgqSwitchProgram::aggregator_shard(uint32_t row) const {
  for (const JobSpec& j : jobs()) {
    const auto p = placement(j.job_id);
    if (p && row >= p->row_base && row - p->row_base < p->rows) return (j.job_id + (row - p->row_base)) & 0x0FFFu;
  }
  return tna::kAnyShard;  // a free row: every instance holds it zeroed
}

}  // namespace agq::pipeline::agq
