// The table the data commands print: left-aligned text columns separated
// by two spaces (the first row is the header), or the same rows as JSON
// (an array of objects keyed by the header) for --json. A cell keeps its
// JSON type (number, string, bool, null) beside its text, so the text and
// JSON forms of a command come from one table.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "control/json.hpp"

namespace agq::control {

class Cell {
 public:
  Cell(std::string s) : text_(s), json_(std::move(s)) {}
  Cell(const char* s) : Cell(std::string(s)) {}
  Cell(std::nullptr_t) : text_("-"), json_(nullptr) {}
  Cell(bool b) : text_(b ? "yes" : "no"), json_(b) {}
  template <class T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
  Cell(T n) : text_(std::to_string(n)), json_(n) {}
  Cell(double d) : json_(d) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", d);
    text_ = buf;
  }
  const std::string& text() const { return text_; }
  const Json& json() const { return json_; }

 private:
  std::string text_;
  Json json_;
};

class Columns {
 public:
  void row(std::vector<Cell> cells) { rows_.push_back(std::move(cells)); }
  std::string render() const {
    std::vector<size_t> width;
    for (const auto& r : rows_)
      for (size_t i = 0; i < r.size(); ++i) {
        if (width.size() <= i) width.push_back(0);
        width[i] = std::max(width[i], r[i].text().size());
      }
    std::string out;
    for (const auto& r : rows_) {
      std::string line;
      for (size_t i = 0; i < r.size(); ++i) {
        line += r[i].text();
        if (i + 1 < r.size()) line += std::string(width[i] - r[i].text().size() + 2, ' ');
      }
      out += line + "\n";
    }
    return out;
  }
  // Rows after the header as objects keyed by the header's cells.
  Json json() const {
    Json out = Json::array();
    for (size_t r = 1; r < rows_.size(); ++r) {
      Json o = Json::object();
      for (size_t i = 0; i < rows_[r].size() && i < rows_[0].size(); ++i) o[rows_[0][i].text()] = rows_[r][i].json();
      out.push_back(std::move(o));
    }
    return out;
  }
  // --json: the JSON array on one line; else the text table.
  std::string output(bool as_json) const { return as_json ? json().dump() + "\n" : render(); }

 private:
  std::vector<std::vector<Cell>> rows_;
};

}  // namespace agq::control
