// The control-socket command interpreter (ControlPlane::execute). Each
// command parses its arguments strictly, reaches the program instances only
// through Pipes (a change runs on every lcore's instance between two bursts,
// a read on one instance; pipes.hpp), and answers
// "ok\n<body>" or "error: <message>\nusage: <its usage>\n".
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "control/command_util.hpp"
#include "control/control_plane.hpp"
#include "control/text.hpp"
#include "proto/headers.hpp"

namespace agq::control {

tna::PortId existing_port(DataplaneView& dp, const std::string& s, const char* usage) {
  auto p = parse_uint(s);
  if (!p) throw CommandError{"'" + s + "' is not a port number", usage};
  const size_t n = dp.port_stats().size();
  if (*p >= n)
    throw CommandError{"port " + s + " does not exist (" +
                           (n == 0 ? std::string("no ports") : std::to_string(n) + " ports: 0.." + std::to_string(n - 1)) +
                           ")",
                       usage};
  return tna::PortId(*p);
}

namespace {

constexpr const char* kUsageClear = "clear counters | clear state | clear ports";
constexpr const char* kUsageDump = "dump <aggregator> [count]";
constexpr const char* kUsageRoute = "route add <ip> <port> | route del <ip> | route list";
constexpr const char* kUsageMac = "mac add <mac> <port> | mac del <mac> | mac list";
constexpr const char* kUsageArp = "arp add <ip> <mac> | arp del <ip> | arp list";
// Bounds the response size and how long one request holds the control plane.
constexpr uint64_t kMaxDumpCount = 1024;

constexpr const char* kHelp =
    "help                        this text\n"
    "ports                       per-port link state and statistics\n"
    "counters                    program and dataplane counters, 'name value' per line\n"
    "clear counters              zero the program counters\n"
    "clear state                 zero the aggregation registers (not the tables)\n"
    "clear ports                 zero the port statistics\n"
    "dump <aggregator> [count]   register cells of aggregators, hex\n"
    "route add <ip> <port>       add an IPv4 host route\n"
    "route del <ip>              remove it\n"
    "route list                  list the host routes\n"
    "mac add <mac> <port>        add a static MAC entry (replaces a learned one)\n"
    "mac del <mac>               remove a static or learned entry\n"
    "mac list                    list the MAC table, static and learned with age\n"
    "arp add <ip> <mac>          answer ARP requests for <ip> with <mac>\n"
    "arp del <ip>                remove it\n"
    "arp list                    list the ARP proxy entries\n"
    "job list                    list the agq jobs (in 'job add' syntax)\n"
    "job get <id>                the job as its workers need it (PROTOCOL.md section 12)\n"
    "job reset <id>              zero the job's slots and rows (a restarted job starts clean)\n"
    "job add <id> workers=<n> slots=<s> rows=<r> [delivery=multicast|ps]\n"
    "        [ps=<port>,<ip>,<mac>] [max_width=<bits>] [lanes=32|16] worker=<id>,<port>,<ip>,<mac> ...\n"
    "                            register an agq job (pipeline agq)\n"
    "job del <id>                remove it and clear its registers\n"
    "queues                      shaped ports' egress queues: rate, depth, enqueued/dequeued/dropped, ECN marks\n"
    "drop <port> <rx|tx> <p>     drop simulator: drop packets with probability p (0..1)\n"
    "drop list                   drop probabilities and simulated drops per port\n"
    "drop clear                  set every drop probability to 0\n"
    "capture <port> rx|tx|both <file.pcapng> [--count N] [--snaplen B]\n"
    "                            copy the port's packets into a pcapng file (DPDK rte_pcapng)\n"
    "capture stop [<port>]       stop one capture or all (also: N packets written, switch exit)\n"
    "capture list                captures: file, packets written, packets dropped\n"
    "meter on|off, meter         per-job counts of the frames sent (for agqctl top; off after 10 s unread)\n"
    "Commands that print data print JSON instead when the line ends with --json.\n";

// 'counters --json': the "name value" lines of format_counters() (the one
// place that reads them) as one object.
Json counters_json(const std::string& text) {
  Json j = Json::object();
  std::istringstream in(text);
  std::string name;
  for (uint64_t v; in >> name >> v;) j[name] = v;
  return j;
}

std::vector<std::string> split(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  for (std::string s; in >> s;) w.push_back(s);
  return w;
}

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

class Interpreter {
 public:
  Interpreter(Pipes& pipes, DataplaneView& dp) : pipes_(pipes), dp_(dp) {}

