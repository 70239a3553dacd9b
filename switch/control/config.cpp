// Loader of the TOML configuration. Structure: read the file ourselves (so a
// missing file reports strerror), parse with toml++, then walk every table
// with an explicit list of known keys, so that typos are errors, not
// silently ignored settings.
#include "control/config.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <map>
#include <string_view>
#include <toml++/toml.h>

#include "control/text.hpp"

namespace agq::control {
namespace {

const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

int line_of(const toml::source_region& r) { return r.begin.line > 0 ? int(r.begin.line) : 1; }
int line_of(const toml::node& n) { return line_of(n.source()); }

std::string join(std::initializer_list<std::string_view> names) {
  std::string s;
  for (auto n : names) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

std::string read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ConfigError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw ConfigError(path + ": cannot open: " + std::strerror(EISDIR));
  }
  std::string text;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw ConfigError(path + ": cannot read: " + std::strerror(err));
    }
    text.append(buf, size_t(n));
  }
  ::close(fd);
  return text;
}

// toml++ quotes the offending input verbatim, newline included; keep the
// error on one line.
std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else out += char(c);
  }
  return out;
}

class Loader {
 public:
  explicit Loader(SwitchConfig& cfg) : cfg_(cfg) {}

  void load(const toml::table& root) {
    check_keys(root, "", {"switch", "classic", "l2", "route", "mac", "arp_proxy"});
    if (auto* t = table_at(root, "switch")) load_switch(*t);
    if (auto* t = table_at(root, "l2")) load_l2(*t);
    const toml::table* classic = table_at(root, "classic");
    if (cfg_.pipeline == "classic") {
      if (!classic) fail(pipeline_line_, "classic", "missing section [classic] (pipeline \"classic\" needs it)");
      load_classic(*classic);
    }
    load_routes(root);
    load_macs(root);
    load_arp_proxy(root);
  }

 private:
  [[noreturn]] void fail(int line, const std::string& field, const std::string& what) const {
    throw ConfigError(cfg_.path + ":" + std::to_string(line) + ": " + field + ": " + what);
  }

  // Every key of `t` must be one of `known`; `section` prefixes field names.
  void check_keys(const toml::table& t, std::string_view section,
                  std::initializer_list<std::string_view> known) const {
    for (auto&& [k, v] : t) {
      bool ok = false;
      for (auto n : known) ok = ok || k.str() == n;
      if (ok) continue;
      const int line = k.source().begin.line > 0 ? line_of(k.source()) : line_of(v);
      if (section.empty())
        fail(line, std::string(k.str()), "unknown section or key (known: " + join(known) + ")");
      fail(line, std::string(section) + "." + std::string(k.str()),
           "unknown key (known: " + join(known) + ")");
    }
  }

  const toml::table* table_at(const toml::table& root, std::string_view name) const {
    const toml::node* n = root.get(name);
    if (!n) return nullptr;
    if (!n->is_table()) fail(line_of(*n), std::string(name), std::string("expected a table [") +
                                                                 std::string(name) + "], got " + type_name(*n));
    return n->as_table();
  }

