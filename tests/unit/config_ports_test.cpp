// [[port]] links in the configuration (switch/control/config_ports.cpp):
// rates and sizes with their units, the defaults, and every mistake
// reported with the file, the line and the field.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "control/config.hpp"

namespace agq::control {
namespace {

namespace fs = std::filesystem;

class PortConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/agq-port-config-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& text) {
    const fs::path p = dir_ / "c.toml";
    std::ofstream(p) << text;
    return p.string();
  }

  SwitchConfig load(const std::string& port_section) { return load_config(write(kBase + port_section)); }

  // Expects "FILE:LINE: FIELD...what..." for kBase + `section`.
  void expect_error(const std::string& section, int line, const std::string& field, const std::string& what = "") {
    const std::string path = write(kBase + section);
    try {
      load_config(path);
      ADD_FAILURE() << "no error for:\n" << section;
    } catch (const ConfigError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(path + ":" + std::to_string(line) + ": " + field, 0), 0u) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
    }
  }

  static inline const std::string kBase =
      "[classic]\n"               // 1
      "ps_port = 0\n"             // 2
      "worker_ports = [1, 2]\n";  // 3; a [[port]] starts at line 4
  fs::path dir_;
};

TEST_F(PortConfigTest, RatesQueuesAndThresholdsWithTheirUnits) {
  const SwitchConfig c = load(
      "[[port]]\nid = 1\nrate = \"50mbit\"\nqueue = 64\necn_threshold = 16\n"          // 4-8
      "[[port]]\nid = 2\nrate = \"2.5 Gbit/s\"\nqueue = \"256kb\"\necn_threshold = \"30KiB\"\n"
      "burst = \"16kib\"\noverhead = 0\n"
      "[[port]]\nid = 0\nrate = 1000000\n");
  ASSERT_EQ(c.links.size(), 3u);
  const PortLinkEntry& a = c.links[0];
  EXPECT_EQ(a.port, 1);
  EXPECT_EQ(a.rate_bps, 50'000'000u);
  EXPECT_EQ(a.queue_packets, 64u);
  EXPECT_EQ(a.queue_bytes, 0u);
  EXPECT_TRUE(a.ecn);
  EXPECT_FALSE(a.ecn_in_bytes);
  EXPECT_EQ(a.ecn_packets, 16u);
  EXPECT_EQ(a.overhead, 24) << "preamble, SFD, FCS and gap by default";
  EXPECT_EQ(a.burst_bytes, 0u);
  EXPECT_EQ(a.line, 4);
  const PortLinkEntry& b = c.links[1];
  EXPECT_EQ(b.rate_bps, 2'500'000'000u);
  EXPECT_EQ(b.queue_packets, 0u);
  EXPECT_EQ(b.queue_bytes, 256'000u);
  EXPECT_TRUE(b.ecn_in_bytes);
  EXPECT_EQ(b.ecn_bytes, 30u * 1024);
  EXPECT_EQ(b.burst_bytes, 16u * 1024);
  EXPECT_EQ(b.overhead, 0);
  const PortLinkEntry& d = c.links[2];
  EXPECT_EQ(d.rate_bps, 1'000'000u);
  EXPECT_EQ(d.queue_packets, 1000u) << "Linux's txqueuelen by default";
  EXPECT_FALSE(d.ecn);
  EXPECT_NO_THROW(check_ports(c, 3));
}

TEST_F(PortConfigTest, BadValuesNameTheFileLineAndField) {
  expect_error("[[port]]\nid = 1\n", 4, "port[0].rate", "missing");
  expect_error("[[port]]\nrate = \"1gbit\"\n", 4, "port[0].id", "missing");
  expect_error("[[port]]\nid = 1\nrate = \"50mbps\"\n", 6, "port[0].rate", "bits, not bytes");
  expect_error("[[port]]\nid = 1\nrate = \"fast\"\n", 6, "port[0].rate", "is not a rate");
  expect_error("[[port]]\nid = 1\nrate = \"50\"\n", 6, "port[0].rate", "is not a rate");
  expect_error("[[port]]\nid = 1\nrate = \"2tbit\"\n", 6, "port[0].rate", "out of range");
  expect_error("[[port]]\nid = 1\nrate = 100\n", 6, "port[0].rate", "out of range");
  expect_error("[[port]]\nid = 1\nrate = true\n", 6, "port[0].rate", "a boolean");
  expect_error("[[port]]\nid = 1\nrate = \"1gbit\"\nqueue = 0\n", 7, "port[0].queue", "out of range");
  expect_error("[[port]]\nid = 1\nrate = \"1gbit\"\nqueue = 20000\n", 7, "port[0].queue", "out of range");
  expect_error("[[port]]\nid = 1\nrate = \"1gbit\"\nqueue = \"100\"\n", 7, "port[0].queue", "is not a size");
  expect_error("[[port]]\nid = 1\nrate = \"1gbit\"\nqueue = \"1kb\"\n", 7, "port[0].queue", "out of range");
  expect_error("[[port]]\nid = 1\nrate = \"1gbit\"\nqueue = 1.5\n", 7, "port[0].queue", "a float");
  expect_error("[[port]]\nid = 1\nrate = \"1gbit\"\nqueue = 10\necn_threshold = 10\n", 8, "port[0].ecn_threshold",
               "not below the queue");
  expect_error("[[port]]\nid = 1\nrate = \"1gbit\"\nqueue = \"10kb\"\necn_threshold = \"10kb\"\n", 8,
               "port[0].ecn_threshold", "not below the queue");
  expect_error("[[port]]\nid = 1\nrate = \"1gbit\"\noverhead = 100\n", 7, "port[0].overhead", "out of range");
  expect_error("[[port]]\nid = 1\nrate = \"1gbit\"\nburst = \"100mib\"\n", 7, "port[0].burst", "out of range");
  expect_error("[[port]]\nid = 1\nrate = \"1gbit\"\nqueu = 5\n", 7, "port[0].queu", "unknown key");
  expect_error("[[port]]\nid = 1\nrate = \"1gbit\"\n[[port]]\nid = 1\nrate = \"2gbit\"\n", 8, "port[1].id",
               "already has a [[port]] (line 5)");
  expect_error("[port]\nid = 1\n", 4, "port", "array of tables");
}

TEST_F(PortConfigTest, APortThatDoesNotExistIsNamed) {
  const SwitchConfig c = load("[[port]]\nid = 7\nrate = \"1gbit\"\n");
  try {
    check_ports(c, 3);
    ADD_FAILURE() << "port 7 of 3 accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(":5: port[0].id: port 7 does not exist"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace agq::control
