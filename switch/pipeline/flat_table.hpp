// An exact-match table for the data plane: open addressing with linear
// probing over one flat array of slots (key and action data side by side, so
// a hit is usually one cache line), sized to a power of two at least twice
// the entry capacity so probes stay short. Keys are up to 48 bits (a MAC or
// an IPv4 address); the all-ones key marks an empty slot. Deletion shifts the
// following cluster back (no tombstones), so lookups never degrade with
// churn. Nothing allocates after construction.
//
// Beside the slots, a dense list of the present keys (keys_, each slot
// holding its key's place in at_): for_each, remove_if and clear visit the
// entries, not the slots. The slots are sized for lookups (the MAC table's
// 131072 slots are 3 MB at the default capacity); the control plane's reads
// (`mac list`, ageing) run on the owning lcore, which polls nothing
// meanwhile, so they must cost what the table holds, not what it could.
// Lookups never touch keys_ or at_.
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
    at_.assign(slots, 0);
    keys_.reserve(capacity);
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
    at_[i] = uint32_t(keys_.size());
    keys_.push_back(key);  // within the reserve: at most capacity_ entries
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
    // Swap-remove from keys_: the last key takes this one's place (its slot
    // found before the shift below, which carries at_ along with the slot).
    const uint32_t at = at_[i];
    const uint64_t last = keys_.back();
    keys_.pop_back();
    if (last != key) {
      keys_[at] = last;
      at_[slot_of(last)] = at;
    }
    // Backward-shift deletion: move every later member of the cluster that
    // may live at i (its home is not in (i, j]) into the hole.
    for (std::size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
      if (slots_[j].key == kEmpty) break;
      const std::size_t h = home(slots_[j].key);
      const bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      at_[i] = at_[j];
      i = j;
    }
    slots_[i] = Slot{};
    --size_;
    ++generation_;
    return true;
  }

  // O(entries): each entry's slot is emptied without a lookup (slot_of
  // before any slot changes, since emptying one cuts the probe chains).
  void clear() {
    for (uint64_t& k : keys_) k = slot_of(k);
    for (uint64_t i : keys_) slots_[i] = Slot{};
    keys_.clear();
    size_ = 0;
    ++generation_;
  }

  // Every entry, in no particular order (the order of insertion, shuffled
  // by removals). fn must not insert or erase.
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (uint64_t k : keys_) fn(k, slots_[slot_of(k)].value);
  }

  // Removes the entries for which pred(key, value) holds; returns how many.
  // Control plane only (collects the keys first: erasing reorders keys_).
  template <typename Pred>
  std::size_t remove_if(Pred&& pred) {
    std::vector<uint64_t> doomed;
    for_each([&](uint64_t k, const Value& v) {
      if (pred(k, v)) doomed.push_back(k);
    });
    for (uint64_t k : doomed) erase(k);
    return doomed.size();
  }

 private:
  // The slot of a present key.
  std::size_t slot_of(uint64_t key) const {
    std::size_t i = home(key);
    while (slots_[i].key != key) i = (i + 1) & mask_;
    return i;
  }

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
  std::vector<uint32_t> at_;     // per slot: its key's place in keys_ (meaningless when empty)
  std::vector<uint64_t> keys_;   // the present keys, dense
};

}  // namespace agq::pipeline