  std::string run(std::vector<std::string> w, ControlPlane& cp) {
    json_ = take_json_flag(w);
    const std::string& cmd = w[0];
    if (cmd == "help") {
      args(w, 1, 1, "help");
      return kHelp;
    }
    if (cmd == "ports") {
      args(w, 1, 1, "ports");
      return ports();
    }
    if (cmd == "counters") {
      args(w, 1, 1, "counters");
      return json_ ? counters_json(cp.format_counters()).dump() + "\n" : cp.format_counters();
    }
    if (cmd == "clear") return clear(w);
    if (cmd == "dump") return dump(w);
    if (cmd == "route") return route(w);
    if (cmd == "mac") return mac(w);
    if (cmd == "arp") return arp(w);
    if (cmd == "job") return job_command(pipes_, dp_, w, json_);
    if (cmd == "drop") return drop_command(dp_, w, json_);
    if (cmd == "queues") return queues_command(dp_, w, json_);
    if (auto* handler = cp.extra_command(cmd)) return (*handler)(w, json_);
    throw CommandError{"unknown command '" + cmd + "' (try 'help')", ""};
  }

 private:
  static void args(const std::vector<std::string>& w, size_t lo, size_t hi, const char* usage) {
    check_arg_count(w, lo, hi, usage);
  }

  static uint32_t ip_arg(const std::string& s, const char* usage) {
    auto ip = parse_ipv4(s);
    if (!ip) throw CommandError{"'" + s + "' is not an IPv4 address (a.b.c.d)", usage};
    return *ip;
  }

  static proto::Mac mac_arg(const std::string& s, const char* usage) {
    auto m = parse_mac(s);
    if (!m) throw CommandError{"'" + s + "' is not a MAC address (xx:xx:xx:xx:xx:xx)", usage};
    return *m;
  }

  tna::PortId port_arg(const std::string& s, const char* usage) { return existing_port(dp_, s, usage); }

  std::string ports() {
    Columns t;
    t.row({"port", "name", "mac", "link", "rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "rx_dropped",
           "tx_dropped"});
    for (const auto& r : dp_.port_stats())
      t.row({r.id, r.name, r.mac, r.link_up ? "up" : "down", r.rx_packets, r.rx_bytes, r.tx_packets, r.tx_bytes,
             r.rx_dropped, r.tx_dropped});
    return t.output(json_);
  }

  std::string clear(const std::vector<std::string>& w) {
    args(w, 2, 2, kUsageClear);
    if (w[1] == "counters") {
      pipes_.all([](pipeline::SwitchProgram& p) { p.clear_counters(); });
    } else if (w[1] == "state") {
      pipes_.all([](pipeline::SwitchProgram& p) { p.clear_state(); });
    } else if (w[1] == "ports") {
      dp_.clear_port_stats();
    } else {
      throw CommandError{"cannot clear '" + w[1] + "'", kUsageClear};
    }
    return "";
  }

  std::string dump(const std::vector<std::string>& w) {
    args(w, 2, 3, kUsageDump);
    const uint32_t total = pipes_.on(0, [](pipeline::SwitchProgram& p) { return p.aggregator_count(); });
    auto first = parse_uint(w[1]);
    if (!first) throw CommandError{"'" + w[1] + "' is not an aggregator index", kUsageDump};
    if (*first >= total)
      throw CommandError{"aggregator " + w[1] + " out of range (" +
                             (total == 0 ? std::string("no aggregators")
                                         : std::to_string(total) + " aggregators: 0.." + std::to_string(total - 1)) +
                             ")",
                         kUsageDump};
    uint64_t count = 1;
    if (w.size() == 3) {
      auto c = parse_uint(w[2]);
      if (!c || *c == 0 || *c > kMaxDumpCount)
        throw CommandError{"count must be 1.." + std::to_string(kMaxDumpCount), kUsageDump};
      count = std::min<uint64_t>(*c, total - *first);  // a range past the end is cut, not refused
    }
    std::string out;
    Json all = Json::array();
    for (uint64_t i = *first; i < *first + count; ++i) {
      // Registers are read on the lcore that owns the aggregator's shard, one
      // aggregator per command: the lcore is never held for a whole dump.
      const uint32_t shard = pipes_.on(0, [&](pipeline::SwitchProgram& p) { return p.aggregator_shard(uint32_t(i)); });
      const auto cells = pipes_.on(pipes_.owner(shard),
                                   [&](pipeline::SwitchProgram& p) { return p.dump_aggregator(uint32_t(i)); });
      if (json_) {
        Json c = Json::object();
        for (const auto& [name, v] : cells) c[name] = v;
        all.push_back(Json{{"aggregator", i}, {"cells", std::move(c)}});
        continue;
      }
      out += "aggregator " + std::to_string(i) + "\n";
      Columns t;
      for (const auto& [name, v] : cells) {
        char hex[32];
        std::snprintf(hex, sizeof hex, "0x%08" PRIx64, v);
        t.row({"  " + name, hex});
      }
      out += t.render();
    }
    return json_ ? all.dump() + "\n" : out;
  }

