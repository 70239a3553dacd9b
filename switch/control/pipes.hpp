// How the control plane reaches the program instances: one independent
// pipeline::SwitchProgram per dataplane lcore (like Tofino's pipes, each with
// its own tables, registers and PRE), each touched only by its own lcore.
//
// A change (job, route, MAC, ARP entry, clear) is a closure every instance
// runs on its own lcore between two bursts: the control thread puts it on
// each lcore's command ring and waits for the acks (the Executor, implemented
// by the dataplane with rte_rings). A read of state every instance holds
// alike (tables) asks instance 0; a read of a shard's registers asks the
// shard's owner (shard % count, docs/PROTOCOL.md section 10); counters are
// summed over instances. Without an executor (unit tests, or before the
// lcores start and after they stop) the closures run on the caller's thread.
//
// No DPDK here: the control plane and its unit tests stay DPDK-free.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "pipeline/switch_program.hpp"
#include "tna/pre.hpp"
#include "tna/program.hpp"

namespace agq::control {

// Runs closures on the threads that own the instances (the dataplane lcores).
class Executor {
 public:
  virtual ~Executor() = default;
  // Runs fn(i) for every i in `instances` on instance i's own thread, all
  // lcores at once, and returns when every one has run. Runs fn(i) on the
  // caller's thread for an instance whose lcore is not polling (not started,
  // or stopped). Throws std::runtime_error when an lcore does not answer in
  // time; the closure then never runs on it.
  virtual void run(const std::vector<unsigned>& instances, const std::function<void(unsigned)>& fn) = 0;
};

// One pipe: a program instance and its own packet replication engine.
struct Pipe {
  tna::ReplicationEngine pre;
  std::unique_ptr<pipeline::SwitchProgram> prog;
};

class Pipes {
 public:
  // Instances that live elsewhere (unit tests: one program on the stack).
  explicit Pipes(std::vector<pipeline::SwitchProgram*> instances);
  // Instances owned here (the switch: one per lcore, made by main.cpp).
  explicit Pipes(std::vector<std::unique_ptr<Pipe>> pipes);

  unsigned count() const { return static_cast<unsigned>(progs_.size()); }
  // Fixed facts of the programs (name(), has_egress()) may be read from any
  // thread; everything else goes through all()/on().
  pipeline::SwitchProgram& instance(unsigned i) const { return *progs_.at(i); }
  tna::ReplicationEngine* pre(unsigned i) const { return i < pipes_.size() ? &pipes_[i]->pre : nullptr; }

  // The instance that owns `shard`; kAnyShard: instance 0.
  unsigned owner(uint32_t shard) const { return shard == tna::kAnyShard ? 0 : shard % count(); }

  // nullptr: run closures directly on the caller's thread.
  void set_executor(Executor* e) { executor_ = e; }

  // Applies fn(prog) to every instance, each on its own lcore, and returns
  // instance 0's result (instances hold identical tables, since every change
  // goes through here in the same order).
  template <typename Fn> auto all(Fn&& fn) -> std::invoke_result_t<Fn&, pipeline::SwitchProgram&> {
    using R = std::invoke_result_t<Fn&, pipeline::SwitchProgram&>;
    std::vector<unsigned> which(count());
    for (unsigned i = 0; i < count(); ++i) which[i] = i;
    if constexpr (std::is_void_v<R>) {
      run(which, [&](unsigned i) { fn(*progs_[i]); });
    } else {
      std::vector<std::optional<R>> out(count());
      run(which, [&](unsigned i) { out[i].emplace(fn(*progs_[i])); });
      return std::move(*out[0]);
    }
  }

  // Runs fn(prog) on instance i only, on its lcore, and returns its result.
  template <typename Fn> auto on(unsigned i, Fn&& fn) -> std::invoke_result_t<Fn&, pipeline::SwitchProgram&> {
    using R = std::invoke_result_t<Fn&, pipeline::SwitchProgram&>;
    if constexpr (std::is_void_v<R>) {
      run({i}, [&](unsigned k) { fn(*progs_[k]); });
    } else {
      std::optional<R> out;
      run({i}, [&](unsigned k) { out.emplace(fn(*progs_[k])); });
      return std::move(*out);
    }
  }

  // Every program counter summed over the instances, in instance 0's order;
  // table-state counters (pipeline::Forwarding::is_table_counter) are
  // instance 0's, since every instance applied the same changes.
  void visit_counters(const tna::CounterVisitor& visit);

  // The switch's boot epoch (docs/PROTOCOL.md section 11); 0 = not set.
  uint16_t epoch() const { return epoch_; }
  void set_epoch_value(uint16_t e) { epoch_ = e; }

 private:
  void run(const std::vector<unsigned>& which, const std::function<void(unsigned)>& fn);

  std::vector<std::unique_ptr<Pipe>> pipes_;  // empty when the instances live elsewhere
  std::vector<pipeline::SwitchProgram*> progs_;
  Executor* executor_ = nullptr;
  std::mutex mu_;  // one control-plane request at a time (socket, ageing, digests)
  uint16_t epoch_ = 0;
};

}  // namespace agq::control
