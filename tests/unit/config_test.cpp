// The configuration file: the shipped example loads, and every kind of
// mistake is reported with the file, the right line and the field name.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "control/config.hpp"
#include "pipeline/classic/classic_program.hpp"
#include "tna/pre.hpp"

namespace agq::control {
namespace {

namespace fs = std::filesystem;

// The source tree, found from this file's own (absolute) path.
const fs::path kSourceDir = AGQ_SOURCE_DIR;  // set by tests/CMakeLists.txt

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/agq-config-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& text, const std::string& name = "c.toml") {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }

  // Loads `text` and expects a ConfigError "FILE:LINE: ..." that also
  // mentions `field` and `what`.
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

// A minimal valid file; line numbers in the tests below count from here.
const std::string kGood =
    "[switch]\n"             // 1
    "pipeline = \"classic\"\n"  // 2
    "[classic]\n"            // 3
    "ps_port = 0\n"          // 4
    "worker_ports = [1, 2]\n";  // 5

TEST_F(ConfigTest, ShippedExampleLoads) {
  const SwitchConfig c = load_config((kSourceDir / "conf/classic.toml").string());
  EXPECT_EQ(c.pipeline, "classic");
  EXPECT_EQ(c.ctl_socket, "/run/agq-switch/agq-switch.sock");
  EXPECT_EQ(c.classic.ps_port, 0);
  EXPECT_EQ(c.classic.worker_ports, (std::vector<tna::PortId>{1, 2}));
  EXPECT_EQ(c.classic.register_capacity, 35000u);
  EXPECT_TRUE(c.forwarding.learning);
  EXPECT_EQ(c.forwarding.ageing_ns, 300ull * 1000000000ull);
  ASSERT_EQ(c.routes.size(), 3u);
  EXPECT_EQ(c.routes[0].ip, 0x0A020201u);
  EXPECT_EQ(c.routes[0].port, 1);
  ASSERT_EQ(c.macs.size(), 2u);
  EXPECT_EQ(c.macs[0].mac, (proto::Mac{2, 0, 0, 0, 0, 1}));
  ASSERT_EQ(c.arp_proxy.size(), 2u);
  EXPECT_EQ(c.arp_proxy[1].ip, 0x0A020202u);
  EXPECT_NO_THROW(check_ports(c, 3));
}

TEST_F(ConfigTest, MinimalFileGetsDefaults) {
  const SwitchConfig c = load_config(write("[classic]\nps_port = 3\nworker_ports = [0]\n"));
  EXPECT_EQ(c.pipeline, "classic");
  EXPECT_TRUE(c.ctl_socket.empty());
  EXPECT_EQ(c.classic.register_capacity, 35000u);
  EXPECT_TRUE(c.routes.empty());
  // ps_port and the worker port are remembered for check_ports.
  ASSERT_EQ(c.port_refs.size(), 2u);
  EXPECT_EQ(c.port_refs[0].field, "classic.ps_port");
  EXPECT_EQ(c.port_refs[0].line, 2);
  EXPECT_EQ(c.port_refs[1].field, "classic.worker_ports[0]");
}

TEST_F(ConfigTest, L2Settings) {
  const SwitchConfig c = load_config(write(kGood + "[l2]\nlearning = false\nageing_s = 0\n"));
  EXPECT_FALSE(c.forwarding.learning);
  EXPECT_EQ(c.forwarding.ageing_ns, 0u);
}

TEST_F(ConfigTest, MissingFileSaysCannotOpen) {
  const std::string p = (dir_ / "absent.toml").string();
  try {
    load_config(p);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), p + ": cannot open: No such file or directory");
  }
}

TEST_F(ConfigTest, DirectoryIsNotAFile) {
  try {
    load_config(dir_.string());
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos) << e.what();
  }
}

TEST_F(ConfigTest, SyntaxErrorHasLine) {
  expect_error(kGood + "[l2]\nlearning = tru\n", 7, "syntax");
  expect_error(kGood + "[classic]\n", 6, "syntax");  // table defined twice
}

