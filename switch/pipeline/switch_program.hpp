// The programs the switch can run (classic, and later agq) share this
// interface: a tna::Program with the ordinary-forwarding control inside it
// and a generic register dump for the control socket.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/forwarding.hpp"
#include "tna/pre.hpp"
#include "tna/program.hpp"

namespace agq::pipeline {

class SwitchProgram : public tna::Program {
 public:
  using NamedCells = std::vector<std::pair<std::string, uint64_t>>;

  SwitchProgram(ForwardingConfig fwd_cfg, tna::ReplicationEngine& pre)
      : forwarding_(fwd_cfg), pre_(pre) {}

  Forwarding& forwarding() { return forwarding_; }
  const Forwarding& forwarding() const { return forwarding_; }

  // MAC learning as a digest (see MacDigestSink): the dataplane gives each
  // instance the sink of its lcore; null (the default) learns directly.
  void set_mac_digest_sink(MacDigestSink* sink) { forwarding_.set_digest_sink(sink); }

  // Number of aggregators (register rows) the control plane can dump.
  virtual uint32_t aggregator_count() const = 0;
  // Every register cell that belongs to aggregator `index` (and its
  // per-sequence slots), by register name, e.g. {"reg0", 0x1e180}.
  virtual NamedCells dump_aggregator(uint32_t index) const = 0;
  // The shard (docs/PROTOCOL.md section 10) whose lcore owns aggregator
  // `index`: the control plane reads its registers from that instance.
  // kAnyShard: every instance holds it alike (or the program has one shard).
  virtual uint32_t aggregator_shard(uint32_t /*index*/) const { return tna::kAnyShard; }

  // This instance runs on dataplane lcore `index` of `count` and gets only
  // the packets of the shards s with s % count == index (docs/PROTOCOL.md
  // section 10): a program may then hold only those shards' registers.
  // Called before the lcores start; the default holds everything.
  virtual void own_shards(unsigned /*index*/, unsigned /*count*/) {}

  // The switch's nonzero boot epoch (docs/PROTOCOL.md §11), written into
  // every agq frame the program makes; programs without such frames ignore it.
  virtual void set_epoch(uint16_t /*epoch*/) {}

 protected:
  tna::ReplicationEngine& pre() { return pre_; }

 private:
  Forwarding forwarding_;
  tna::ReplicationEngine& pre_;
};

}  // namespace agq::pipeline