  // The tables of an array of tables ([[name]]); empty when absent.
  std::vector<const toml::table*> tables_at(const toml::table& root, std::string_view name) const {
    std::vector<const toml::table*> out;
    const toml::node* n = root.get(name);
    if (!n) return out;
    const toml::array* a = n->as_array();
    if (!a) fail(line_of(*n), std::string(name),
                 "expected an array of tables [[" + std::string(name) + "]], got " + type_name(*n));
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::node& e = *a->get(i);
      if (!e.is_table())
        fail(line_of(e), std::string(name) + "[" + std::to_string(i) + "]",
             std::string("expected a table, got ") + type_name(e));
      out.push_back(e.as_table());
    }
    return out;
  }

  const toml::node& required(const toml::table& t, std::string_view key, const std::string& field) const {
    const toml::node* n = t.get(key);
    if (!n) fail(line_of(t), field, "missing (required)");
    return *n;
  }

  int64_t integer(const toml::node& n, const std::string& field, int64_t lo, int64_t hi) const {
    auto v = n.as_integer();
    if (!v) fail(line_of(n), field, std::string("expected an integer, got ") + type_name(n));
    const int64_t x = v->get();
    if (x < lo || x > hi)
      fail(line_of(n), field, std::to_string(x) + " is out of range " + std::to_string(lo) + ".." +
                                  std::to_string(hi));
    return x;
  }

  std::string string(const toml::node& n, const std::string& field) const {
    auto v = n.as_string();
    if (!v) fail(line_of(n), field, std::string("expected a string, got ") + type_name(n));
    return v->get();
  }

  bool boolean(const toml::node& n, const std::string& field) const {
    auto v = n.as_boolean();
    if (!v) fail(line_of(n), field, std::string("expected true or false, got ") + type_name(n));
    return v->get();
  }

  // A port number; remembered for check_ports.
  tna::PortId port(const toml::node& n, const std::string& field) {
    const auto p = tna::PortId(integer(n, field, 0, int64_t(kMaxPortId)));
    cfg_.port_refs.push_back({p, line_of(n), field});
    return p;
  }

  uint32_t ipv4(const toml::node& n, const std::string& field) const {
    const std::string s = string(n, field);
    auto ip = parse_ipv4(s);
    if (!ip) fail(line_of(n), field, "\"" + s + "\" is not an IPv4 address (a.b.c.d)");
    return *ip;
  }

  proto::Mac mac(const toml::node& n, const std::string& field) const {
    const std::string s = string(n, field);
    auto m = parse_mac(s);
    if (!m) fail(line_of(n), field, "\"" + s + "\" is not a MAC address (xx:xx:xx:xx:xx:xx)");
    return *m;
  }

  void load_switch(const toml::table& t) {
    check_keys(t, "switch", {"pipeline", "ctl_socket"});
    if (auto* n = t.get("pipeline")) {
      cfg_.pipeline = string(*n, "switch.pipeline");
      pipeline_line_ = line_of(*n);
      if (cfg_.pipeline != "classic")
        fail(pipeline_line_, "switch.pipeline", "unknown pipeline \"" + cfg_.pipeline + "\" (known: classic)");
    }
    if (auto* n = t.get("ctl_socket")) {
      cfg_.ctl_socket = string(*n, "switch.ctl_socket");
      if (cfg_.ctl_socket.empty()) fail(line_of(*n), "switch.ctl_socket", "must not be empty");
    }
  }

  void load_l2(const toml::table& t) {
    check_keys(t, "l2", {"learning", "ageing_s"});
    if (auto* n = t.get("learning")) cfg_.forwarding.learning = boolean(*n, "l2.learning");
    // Upper bound keeps ageing_s * 1e9 far from overflowing uint64.
    if (auto* n = t.get("ageing_s"))
      cfg_.forwarding.ageing_ns = uint64_t(integer(*n, "l2.ageing_s", 0, 1'000'000'000)) * 1'000'000'000ull;
  }

  void load_classic(const toml::table& t) {
    check_keys(t, "classic", {"ps_port", "worker_ports", "register_capacity"});
    auto& c = cfg_.classic;
    const toml::node& ps = required(t, "ps_port", "classic.ps_port");
    c.ps_port = port(ps, "classic.ps_port");

    const toml::node& wn = required(t, "worker_ports", "classic.worker_ports");
    const toml::array* wa = wn.as_array();
    if (!wa) fail(line_of(wn), "classic.worker_ports", std::string("expected an array of ports, got ") + type_name(wn));
    if (wa->empty()) fail(line_of(wn), "classic.worker_ports", "must list at least one port");
    c.worker_ports.clear();
    for (size_t i = 0; i < wa->size(); ++i) {
      const std::string field = "classic.worker_ports[" + std::to_string(i) + "]";
      const toml::node& e = *wa->get(i);
      const tna::PortId p = port(e, field);
      if (p == c.ps_port)
        fail(line_of(e), field, "port " + std::to_string(p) + " is also the ps_port (line " +
                                    std::to_string(line_of(ps)) + "); the PS and the workers need their own ports");
      for (tna::PortId q : c.worker_ports)
        if (q == p) fail(line_of(e), field, "port " + std::to_string(p) + " is listed twice");
      c.worker_ports.push_back(p);
    }
    // The packet's hashID/hash1 index the registers and are at most 16 bits
    // wide, so cells beyond 65536 could never be reached.
    if (auto* n = t.get("register_capacity"))
      c.register_capacity = uint32_t(integer(*n, "classic.register_capacity", 1, 65536));
  }

  void load_routes(const toml::table& root) {
    std::map<uint32_t, int> seen;  // ip -> line
    const auto tables = tables_at(root, "route");
    for (size_t i = 0; i < tables.size(); ++i) {
      const toml::table& t = *tables[i];
      const std::string f = "route[" + std::to_string(i) + "]";
      check_keys(t, f, {"ip", "port"});
      const toml::node& ipn = required(t, "ip", f + ".ip");
      const uint32_t ip = ipv4(ipn, f + ".ip");
      const tna::PortId p = port(required(t, "port", f + ".port"), f + ".port");
      if (auto [it, fresh] = seen.emplace(ip, line_of(ipn)); !fresh)
        fail(line_of(ipn), f + ".ip", "duplicate route for " + proto::ipv4_to_string(ip) +
                                          " (first at line " + std::to_string(it->second) + ")");
      cfg_.routes.push_back({ip, p, line_of(t)});
    }
  }

  void load_macs(const toml::table& root) {
    std::map<proto::Mac, int> seen;
    const auto tables = tables_at(root, "mac");
    for (size_t i = 0; i < tables.size(); ++i) {
      const toml::table& t = *tables[i];
      const std::string f = "mac[" + std::to_string(i) + "]";
      check_keys(t, f, {"mac", "port"});
      const toml::node& mn = required(t, "mac", f + ".mac");
      const proto::Mac m = mac(mn, f + ".mac");
      if (m[0] & 1) fail(line_of(mn), f + ".mac", proto::mac_to_string(m) + " is a multicast address; static entries are unicast");
      const tna::PortId p = port(required(t, "port", f + ".port"), f + ".port");
      if (auto [it, fresh] = seen.emplace(m, line_of(mn)); !fresh)
        fail(line_of(mn), f + ".mac", "duplicate static MAC " + proto::mac_to_string(m) +
                                          " (first at line " + std::to_string(it->second) + ")");
      cfg_.macs.push_back({m, p, line_of(t)});
    }
  }

  void load_arp_proxy(const toml::table& root) {
    std::map<uint32_t, int> seen;
    const auto tables = tables_at(root, "arp_proxy");
    for (size_t i = 0; i < tables.size(); ++i) {
      const toml::table& t = *tables[i];
      const std::string f = "arp_proxy[" + std::to_string(i) + "]";
      check_keys(t, f, {"ip", "mac"});
      const toml::node& ipn = required(t, "ip", f + ".ip");
      const uint32_t ip = ipv4(ipn, f + ".ip");
      const toml::node& mn = required(t, "mac", f + ".mac");
      const proto::Mac m = mac(mn, f + ".mac");
      if (m[0] & 1) fail(line_of(mn), f + ".mac", proto::mac_to_string(m) + " is a multicast address; ARP answers need a unicast MAC");
      if (auto [it, fresh] = seen.emplace(ip, line_of(ipn)); !fresh)
        fail(line_of(ipn), f + ".ip", "duplicate ARP proxy entry for " + proto::ipv4_to_string(ip) +
                                          " (first at line " + std::to_string(it->second) + ")");
      cfg_.arp_proxy.push_back({ip, m, line_of(t)});
    }
  }

  SwitchConfig& cfg_;
  int pipeline_line_ = 1;  // where a missing [classic] is reported
};

}  // namespace

