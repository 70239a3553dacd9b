// The configuration of pipeline "agq": [agq], [[job]] and [[job.worker]]
// load into JobSpecs; every mistake names the file, the line and the field;
// make_program builds the agq program (the fast one) and install_entries registers the jobs,
// an add_job refusal pointing at the job's line.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>

#include "control/config.hpp"
#include "pipeline/agq/agq_program.hpp"
#include "tna/pre.hpp"
#include "../../p4src/agq/agq_limits.h"

namespace agq::control {
namespace {

namespace fs = std::filesystem;
using pipeline::agq::AgqSwitchProgram;
using pipeline::agq::ResultDelivery;

const fs::path kSourceDir = AGQ_SOURCE_DIR;  // set by tests/CMakeLists.txt

class ConfigAgqTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/agq-config-agq-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& text) {
    const fs::path p = dir_ / "c.toml";
    std::ofstream(p) << text;
    return p.string();
  }

  void expect_error(const std::string& text, int line, const std::string& field, const std::string& what = "") {
    const std::string path = write(text);
    try {
      load_config(path);
      ADD_FAILURE() << "no error for:\n" << text;
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(path + ":" + std::to_string(line) + ": ", 0), 0u) << msg;
      EXPECT_NE(msg.find(field), std::string::npos) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
    }
  }

  fs::path dir_;
};

// One job of two workers; line numbers below count from here.
const std::string kHead =
    "[switch]\n"                   // 1
    "pipeline = \"agq\"\n";        // 2
const std::string kJob =
    "[[job]]\n"                    // 3
    "id = 7\n"                     // 4
    "workers = 2\n"                // 5
    "slots = 8\n"                  // 6
    "rows = 2\n";                  // 7
const std::string kW0 =
    "[[job.worker]]\n"             // 8
    "id = 0\n"                     // 9
    "port = 1\n"                   // 10
    "ip = \"10.0.0.1\"\n"          // 11
    "mac = \"02:00:00:00:00:01\"\n";  // 12
const std::string kW1 =
    "[[job.worker]]\n"             // 13
    "id = 1\n"                     // 14
    "port = 2\n"                   // 15
    "ip = \"10.0.0.2\"\n"          // 16
    "mac = \"02:00:00:00:00:02\"\n";  // 17
const std::string kGood = kHead + kJob + kW0 + kW1;

TEST_F(ConfigAgqTest, ShippedExampleLoads) {
  const SwitchConfig c = load_config((kSourceDir / "conf/agq.toml").string());
  EXPECT_EQ(c.pipeline, "agq");
  EXPECT_EQ(c.agq.total_rows, 4096u);
  EXPECT_EQ(c.agq.total_slots, 32768u);
  ASSERT_EQ(c.jobs.size(), 2u);
  const auto& j1 = c.jobs[0].spec;
  EXPECT_EQ(j1.job_id, 1);
  EXPECT_EQ(j1.num_workers, 2);
  EXPECT_EQ(j1.slots, 64u);
  EXPECT_EQ(j1.rows, 16u);
  EXPECT_EQ(j1.delivery, ResultDelivery::Multicast);
  EXPECT_EQ(j1.ps_port, 0);
  EXPECT_EQ(j1.ps_ipv4, 0x0A020264u);
  EXPECT_EQ(j1.ps_mac, (proto::Mac{2, 0, 0, 0, 0, 0x64}));
  EXPECT_EQ(j1.max_width, 32);
  ASSERT_EQ(j1.workers.size(), 2u);
  EXPECT_EQ(j1.workers[1].worker_id, 1);
  EXPECT_EQ(j1.workers[1].port, 2);
  EXPECT_EQ(j1.workers[1].ipv4, 0x0A020202u);
  EXPECT_EQ(j1.workers[1].mac, (proto::Mac{2, 0, 0, 0, 1, 2}));
  EXPECT_EQ(c.jobs[1].spec.max_width, 16);
  EXPECT_EQ(c.jobs[1].spec.workers[0].port, 3);
  EXPECT_NO_THROW(check_ports(c, 5));
  EXPECT_THROW(check_ports(c, 4), ConfigError);
}

