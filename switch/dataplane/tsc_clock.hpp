// Nanoseconds of the steady clock, derived from a TSC reading the poll loop
// already has. A busy round stamps its packets (ingress_mac_tstamp_ns, which
// MAC learning and ageing read) once; std::chrono::steady_clock::now() costs
// ~55 cycles here (kvm-clock's vDSO), the conversion ~5, and the round's
// start is read from the TSC anyway (dp.busy_cycles).
//
// The conversion re-anchors on the steady clock once per quarter second of
// TSC (or on the first round after a longer idle sleep) and re-measures the
// TSC's rate over the interval it just covered, so the error between anchors
// stays well under a millisecond even when the EAL's TSC frequency is a
// rounded estimate (on a VM it is measured and rounded to 10 MHz). A
// re-anchor may step the clock back by that error: the stamp's readers
// (Forwarding's ageing and digest repeat) already treat a stamp at or after
// their `now` as fresh, because stamps of several lcores interleave.
#pragma once

#include <chrono>
#include <cstdint>

namespace agq::dataplane {

class TscClock {
 public:
  using SteadyNs = uint64_t (*)();

  static uint64_t steady_ns() {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
  }

  // tsc_hz: the EAL's estimate (rte_get_tsc_hz); tsc: the TSC now, the
  // first anchor; `now` is the reference clock (the steady clock; a test's
  // own).
  TscClock(uint64_t tsc_hz, uint64_t tsc, SteadyNs now = &TscClock::steady_ns)
      : now_(now), reanchor_(tsc_hz / 4 ? tsc_hz / 4 : 1), mult_(scale(1'000'000'000, tsc_hz)),
        anchor_tsc_(tsc), anchor_ns_(now()) {}

  // The steady clock's nanoseconds at TSC reading `tsc` (non-decreasing
  // readings of one core).
  uint64_t ns(uint64_t tsc) {
    const uint64_t d = tsc - anchor_tsc_;
    if (d >= reanchor_) [[unlikely]]
      return anchor(tsc, d);
    return anchor_ns_ + ((d * mult_) >> 32);
  }

 private:
  // (ns << 32) / cycles, the 32.32 fixed-point nanoseconds per cycle.
  static uint64_t scale(uint64_t ns, uint64_t cycles) {
    return cycles ? uint64_t(((unsigned __int128)ns << 32) / cycles) : 0;
  }

  uint64_t anchor(uint64_t tsc, uint64_t d) {
    const uint64_t ns = now_();
    // The TSC's rate over the interval just covered (the steady clock
    // moved forward over it).
    if (ns > anchor_ns_) mult_ = scale(ns - anchor_ns_, d);
    anchor_ns_ = ns;
    anchor_tsc_ = tsc;
    return ns;
  }

  SteadyNs now_;
  uint64_t reanchor_;       // TSC cycles between anchors
  uint64_t mult_;           // ns per cycle, 32.32 fixed point
  uint64_t anchor_tsc_;
  uint64_t anchor_ns_;
};

}  // namespace agq::dataplane