TEST_F(ConfigTest, UnknownSectionAndKeys) {
  expect_error(kGood + "[l3]\nx = 1\n", 6, "l3", "unknown");
  expect_error(kGood + "[l2]\nlearnin = true\n", 7, "l2.learnin", "unknown key");
  expect_error("[switch]\npipelin = \"classic\"\n", 2, "switch.pipelin", "unknown key");
  expect_error(kGood + "psport = 1\n", 6, "classic.psport", "unknown key");
  expect_error(kGood + "[[route]]\nip = \"10.0.0.1\"\nport = 1\nprot = 2\n", 9, "route[0].prot", "unknown key");
  expect_error(kGood + "[[mac]]\nmac = \"02:00:00:00:00:01\"\nport = 1\nvlan = 2\n", 9, "mac[0].vlan");
  expect_error(kGood + "[[arp_proxy]]\nip = \"10.0.0.1\"\nmax = \"02:00:00:00:00:01\"\n", 8, "arp_proxy[0].max");
  expect_error(kGood + "[[routes]]\nip = \"10.0.0.1\"\n", 6, "routes", "unknown");
}

TEST_F(ConfigTest, WrongTypes) {
  expect_error("[classic]\nps_port = \"zero\"\nworker_ports = [1]\n", 2, "classic.ps_port", "expected an integer");
  expect_error("[classic]\nps_port = 1.0\nworker_ports = [1]\n", 2, "classic.ps_port", "got a float");
  expect_error("[classic]\nps_port = 0\nworker_ports = 1\n", 3, "classic.worker_ports", "expected an array");
  expect_error("[classic]\nps_port = 0\nworker_ports = [1, \"2\"]\n", 3, "classic.worker_ports[1]", "integer");
  expect_error(kGood + "[l2]\nlearning = 1\n", 7, "l2.learning", "true or false");
  expect_error(kGood + "[l2]\nageing_s = \"5m\"\n", 7, "l2.ageing_s", "integer");
  expect_error("[switch]\npipeline = 1\n", 2, "switch.pipeline", "expected a string");
  expect_error("switch = 1\n", 1, "switch", "expected a table");
  expect_error("route = 1\n" + kGood, 1, "route", "array of tables");
  expect_error(kGood + "[[route]]\nip = 167772161\nport = 1\n", 7, "route[0].ip", "expected a string");
}

TEST_F(ConfigTest, MissingRequired) {
  expect_error("[classic]\nworker_ports = [1]\n", 1, "classic.ps_port", "missing");
  expect_error("[classic]\nps_port = 0\n", 1, "classic.worker_ports", "missing");
  expect_error("[switch]\npipeline = \"classic\"\n", 2, "classic", "missing section");
  expect_error(kGood + "[[route]]\nip = \"10.0.0.1\"\n", 6, "route[0].port", "missing");
  expect_error(kGood + "[[arp_proxy]]\nmac = \"02:00:00:00:00:01\"\n", 6, "arp_proxy[0].ip", "missing");
}

TEST_F(ConfigTest, PortRanges) {
  expect_error("[classic]\nps_port = 65535\nworker_ports = [1]\n", 2, "classic.ps_port", "out of range 0..65534");
  expect_error("[classic]\nps_port = -1\nworker_ports = [1]\n", 2, "classic.ps_port", "out of range");
  expect_error(kGood + "[[route]]\nip = \"10.0.0.1\"\nport = 70000\n", 8, "route[0].port", "out of range");
}

TEST_F(ConfigTest, WorkerPortRules) {
  expect_error("[classic]\nps_port = 0\nworker_ports = []\n", 3, "classic.worker_ports", "at least one");
  expect_error("[classic]\nps_port = 1\nworker_ports = [\n  2,\n  1,\n]\n", 5, "classic.worker_ports[1]",
               "also the ps_port (line 2)");
  expect_error("[classic]\nps_port = 0\nworker_ports = [1, 1]\n", 3, "classic.worker_ports[1]", "twice");
}

TEST_F(ConfigTest, OtherRanges) {
  expect_error(kGood + "register_capacity = 0\n", 6, "classic.register_capacity", "out of range 1..65536");
  expect_error(kGood + "register_capacity = 65537\n", 6, "classic.register_capacity");
  expect_error(kGood + "[l2]\nageing_s = -5\n", 7, "l2.ageing_s", "out of range");
  expect_error("[switch]\nctl_socket = \"\"\n", 2, "switch.ctl_socket", "empty");
}

