#include "lib/stats.hpp"

#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace agq::worker {

void add_counters(Counters& a, const Counters& b) {
  a.tx_pkts += b.tx_pkts;
  a.rx_pkts += b.rx_pkts;
  a.chunks_done += b.chunks_done;
  a.acks += b.acks;
  a.retries += b.retries;
  a.retransmissions += b.retransmissions;
  a.duplicates += b.duplicates;
  a.stale += b.stale;
  a.foreign += b.foreign;
  a.malformed += b.malformed;
  a.other += b.other;
  a.tx_refused += b.tx_refused;
  a.errors += b.errors;
}

std::string Progress::line(const char* role, const Counters& c, uint64_t elements_done, uint64_t outstanding,
                           uint64_t now_ns) {
  const uint64_t pkts = c.tx_pkts + c.rx_pkts;
  const double dt = last_ns_ ? double(now_ns - last_ns_) * 1e-9 : 0.0;
  const double mpps = dt > 0 ? double(pkts - last_pkts_) / dt * 1e-6 : 0.0;
  const double eps = dt > 0 ? double(elements_done - last_elems_) / dt : 0.0;
  last_ns_ = now_ns;
  last_pkts_ = pkts;
  last_elems_ = elements_done;
  char b[320];
  std::snprintf(b, sizeof b,
                "[%s] pkts tx %" PRIu64 " rx %" PRIu64 " | %.3f Mpps | %.3f Gbit/s gradient | %.3g elem/s | "
                "outstanding %" PRIu64 " | retx %" PRIu64 " retries %" PRIu64 " | errors %" PRIu64,
                role, c.tx_pkts, c.rx_pkts, mpps, eps * 32e-9, eps, outstanding, c.retransmissions, c.retries,
                c.errors);
  return b;
}

void Json::key(const char* k) {
  if (!body_.empty()) body_ += ",";
  body_ += "\"";
  body_ += k;
  body_ += "\":";
}

Json& Json::num(const char* k, double v) {
  key(k);
  char b[40];
  if (std::isfinite(v))
    std::snprintf(b, sizeof b, "%.9g", v);
  else
    std::snprintf(b, sizeof b, "null");
  body_ += b;
  return *this;
}

Json& Json::num(const char* k, uint64_t v) {
  key(k);
  body_ += std::to_string(v);
  return *this;
}

Json& Json::str(const char* k, const std::string& v) {
  key(k);
  body_ += "\"";
  for (char ch : v) {
    if (ch == '"' || ch == '\\') body_ += '\\';
    if (uint8_t(ch) < 0x20) {
      char e[8];
      std::snprintf(e, sizeof e, "\\u%04x", ch);
      body_ += e;
      continue;
    }
    body_ += ch;
  }
  body_ += "\"";
  return *this;
}

Json& Json::raw(const char* k, const std::string& json) {
  key(k);
  body_ += json;
  return *this;
}

std::string counters_json(const Counters& c) {
  return Json()
      .num("tx_pkts", c.tx_pkts).num("rx_pkts", c.rx_pkts).num("chunks_done", c.chunks_done)
      .num("acks", c.acks).num("retries", c.retries).num("retransmissions", c.retransmissions)
      .num("duplicates", c.duplicates).num("stale", c.stale).num("foreign", c.foreign)
      .num("malformed", c.malformed).num("other", c.other).num("tx_refused", c.tx_refused)
      .num("errors", c.errors)
      .done();
}

}  // namespace agq::worker
