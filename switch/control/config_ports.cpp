// [[port]]: a port's egress link -- rate, queue limit, ECN threshold
// (conf/README.md, "Links with rates"). Strict like the rest of the loader:
// every value names its file, line and field when it is wrong, a unit is
// never guessed, and a port gets one [[port]] at most.
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "control/config_reader.hpp"

namespace agq::control {
namespace {

constexpr uint64_t kMinRate = 10'000;              // 10 kbit/s
constexpr uint64_t kMaxRate = 1'000'000'000'000;   // 1 Tbit/s
constexpr uint32_t kMaxQueuePackets = 16384;       // = dataplane::ShaperSpec::kMaxSlots
constexpr uint64_t kMinQueueBytes = 1514;          // one full-size frame
constexpr uint64_t kMaxBytes = uint64_t(64) << 20;  // = dataplane::TokenBucket::kMaxBurst
constexpr uint32_t kDefaultQueuePackets = 1000;    // Linux's txqueuelen

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

// "<number><unit>" (spaces around the unit allowed): the number times the
// unit's multiplier, or nothing when it is not of that form.
std::optional<double> with_unit(const std::string& text, const std::map<std::string, double>& units) {
  const char* b = text.data();
  const char* e = b + text.size();
  while (b < e && *b == ' ') ++b;
  double x = 0;
  auto [p, ec] = std::from_chars(b, e, x);
  if (ec != std::errc{} || p == b || !std::isfinite(x) || x < 0) return std::nullopt;
  std::string_view u(p, size_t(e - p));
  while (!u.empty() && u.front() == ' ') u.remove_prefix(1);
  while (!u.empty() && u.back() == ' ') u.remove_suffix(1);
  auto it = units.find(lower(u));
  if (it == units.end()) return std::nullopt;
  return x * it->second;
}

const std::map<std::string, double> kRateUnits = {
    {"bit", 1},       {"bit/s", 1},       {"kbit", 1e3}, {"kbit/s", 1e3}, {"mbit", 1e6},
    {"mbit/s", 1e6},  {"gbit", 1e9},      {"gbit/s", 1e9}, {"tbit", 1e12}, {"tbit/s", 1e12}};
const std::map<std::string, double> kSizeUnits = {
    {"b", 1}, {"kb", 1e3}, {"kib", 1024}, {"mb", 1e6}, {"mib", 1024.0 * 1024}};

class PortLoader {
 public:
  PortLoader(TomlReader& r, SwitchConfig& cfg) : r_(r), cfg_(cfg) {}

  void load(const toml::table& root) {
    std::map<tna::PortId, int> seen;  // port -> line
    const auto tables = r_.tables_at(root, "port");
    for (size_t i = 0; i < tables.size(); ++i) {
      const toml::table& t = *tables[i];
      const std::string f = "port[" + std::to_string(i) + "]";
      r_.check_keys(t, f, {"id", "rate", "queue", "ecn_threshold", "burst", "overhead"});
      PortLinkEntry e;
      e.line = line_of(t);
      const toml::node& idn = r_.required(t, "id", f + ".id");
      e.port = r_.port(idn, f + ".id");
      if (auto [it, fresh] = seen.emplace(e.port, line_of(idn)); !fresh)
        r_.fail(line_of(idn), f + ".id",
                "port " + std::to_string(e.port) + " already has a [[port]] (line " + std::to_string(it->second) + ")");
      e.rate_bps = rate(r_.required(t, "rate", f + ".rate"), f + ".rate");
      if (auto* n = t.get("overhead")) e.overhead = uint16_t(r_.integer(*n, f + ".overhead", 0, 64));
      const toml::node* qn = t.get("queue");
      if (!qn) {
        e.queue_packets = kDefaultQueuePackets;
      } else if (qn->is_integer()) {
        e.queue_packets = uint32_t(r_.integer(*qn, f + ".queue", 1, kMaxQueuePackets));
      } else {
        e.queue_bytes = bytes(*qn, f + ".queue", kMinQueueBytes, "a number of packets (an integer 1.." +
                                                                   std::to_string(kMaxQueuePackets) + ") or a size");
      }
      if (auto* n = t.get("ecn_threshold")) {
        const std::string field = f + ".ecn_threshold";
        e.ecn = true;
        if (n->is_integer()) {
          e.ecn_packets = uint32_t(r_.integer(*n, field, 0, kMaxQueuePackets));
          if (e.queue_packets && e.ecn_packets >= e.queue_packets)
            r_.fail(line_of(*n), field,
                    std::to_string(e.ecn_packets) + " packets is not below the queue's " +
                        std::to_string(e.queue_packets) + ": no frame would ever be marked");
        } else {
          e.ecn_in_bytes = true;
          e.ecn_bytes = bytes(*n, field, 0, "a number of packets (an integer) or a size");
          if (e.queue_bytes && e.ecn_bytes >= e.queue_bytes)
            r_.fail(line_of(*n), field,
                    std::to_string(e.ecn_bytes) + " bytes is not below the queue's " + std::to_string(e.queue_bytes) +
                        ": no frame would ever be marked");
        }
      }
      if (auto* n = t.get("burst"))
        e.burst_bytes = n->is_integer() ? uint64_t(r_.integer(*n, f + ".burst", 64, int64_t(kMaxBytes)))
                                        : bytes(*n, f + ".burst", 64, "a size or an integer of bytes");
      cfg_.links.push_back(e);
    }
  }