TEST_F(ConfigTest, UnknownPipeline) {
  expect_error("[switch]\npipeline = \"tofino\"\n", 2, "switch.pipeline", "unknown pipeline \"tofino\" (known: classic, agq)");
}

TEST_F(ConfigTest, BadAddresses) {
  for (const char* ip : {"10.2.2", "10.2.2.256", "10.2.2.1 ", "a.b.c.d", "", "10.2.2.1/32", "1.2.3.4.5"})
    expect_error(kGood + "[[route]]\nip = \"" + ip + "\"\nport = 1\n", 7, "route[0].ip", "not an IPv4 address");
  for (const char* mac : {"02:00:00:00:00", "2:0:0:0:0:1", "02-00-00-00-00-01", "02:00:00:00:00:0g", "02:00:00:00:00:001"})
    expect_error(kGood + "[[mac]]\nmac = \"" + mac + "\"\nport = 1\n", 7, "mac[0].mac", "not a MAC address");
  expect_error(kGood + "[[arp_proxy]]\nip = \"10.0.0.1\"\nmac = \"zz\"\n", 8, "arp_proxy[0].mac", "not a MAC");
  expect_error(kGood + "[[mac]]\nmac = \"01:00:5e:00:00:01\"\nport = 1\n", 7, "mac[0].mac", "multicast");
}

TEST_F(ConfigTest, Duplicates) {
  const std::string r = "[[route]]\nip = \"10.0.0.1\"\nport = 1\n";
  expect_error(kGood + r + r, 10, "route[1].ip", "duplicate route for 10.0.0.1 (first at line 7)");
  const std::string m = "[[mac]]\nmac = \"02:00:00:00:00:01\"\nport = 1\n";
  expect_error(kGood + m + m, 10, "mac[1].mac", "first at line 7");
  const std::string a = "[[arp_proxy]]\nip = \"10.0.0.1\"\nmac = \"02:00:00:00:00:01\"\n";
  expect_error(kGood + a + a, 10, "arp_proxy[1].ip", "duplicate");
}

TEST_F(ConfigTest, CheckPortsNamesLineAndField) {
  const std::string path = write(kGood + "[[route]]\nip = \"10.0.0.1\"\nport = 1\n"
                                          "[[route]]\nip = \"10.0.0.2\"\nport = 7\n");
  const SwitchConfig c = load_config(path);
  EXPECT_NO_THROW(check_ports(c, 8));
  try {
    check_ports(c, 3);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), path + ":11: route[1].port: port 7 does not exist (3 ports: 0..2)");
  }
  try {
    check_ports(c, 2);  // worker port 2 comes first in the file
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              path + ":5: classic.worker_ports[1]: port 2 does not exist (2 ports: 0..1)");
  }
  EXPECT_THROW(check_ports(c, 0), ConfigError);
}

TEST_F(ConfigTest, MakeProgramAndInstallEntries) {
  const SwitchConfig c = load_config((kSourceDir / "conf/classic.toml").string());
  tna::ReplicationEngine pre;
  auto prog = make_program(c, pre);
  ASSERT_TRUE(prog);
  EXPECT_EQ(prog->name(), "classic");
  EXPECT_EQ(pre.member_ports(pipeline::classic::ClassicProgram::kWorkerGroup), (std::vector<tna::PortId>{1, 2}));

  install_entries(c, *prog);
  std::map<uint32_t, tna::PortId> routes;
  prog->forwarding().for_each_route([&](uint32_t ip, tna::PortId p) { routes[ip] = p; });
  EXPECT_EQ(routes, (std::map<uint32_t, tna::PortId>{{0x0A020201, 1}, {0x0A020202, 2}, {0x0A020264, 0}}));
  int statics = 0;
  prog->forwarding().for_each_mac([&](const proto::Mac&, const pipeline::Forwarding::MacEntry& e) {
    statics += e.is_static;
  });
  EXPECT_EQ(statics, 2);
  int arps = 0;
  prog->forwarding().for_each_arp_proxy([&](uint32_t, const proto::Mac&) { ++arps; });
  EXPECT_EQ(arps, 2);

  // Installing the same entries again: the program refuses the duplicate,
  // and the error points at the entry's line in the file.
  try {
    install_entries(c, *prog);
    FAIL();
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(c.path + ":" + std::to_string(c.routes[0].line) + ": route[0]"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace agq::control
