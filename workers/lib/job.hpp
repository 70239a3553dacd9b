// A job as every participant (workers and PS) must agree on it: which
// hashIDs it uses, how chunks map to slots and jobAndSeq values, how many
// contributions complete a chunk. All processes derive the same mapping from
// the same flags, so no negotiation packet is needed.
#pragma once

#include <cstdint>
#include <string>

namespace agq::worker {

inline constexpr int kLanes = 4;               // data0..3 are aggregated in classic
inline constexpr uint32_t kHashIdLimit = 35000; // register capacity of the published program

struct JobSpec {
  uint8_t job_id = 1;           // 1..31: top 5 bits of jobAndSeq, so jobAndSeq is never 0
  uint8_t total_workers = 2;    // contributions per chunk (the switch's 8-bit counter)
  uint64_t elements = 65536;    // gradient length
  uint32_t window = 256;        // slots, i.e. chunks in flight per worker
  uint32_t slot_base = 0;       // first aggregator (hash1) of the job
  uint32_t seqs_per_agg = 1;    // 1 = exact mode; 2..8 packs live seqs (order-dependent)

  uint64_t chunks() const { return (elements + kLanes - 1) / kLanes; }
  uint32_t slot_of(uint64_t chunk) const { return uint32_t(chunk % window); }
  uint32_t generation(uint64_t chunk) const { return uint32_t(chunk / window); }
  uint16_t hash1_of_slot(uint32_t slot) const { return uint16_t(slot_base + slot / seqs_per_agg); }
  uint8_t hash2_of_slot(uint32_t slot) const { return uint8_t(slot % seqs_per_agg); }
  uint16_t hash_id_of_slot(uint32_t slot) const {
    return uint16_t(hash1_of_slot(slot) << 3 | hash2_of_slot(slot));
  }
  // jobAndSeq = job:5 | generation mod 2048:11. Consecutive users of one slot
  // differ, so an ACK or a retry can never be mistaken for the next chunk's.
  uint16_t job_and_seq(uint64_t chunk) const {
    return uint16_t(uint32_t(job_id) << 11 | (generation(chunk) & 0x7FF));
  }
  // Slot of a hashID, or -1 if the hashID is not one of this job's.
  int64_t slot_of_hash_id(uint16_t hash_id) const;

  // Empty string if the spec is usable, else what is wrong.
  std::string validate() const;
};

}  // namespace agq::worker