SwitchConfig load_config(const std::string& path) {
  SwitchConfig cfg;
  cfg.path = path;
  const std::string text = read_file(path);
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw ConfigError(path + ":" + std::to_string(b.line > 0 ? b.line : 1) +
                      ": TOML syntax error (column " + std::to_string(b.column) + "): " +
                      printable(e.description()));
  }
  Loader(cfg).load(root);
  return cfg;
}

void check_ports(const SwitchConfig& cfg, uint16_t port_count) {
  for (const auto& r : cfg.port_refs) {
    if (r.port < port_count) continue;
    const std::string have = port_count == 0 ? "no ports"
                             : std::to_string(port_count) + (port_count == 1 ? " port: 0" : " ports: 0..") +
                                   (port_count == 1 ? "" : std::to_string(port_count - 1));
    throw ConfigError(cfg.path + ":" + std::to_string(r.line) + ": " + r.field + ": port " +
                      std::to_string(r.port) + " does not exist (" + have + ")");
  }
}

std::unique_ptr<pipeline::SwitchProgram> make_program(const SwitchConfig& cfg, tna::ReplicationEngine& pre) {
  if (cfg.pipeline == "classic")
    return std::make_unique<pipeline::classic::ClassicProgram>(cfg.classic, cfg.forwarding, pre);
  throw ConfigError(cfg.path + ": switch.pipeline: unknown pipeline \"" + cfg.pipeline + "\" (known: classic)");
}

void install_entries(const SwitchConfig& cfg, pipeline::SwitchProgram& prog) {
  std::lock_guard g(prog.lock());
  auto& fwd = prog.forwarding();
  auto fail = [&](int line, const std::string& field, const std::string& what) {
    throw ConfigError(cfg.path + ":" + std::to_string(line) + ": " + field + ": " + what +
                      " (duplicate, or the table is full)");
  };
  for (size_t i = 0; i < cfg.routes.size(); ++i) {
    const auto& r = cfg.routes[i];
    if (!fwd.add_route(r.ip, r.port))
      fail(r.line, "route[" + std::to_string(i) + "]", "cannot install route " + proto::ipv4_to_string(r.ip));
  }
  for (size_t i = 0; i < cfg.macs.size(); ++i) {
    const auto& m = cfg.macs[i];
    if (!fwd.add_static_mac(m.mac, m.port))
      fail(m.line, "mac[" + std::to_string(i) + "]", "cannot install static MAC " + proto::mac_to_string(m.mac));
  }
  for (size_t i = 0; i < cfg.arp_proxy.size(); ++i) {
    const auto& a = cfg.arp_proxy[i];
    if (!fwd.add_arp_proxy(a.ip, a.mac))
      fail(a.line, "arp_proxy[" + std::to_string(i) + "]",
           "cannot install ARP proxy entry " + proto::ipv4_to_string(a.ip));
  }
}

}  // namespace agq::control
