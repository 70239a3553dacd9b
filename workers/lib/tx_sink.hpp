// Where the engines put the frames they send: the DPDK TX path in the
// binary, a vector in the tests.
#pragma once

#include <cstdint>
#include <span>

namespace agq::worker {

class TxSink {
 public:
  virtual ~TxSink() = default;
  // Queues one frame on `port`; false if the port cannot take it now (the
  // engine keeps the packet and tries again on the next tick: dropping a
  // contribution would stall the slot in the classic protocol).
  virtual bool send(uint16_t port, std::span<const uint8_t> frame) = 0;
};

}  // namespace agq::worker
