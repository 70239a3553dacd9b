// A pass counter that lets registers check TNA's "one access per register per
// pass" rule. Each pass of a packet through a program's ingress gets a fresh
// id; the id is thread-local so concurrent lcores never share it.
#pragma once

#include <cstdint>

namespace agq::tna {

class PassClock {
 public:
  static uint64_t current() { return id_; }
  static void begin_pass() { id_ = ++next_; }
  static void end_pass() { id_ = 0; }

 private:
  static inline thread_local uint64_t id_ = 0;
  static inline thread_local uint64_t next_ = 0;
};

}  // namespace agq::tna
