#include "control/json_text.hpp"

#include <vector>

#include "control/columns.hpp"

namespace agq::control {
namespace {

std::string scalar(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "-";
  return v.dump();
}

bool is_table(const Json& v) {
  if (!v.is_array() || v.empty()) return false;
  for (const auto& e : v)
    if (!e.is_object()) return false;
  return true;
}

// Rows of objects -> header from the first row's keys; each line indented.
std::string table(const Json& rows, const std::string& indent) {
  Columns t;
  std::vector<std::string> header;
  for (const auto& [k, v] : rows.front().items()) header.push_back(k);
  t.row({header.begin(), header.end()});
  for (const auto& r : rows) {
    std::vector<Cell> cells;
    for (const auto& k : header) {
      auto it = r.find(k);
      cells.push_back(it == r.end() ? "-" : scalar(*it));
    }
    t.row(cells);
  }
  const std::string text = t.render();
  std::string out;
  for (size_t at = 0; at < text.size();) {
    const size_t nl = text.find('\n', at);
    out += indent;
    out.append(text, at, nl - at + 1);
    at = nl + 1;
  }
  return out;
}

void object_lines(const Json& obj, const std::string& prefix, Columns& t, std::string& tables) {
  // Strings built by appends: GCC 12's -Wrestrict misfires on operator+ chains.
  for (const auto& [k, v] : obj.items()) {
    std::string name = prefix;
    name += k;
    if (v.is_object()) {
      object_lines(v, name + ".", t, tables);
    } else if (is_table(v)) {
      tables += name;
      tables += ":\n";
      tables += table(v, "  ");
    } else if (v.is_array()) {
      std::string s;
      for (const auto& e : v) {
        if (!s.empty()) s += ',';
        s += scalar(e);
      }
      t.row({name, s.empty() ? std::string("-") : s});
    } else {
      t.row({name, scalar(v)});
    }
  }
}

}  // namespace

std::string json_as_text(const Json& j) {
  if (is_table(j)) return table(j, "");
  if (j.is_object()) {
    Columns t;
    std::string tables;
    object_lines(j, "", t, tables);
    return t.render() + tables;
  }
  if (j.is_array()) {
    std::string s;
    for (const auto& e : j) s += scalar(e) + "\n";
    return s;
  }
  return scalar(j) + "\n";
}

}  // namespace agq::control
