// Control-socket commands of the agq pipeline ('job list|add|del') against a
// real AgqProgram, and of the drop simulator ('drop ...') against a fake
// dataplane backed by the real DropSim.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "control/control_plane.hpp"
#include "dataplane/drop_sim.hpp"
#include "pipeline/agq/agq_program.hpp"
#include "pipeline/classic/classic_program.hpp"
#include "tna/pre.hpp"

namespace agq::control {
namespace {

using dataplane::DropSim;
using dataplane::SimDir;

class SimView : public DataplaneView {
 public:
  std::vector<PortStatsRow> port_stats() override {
    std::vector<PortStatsRow> rows;
    for (tna::PortId i = 0; i < 4; ++i) rows.push_back({i, "p" + std::to_string(i), "", true, 0, 0, 0, 0, 0, 0});
    return rows;
  }
  void clear_port_stats() override {}
  void visit_counters(const tna::CounterVisitor&) override {}
  void set_sim_drop(tna::PortId port, SimDirection dir, double p) override {
    sim.set(port, dir == SimDirection::Rx ? SimDir::Rx : SimDir::Tx, p);
  }
  SimDropRow sim_drop(tna::PortId port) override {
    return {port, sim.get(port, SimDir::Rx), sim.get(port, SimDir::Tx), 10u * port, 10u * port + 1};
  }
  DropSim sim{4};
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class CommandsTest : public ::testing::Test {
 protected:
  std::string ok(ControlPlane& cp, const std::string& cmd) {
    const std::string r = cp.execute(cmd);
    EXPECT_EQ(r.rfind("ok\n", 0), 0u) << cmd << " -> " << r;
    return r.size() >= 3 ? r.substr(3) : r;
  }
  std::string err(ControlPlane& cp, const std::string& cmd) {
    const std::string r = cp.execute(cmd);
    EXPECT_EQ(r.rfind("error: ", 0), 0u) << cmd << " -> " << r;
    return r;
  }
  tna::ReplicationEngine pre;
  SimView dp;
};

class AgqCommandsTest : public CommandsTest {
 protected:
  AgqCommandsTest() : prog(pipeline::agq::AgqConfig{64, 1024}, pipeline::ForwardingConfig{}, pre), cp(prog, dp, "") {}
  pipeline::agq::AgqProgram prog;
  ControlPlane cp;
};

class ClassicCommandsTest : public CommandsTest {
 protected:
  ClassicCommandsTest()
      : prog(pipeline::classic::ClassicConfig{0, {1, 2}, 35000}, pipeline::ForwardingConfig{}, pre), cp(prog, dp, "") {}
  pipeline::classic::ClassicProgram prog;
  ControlPlane cp;
};

const std::string kJob7 =
    "job add 7 workers=2 slots=8 rows=2 worker=1,2,10.0.0.2,02:00:00:00:00:02 worker=0,1,10.0.0.1,02:00:00:00:00:01";

TEST_F(AgqCommandsTest, HelpListsJobAndDrop) {
  const std::string h = ok(cp, "help");
  for (const char* c : {"job list", "job add", "job del", "drop <port> <rx|tx>", "drop list", "drop clear"})
    EXPECT_TRUE(contains(h, c)) << c;
}

TEST_F(AgqCommandsTest, AddListDel) {
  EXPECT_EQ(ok(cp, "job list"), "");
  ok(cp, kJob7);
  // Listed in 'job add' syntax, workers by id, defaults spelled out.
  const std::string line =
      "7 workers=2 slots=8 rows=2 delivery=multicast max_width=32 worker=0,1,10.0.0.1,02:00:00:00:00:01 "
      "worker=1,2,10.0.0.2,02:00:00:00:00:02\n";
  EXPECT_EQ(ok(cp, "job list"), line);
  ok(cp, "job add 9 workers=1 slots=4 rows=1 delivery=ps ps=3,10.0.0.100,02:00:00:00:00:64 max_width=16 "
         "lanes=16 worker=0,0,10.0.0.9,02:00:00:00:00:09");
  EXPECT_EQ(ok(cp, "job list"),
            line + "9 workers=1 slots=4 rows=1 delivery=ps ps=3,10.0.0.100,02:00:00:00:00:64 max_width=16 "
                   "lanes=16 worker=0,0,10.0.0.9,02:00:00:00:00:09\n");
  // The listed line is itself a valid 'job add' after removal.
  ok(cp, "job del 7");
  ok(cp, "job add " + line.substr(0, line.size() - 1));
  ok(cp, "job del 7");
  ok(cp, "job del 9");
  EXPECT_EQ(ok(cp, "job list"), "");
  EXPECT_TRUE(contains(err(cp, "job del 9"), "no job 9"));
}

// PROTOCOL.md §6: a job whose rows cannot hold its slots' windows is
// added, and the answer warns with the numbers; a job whose max_width is
// below w_min says "PS only"; a job that fits says nothing.
TEST_F(AgqCommandsTest, JobAddWarnsWhenRowsCannotHoldTheWindows) {
  const std::string w0 = " worker=0,1,10.0.0.1,02:00:00:00:00:01";
  // 8 slots in 2 rows: 4 per row; at 32 bits one window fills a row half.
  const std::string four = ok(cp, kJob7);
  EXPECT_EQ(four.rfind("job 7: warning: ", 0), 0u) << four;
  for (const char* part : {"4 slots per row (2^2, 8 slots in 2 rows)", "share 8 units per row half",
                           "max_width 32 bits (8 units)", "at most 1 of a row's 4 slots", "the rest go to the PS",
                           "rows = 8 hold every slot at 32 bits"})
    EXPECT_TRUE(contains(four, part)) << part << " in " << four;
  // max_width 16: two windows per row half, 4 slots per row still too many.
  const std::string two = ok(cp, "job add 3 workers=1 slots=8 rows=2 max_width=16" + w0);
  EXPECT_TRUE(contains(two, "at most 2 of a row's 4 slots")) << two;
  EXPECT_TRUE(contains(two, "rows = 4 hold every slot at 16 bits")) << two;
  // None of these jobs has a PS: what gets no window has nowhere to go.
  EXPECT_TRUE(contains(two, "this job has no PS (ps_port): a sequence that gets no window cannot complete")) << two;
  // Fits: 2 slots per row at 16 bits, or one slot per row at 32.
  EXPECT_EQ(ok(cp, "job add 4 workers=1 slots=8 rows=4 max_width=16" + w0), "");
  EXPECT_EQ(ok(cp, "job add 5 workers=1 slots=8 rows=8" + w0), "");
  // N = 5 (g = 3): w_min = 8 bits; max_width 4 can never be granted.
  std::string ws;
  for (int i = 0; i < 5; ++i)
    ws += " worker=" + std::to_string(i) + ",1,10.0.1." + std::to_string(i + 1) + ",02:00:00:00:01:0" +
          std::to_string(i + 1);
  const std::string ps = ok(cp, "job add 6 workers=5 slots=4 rows=4 max_width=4" + ws);
  EXPECT_EQ(ps.rfind("job 6: warning: PS only: max_width 4 bits is below w_min 8 bits", 0), 0u) << ps;
  // Every warned job was added.
  EXPECT_EQ(prog.jobs().size(), 5u);
}

TEST_F(AgqCommandsTest, ProgramRefusalsAreReported) {
  ok(cp, kJob7);
  // Same id again: refused by AgqProgram::add_job, message prefixed with the job.
  EXPECT_TRUE(contains(err(cp, kJob7), "error: job 7: "));
  // More slots than the switch has (1024): refused by the program too.
  EXPECT_TRUE(contains(err(cp, "job add 8 workers=1 slots=2048 rows=64 worker=0,1,10.0.0.1,02:00:00:00:00:01"),
                       "error: job 8: "));
}

TEST_F(AgqCommandsTest, ArgumentErrors) {
  const std::string w0 = " worker=0,1,10.0.0.1,02:00:00:00:00:01";
  const std::string w1 = " worker=1,2,10.0.0.2,02:00:00:00:00:02";
  struct Case {
    std::string cmd, what;
  } cases[] = {
      {"job", "missing arguments"},
      {"job list x", "too many arguments"},
      {"job frob", "unknown job subcommand"},
      {"job add", "missing arguments"},
      {"job add 0 workers=1 slots=1 rows=1" + w0, "id: 0 is out of range 1..65535"},
      {"job add x workers=1 slots=1 rows=1" + w0, "id: 'x' is not a number"},
      {"job add 1 slots=1 rows=1" + w0, "workers=... is required"},
      {"job add 1 workers=1 rows=1" + w0, "slots=... is required"},
      {"job add 1 workers=1 slots=1" + w0, "rows=... is required"},
      {"job add 1 workers=33 slots=1 rows=1" + w0, "workers: 33 is out of range 1..32"},
      {"job add 1 workers=1 workers=1 slots=1 rows=1" + w0, "workers given twice"},
      {"job add 1 workers=1 slots=8 rows=0" + w0, "rows: 0 is out of range 1..65536"},
      {"job add 1 workers=1 slots=1 rows=1 max_width=6" + w0, "not a multiple of 4"},
      {"job add 1 workers=1 slots=1 rows=1 max_width=40" + w0, "max_width: 40 is out of range 4..32"},
      {"job add 1 workers=1 slots=1 rows=1 delivery=bcast" + w0, "not multicast or ps"},
      {"job add 1 workers=1 slots=1 rows=1 lanes=24" + w0, "lanes 24 is not 32 or 16"},
      {"job add 1 workers=1 slots=1 rows=1 lanes=8" + w0, "lanes: 8 is out of range 16..32"},
      {"job add 1 workers=1 slots=1 rows=1 delivery=ps" + w0, "needs a PS"},
      {"job add 1 workers=1 slots=1 rows=1 ps=1,10.0.0.1" + w0, "ps: expected <port>,<ip>,<mac>"},
      {"job add 1 workers=1 slots=1 rows=1 ps=9,10.0.0.1,02:00:00:00:00:01" + w0, "port 9 does not exist (4 ports: 0..3)"},
      {"job add 1 workers=1 slots=1 rows=1 colour=red" + w0, "unknown key 'colour'"},
      {"job add 1 workers=1 slots=1 rows=1 worker" + w0, "'worker' is not key=value"},
      {"job add 1 workers=2 slots=1 rows=1" + w0, "1 workers listed, workers = 2"},
      {"job add 1 workers=2 slots=1 rows=1" + w0 + w0, "worker id 0 is listed twice"},
      {"job add 1 workers=1 slots=1 rows=1" + w1, "worker id 1 is out of range 0..0"},
      {"job add 1 workers=1 slots=1 rows=1 worker=0,1,10.0.0,02:00:00:00:00:01", "not an IPv4 address"},
      {"job add 1 workers=1 slots=1 rows=1 worker=0,1,10.0.0.1,02:00:00:00:00", "not a MAC address"},
      {"job add 1 workers=1 slots=1 rows=1 worker=0,1,10.0.0.1,01:00:5e:00:00:01", "multicast"},
      {"job add 1 workers=1 slots=1 rows=1 worker=0,7,10.0.0.1,02:00:00:00:00:01", "port 7 does not exist"},
      {"job add 1 workers=1 slots=1 rows=1 worker=0,1,10.0.0.1", "worker: expected <id>,<port>,<ip>,<mac>"},
      {"job del", "missing arguments"},
      {"job del 1 2", "too many arguments"},
      {"job del 0", "out of range"},
  };
  for (const auto& c : cases) {
    const std::string r = err(cp, c.cmd);
    EXPECT_TRUE(contains(r, c.what)) << c.cmd << " -> " << r;
  }
  EXPECT_EQ(ok(cp, "job list"), "");  // nothing half-added
}

TEST_F(ClassicCommandsTest, JobsNeedTheAgqPipeline) {
  for (const char* c : {"job list", "job del 1", "job add 1 workers=1 slots=1 rows=1"})
    EXPECT_TRUE(contains(err(cp, c), "jobs need the agq pipeline (this switch runs \"classic\"")) << c;
}

TEST_F(ClassicCommandsTest, DropSetListClear) {
  ok(cp, "drop 1 rx 0.25");
  ok(cp, "drop 3 tx 1");
  ok(cp, "drop 0 tx 1e-3");
  EXPECT_DOUBLE_EQ(dp.sim.get(1, SimDir::Rx), 0.25);
  EXPECT_EQ(dp.sim.threshold(3, SimDir::Tx), DropSim::kOne);
  EXPECT_EQ(dp.sim.threshold(1, SimDir::Tx), 0u);
  EXPECT_EQ(ok(cp, "drop list"),
            "port  rx_probability  tx_probability  rx_drops  tx_drops\n"
            "0     0               0.001           0         1\n"
            "1     0.25            0               10        11\n"
            "2     0               0               20        21\n"
            "3     0               1               30        31\n");
  ok(cp, "drop 3 tx 0");
  EXPECT_EQ(dp.sim.threshold(3, SimDir::Tx), 0u);
  ok(cp, "drop clear");
  for (tna::PortId p = 0; p < 4; ++p)
    for (SimDir d : {SimDir::Rx, SimDir::Tx}) EXPECT_EQ(dp.sim.threshold(p, d), 0u);
}

TEST_F(ClassicCommandsTest, DropErrors) {
  struct Case {
    const char* cmd;
    const char* what;
  } cases[] = {
      {"drop", "missing arguments"},
      {"drop 1", "missing arguments"},
      {"drop 1 rx", "missing arguments"},
      {"drop 1 rx 0.5 x", "too many arguments"},
      {"drop list x", "too many arguments"},
      {"drop clear x", "too many arguments"},
      {"drop 4 rx 0.5", "port 4 does not exist"},
      {"drop x rx 0.5", "not a port number"},
      {"drop 1 both 0.5", "direction must be rx or tx"},
      {"drop 1 rx 1.5", "not a probability"},
      {"drop 1 rx -0.1", "not a probability"},
      {"drop 1 rx nan", "not a probability"},
      {"drop 1 rx inf", "not a probability"},
      {"drop 1 rx 0.5x", "not a probability"},
      {"drop 1 rx 50%", "not a probability"},
  };
  for (const auto& c : cases) {
    const std::string r = err(cp, c.cmd);
    EXPECT_TRUE(contains(r, c.what)) << c.cmd << " -> " << r;
    EXPECT_TRUE(contains(r, "usage: drop <port> <rx|tx>")) << c.cmd << " -> " << r;
  }
  for (tna::PortId p = 0; p < 4; ++p) EXPECT_EQ(dp.sim.threshold(p, SimDir::Rx), 0u);
}

}  // namespace
}  // namespace agq::control
