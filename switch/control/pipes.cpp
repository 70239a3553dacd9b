#include "control/pipes.hpp"

#include <string>
#include <string_view>

namespace agq::control {

Pipes::Pipes(std::vector<pipeline::SwitchProgram*> instances) : progs_(std::move(instances)) {}

Pipes::Pipes(std::vector<std::unique_ptr<Pipe>> pipes) : pipes_(std::move(pipes)) {
  for (auto& p : pipes_) progs_.push_back(p->prog.get());
}

void Pipes::run(const std::vector<unsigned>& which, const std::function<void(unsigned)>& fn) {
  std::lock_guard g(mu_);
  if (executor_) {
    executor_->run(which, fn);
    return;
  }
  for (unsigned i : which) fn(i);
}

void Pipes::visit_counters(const tna::CounterVisitor& visit) {
  // Each lcore copies its own instance's counters; the sum is made here.
  std::vector<std::vector<std::pair<std::string, uint64_t>>> per(count());
  std::vector<unsigned> which(count());
  for (unsigned i = 0; i < count(); ++i) which[i] = i;
  run(which, [&](unsigned i) {
    progs_[i]->visit_counters([&](std::string_view name, uint64_t v) { per[i].emplace_back(name, v); });
  });
  for (size_t k = 0; k < per[0].size(); ++k) {
    // Table state every instance holds alike (one control-plane change
    // applied to each) is counted once: instance 0's.
    if (pipeline::Forwarding::is_table_counter(per[0][k].first)) {
      visit(per[0][k].first, per[0][k].second);
      continue;
    }
    uint64_t sum = 0;
    for (const auto& p : per)
      if (k < p.size()) sum += p[k].second;
    visit(per[0][k].first, sum);
  }
}

}  // namespace agq::control
