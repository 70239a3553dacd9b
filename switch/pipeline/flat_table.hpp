// An exact-match table for the data plane: open addressing with linear
// probing over one flat array of slots (key and action data side by side, so
// a hit is usually one cache line), sized to a power of two at least twice
// the entry capacity so probes stay short. Keys are up to 48 bits (a MAC or
// an IPv4 address); the all-ones key marks an empty slot. Deletion shifts the
// following cluster back (no tombstones), so lookups never degrade with
// churn. Nothing allocates after construction.
//
// Not thread-safe: one instance per program instance, one thread each (the
// shared-nothing lcores); the control plane's changes are applied by the
// owning lcore between bursts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace agq::pipeline {

template <typename Value>
class FlatTable {
 public:
  static constexpr uint64_t kEmpty = ~0ull;

  explicit FlatTable(std::size_t capacity) : capacity_(capacity) {
    std::size_t slots = 16;
    while (slots < 2 * capacity) slots *= 2;
    mask_ = slots - 1;
    shift_ = 64 - __builtin_ctzll(slots);
    slots_.assign(slots, Slot{});
  }

  std::size_t size() const { return size_; }
  std::size_t capacity() const { return capacity_; }
  // Bumped by every insert, erase and clear: a pointer returned by find()
  // (and a remembered miss) is valid while the generation has not changed,
  // which is what a last-hit memo of a lookup checks (Forwarding::MacMemo).
  // Writes through such a pointer (a value changed in place) do not bump it.
  uint64_t generation() const { return generation_; }

  // Fibonacci hashing: the multiply spreads the low-entropy bits of a MAC
  // (often only the last octets differ) over the slot index.
  std::size_t home(uint64_t key) const { return std::size_t((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  void prefetch(uint64_t key) const { __builtin_prefetch(&slots_[home(key)]); }

  Value* find(uint64_t key) {
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
    }
  }
  const Value* find(uint64_t key) const { return const_cast<FlatTable*>(this)->find(key); }

  // False when the key is present or the table holds `capacity` entries.
  bool insert(uint64_t key, const Value& v) {
    if (size_ >= capacity_) {
      return false;
    }
    std::size_t i = home(key);
    for (; slots_[i].key != kEmpty; i = (i + 1) & mask_)
      if (slots_[i].key == key) return false;
    slots_[i] = Slot{key, v};
    ++size_;
    ++generation_;
    return true;
  }

  bool erase(uint64_t key) {
    std::size_t i = home(key);
    for (;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) break;
      if (slots_[i].key == kEmpty) return false;
    }
    // Backward-shift deletion: move every later member of the cluster that
    // may live at i (its home is not in (i, j]) into the hole.
    for (std::size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
      if (slots_[j].key == kEmpty) break;
      const std::size_t h = home(slots_[j].key);
      const bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i] = Slot{};
    --size_;
    ++generation_;
    return true;
  }

  void clear() {
    slots_.assign(slots_.size(), Slot{});
    size_ = 0;
    ++generation_;
  }

  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (const Slot& s : slots_)
      if (s.key != kEmpty) fn(s.key, s.value);
  }

  // Removes the entries for which pred(key, value) holds; returns how many.
  // Control plane only (collects the keys first: erasing shifts slots).
  template <typename Pred>
  std::size_t remove_if(Pred&& pred) {
    std::vector<uint64_t> doomed;
    for (const Slot& s : slots_)
      if (s.key != kEmpty && pred(s.key, s.value)) doomed.push_back(s.key);
    for (uint64_t k : doomed) erase(k);
    return doomed.size();
  }

 private:
  struct Slot {
    uint64_t key = kEmpty;
    Value value{};
  };
  std::size_t capacity_;
  std::size_t mask_ = 0;
  unsigned shift_ = 0;
  std::size_t size_ = 0;
  uint64_t generation_ = 0;
  std::vector<Slot> slots_;
};

}  // namespace agq::pipeline
