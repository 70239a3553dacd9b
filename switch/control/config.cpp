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
#include <random>
#include <string_view>
#include <toml++/toml.h>

#include "control/config_reader.hpp"
#include "control/job_listener.hpp"
#include "control/text.hpp"

namespace agq::control {
namespace {

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

class Loader : public TomlReader {
 public:
  explicit Loader(SwitchConfig& cfg) : TomlReader(cfg) {}

  void load(const toml::table& root) {
    check_keys(root, "", {"switch", "classic", "agq", "job", "l2", "route", "mac", "arp_proxy", "port"});
    if (auto* t = table_at(root, "switch")) load_switch(*t);
    if (auto* t = table_at(root, "l2")) load_l2(*t);
    const toml::table* classic = table_at(root, "classic");
    if (cfg_.pipeline == "classic") {
      if (!classic) fail(pipeline_line_, "classic", "missing section [classic] (pipeline \"classic\" needs it)");
      load_classic(*classic);
    } else if (classic) {
      fail(line_of(*classic), "classic", "section [classic] is for pipeline \"classic\" (switch.pipeline is \"" +
                                             cfg_.pipeline + "\", line " + std::to_string(pipeline_line_) + ")");
    }
    load_agq_sections(*this, root, cfg_);
    load_routes(root);
    load_macs(root);
    load_arp_proxy(root);
    load_port_sections(*this, root, cfg_);
  }

 private:
  void load_switch(const toml::table& t) {
    check_keys(t, "switch", {"pipeline", "ctl_socket", "epoch", "job_listen"});
    if (auto* n = t.get("job_listen")) {
      cfg_.job_listen = string(*n, "switch.job_listen");
      std::string err;
      if (!parse_listen_address(cfg_.job_listen, err)) fail(line_of(*n), "switch.job_listen", err);
    }
    if (auto* n = t.get("epoch")) {
      cfg_.epoch = uint16_t(integer(*n, "switch.epoch", 1, 65535));
      cfg_.epoch_fixed = true;
    }
    if (auto* n = t.get("pipeline")) {
      cfg_.pipeline = string(*n, "switch.pipeline");
      pipeline_line_ = line_of(*n);
      if (cfg_.pipeline != "classic" && cfg_.pipeline != "agq")
        fail(pipeline_line_, "switch.pipeline", "unknown pipeline \"" + cfg_.pipeline + "\" (known: classic, agq)");
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
  if (!cfg.epoch_fixed) {
    // A new nonzero epoch at every start (PROTOCOL §11): 1..65535 at random.
    std::random_device rd;
    cfg.epoch = uint16_t(1 + rd() % 65535);
  }
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
  if (cfg.pipeline == "agq") return make_agq_program(cfg, pre);
  throw ConfigError(cfg.path + ": switch.pipeline: unknown pipeline \"" + cfg.pipeline + "\" (known: classic, agq)");
}

void install_entries(const SwitchConfig& cfg, pipeline::SwitchProgram& prog) {
  // Before the lcores run (main.cpp calls it once per instance): no lcore
  // can see a half-installed table.
  install_jobs(cfg, prog);
  prog.set_epoch(cfg.epoch);
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
