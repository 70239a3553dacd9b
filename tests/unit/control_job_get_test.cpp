// 'job get ID [--json]' and 'job reset ID' (docs/PROTOCOL.md §12) against a
// real AgqProgram, and the job description's parser (control/job_info.hpp)
// that workers use on that JSON.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "agq_test_util.hpp"
#include "control/control_plane.hpp"
#include "control/job_info.hpp"
#include "control/json.hpp"

namespace agq::control {
namespace {

using agq_test::AgqHarness;
using agq_test::data_pkt;
using agq_test::job_spec;

// Enough ports for the harness's worker ports (40 * job + w + 2), 3 lcores
// and a boot epoch, as a running switch would report them.
class View : public DataplaneView {
 public:
  std::vector<PortStatsRow> port_stats() override {
    std::vector<PortStatsRow> rows;
    for (tna::PortId i = 0; i < 128; ++i) rows.push_back({i, "p", "", true, 0, 0, 0, 0, 0, 0});
    return rows;
  }
  void clear_port_stats() override {}
  void visit_counters(const tna::CounterVisitor&) override {}
  void set_sim_drop(tna::PortId, SimDirection, double) override {}
  SimDropRow sim_drop(tna::PortId p) override { return {p, 0, 0, 0, 0}; }
  uint16_t lcore_count() override { return 3; }
  uint16_t boot_epoch() override { return 0xBEEF; }
  uint16_t memif_queues() override { return 2; }
};

class JobGetTest : public ::testing::Test {
 protected:
  // Control commands change h.prog only: no model beside it.
  JobGetTest() : cp(h.prog, view, "") { h.check_model = false; }
  std::string ok(const std::string& cmd) {
    const std::string r = cp.execute(cmd);
    EXPECT_EQ(r.rfind("ok\n", 0), 0u) << cmd << " -> " << r;
    return r.size() >= 3 ? r.substr(3) : r;
  }
  std::string err(const std::string& cmd) {
    const std::string r = cp.execute(cmd);
    EXPECT_EQ(r.rfind("error: ", 0), 0u) << cmd << " -> " << r;
    return r;
  }
  bool all_registers_zero() {
    for (const auto& [name, v] : h.dump_all())
      if (v != 0) return false;
    return true;
  }
  AgqHarness h;
  View view;
  ControlPlane cp;
};

TEST_F(JobGetTest, JsonHasEveryFieldOfSection12) {
  // 3 workers, 20 slots in at most 6 rows: 4 slots per row (row_shift 2), 5 rows, g = 2.
  auto spec = job_spec(1, 3, 20, 6, pipeline::agq::ResultDelivery::Ps, 16);
  h.add(spec);
  const Json j = Json::parse(ok("job get 1 --json"));
  const Json want = Json::parse(R"({
    "id": 1, "workers": 3, "slots": 20, "rows": 5, "row_shift": 2, "guard": 2, "max_width": 16,
    "lanes": 32, "delivery": "ps",
    "ps": {"port": 1, "ip": "10.0.0.254", "mac": "02:00:00:00:00:fe"},
    "worker_table": [
      {"id": 0, "port": 42, "ip": "10.1.0.1", "mac": "02:00:00:01:00:01"},
      {"id": 1, "port": 43, "ip": "10.1.0.2", "mac": "02:00:00:01:00:02"},
      {"id": 2, "port": 44, "ip": "10.1.0.3", "mac": "02:00:00:01:00:03"}],
    "epoch": 48879, "lcores": 3, "rings": 2})");
  EXPECT_EQ(j, want) << j.dump(2);
  // The placement the program made is what workers are told.
  const auto p = h.prog.placement(1);
  ASSERT_TRUE(p);
  EXPECT_EQ(j["row_shift"], p->row_shift);
  EXPECT_EQ(j["rows"], p->rows);
  EXPECT_EQ(j["guard"], p->guard);

  // A worker reads it back field for field.
  const JobInfo info = parse_job_info_text(ok("job get 1 --json"));
  EXPECT_EQ(info.id, 1);
  EXPECT_EQ(info.row_shift, 2);
  ASSERT_TRUE(info.ps);
  EXPECT_EQ(info.ps->port, 1);
  EXPECT_EQ(info.ps->ipv4, agq_test::kPsIp);
  ASSERT_EQ(info.worker_table.size(), 3u);
  EXPECT_EQ(info.worker_table[2].at.port, 44);
  EXPECT_EQ(info.worker_table[2].at.mac, spec.workers[2].mac);
  EXPECT_EQ(info.epoch, 0xBEEF);
  EXPECT_EQ(info.lcores, 3);
  EXPECT_EQ(info.rings, 2);
  EXPECT_EQ(to_json(info), j);  // lossless both ways
  // A job file saved before `rings` existed still reads (0: not said).
  Json old = j;
  old.erase("rings");
  EXPECT_EQ(parse_job_info(old).rings, 0);
}

TEST_F(JobGetTest, TextFormAndListJson) {
  h.add(job_spec(2, 2, 8, 8));
  const std::string t = ok("job get 2");
  EXPECT_NE(t.find("row_shift  0\n"), std::string::npos) << t;
  EXPECT_NE(t.find("ps.ip"), std::string::npos) << t;  // nested object flattened
  EXPECT_NE(t.find("worker_table:\n  id  port  ip        mac\n  0   82    10.2.0.1  02:00:00:02:00:01\n"),
            std::string::npos)
      << t;
  h.add(job_spec(3, 1, 4, 1));
  const Json list = Json::parse(ok("job list --json"));
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["id"], 2);
  EXPECT_EQ(list[1]["id"], 3);
  EXPECT_EQ(list[1], Json::parse(ok("job get 3 --json")));
}

