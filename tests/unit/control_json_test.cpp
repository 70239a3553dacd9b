// --json on every control command that prints data: the same rows as the
// text form, typed (numbers as numbers, static MAC age as null).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "control/control_plane.hpp"
#include "control/json.hpp"
#include "pipeline/agq/agq_program.hpp"
#include "tna/pre.hpp"

namespace agq::control {
namespace {

class View : public DataplaneView {
 public:
  std::vector<PortStatsRow> port_stats() override {
    return {{0, "net_memif0", "02:00:00:00:00:10", true, 5, 500, 6, 600, 1, 2},
            {1, "net_memif1", "02:00:00:00:00:11", false, 0, 0, 0, 0, 0, 0}};
  }
  void clear_port_stats() override {}
  void visit_counters(const tna::CounterVisitor& v) override {
    v("dp.rx", 11);
    v("dp.tx", 12);
  }
  void set_sim_drop(tna::PortId, SimDirection, double p) override { prob = p; }
  SimDropRow sim_drop(tna::PortId port) override { return {port, port ? prob : 0.0, 0.0, 3u * port, 0}; }
  double prob = 0;
};

class JsonCommands : public ::testing::Test {
 protected:
  JsonCommands() : prog(pipeline::agq::AgqConfig{8, 64}, pipeline::ForwardingConfig{}, pre), cp(prog, view, "") {}
  Json json(const std::string& cmd) {
    const std::string r = cp.execute(cmd + " --json");
    EXPECT_EQ(r.rfind("ok\n", 0), 0u) << cmd << " -> " << r;
    return Json::parse(r.substr(3));
  }
  std::string text(const std::string& cmd) {
    const std::string r = cp.execute(cmd);
    EXPECT_EQ(r.rfind("ok\n", 0), 0u) << cmd << " -> " << r;
    return r.substr(3);
  }
  tna::ReplicationEngine pre;
  View view;
  pipeline::agq::AgqProgram prog;
  ControlPlane cp;
};

TEST_F(JsonCommands, Ports) {
  const Json j = json("ports");
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0], Json::parse(R"({"port":0,"name":"net_memif0","mac":"02:00:00:00:00:10","link":"up",
      "rx_packets":5,"rx_bytes":500,"tx_packets":6,"tx_bytes":600,"rx_dropped":1,"tx_dropped":2})"));
  EXPECT_EQ(j[1]["link"], "down");
}

TEST_F(JsonCommands, CountersAreTheTextLines) {
  const Json j = json("counters");
  EXPECT_EQ(j["dp.rx"], 11);
  EXPECT_EQ(j["dp.tx"], 12);
  EXPECT_EQ(j["agq_packets"], 0);
  size_t lines = 0;
  for (char c : text("counters")) lines += c == '\n';
  EXPECT_EQ(j.size(), lines);  // every line, nothing else
}

TEST_F(JsonCommands, DumpRoutesMacsArpDrops) {
  const Json d = json("dump 1 2");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0]["aggregator"], 1);
  EXPECT_EQ(d[1]["aggregator"], 2);
  EXPECT_TRUE(d[0]["cells"].is_object());
  EXPECT_EQ(d[0]["cells"].size(), prog.dump_aggregator(1).size());

  ASSERT_EQ(text("route add 10.0.0.7 1"), "");
  EXPECT_EQ(json("route list"), Json::parse(R"([{"ip":"10.0.0.7","port":1}])"));
  ASSERT_EQ(text("mac add 02:00:00:00:00:07 1"), "");
  EXPECT_EQ(json("mac list"), Json::parse(R"([{"mac":"02:00:00:00:00:07","port":1,"type":"static","age_s":null}])"));
  ASSERT_EQ(text("arp add 10.0.0.7 02:00:00:00:00:07"), "");
  EXPECT_EQ(json("arp list"), Json::parse(R"([{"ip":"10.0.0.7","mac":"02:00:00:00:00:07"}])"));
  ASSERT_EQ(text("drop 1 rx 0.25"), "");
  EXPECT_EQ(json("drop list"), Json::parse(R"([
      {"port":0,"rx_probability":0.0,"tx_probability":0.0,"rx_drops":0,"tx_drops":0},
      {"port":1,"rx_probability":0.25,"tx_probability":0.0,"rx_drops":3,"tx_drops":0}])"));
  // The text form is unchanged by the typed table.
  EXPECT_EQ(text("drop list"),
            "port  rx_probability  tx_probability  rx_drops  tx_drops\n"
            "0     0               0               0         0\n"
            "1     0.25            0               3         0\n");
}

TEST_F(JsonCommands, EmptyTablesAreEmptyArrays) {
  EXPECT_EQ(json("route list"), Json::array());
  EXPECT_EQ(json("job list"), Json::array());
  // Only a trailing --json is the flag; elsewhere it is an argument.
  EXPECT_EQ(cp.execute("route --json list").rfind("error: ", 0), 0u);
}

}  // namespace
}  // namespace agq::control
