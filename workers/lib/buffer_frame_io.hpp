// A FrameIo over plain memory: one buffer per slot, frames copied out to a
// TxSink (unit tests, and any transport that copies anyway).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lib/allreduce_engine.hpp"
#include "lib/tx_sink.hpp"

namespace agq::worker {

class BufferFrameIo final : public FrameIo {
 public:
  BufferFrameIo(uint32_t buffers, size_t frame_len) : len_(frame_len), mem_(size_t(buffers) * frame_len) {}
  void set_sink(TxSink* sink) { sink_ = sink; }
  uint8_t* frame(uint32_t b) override { return mem_.data() + size_t(b) * len_; }
  bool send(uint16_t port, uint32_t b, uint16_t len) override {
    return sink_ && sink_->send(port, std::span<const uint8_t>(frame(b), len));
  }

 private:
  size_t len_;
  std::vector<uint8_t> mem_;
  TxSink* sink_ = nullptr;
};

}  // namespace agq::worker