  std::string route(const std::vector<std::string>& w) {
    args(w, 2, 4, kUsageRoute);
    if (w[1] == "list") {
      args(w, 2, 2, kUsageRoute);
      std::vector<std::pair<uint32_t, tna::PortId>> rows;
      pipes_.on(0, [&](pipeline::SwitchProgram& prog) {
        prog.forwarding().for_each_route([&](uint32_t ip, tna::PortId p) { rows.emplace_back(ip, p); });
      });
      std::sort(rows.begin(), rows.end());
      Columns t;
      t.row({"ip", "port"});
      for (auto [ip, p] : rows) t.row({proto::ipv4_to_string(ip), p});
      return t.output(json_);
    }
    if (w[1] == "add") {
      args(w, 4, 4, kUsageRoute);
      const uint32_t ip = ip_arg(w[2], kUsageRoute);
      const tna::PortId port = port_arg(w[3], kUsageRoute);
      if (pipes_.all([&](pipeline::SwitchProgram& p) { return p.forwarding().add_route(ip, port); })) return "";
      std::optional<tna::PortId> existing;
      std::size_t capacity = 0;
      pipes_.on(0, [&](pipeline::SwitchProgram& prog) {  // why it was refused
        existing = prog.forwarding().find_route(ip);
        capacity = prog.forwarding().config().route_capacity;
      });
      if (existing)
        throw CommandError{"a route for " + w[2] + " exists (port " + std::to_string(*existing) +
                               "); 'route del " + w[2] + "' first", ""};
      throw CommandError{"route table full (" + std::to_string(capacity) + " entries)", ""};
    }
    if (w[1] == "del") {
      args(w, 3, 3, kUsageRoute);
      const uint32_t ip = ip_arg(w[2], kUsageRoute);
      if (!pipes_.all([&](pipeline::SwitchProgram& p) { return p.forwarding().remove_route(ip); }))
        throw CommandError{"no route for " + w[2], ""};
      return "";
    }
    throw CommandError{"unknown route subcommand '" + w[1] + "'", kUsageRoute};
  }

  std::string mac(const std::vector<std::string>& w) {
    args(w, 2, 4, kUsageMac);
    using Entry = pipeline::Forwarding::MacEntry;
    if (w[1] == "list") {
      args(w, 2, 2, kUsageMac);
      std::vector<std::pair<proto::Mac, Entry>> rows;
      pipes_.on(0, [&](pipeline::SwitchProgram& p) {
        p.forwarding().for_each_mac([&](const proto::Mac& m, const Entry& e) { rows.emplace_back(m, e); });
      });
      std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.first < b.first; });
      const uint64_t now = now_ns();
      Columns t;
      t.row({"mac", "port", "type", "age_s"});
      for (const auto& [m, e] : rows) {
        Cell age = nullptr;
        if (!e.is_static) age = now > e.last_seen_ns ? (now - e.last_seen_ns) / 1'000'000'000 : 0;
        t.row({proto::mac_to_string(m), e.port, e.is_static ? "static" : "learned", age});
      }
      return t.output(json_);
    }
    if (w[1] == "add") {
      args(w, 4, 4, kUsageMac);
      const proto::Mac m = mac_arg(w[2], kUsageMac);
      if (m[0] & 1) throw CommandError{w[2] + " is a multicast address; static entries are unicast", ""};
      const tna::PortId port = port_arg(w[3], kUsageMac);
      if (pipes_.all([&](pipeline::SwitchProgram& p) { return p.forwarding().add_static_mac(m, port); })) return "";
      std::optional<Entry> existing;
      std::size_t capacity = 0;
      pipes_.on(0, [&](pipeline::SwitchProgram& prog) {  // why it was refused
        existing = prog.forwarding().find_mac(m);
        capacity = prog.forwarding().config().mac_capacity;
      });
      if (existing)
        throw CommandError{"a static entry for " + w[2] + " exists (port " + std::to_string(existing->port) +
                               "); 'mac del " + w[2] + "' first", ""};
      throw CommandError{"MAC table full (" + std::to_string(capacity) + " entries)", ""};
    }
    if (w[1] == "del") {
      args(w, 3, 3, kUsageMac);
      const proto::Mac m = mac_arg(w[2], kUsageMac);
      if (!pipes_.all([&](pipeline::SwitchProgram& p) { return p.forwarding().remove_mac(m); }))
        throw CommandError{"no entry for " + w[2], ""};
      return "";
    }
    throw CommandError{"unknown mac subcommand '" + w[1] + "'", kUsageMac};
  }