 private:
  // bit/s: an integer, or a string with a unit ("50mbit", "2.5 Gbit/s").
  uint64_t rate(const toml::node& n, const std::string& field) const {
    double bps;
    if (n.is_integer()) {
      bps = double(n.as_integer()->get());
    } else if (n.is_string()) {
      const std::string s = n.as_string()->get();
      auto v = with_unit(s, kRateUnits);
      if (!v) {
        const std::string l = lower(s);
        const bool bytes_rate = l.find("bps") != std::string::npos || l.find("byte") != std::string::npos;
        r_.fail(line_of(n), field,
                "\"" + s + "\" is not a rate (a number and a unit: bit, kbit, mbit, gbit, tbit, e.g. \"50mbit\" or "
                           "\"2.5gbit\"; or an integer of bit/s)" +
                    (bytes_rate ? std::string("; rates are in bits, not bytes") : std::string()));
      }
      bps = *v;
    } else {
      r_.fail(line_of(n), field, std::string("expected a rate (\"50mbit\" or an integer of bit/s), got ") + type_name(n));
    }
    if (bps < double(kMinRate) || bps > double(kMaxRate))
      r_.fail(line_of(n), field, "rate out of range 10kbit..1tbit");
    return uint64_t(std::llround(bps));
  }

  // Bytes: a string with a unit ("64kb", "1.5 MiB", "9000b"); an integer
  // where `what` allows it is the caller's (packets), so here only strings.
  uint64_t bytes(const toml::node& n, const std::string& field, uint64_t lo, const std::string& what) const {
    if (!n.is_string())
      r_.fail(line_of(n), field, "expected " + what + " (\"64kb\", \"1mib\", \"9000b\"), got " + type_name(n));
    const std::string s = n.as_string()->get();
    auto v = with_unit(s, kSizeUnits);
    if (!v)
      r_.fail(line_of(n), field, "\"" + s + "\" is not a size (a number and a unit: b, kb, kib, mb, mib, e.g. \"64kb\")");
    const double x = std::round(*v);
    if (x < double(lo) || x > double(kMaxBytes))
      r_.fail(line_of(n), field, "\"" + s + "\" is out of range " + std::to_string(lo) + ".." +
                                     std::to_string(kMaxBytes) + " bytes");
    return uint64_t(x);
  }

  TomlReader& r_;
  SwitchConfig& cfg_;
};

}  // namespace

void load_port_sections(TomlReader& r, const toml::table& root, SwitchConfig& cfg) { PortLoader(r, cfg).load(root); }

}  // namespace agq::control
