// The switch's drop simulator (issue 4 §5): a drop probability per port and
// direction, set by the control thread, read by every lcore right after
// rx_burst and right before a packet is queued for tx. It drives the loss
// tests of the agq protocol on virtual ports that never lose anything.
//
// No DPDK in here, so it is unit-tested on its own. A probability is kept as
// a threshold against a 32-bit random number (drop iff r < t), t = p * 2^32
// in a uint64 so that p = 1 drops every packet and p = 0 (t = 0) none, and
// the hot path is one relaxed load and, only when t != 0, one PRNG step.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>

namespace agq::dataplane {

enum class SimDir : uint8_t { Rx = 0, Tx = 1 };

class DropSim {
 public:
  static constexpr uint64_t kOne = uint64_t(1) << 32;

  explicit DropSim(uint16_t nports) : nports_(nports), t_(new std::atomic<uint64_t>[size_t(nports) * 2]) {
    for (size_t i = 0; i < size_t(nports) * 2; ++i) t_[i].store(0, std::memory_order_relaxed);
  }

  uint16_t ports() const { return nports_; }

  // p outside [0, 1] (or NaN) is clamped by the caller's validation; here
  // it is clamped again so a bad value can never wrap the threshold.
  void set(uint16_t port, SimDir d, double p) {
    if (port >= nports_) return;
    const double q = std::isnan(p) ? 0.0 : p < 0 ? 0.0 : p > 1 ? 1.0 : p;
    t_[index(port, d)].store(uint64_t(std::llround(q * double(kOne))), std::memory_order_relaxed);
    bool any = false;
    for (uint16_t i = 0; i < nports_; ++i) any |= threshold(i, d) != 0;
    active_[size_t(d)].store(any, std::memory_order_relaxed);
  }
  // Whether any port drops in direction d: the lcores' per-burst check, so
  // that the per-packet path reads no threshold while the simulator is off.
  bool active(SimDir d) const { return active_[size_t(d)].load(std::memory_order_relaxed); }
  double get(uint16_t port, SimDir d) const {
    return port < nports_ ? double(threshold(port, d)) / double(kOne) : 0.0;
  }
  uint64_t threshold(uint16_t port, SimDir d) const {
    return t_[index(port, d)].load(std::memory_order_relaxed);
  }
  void clear() {
    for (size_t i = 0; i < size_t(nports_) * 2; ++i) t_[i].store(0, std::memory_order_relaxed);
    for (auto& a : active_) a.store(false, std::memory_order_relaxed);
  }

  static size_t index(uint16_t port, SimDir d) { return size_t(port) * 2 + size_t(d); }

 private:
  uint16_t nports_;
  std::unique_ptr<std::atomic<uint64_t>[]> t_;
  std::atomic<bool> active_[2] = {false, false};  // by SimDir; written by the control thread only
};

// xorshift64* (Vigna): a few cycles per number, good enough for loss
// decisions; one per lcore, so no sharing. The upper 32 bits are returned
// (the low bits of xorshift are the weak ones).
class XorShift64 {
 public:
  explicit XorShift64(uint64_t seed) : s_(mix(seed)) {}
  uint32_t next() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return uint32_t((s_ * 0x2545F4914F6CDD1Dull) >> 32);
  }
  // True with the probability the threshold encodes.
  bool drop(uint64_t threshold) { return threshold != 0 && next() < threshold; }

 private:
  // splitmix64 finaliser: any seed (0 included) gives a non-zero state.
  static uint64_t mix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z ? z : 1;
  }
  uint64_t s_;
};

}  // namespace agq::dataplane