TEST_F(ConfigAgqTest, DefaultsAndOrder) {
  // Workers may be listed in any order; they are kept sorted by id.
  const SwitchConfig c = load_config(write(kHead + kJob + kW1 + kW0));
  EXPECT_EQ(c.agq.total_rows, pipeline::agq::AgqConfig{}.total_rows);
  EXPECT_EQ(c.agq.total_slots, pipeline::agq::AgqConfig{}.total_slots);
  ASSERT_EQ(c.jobs.size(), 1u);
  const auto& j = c.jobs[0].spec;
  EXPECT_EQ(c.jobs[0].line, 3);
  EXPECT_EQ(j.delivery, ResultDelivery::Multicast);
  EXPECT_EQ(j.ps_port, tna::kNoPort);
  EXPECT_EQ(j.max_width, 32);
  EXPECT_EQ(j.workers[0].worker_id, 0);
  EXPECT_EQ(j.workers[0].port, 1);
  // Worker ports are remembered for check_ports with their field names.
  ASSERT_EQ(c.port_refs.size(), 2u);
  EXPECT_EQ(c.port_refs[0].field, "job[0].worker[0].port");
  EXPECT_EQ(c.port_refs[0].line, 10);
}

// PROTOCOL.md §6: the job-add warning at config load, with file and line;
// a job that fits has none.
TEST_F(ConfigAgqTest, JobsWhoseRowsCannotHoldTheirWindowsWarn) {
  const std::string path = write(kGood);  // 8 slots in 2 rows: 4 per row at 32 bits
  const SwitchConfig c = load_config(path);
  ASSERT_EQ(c.jobs.size(), 1u);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_EQ(c.warnings[0].rfind(path + ":3: job[0]: job 7: warning: 4 slots per row", 0), 0u) << c.warnings[0];
  EXPECT_NE(c.warnings[0].find("at most 1 of a row's 4 slots"), std::string::npos) << c.warnings[0];
  const std::string fits = kHead + "[[job]]\nid = 7\nworkers = 2\nslots = 8\nrows = 8\n" + kW0 + kW1;
  EXPECT_TRUE(load_config(write(fits)).warnings.empty());
}

TEST_F(ConfigAgqTest, LaneProfileAndEpoch) {
  // lanes = 32 by default; 16 is the other profile; anything else names the line.
  EXPECT_EQ(load_config(write(kGood)).jobs[0].spec.lanes, 32);
  EXPECT_EQ(load_config(write(kHead + kJob + "lanes = 16\n" + kW0 + kW1)).jobs[0].spec.lanes, 16);
  expect_error(kHead + kJob + "lanes = 24\n" + kW0 + kW1, 8, "job[0].lanes", "not 32 or 16");
  expect_error(kHead + kJob + "lanes = 64\n" + kW0 + kW1, 8, "job[0].lanes", "out of range 16..32");
  expect_error(kHead + kJob + "lanes = \"16\"\n" + kW0 + kW1, 8, "job[0].lanes", "expected an integer");
  // [switch] epoch: fixed when given, else a random nonzero one.
  const SwitchConfig fixed = load_config(write("[switch]\npipeline = \"agq\"\nepoch = 4660\n"));
  EXPECT_EQ(fixed.epoch, 4660);
  EXPECT_TRUE(fixed.epoch_fixed);
  const SwitchConfig random = load_config(write(kGood));
  EXPECT_NE(random.epoch, 0);
  EXPECT_FALSE(random.epoch_fixed);
  expect_error("[switch]\npipeline = \"agq\"\nepoch = 0\n", 3, "switch.epoch", "out of range 1..65535");
}

TEST_F(ConfigAgqTest, NoJobsIsFine) {
  const SwitchConfig c = load_config(write(kHead + "[agq]\ntotal_rows = 16\ntotal_slots = 64\n"));
  EXPECT_TRUE(c.jobs.empty());
  EXPECT_EQ(c.agq.total_rows, 16u);
  EXPECT_EQ(c.agq.total_slots, 64u);
}

TEST_F(ConfigAgqTest, PsDelivery) {
  const std::string ps = "delivery = \"ps\"\nps_port = 0\nps_ip = \"10.0.0.100\"\nps_mac = \"02:00:00:00:00:64\"\n";
  const SwitchConfig c = load_config(write(kHead + kJob + ps + kW0 + kW1));
  const auto& j = c.jobs[0].spec;
  EXPECT_EQ(j.delivery, ResultDelivery::Ps);
  EXPECT_EQ(j.ps_port, 0);
  EXPECT_EQ(j.ps_ipv4, 0x0A000064u);
}

TEST_F(ConfigAgqTest, UnknownKeys) {
  expect_error(kHead + "[agq]\ntotal_row = 5\n", 4, "agq.total_row", "unknown key");
  expect_error(kHead + kJob + "worker_count = 2\n" + kW0 + kW1, 8, "job[0].worker_count", "unknown key");
  expect_error(kGood + "vlan = 3\n", 18, "job[0].worker[1].vlan", "unknown key");
}

