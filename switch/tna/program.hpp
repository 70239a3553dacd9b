// A Program is one P4 program: parser, ingress control(s), deparser. It takes
// the bytes of one packet, may rewrite them in place (never changes their
// length), and returns the traffic manager's decision. Resubmission is run
// inside process(): the ingress sees the original bytes again with
// resubmit_flag set, exactly as on Tofino where the deparser does not emit a
// resubmitted packet.
//
// Programs hold no DPDK types. Concurrency: process() and the control-plane
// methods of one Program must not run at the same time; the switch serialises
// them with Program::lock() (see docs/ARCHITECTURE.md).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "tna/intrinsic.hpp"
#include "tna/spinlock.hpp"

namespace agq::tna {

// A named counter visitor: called once per counter.
using CounterVisitor = std::function<void(std::string_view name, uint64_t value)>;

class Program {
 public:
  virtual ~Program() = default;
  virtual std::string_view name() const = 0;

  // Runs one packet to completion (all passes). `bytes` holds the frame.
  virtual Decision process(std::span<uint8_t> bytes, const IngressIntrinsicMd& md) = 0;

  // Egress control, run once per replica of a multicast decision (TNA's
  // egress pipeline with eg_intr_md.egress_rid). A program that rewrites
  // replicas returns true from has_egress(); the dataplane then gives every
  // replica its own copy of the bytes instead of a shared clone.
  virtual bool has_egress() const { return false; }
  virtual void egress(std::span<uint8_t> /*bytes*/, PortId /*egress_port*/, uint16_t /*rid*/) {}

  // Every counter of the program, in a stable order.
  virtual void visit_counters(const CounterVisitor& visit) const = 0;
  virtual void clear_counters() = 0;
  // Clears the aggregation state (registers), not the tables.
  virtual void clear_state() = 0;

  SpinLock& lock() { return lock_; }

 private:
  SpinLock lock_;
};

}  // namespace agq::tna
