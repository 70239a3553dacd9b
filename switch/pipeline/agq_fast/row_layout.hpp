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
#include <algorithm>
#include <cstdint>
#include <utility>
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
// lanes) and their slots, densely, and the row_off -> local mapping. The
// packet path reads only the first 48 bytes (pointers and constants; one
// cache line with the job's job_t entry in JobEntry); the storage itself
// follows. Like a span, a const JobRows still gives writable cells.
class JobRows {
 public:
  static constexpr uint32_t kNotHere = ~0u;

  JobRows() = default;
  // The rows [0, rows) of job `job_id` (2^row_shift slots each) that
  // `owner` holds, zeroed.
  JobRows(ShardOwner owner, uint16_t job_id, uint32_t rows, uint8_t row_shift);
  JobRows(JobRows&& o) noexcept { *this = std::move(o); }
  JobRows& operator=(JobRows&& o) noexcept;

  // The packet path: the local index of row `row_off` (< rows()) of the
  // job, or kNotHere. Owned rows are row_off % count == first (count a
  // power of two), local = row_off / count.
  [[gnu::always_inline]] uint32_t local(uint32_t row_off) const {
    if (map_) [[unlikely]]
      return map_[row_off];
    return (row_off & mask_) == first_ ? row_off >> log2_ : kNotHere;
  }
  // The record of slot `slot` (of the job) whose row has local index `lr`.
  SlotRecord* slot(uint32_t lr, uint32_t slot) const { return slots_ + ((lr << row_shift_) | (slot & slot_mask_)); }
  // The packet path's lookup of slot `slot` of the job: its row's local
  // index (kNotHere: not held here) and, when held, its record. An
  // instance that holds every row (one lcore) keeps them in the job's own
  // order: local = row_off, and the record is slot's.
  [[gnu::always_inline]] uint32_t find(uint32_t slot, SlotRecord*& rec) const {
    if (all_) [[likely]] {
      rec = slots_ + slot;
      return slot >> row_shift_;
    }
    const uint32_t lr = local(slot >> row_shift_);
    rec = slots_ + ((lr << row_shift_) | (slot & slot_mask_));
    return lr;
  }
  Pair<uint8_t>* occupancy(uint32_t lr) const { return occ_ + lr; }
  RowLanes* lanes(uint32_t lr) const { return lanes_ + lr; }

  uint32_t rows() const { return rows_; }  // of the job, all instances
  uint32_t local_rows() const { return uint32_t(occ_store_.size()); }  // held here
  std::size_t bytes() const;  // register memory held here
  void clear();               // zero every cell held here

 private:
  void point();  // the packet path's pointers into the storage
  // Packet path.
  const uint32_t* map_ = nullptr;  // count not a power of two: row_off -> local
  SlotRecord* slots_ = nullptr;
  Pair<uint8_t>* occ_ = nullptr;
  RowLanes* lanes_ = nullptr;
  uint32_t mask_ = 0, first_ = 0, log2_ = 0;
  uint8_t row_shift_ = 0;
  bool all_ = false;  // every row held here (count 1): local = row_off
  uint32_t slot_mask_ = 0;
  // Control plane.
  uint32_t rows_ = 0;
  std::vector<uint32_t> map_store_;
  std::vector<SlotRecord> slots_store_;
  std::vector<Pair<uint8_t>> occ_store_;
  std::vector<RowLanes> lanes_store_;
};

inline JobRows::JobRows(ShardOwner owner, uint16_t job_id, uint32_t rows, uint8_t row_shift)
    : row_shift_(row_shift), slot_mask_((1u << row_shift) - 1), rows_(rows) {
  uint32_t n = 0;  // rows held here
  if (std::has_single_bit(owner.count)) {
    // shard % count = (job_id + row_off) & (count - 1): owned when
    // row_off & (count - 1) == (index - job_id) & (count - 1).
    mask_ = owner.count - 1;
    all_ = owner.count == 1;
    log2_ = uint32_t(std::countr_zero(owner.count));
    first_ = (owner.index - job_id) & mask_;
    n = rows > first_ ? (rows - first_ + mask_) >> log2_ : 0;
  } else {
    map_store_.assign(rows, kNotHere);
    for (uint32_t r = 0; r < rows; ++r)
      if (owner.owns((job_id + r) & 0x0FFFu)) map_store_[r] = n++;
  }
  // The slots of local row lr are (lr << row_shift) + (slot & slot_mask); a
  // partial last row of the job leaves a few records never addressed.
  slots_store_.resize(std::size_t(n) << row_shift);
  occ_store_.resize(n);
  lanes_store_.resize(n);
  point();
}

inline JobRows& JobRows::operator=(JobRows&& o) noexcept {
  mask_ = o.mask_, first_ = o.first_, log2_ = o.log2_, row_shift_ = o.row_shift_, slot_mask_ = o.slot_mask_;
  all_ = o.all_;
  rows_ = o.rows_;
  map_store_ = std::move(o.map_store_);
  slots_store_ = std::move(o.slots_store_);
  occ_store_ = std::move(o.occ_store_);
  lanes_store_ = std::move(o.lanes_store_);
  point();
  o.point();
  return *this;
}

inline void JobRows::point() {
  map_ = map_store_.empty() ? nullptr : map_store_.data();
  slots_ = slots_store_.data();
  occ_ = occ_store_.data();
  lanes_ = lanes_store_.data();
}

inline std::size_t JobRows::bytes() const {
  return slots_store_.size() * sizeof(SlotRecord) + occ_store_.size() * sizeof(Pair<uint8_t>) +
         lanes_store_.size() * sizeof(RowLanes) + map_store_.size() * sizeof(uint32_t);
}

inline void JobRows::clear() {
  std::fill(slots_store_.begin(), slots_store_.end(), SlotRecord{});
  std::fill(occ_store_.begin(), occ_store_.end(), Pair<uint8_t>{});
  std::fill(lanes_store_.begin(), lanes_store_.end(), RowLanes{});
}

}  // namespace agq::pipeline::agq::fast
