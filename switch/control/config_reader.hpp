// Internal to the configuration loader (config*.cpp): typed, strict access
// to TOML values, each error "FILE:LINE: FIELD: what is wrong". Shared so
// that the pipeline-specific sections (config_agq.cpp) read values with the
// same words and the same rules as the rest of the file.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <toml++/toml.h>
#include <vector>

#include "control/config.hpp"
#include "control/text.hpp"

namespace agq::control {

// Helpers for the messages.
inline const char* type_name(const toml::node& n) {
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

inline int line_of(const toml::source_region& r) { return r.begin.line > 0 ? int(r.begin.line) : 1; }
inline int line_of(const toml::node& n) { return line_of(n.source()); }

inline std::string join(std::initializer_list<std::string_view> names) {
  std::string s;
  for (auto n : names) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

class TomlReader {
 public:
  explicit TomlReader(SwitchConfig& cfg) : cfg_(cfg) {}

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

 protected:
  SwitchConfig& cfg_;
};

// [agq] and [[job]] (config_agq.cpp): loads them when the pipeline is
// "agq", refuses them otherwise.
void load_agq_sections(TomlReader& r, const toml::table& root, SwitchConfig& cfg);
// [[port]] (config_ports.cpp): egress rates, queues, ECN thresholds.
void load_port_sections(TomlReader& r, const toml::table& root, SwitchConfig& cfg);
// make_program and install_entries for pipeline "agq" (config_agq.cpp).
std::unique_ptr<pipeline::SwitchProgram> make_agq_program(const SwitchConfig& cfg, tna::ReplicationEngine& pre);
void install_jobs(const SwitchConfig& cfg, pipeline::SwitchProgram& prog);

}  // namespace agq::control