TEST_F(ConfigAgqTest, WrongTypes) {
  expect_error(kHead + "[[job]]\nid = \"7\"\n", 4, "job[0].id", "expected an integer");
  expect_error(kHead + kJob + "delivery = 1\n" + kW0 + kW1, 8, "job[0].delivery", "expected a string");
  expect_error(kHead + kJob + "max_width = 16.0\n" + kW0 + kW1, 8, "job[0].max_width", "got a float");
  expect_error("job = 1\n" + kHead, 1, "job", "array of tables");
  expect_error("agq = 1\n" + kHead, 1, "agq", "expected a table");
  expect_error(kHead + kJob + "worker = 1\n", 8, "worker", "array of tables");
}

TEST_F(ConfigAgqTest, Ranges) {
  expect_error(kHead + "[[job]]\nid = 0\n", 4, "job[0].id", "out of range 1..65535");
  expect_error(kHead + "[[job]]\nid = 65536\n", 4, "job[0].id", "out of range");
  expect_error(kHead + "[[job]]\nid = 1\nworkers = 33\n", 5, "job[0].workers", "out of range 1..32");
  expect_error(kHead + "[[job]]\nid = 1\nworkers = 0\n", 5, "job[0].workers", "out of range");
  expect_error(kHead + "[[job]]\nid = 1\nworkers = 1\nslots = 0\n", 6, "job[0].slots", "out of range");
  expect_error(kHead + "[[job]]\nid = 1\nworkers = 1\nslots = 65537\n", 6, "job[0].slots", "out of range 1..65536");
  expect_error(kHead + "[[job]]\nid = 1\nworkers = 1\nslots = 8\nrows = 0\n", 7, "job[0].rows", "out of range 1..65536");
  expect_error(kHead + kJob + "max_width = 36\n" + kW0 + kW1, 8, "job[0].max_width", "out of range 4..32");
  expect_error(kHead + kJob + "max_width = 10\n" + kW0 + kW1, 8, "job[0].max_width", "multiple of 4");
  expect_error(kHead + kJob + "delivery = \"unicast\"\n" + kW0 + kW1, 8, "job[0].delivery", "\"multicast\" or \"ps\"");
  expect_error(kHead + "[agq]\ntotal_rows = 0\n", 4, "agq.total_rows", "out of range");
  expect_error(kHead + "[agq]\ntotal_slots = 2000000\n", 4, "agq.total_slots", "out of range");
  expect_error(kHead + kJob + kW0 + "[[job.worker]]\nid = 2\n", 14, "job[0].worker[1].id", "out of range 0..1");
  expect_error(kHead + kJob + kW0 + kW1 + "[[job.worker]]\nid = 1\n", 18, "job[0].worker", "3 [[job.worker]] tables, but workers = 2 (line 5)");
  expect_error(kHead + kJob + kW0, 8, "job[0].worker", "1 [[job.worker]] tables");
  expect_error(kHead + kJob, 5, "job[0].worker", "0 [[job.worker]] tables");
  expect_error(kHead + kJob + kW0 + "[[job.worker]]\nid = 1\nport = 65535\n", 15, "job[0].worker[1].port",
               "out of range 0..65534");
}

