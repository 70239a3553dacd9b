// Registers and register actions in the vocabulary of TNA.
//
// A Register<T> is an array of cells. The only way a pipeline pass touches a
// cell is through a RegisterAction: one read-modify-write of one cell that
// returns a value, exactly like a Tofino stateful ALU. Tofino allows one access
// per register per pass; builds with AGQ_CHECK_TNA_RULES (the Debug and
// sanitizer builds) assert that rule, so a pipeline that would not fit a
// Tofino fails its unit tests instead of silently "working" in software.
//
// The control plane reads and writes cells directly (read/write/clear), like
// BFRt register reads/writes; it never runs actions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tna/pass.hpp"

namespace agq::tna {

template <typename T>
class Register {
 public:
  Register(std::string name, std::size_t size, T init = T{})
      : name_(std::move(name)), init_(init), cells_(size, init) {}

  const std::string& name() const { return name_; }
  std::size_t size() const { return cells_.size(); }

  // Control-plane access (never from a register action).
  T read(std::size_t i) const { return cells_.at(i); }
  void write(std::size_t i, T v) { cells_.at(i) = v; }
  void clear() { std::fill(cells_.begin(), cells_.end(), init_); }

 private:
  template <typename, typename>
  friend class RegisterAction;

  T& cell_for_pass(std::size_t i) {
#ifdef AGQ_CHECK_TNA_RULES
    const uint64_t pass = PassClock::current();
    // The rule is per register, not per cell: a Tofino stateful ALU serves
    // one index of its register per packet.
    if (pass != 0 && last_pass_ == pass)
      throw std::logic_error("TNA rule: register '" + name_ + "' accessed twice in one pass");
    last_pass_ = pass;
#endif
    return cells_[i];
  }

  std::string name_;
  T init_;
  std::vector<T> cells_;
  uint64_t last_pass_ = 0;  // only used with AGQ_CHECK_TNA_RULES
};

// One stateful-ALU program on a register: `Fn` is `R(T& cell)`; it may update
// the cell and returns the action's output (TNA's `out rv`).
template <typename T, typename Fn>
class RegisterAction {
 public:
  RegisterAction(Register<T>& reg, const char* name, Fn fn) : reg_(reg), name_(name), fn_(fn) {}

  // Runs the action on cell `index`. The caller guarantees index < size()
  // (the pipeline range-checks indices it takes from packets).
  auto execute(std::size_t index) { return fn_(reg_.cell_for_pass(index)); }

  const char* name() const { return name_; }

 private:
  Register<T>& reg_;
  const char* name_;
  Fn fn_;
};

template <typename T, typename Fn>
RegisterAction(Register<T>&, const char*, Fn) -> RegisterAction<T, Fn>;

}  // namespace agq::tna
