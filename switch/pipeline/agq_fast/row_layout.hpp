// Where an instance of the fast agq program keeps the registers of a job:
// the owner-major row layout (docs/ARCHITECTURE.md, "Memory").
//
// The switch runs one instance per dataplane lcore, and lcore `index` of
// `count` owns the shards s with s % count == index, shard = (job_id +
// row_off) & 0xFFF (docs/PROTOCOL.md section 10; row_off = the row's offset
// in its job). So an instance holds only the rows it owns, and the slots of
// those rows: each job's owned rows are renumbered densely 0, 1, 2, ... (the
// "local" row index) in storage allocated per job, on the lcore that runs
// add_job, so it is first touched by (and NUMA-local to) its owner. Memory
// per instance is ~1/count of the jobs' rows, and no page holds another
// lcore's rows. With count = 1 the layout is the identity: local = row_off.
//
// The packet path maps (job, row_off) -> local in O(1):
//   - count a power of two (1, 2, 4, ...; what rte_flow steering needs):
//     shard % count = (job_id + row_off) & (count - 1), and the owned rows
//     of a job are row_off = first + i*count, so local = row_off >> log2(count);
//   - any other count: a per-job table row_off -> local (4 bytes per row of
//     the job, built at add_job), since the 12-bit wrap of the shard makes
//     the owned rows irregular.
// A row this instance does not own maps to kNotHere (the dataplane never
// hands such a DATA to this instance; the program drops it as a bad slot).
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

#include "pipeline/agq/agq_program.hpp"
#include "proto/agq.hpp"

namespace agq::pipeline::agq::fast {

// slot_bitmap, slot_count and slot_window of one slot: one cache access.
struct SlotRecord {
  Pair<uint32_t> slot_bitmap;
  Pair<uint16_t> slot_window;
  Pair<uint8_t> slot_count;
};
static_assert(sizeof(SlotRecord) <= 16);

// lane00..lane31 of one row, half v contiguous (a 32-lane pass touches two
// cache lines, a 16-lane pass one).
struct alignas(64) RowLanes {
  uint32_t half[2][proto::kAgqLanes];
};

// Which shards an instance owns: lcore `index` of `count` (PROTOCOL §10).
struct ShardOwner {
  uint32_t index = 0, count = 1;
  bool operator==(const ShardOwner&) const = default;
  bool owns(uint32_t shard) const { return shard % count == index; }
};

// One job's registers on one instance: its owned rows (row_occupancy, the
// lanes) and their slots, densely, and the row_off -> local mapping.
class JobRows {
 public:
  static constexpr uint32_t kNotHere = ~0u;

  JobRows() = default;
  // The rows [0, rows) of job `job_id` (2^row_shift slots each) that
  // `owner` holds, zeroed.
  JobRows(ShardOwner owner, uint16_t job_id, uint32_t rows, uint8_t row_shift);

  // The packet path: the local index of row `row_off` of the job, or kNotHere.
  [[gnu::always_inline]] uint32_t local(uint32_t row_off) const {
    if (!map_.empty()) [[unlikely]]
      return map_[row_off];
    return ((job_id_ + row_off) & mask_) == index_ ? row_off >> log2_ : kNotHere;
  }
  // The record of slot `slot` (of the job) whose row has local index `lr`.
  SlotRecord* slot(uint32_t lr, uint32_t slot) { return &slots_[(lr << row_shift_) | (slot & slot_mask_)]; }
  Pair<uint8_t>* occupancy(uint32_t lr) { return &occ_[lr]; }
  RowLanes* lanes(uint32_t lr) { return &lanes_[lr]; }
  const SlotRecord* slot(uint32_t lr, uint32_t slot) const {
    return &slots_[(lr << row_shift_) | (slot & slot_mask_)];
  }
  const Pair<uint8_t>* occupancy(uint32_t lr) const { return &occ_[lr]; }
  const RowLanes* lanes(uint32_t lr) const { return &lanes_[lr]; }

  uint32_t rows() const { return rows_; }             // of the job, all instances
  uint32_t local_rows() const { return uint32_t(occ_.size()); }  // held here
  std::size_t bytes() const;                          // register memory held here
  void clear();                                       // zero every cell held here

 private:
  uint32_t job_id_ = 0, mask_ = 0, index_ = 0, log2_ = 0;
  uint32_t rows_ = 0, row_shift_ = 0, slot_mask_ = 0;
  std::vector<uint32_t> map_;  // count not a power of two: row_off -> local
  std::vector<SlotRecord> slots_;
  std::vector<Pair<uint8_t>> occ_;
  std::vector<RowLanes> lanes_;
};

inline JobRows::JobRows(ShardOwner owner, uint16_t job_id, uint32_t rows, uint8_t row_shift)
    : job_id_(job_id), rows_(rows), row_shift_(row_shift), slot_mask_((1u << row_shift) - 1) {
  uint32_t n = 0;  // rows held here
  if (std::has_single_bit(owner.count)) {
    mask_ = owner.count - 1;
    index_ = owner.index;
    log2_ = uint32_t(std::countr_zero(owner.count));
    const uint32_t first = (owner.index - job_id) & mask_;  // first owned row_off
    n = rows > first ? (rows - first + mask_) >> log2_ : 0;
  } else {
    map_.assign(rows, kNotHere);
    for (uint32_t r = 0; r < rows; ++r)
      if (owner.owns((job_id + r) & 0x0FFFu)) map_[r] = n++;
  }
  // The slots of local row lr are (lr << row_shift) + (slot & slot_mask); a
  // partial last row of the job leaves a few records never addressed.
  slots_.resize(std::size_t(n) << row_shift);
  occ_.resize(n);
  lanes_.resize(n);
}

inline std::size_t JobRows::bytes() const {
  return slots_.size() * sizeof(SlotRecord) + occ_.size() * sizeof(occ_[0]) + lanes_.size() * sizeof(RowLanes) +
         map_.size() * sizeof(uint32_t);
}

inline void JobRows::clear() {
  std::fill(slots_.begin(), slots_.end(), SlotRecord{});
  std::fill(occ_.begin(), occ_.end(), Pair<uint8_t>{});
  std::fill(lanes_.begin(), lanes_.end(), RowLanes{});
}

}  // namespace agq::pipeline::agq::fast
