// Match-action tables in the vocabulary of TNA.
//
// An entry's action is a value of `Action`, normally a std::variant of small
// structs, one per P4 action, holding the action data. apply() returns the
// action of the matching entry or the default action, and counts hits and
// misses like a direct counter would.
//
//   ExactTable<Key, Action>   exact match, runtime entries (control plane)
//   ConstTable<Action>        exact match over a small dense key space whose
//                             entries are fixed at construction (P4 const entries)
//   TernaryTable<Key, Action> value/mask/priority entries, highest priority wins
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace agq::tna {

struct TableStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
};

template <typename Key, typename Action, typename Hash = std::hash<Key>>
class ExactTable {
 public:
  ExactTable(std::string name, std::size_t capacity, Action default_action)
      : name_(std::move(name)), capacity_(capacity), default_(std::move(default_action)) {}

  const std::string& name() const { return name_; }
  std::size_t capacity() const { return capacity_; }
  std::size_t size() const { return entries_.size(); }
  const TableStats& stats() const { return stats_; }

  // Control plane. add() fails (returns false) when the table is full or the
  // key exists; modify() fails when it does not.
  bool add(const Key& k, Action a) {
    if (entries_.size() >= capacity_ || entries_.count(k)) return false;
    entries_.emplace(k, std::move(a));
    return true;
  }
  bool modify(const Key& k, Action a) {
    auto it = entries_.find(k);
    if (it == entries_.end()) return false;
    it->second = std::move(a);
    return true;
  }
  // add-or-modify, for learning and idempotent configuration.
  bool upsert(const Key& k, Action a) {
    auto it = entries_.find(k);
    if (it != entries_.end()) { it->second = std::move(a); return true; }
    return add(k, std::move(a));
  }
  bool remove(const Key& k) { return entries_.erase(k) > 0; }
  void clear() { entries_.clear(); }
  std::optional<Action> get(const Key& k) const {
    auto it = entries_.find(k);
    if (it == entries_.end()) return std::nullopt;
    return it->second;
  }
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (const auto& [k, a] : entries_) fn(k, a);
  }
  // Removes the entries for which pred(key, action) is true; returns how many.
  template <typename Pred>
  std::size_t remove_if(Pred&& pred) {
    std::size_t n = 0;
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (pred(it->first, it->second)) { it = entries_.erase(it); ++n; }
      else ++it;
    }
    return n;
  }

  // Data plane.
  const Action& apply(const Key& k) {
    auto it = entries_.find(k);
    if (it == entries_.end()) { ++stats_.misses; return default_; }
    ++stats_.hits;
    return it->second;
  }
  // Data-plane access that may update the entry's action data in place (used
  // for per-entry timestamps, like TNA's idle-timeout hit state).
  Action* apply_mut(const Key& k) {
    auto it = entries_.find(k);
    if (it == entries_.end()) { ++stats_.misses; return nullptr; }
    ++stats_.hits;
    return &it->second;
  }

 private:
  std::string name_;
  std::size_t capacity_;
  Action default_;
  std::unordered_map<Key, Action, Hash> entries_;
  TableStats stats_;
};

// A table with `const entries` over a dense key 0..size-1. The entries are
// generated once from a formula (the source of truth shared with the P4
// generator); a key without an entry yields the default action.
template <typename Action>
class ConstTable {
 public:
  ConstTable(std::string name, std::size_t key_space, Action default_action)
      : name_(std::move(name)), entries_(key_space), default_(std::move(default_action)) {}

  const std::string& name() const { return name_; }
  std::size_t key_space() const { return entries_.size(); }
  std::size_t size() const {
    std::size_t n = 0;
    for (const auto& e : entries_) n += e.has_value();
    return n;
  }
  void set(std::size_t key, Action a) { entries_.at(key) = std::move(a); }
  const std::optional<Action>& entry(std::size_t key) const { return entries_.at(key); }

  const Action& apply(std::size_t key) const {
    const auto& e = entries_[key];
    return e ? *e : default_;
  }
  bool hit(std::size_t key) const { return entries_[key].has_value(); }

 private:
  std::string name_;
  std::vector<std::optional<Action>> entries_;
  Action default_;
};

template <typename Key, typename Action>
class TernaryTable {
 public:
  struct Entry {
    Key value;
    Key mask;
    int priority;
    Action action;
  };

  TernaryTable(std::string name, std::size_t capacity, Action default_action)
      : name_(std::move(name)), capacity_(capacity), default_(std::move(default_action)) {}

  const std::string& name() const { return name_; }
  std::size_t size() const { return entries_.size(); }

  bool add(Key value, Key mask, int priority, Action a) {
    if (entries_.size() >= capacity_) return false;
    Entry e{value & mask, mask, priority, std::move(a)};
    auto pos = entries_.begin();
    while (pos != entries_.end() && pos->priority >= priority) ++pos;
    entries_.insert(pos, std::move(e));
    return true;
  }
  void clear() { entries_.clear(); }

  const Action& apply(const Key& k) const {
    for (const auto& e : entries_)
      if ((k & e.mask) == e.value) return e.action;
    return default_;
  }

 private:
  std::string name_;
  std::size_t capacity_;
  Action default_;
  std::vector<Entry> entries_;  // sorted by priority, highest first
};

}  // namespace agq::tna