// What the compiled Tofino program cannot hold (p4src/agq/agq_limits.h, the
// sizes setup_agq.py checks too) is refused with the limit and its name.
TEST_F(ConfigAgqTest, BeyondTheTofinoProgramsSizes) {
  expect_error(kHead + "[agq]\ntotal_rows = " + std::to_string(AGQ_ROWS + 1) + "\n", 4, "agq.total_rows",
               "row registers hold " + std::to_string(AGQ_ROWS) + " (p4src/agq/agq_limits.h AGQ_ROWS)");
  expect_error(kHead + "[agq]\ntotal_slots = " + std::to_string(AGQ_SLOTS + 1) + "\n", 4, "agq.total_slots",
               "slot registers hold " + std::to_string(AGQ_SLOTS) + " (p4src/agq/agq_limits.h AGQ_SLOTS)");
  // Workers summed over jobs: full 32-worker jobs until one more than worker_t holds.
  std::string text = kHead;
  const int jobs = AGQ_MAX_WORKERS / 32 + 1;
  int line = 3, last_job_line = 0;
  for (int j = 0; j < jobs; ++j) {
    last_job_line = line;
    text += "[[job]]\nid = " + std::to_string(j + 1) + "\nworkers = 32\nslots = 1\nrows = 1\n";
    line += 5;
    for (int w = 0; w < 32; ++w) {
      text += "[[job.worker]]\nid = " + std::to_string(w) + "\nport = 1\nip = \"10.0." + std::to_string(j % 250) + "." +
              std::to_string(w + 1) + "\"\nmac = \"02:00:00:00:00:01\"\n";
      line += 5;
    }
  }
  expect_error(text, last_job_line, "job[" + std::to_string(jobs - 1) + "].workers",
               "worker_t holds " + std::to_string(AGQ_MAX_WORKERS) + " (p4src/agq/agq_limits.h AGQ_MAX_WORKERS)");
  // Jobs: one more than job_t holds (one worker each).
  text = kHead;
  line = 3;
  for (int j = 0; j <= AGQ_MAX_JOBS; ++j) {
    last_job_line = line;
    text += "[[job]]\nid = " + std::to_string(j + 1) +
            "\nworkers = 1\nslots = 1\nrows = 1\n[[job.worker]]\nid = 0\nport = 1\nip = \"10.0.0.1\"\n"
            "mac = \"02:00:00:00:00:01\"\n";
    line += 10;
  }
  expect_error(text, last_job_line, "job[" + std::to_string(AGQ_MAX_JOBS) + "]",
               "job_t holds " + std::to_string(AGQ_MAX_JOBS) + " (p4src/agq/agq_limits.h AGQ_MAX_JOBS)");
}

TEST_F(ConfigAgqTest, MissingRequired) {
  expect_error(kHead + "[[job]]\nworkers = 2\n", 3, "job[0].id", "missing");
  expect_error(kHead + "[[job]]\nid = 1\nslots = 2\n", 3, "job[0].workers", "missing");
  expect_error(kHead + "[[job]]\nid = 1\nworkers = 2\nrows = 2\n", 3, "job[0].slots", "missing");
  expect_error(kHead + "[[job]]\nid = 1\nworkers = 2\nslots = 2\n", 3, "job[0].rows", "missing");
  expect_error(kHead + kJob + "[[job.worker]]\nid = 0\nport = 1\nip = \"10.0.0.1\"\n" + kW1, 8,
               "job[0].worker[0].mac", "missing");
  expect_error(kHead + kJob + "delivery = \"ps\"\n" + kW0 + kW1, 8, "job[0].delivery", "needs ps_port, ps_ip and ps_mac");
  expect_error(kHead + kJob + "ps_port = 0\n" + kW0 + kW1, 3, "job[0].ps_ip", "missing");
}

TEST_F(ConfigAgqTest, BadAddresses) {
  expect_error(kHead + kJob + "[[job.worker]]\nid = 0\nport = 1\nip = \"10.0.0\"\n" + kW1, 11,
               "job[0].worker[0].ip", "not an IPv4 address");
  expect_error(kHead + kJob + "[[job.worker]]\nid = 0\nport = 1\nip = \"10.0.0.1\"\nmac = \"01:00:5e:00:00:01\"\n" + kW1,
               12, "job[0].worker[0].mac", "multicast");
  expect_error(kHead + kJob + "ps_port = 0\nps_ip = \"10.0.0.100\"\nps_mac = \"02:00:00:00:00\"\n", 10, "job[0].ps_mac",
               "not a MAC address");
}

TEST_F(ConfigAgqTest, Duplicates) {
  expect_error(kHead + kJob + kW0 + "[[job.worker]]\nid = 0\n", 14, "job[0].worker[1].id",
               "duplicate worker id 0 (first at line 9)");
  // A second job with the same id: reported at its id line.
  expect_error(kGood + kJob + kW0 + kW1, 19, "job[1].id", "duplicate job id 7 (first at line 4)");
}

TEST_F(ConfigAgqTest, SectionsOfTheOtherPipeline) {
  expect_error("[classic]\nps_port = 0\nworker_ports = [1]\n[agq]\ntotal_rows = 4\n", 4, "agq",
               "is for pipeline \"agq\"");
  expect_error("[classic]\nps_port = 0\nworker_ports = [1]\n" + kJob, 4, "job[0]", "is for pipeline \"agq\"");
  expect_error(kHead + "[classic]\nps_port = 0\nworker_ports = [1]\n", 3, "classic", "is for pipeline \"classic\"");
}

