#include "observe/tel_json.hpp"

#include <rte_telemetry.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <map>
#include <vector>

namespace agq::observe {
namespace {

using control::Json;

std::string text_of(const Json& v) {
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (s.size() >= RTE_TEL_MAX_STRING_LEN) s.resize(RTE_TEL_MAX_STRING_LEN - 1);
  return s;
}

bool is_uint(const Json& v) { return v.is_number_unsigned(); }
bool is_scalar(const Json& v) { return !v.is_object() && !v.is_array(); }

// An array of scalars as a new telemetry array (caller owns it).
int scalar_array(const std::vector<const Json*>& vals, rte_tel_data* a) {
  bool all_uint = true;
  for (const Json* v : vals) all_uint = all_uint && is_uint(*v);
  if (rte_tel_data_start_array(a, all_uint ? RTE_TEL_U64_VAL : RTE_TEL_STRING_VAL) != 0) return -EINVAL;
  for (const Json* v : vals) {
    const int rc = all_uint ? rte_tel_data_add_array_u64(a, v->get<uint64_t>())
                            : rte_tel_data_add_array_string(a, text_of(*v).c_str());
    if (rc != 0) return -ENOSPC;
  }
  return 0;
}

int add_container(rte_tel_data* d, const std::string& name, const std::vector<const Json*>& vals) {
  rte_tel_data* a = rte_tel_data_alloc();
  if (a == nullptr) return -ENOMEM;
  int rc = scalar_array(vals, a);
  if (rc == 0 && rte_tel_data_add_dict_container(d, name.c_str(), a, 0) != 0) rc = -ENOSPC;
  if (rc != 0) rte_tel_data_free(a);
  return rc;
}

int add_scalar(rte_tel_data* d, const std::string& name, const Json& v) {
  const int rc = is_uint(v) ? rte_tel_data_add_dict_u64(d, name.c_str(), v.get<uint64_t>())
                            : rte_tel_data_add_dict_string(d, name.c_str(), text_of(v).c_str());
  return rc == 0 ? 0 : -ENOSPC;
}

// DPDK 22.11 accepts only [A-Za-z0-9_/] in dict names: "dp.rx" -> "dp_rx".
std::string tel_name(const std::string& key) {
  std::string s = key;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '/') c = '_';
  if (s.size() >= RTE_TEL_MAX_STRING_LEN) s.resize(RTE_TEL_MAX_STRING_LEN - 1);
  return s;
}

std::string join(const std::string& prefix, const std::string& key) {
  return tel_name(prefix.empty() ? key : prefix + "_" + key);
}

// Rows of objects -> one column per (flattened) key, in first-seen order;
// a row without the key gets null.
void collect_columns(const Json& obj, const std::string& prefix, std::vector<std::string>& order,
                     std::map<std::string, const Json*>& row) {
  for (const auto& [k, v] : obj.items()) {
    const std::string name = join(prefix, k);
    if (v.is_object()) {
      collect_columns(v, name, order, row);
    } else if (is_scalar(v)) {
      if (std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
      row[name] = &v;
    }
  }
}

int add_columns(rte_tel_data* d, const std::string& prefix, const Json& rows) {
  static const Json null_value = nullptr;
  std::vector<std::string> order;
  std::vector<std::map<std::string, const Json*>> cells(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) collect_columns(rows[i], prefix, order, cells[i]);
  for (const std::string& col : order) {
    std::vector<const Json*> vals;
    for (const auto& r : cells) {
      auto it = r.find(col);
      vals.push_back(it == r.end() ? &null_value : it->second);
    }
    if (const int rc = add_container(d, col, vals)) return rc;
  }
  return 0;
}

bool rows_of_objects(const Json& a) {
  if (!a.is_array() || a.empty()) return false;
  for (const auto& e : a)
    if (!e.is_object()) return false;
  return true;
}

int add_object(rte_tel_data* d, const std::string& prefix, const Json& obj) {
  for (const auto& [k, v] : obj.items()) {
    const std::string name = join(prefix, k);
    int rc = 0;
    if (v.is_object()) {
      rc = add_object(d, name, v);
    } else if (rows_of_objects(v)) {
      rc = add_columns(d, name, v);
    } else if (v.is_array()) {
      std::vector<const Json*> vals;
      for (const auto& e : v)
        if (is_scalar(e)) vals.push_back(&e);
      rc = add_container(d, name, vals);
    } else {
      rc = add_scalar(d, name, v);
    }
    if (rc != 0) return rc;
  }
  return 0;
}

}  // namespace

int json_to_tel(const Json& j, rte_tel_data* d) {
  if (j.is_object()) {
    rte_tel_data_start_dict(d);
    return add_object(d, "", j);
  }
  if (rows_of_objects(j)) {
    rte_tel_data_start_dict(d);
    return add_columns(d, "", j);
  }
  if (j.is_array()) {
    std::vector<const Json*> vals;
    for (const auto& e : j)
      if (is_scalar(e)) vals.push_back(&e);
    return scalar_array(vals, d);
  }
  rte_tel_data_string(d, text_of(j).c_str());
  return 0;
}

}  // namespace agq::observe