TEST_F(JobGetTest, Errors) {
  EXPECT_NE(err("job get 9").find("error: no job 9\n"), std::string::npos);
  EXPECT_NE(err("job get 9 --json").find("error: no job 9\n"), std::string::npos);
  EXPECT_NE(err("job reset 9").find("error: no job 9\n"), std::string::npos);
  EXPECT_NE(err("job get").find("usage: job get <id>"), std::string::npos);
  EXPECT_NE(err("job get 1 2").find("too many arguments"), std::string::npos);
  EXPECT_NE(err("job reset x").find("'x' is not a number"), std::string::npos);
  EXPECT_NE(err("job get 0").find("out of range"), std::string::npos);
}

TEST_F(JobGetTest, ResetZeroesSlotsAndRowsKeepsTheJob) {
  const auto spec = job_spec(4, 2, 8, 8);
  h.add(spec);
  const auto before = h.prog.placement(4);
  ASSERT_TRUE(before);
  // Worker 0 contributes to slot 3: registers hold a partial sum.
  auto o = h.send(spec, data_pkt(spec, 0, 3, 0, 32, {7, 8, 9}));
  EXPECT_EQ(o.decision.kind, tna::Decision::Kind::Drop);  // absorbed: waits for worker 1
  ASSERT_FALSE(all_registers_zero());

  ok("job reset 4");
  EXPECT_TRUE(all_registers_zero());
  const auto after = h.prog.placement(4);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->row_base, before->row_base);
  EXPECT_EQ(after->slot_base, before->slot_base);
  EXPECT_EQ(after->row_shift, before->row_shift);
  EXPECT_EQ(ok("job list"), ok("job list"));

  // The job works from scratch: worker 1 alone does not complete slot 3
  // (worker 0's contribution is gone); worker 0 again does.
  o = h.send(spec, data_pkt(spec, 1, 3, 0, 32, {1, 1, 1}));
  EXPECT_EQ(o.decision.kind, tna::Decision::Kind::Drop);
  o = h.send(spec, data_pkt(spec, 0, 3, 0, 32, {2, 2, 2}));
  ASSERT_EQ(o.decision.kind, tna::Decision::Kind::Multicast);
  ASSERT_TRUE(o.parsed);
  EXPECT_EQ(o.hdr.agq.type, proto::AgqType::Result);
}

TEST(JobInfoParse, ErrorsNameTheField) {
  JobInfo j;
  j.id = 5;
  j.workers = 2;
  j.slots = 4;
  j.rows = 1;
  j.row_shift = 2;
  j.guard = 1;
  j.worker_table = {{0, {3, 0x0A000001, {2, 0, 0, 0, 0, 1}}}, {1, {4, 0x0A000002, {2, 0, 0, 0, 0, 2}}}};
  EXPECT_EQ(parse_job_info(to_json(j)), j);
  EXPECT_EQ(parse_job_info_text(to_json(j).dump()), j);

  struct Case {
    std::string path, value, what;
  } cases[] = {
      {"/lanes", "", "job: lanes: missing"},
      {"/lanes", "24", "job: lanes: 24 is not 32 or 16"},
      {"/slots", "\"8\"", "job: slots: \"8\" is not a non-negative integer"},
      {"/id", "0", "job: id: 0 is out of range 1..65535"},
      {"/delivery", "\"ps\"", "job: ps: null, but delivery is \"ps\""},
      {"/worker_table/1/mac", "\"02:00\"", "job: worker_table[1].mac: '02:00' is not a MAC address"},
      {"/worker_table/1/id", "0", "job: worker_table[1].id: 0: the table is ordered by id, expected 1"},
      {"/workers", "3", "job: worker_table: 2 entries, workers = 3"},
  };
  for (const auto& c : cases) {
    Json doc = to_json(j);
    const auto ptr = Json::json_pointer(c.path);
    if (c.value.empty()) doc.at(ptr.parent_pointer()).erase(ptr.back());
    else doc[ptr] = Json::parse(c.value);
    try {
      parse_job_info(doc);
      ADD_FAILURE() << c.path << " accepted";
    } catch (const JobInfoError& e) {
      EXPECT_EQ(std::string(e.what()), c.what) << c.path;
    }
  }
  EXPECT_THROW(parse_job_info_text("{not json"), JobInfoError);
}

}  // namespace
}  // namespace agq::control