TEST_F(ConfigAgqTest, CheckPortsNamesWorkerAndPs) {
  const std::string ps = "ps_port = 9\nps_ip = \"10.0.0.100\"\nps_mac = \"02:00:00:00:00:64\"\n";
  const std::string path = write(kHead + kJob + ps + kW0 + kW1);
  const SwitchConfig c = load_config(path);
  EXPECT_NO_THROW(check_ports(c, 10));
  try {
    check_ports(c, 3);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), path + ":8: job[0].ps_port: port 9 does not exist (3 ports: 0..2)");
  }
  try {
    check_ports(c, 2);  // the PS still comes first
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("job[0].ps_port"), std::string::npos) << e.what();
  }
}

TEST_F(ConfigAgqTest, MakeProgramAndInstallJobs) {
  const SwitchConfig c = load_config((kSourceDir / "conf/agq.toml").string());
  tna::ReplicationEngine pre;
  auto prog = make_program(c, pre);
  ASSERT_TRUE(prog);
  EXPECT_EQ(prog->name(), "agq");
  install_entries(c, *prog);
  auto& agq = static_cast<AgqSwitchProgram&>(*prog);
  std::vector<pipeline::agq::JobSpec> jobs = agq.jobs();
  ASSERT_EQ(jobs.size(), 2u);
  std::sort(jobs.begin(), jobs.end(), [](auto& a, auto& b) { return a.job_id < b.job_id; });
  EXPECT_EQ(jobs[0].job_id, 1);
  EXPECT_EQ(jobs[1].job_id, 2);
  EXPECT_EQ(jobs[1].max_width, 16);
  int routes = 0;
  prog->forwarding().for_each_route([&](uint32_t, tna::PortId) { ++routes; });
  EXPECT_EQ(routes, 1);
}

// docs/DEPLOY.md's rack: PS on port 0, four workers on 1..4, uplink on 5,
// every host port a 10 Gbit/s link; the job installs on the agq program.
TEST_F(ConfigAgqTest, ShippedRackExampleLoads) {
  const SwitchConfig c = load_config((kSourceDir / "conf/rack.toml").string());
  EXPECT_EQ(c.pipeline, "agq");
  EXPECT_TRUE(c.job_listen.empty());
  ASSERT_EQ(c.jobs.size(), 1u);
  const auto& j = c.jobs[0].spec;
  EXPECT_EQ(j.job_id, 1);
  EXPECT_EQ(j.num_workers, 4);
  EXPECT_EQ(j.ps_port, 0);
  EXPECT_EQ(j.ps_ipv4, 0x0A030064u);
  ASSERT_EQ(j.workers.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(j.workers[i].worker_id, i);
    EXPECT_EQ(j.workers[i].port, i + 1);
    EXPECT_EQ(j.workers[i].ipv4, 0x0A030001u + uint32_t(i));
  }
  ASSERT_EQ(c.links.size(), 5u);
  for (const auto& l : c.links) {
    EXPECT_LE(l.port, 4);
    EXPECT_EQ(l.rate_bps, 10'000'000'000ull);
    EXPECT_EQ(l.queue_packets, 1000u);
    EXPECT_TRUE(l.ecn);
    EXPECT_EQ(l.ecn_packets, 65u);
  }
  EXPECT_EQ(c.routes.size(), 6u);
  EXPECT_EQ(c.macs.size(), 6u);
  EXPECT_EQ(c.arp_proxy.size(), 6u);
  EXPECT_NO_THROW(check_ports(c, 6));
  EXPECT_THROW(check_ports(c, 5), ConfigError);
  tna::ReplicationEngine pre;
  auto prog = make_program(c, pre);
  ASSERT_TRUE(prog);
  EXPECT_NO_THROW(install_entries(c, *prog));
  EXPECT_EQ(static_cast<AgqSwitchProgram&>(*prog).jobs().size(), 1u);
}

TEST_F(ConfigAgqTest, AddJobRefusalNamesTheJobLine) {
  // Two jobs of 2 rows each in a switch of 3 rows: the second does not fit.
  std::string second = kJob + kW0 + kW1;
  second.replace(second.find("id = 7"), 6, "id = 8");
  const std::string path = write(kHead + "[agq]\ntotal_rows = 3\n" + kJob + kW0 + kW1 + second);
  const SwitchConfig c = load_config(path);
  ASSERT_EQ(c.jobs.size(), 2u);
  tna::ReplicationEngine pre;
  auto prog = make_program(c, pre);
  try {
    install_entries(c, *prog);
    FAIL() << "the second job fits in 3 rows?";
  } catch (const ConfigError& e) {
    const std::string prefix = path + ":" + std::to_string(c.jobs[1].line) + ": job[1]: job 8: ";
    EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace agq::control
