#include "control/job_info.hpp"

#include "control/ctl_protocol.hpp"
#include "control/text.hpp"

namespace agq::control {
namespace {

Json endpoint_json(const JobEndpoint& e) {
  return Json{{"port", e.port}, {"ip", proto::ipv4_to_string(e.ipv4)}, {"mac", proto::mac_to_string(e.mac)}};
}

[[noreturn]] void fail(const std::string& field, const std::string& what) {
  throw JobInfoError("job: " + field + ": " + what);
}

const Json& member(const Json& obj, const std::string& key, const std::string& where) {
  if (!obj.is_object()) fail(where.empty() ? "(document)" : where, "is not a JSON object");
  auto it = obj.find(key);
  if (it == obj.end()) fail(where.empty() ? key : where + "." + key, "missing");
  return *it;
}

uint64_t uint_field(const Json& obj, const std::string& key, uint64_t lo, uint64_t hi, const std::string& where = "") {
  const Json& v = member(obj, key, where);
  const std::string name = where.empty() ? key : where + "." + key;
  if (!v.is_number_unsigned()) fail(name, v.dump() + " is not a non-negative integer");
  const uint64_t n = v.get<uint64_t>();
  if (n < lo || n > hi) fail(name, std::to_string(n) + " is out of range " + std::to_string(lo) + ".." + std::to_string(hi));
  return n;
}

std::string string_field(const Json& obj, const std::string& key, const std::string& where = "") {
  const Json& v = member(obj, key, where);
  if (!v.is_string()) fail(where.empty() ? key : where + "." + key, v.dump() + " is not a string");
  return v.get<std::string>();
}

JobEndpoint endpoint_from(const Json& obj, const std::string& where) {
  JobEndpoint e;
  e.port = tna::PortId(uint_field(obj, "port", 0, kMaxPortId, where));
  const std::string ip = string_field(obj, "ip", where);
  auto v4 = parse_ipv4(ip);
  if (!v4) fail(where + ".ip", "'" + ip + "' is not an IPv4 address");
  e.ipv4 = *v4;
  const std::string mac = string_field(obj, "mac", where);
  auto m = parse_mac(mac);
  if (!m) fail(where + ".mac", "'" + mac + "' is not a MAC address");
  e.mac = *m;
  return e;
}

}  // namespace

Json to_json(const JobInfo& j) {
  Json workers = Json::array();
  for (const auto& w : j.worker_table) {
    Json e = endpoint_json(w.at);
    workers.push_back(Json{{"id", w.id}, {"port", e["port"]}, {"ip", e["ip"]}, {"mac", e["mac"]}});
  }
  Json out{{"id", j.id},
           {"workers", j.workers},
           {"slots", j.slots},
           {"rows", j.rows},
           {"row_shift", j.row_shift},
           {"guard", j.guard},
           {"max_width", j.max_width},
           {"lanes", j.lanes},
           {"delivery", j.delivery},
           {"ps", j.ps ? endpoint_json(*j.ps) : Json(nullptr)},
           {"worker_table", std::move(workers)},
           {"epoch", j.epoch},
           {"lcores", j.lcores}};
  if (j.rings) out["rings"] = j.rings;
  return out;
}

JobInfo parse_job_info(const Json& j) {
  JobInfo out;
  out.id = uint16_t(uint_field(j, "id", 1, 65535));
  out.workers = uint8_t(uint_field(j, "workers", 1, 32));
  out.slots = uint32_t(uint_field(j, "slots", 1, 65536));
  out.rows = uint32_t(uint_field(j, "rows", 1, 65536));
  out.row_shift = uint8_t(uint_field(j, "row_shift", 0, 16));
  out.guard = uint8_t(uint_field(j, "guard", 0, 5));
  out.max_width = uint8_t(uint_field(j, "max_width", 4, 32));
  out.lanes = uint8_t(uint_field(j, "lanes", 16, 32));
  if (out.lanes != 16 && out.lanes != 32) fail("lanes", std::to_string(out.lanes) + " is not 32 or 16");
  out.delivery = string_field(j, "delivery");
  if (out.delivery != "multicast" && out.delivery != "ps") fail("delivery", "'" + out.delivery + "' is not multicast or ps");
  const Json& ps = member(j, "ps", "");
  if (!ps.is_null()) out.ps = endpoint_from(ps, "ps");
  if (out.delivery == "ps" && !out.ps) fail("ps", "null, but delivery is \"ps\"");
  const Json& table = member(j, "worker_table", "");
  if (!table.is_array()) fail("worker_table", "is not an array");
  if (table.size() != out.workers)
    fail("worker_table", std::to_string(table.size()) + " entries, workers = " + std::to_string(out.workers));
  for (size_t i = 0; i < table.size(); ++i) {
    const std::string where = "worker_table[" + std::to_string(i) + "]";
    JobWorker w;
    w.id = uint8_t(uint_field(table[i], "id", 0, out.workers - 1u, where));
    if (w.id != i) fail(where + ".id", std::to_string(w.id) + ": the table is ordered by id, expected " + std::to_string(i));
    w.at = endpoint_from(table[i], where);
    out.worker_table.push_back(w);
  }
  out.epoch = uint16_t(uint_field(j, "epoch", 0, 65535));
  out.lcores = uint16_t(uint_field(j, "lcores", 1, 65535));
  if (j.find("rings") != j.end()) out.rings = uint16_t(uint_field(j, "rings", 1, 255));
  return out;
}

JobInfo parse_job_info_text(std::string_view text) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw JobInfoError(std::string("job: not JSON: ") + e.what());
  }
  return parse_job_info(j);
}

JobInfo fetch_job_info(const std::string& ctl_socket, uint16_t id) {
  const CtlReply r = ctl_request(ctl_socket, "job get " + std::to_string(id) + " --json");
  if (!r.ok) throw JobInfoError("job " + std::to_string(id) + ": the switch at " + ctl_socket + " says: " + r.message);
  return parse_job_info_text(r.body);
}

}  // namespace agq::control
