// The agq PS's check of its own address against the switch's job. The
// switch sends a job's PS traffic (fallback DATA, RESULTs of delivery "ps")
// to the job's ps_mac / ps_ip, and accepts PS_RESULTs only from ps_ip
// (docs/PROTOCOL.md §7): a PS started with its own flags next to a job
// with another PS address would sum and answer, and every answer would be
// dropped by the switch (drops_agq_bad_worker) while the workers wait for
// their RESULTs and time out. The first such frame stops the PS with an
// error naming the field and both values instead.
#pragma once

#include <cstdio>
#include <cstring>
#include <span>
#include <string>

#include "lib/agq_ps_engine.hpp"
#include "lib/agq_wire.hpp"
#include "proto/headers.hpp"

namespace agq::worker {

template <class Engine>
class PsAddressCheck {
 public:
  // `self`: the PS's address; `from_switch`: it came from the switch's job
  // (then a disagreement means the switch changed under the PS).
  PsAddressCheck(Engine& eng, uint16_t job_id, const Endpoint& self, bool from_switch)
      : eng_(eng), job_(job_id), self_(self), from_switch_(from_switch) {}

  void on_frame(uint16_t port, std::span<const uint8_t> frame, uint64_t now) {
    if (error_.empty()) check(frame);
    eng_.on_frame(port, frame, now);
  }
  template <class Tx>
  unsigned tick(uint64_t now, Tx& tx) { return eng_.tick(now, tx); }
  bool finished() const { return eng_.finished(); }
  bool failed() const { return eng_.failed() || !error_.empty(); }
  uint64_t outstanding() const { return eng_.outstanding(); }
  uint64_t elements_done() const { return eng_.elements_done(); }
  const auto& counters() const { return eng_.counters(); }
  const std::string& error() const { return error_; }

 private:
  void check(std::span<const uint8_t> frame) {
    const auto h = parse_agq(frame);
    if (!h || h->job_id != job_ || frame.size() < 34 || frame[12] != 0x08 || frame[13] != 0x00) return;
    if (h->type != proto::AgqType::FallbackData && h->type != proto::AgqType::Result) return;
    uint32_t dst_ip;
    std::memcpy(&dst_ip, frame.data() + 30, 4);
    dst_ip = __builtin_bswap32(dst_ip);
    const bool mac_ok = std::memcmp(frame.data(), self_.mac.data(), 6) == 0;
    if (dst_ip == self_.ip && mac_ok) return;
    const char* field = dst_ip != self_.ip ? "ps_ip" : "ps_mac";
    const std::string theirs = dst_ip != self_.ip ? ip_text(dst_ip) : mac_text(frame.data());
    const std::string mine = dst_ip != self_.ip ? ip_text(self_.ip) : mac_text(self_.mac.data());
    error_ = "job " + std::to_string(job_) + ": the switch sends this job's PS traffic to " + field + " = " + theirs +
             ", this PS is " + mine +
             (from_switch_ ? " (from the switch's job when it started: was the job replaced?)"
                           : " (its default address: no --switch-ctl/--job-file)") +
             "; its answers would be dropped by the switch. Start the PS with --switch-ctl SOCKET|tcp:HOST:PORT "
             "--job " + std::to_string(job_) + " (or --job-file)";
  }
  static std::string ip_text(uint32_t ip) {
    char b[16];
    std::snprintf(b, sizeof b, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
    return b;
  }
  static std::string mac_text(const uint8_t* m) {
    char b[18];
    std::snprintf(b, sizeof b, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
    return b;
  }

  Engine& eng_;
  uint16_t job_;
  Endpoint self_;
  bool from_switch_;
  std::string error_;
};

}  // namespace agq::worker