  std::string arp(const std::vector<std::string>& w) {
    args(w, 2, 4, kUsageArp);
    if (w[1] == "list") {
      args(w, 2, 2, kUsageArp);
      std::vector<std::pair<uint32_t, proto::Mac>> rows;
      pipes_.on(0, [&](pipeline::SwitchProgram& p) {
        p.forwarding().for_each_arp_proxy([&](uint32_t ip, const proto::Mac& m) { rows.emplace_back(ip, m); });
      });
      std::sort(rows.begin(), rows.end());
      Columns t;
      t.row({"ip", "mac"});
      for (const auto& [ip, m] : rows) t.row({proto::ipv4_to_string(ip), proto::mac_to_string(m)});
      return t.output(json_);
    }
    if (w[1] == "add") {
      args(w, 4, 4, kUsageArp);
      const uint32_t ip = ip_arg(w[2], kUsageArp);
      const proto::Mac m = mac_arg(w[3], kUsageArp);
      if (m[0] & 1) throw CommandError{w[3] + " is a multicast address; ARP answers need a unicast MAC", ""};
      if (pipes_.all([&](pipeline::SwitchProgram& p) { return p.forwarding().add_arp_proxy(ip, m); })) return "";
      std::optional<proto::Mac> existing;
      std::size_t capacity = 0;
      pipes_.on(0, [&](pipeline::SwitchProgram& prog) {  // why it was refused
        existing = prog.forwarding().find_arp_proxy(ip);
        capacity = prog.forwarding().config().arp_capacity;
      });
      if (existing)
        throw CommandError{"an ARP proxy entry for " + w[2] + " exists (" + proto::mac_to_string(*existing) +
                               "); 'arp del " + w[2] +
                               "' first", ""};
      throw CommandError{"ARP proxy table full (" + std::to_string(capacity) + " entries)", ""};
    }
    if (w[1] == "del") {
      args(w, 3, 3, kUsageArp);
      const uint32_t ip = ip_arg(w[2], kUsageArp);
      if (!pipes_.all([&](pipeline::SwitchProgram& p) { return p.forwarding().remove_arp_proxy(ip); }))
        throw CommandError{"no ARP proxy entry for " + w[2], ""};
      return "";
    }
    throw CommandError{"unknown arp subcommand '" + w[1] + "'", kUsageArp};
  }

  Pipes& pipes_;
  DataplaneView& dp_;
  bool json_ = false;  // the line ended with --json
};

}  // namespace

std::string ControlPlane::execute(const std::string& line) {
  const auto words = split(line);
  if (words.empty()) return "error: empty command (try 'help')\n";
  try {
    return "ok\n" + Interpreter(pipes_, dp_).run(words, *this);
  } catch (const CommandError& e) {
    return "error: " + e.message + "\n" + (e.usage.empty() ? "" : "usage: " + e.usage + "\n");
  } catch (const std::exception& e) {
    return "error: internal: " + std::string(e.what()) + "\n";
  }
}

std::string ControlPlane::format_counters() {
  std::string out;
  auto add = [&](std::string_view name, uint64_t v) {
    out.append(name);
    out += ' ';
    out += std::to_string(v);
    out += '\n';
  };
  pipes_.visit_counters(add);  // summed over the instances
  dp_.visit_counters(add);     // the lcores' own counters, read directly

  return out;
}

}  // namespace agq::control
