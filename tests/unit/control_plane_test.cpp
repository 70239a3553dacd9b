// The control plane: every command of the interpreter against a real
// ClassicProgram with a fake dataplane, and the unix-socket round trip
// (creation rules, permissions, agqctl's client function).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "control/control_plane.hpp"
#include "control/ctl_protocol.hpp"
#include "pipeline/classic/classic_program.hpp"
#include "proto/frame.hpp"
#include "tna/pre.hpp"

namespace agq::control {
namespace {

namespace fs = std::filesystem;
using pipeline::classic::ClassicConfig;
using pipeline::classic::ClassicProgram;

class FakeView : public DataplaneView {
 public:
  std::vector<PortStatsRow> port_stats() override {
    std::vector<PortStatsRow> rows;
    for (tna::PortId i = 0; i < 3; ++i)
      rows.push_back({i, "net_null" + std::to_string(i), "02:00:00:00:01:0" + std::to_string(i), i != 2,
                      cleared ? 0 : 10u + i, 1000, 20, 2000, 1, 2});
    return rows;
  }
  void clear_port_stats() override { cleared = true; }
  void visit_counters(const tna::CounterVisitor& v) override {
    v("dp_tx_dropped", 42);
    v("dp_idle_sleeps", 7);
  }
  void set_sim_drop(tna::PortId port, SimDirection dir, double p) override {
    (dir == SimDirection::Rx ? sim_rx : sim_tx)[port] = p;
  }
  SimDropRow sim_drop(tna::PortId port) override { return {port, sim_rx[port], sim_tx[port], 5u + port, 0}; }
  bool cleared = false;
  double sim_rx[3] = {}, sim_tx[3] = {};
};

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class ControlPlaneTest : public ::testing::Test {
 protected:
  ControlPlaneTest() : prog(ClassicConfig{0, {1, 2}, 35000}, pipeline::ForwardingConfig{}, pre), cp(prog, dp, "") {}

  // A broadcast frame from `src` arriving on `port`, `age_s` seconds ago
  // (so the MAC table learns src with that age).
  void send_broadcast(const proto::Mac& src, tna::PortId port, uint64_t age_s = 0) {
    proto::UdpFrameSpec s;
    s.dst_mac = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    s.src_mac = src;
    s.src_ip = 0x0A000001;
    s.dst_ip = 0x0A0000FF;
    s.src_port = s.dst_port = 9999;
    const uint8_t payload[8] = {};
    auto f = proto::build_udp_frame(s, payload);
    tna::IngressIntrinsicMd md;
    md.ingress_port = port;
    md.ingress_mac_tstamp_ns = now_ns() - age_s * 1'000'000'000ull;
    prog.process(f, md);
  }

  // One AGQ contribution of a two-worker job into slot `hash_id`.
  void send_contribution(uint16_t hash_id) {
    proto::UdpFrameSpec s;
    s.dst_mac = {0x02, 0, 0, 0, 0, 0x10};
    s.src_mac = {0x02, 0, 0, 0, 0, 0x01};
    s.src_ip = 0x0A020201;
    s.dst_ip = 0x0A020264;
    proto::AgqClassic a;
    a.job_and_seq = 0x0102;
    a.total_workers = 2;
    a.data = {5, 6, 7, 8};
    a.hash_id = hash_id;
    a.hash1 = uint16_t(hash_id >> 3);
    a.hash2 = uint8_t(hash_id & 7);
    auto f = proto::build_agq_classic_frame(s, a);
    tna::IngressIntrinsicMd md;
    md.ingress_port = 1;
    prog.process(f, md);
  }

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

  tna::ReplicationEngine pre;
  ClassicProgram prog;
  FakeView dp;
  ControlPlane cp;
};

TEST_F(ControlPlaneTest, HelpAndUnknown) {
  const std::string h = ok("help");
  for (const char* c : {"ports", "counters", "clear state", "dump", "route add", "mac list", "arp del"})
    EXPECT_TRUE(contains(h, c)) << c;
  EXPECT_TRUE(contains(err("frobnicate"), "unknown command 'frobnicate'"));
  EXPECT_TRUE(contains(err(""), "empty command"));
  EXPECT_TRUE(contains(err("   "), "empty command"));
  EXPECT_TRUE(contains(err("help me"), "too many arguments"));
  EXPECT_TRUE(contains(err("ports 1"), "usage: ports"));
  ok("  help  ");  // extra blanks are fine
}

TEST_F(ControlPlaneTest, Ports) {
  const std::string p = ok("ports");
  EXPECT_TRUE(contains(p, "port")) << p;
  EXPECT_TRUE(contains(p, "rx_packets")) << p;
  EXPECT_TRUE(contains(p, "net_null2")) << p;
  EXPECT_TRUE(contains(p, "02:00:00:00:01:01")) << p;
  EXPECT_TRUE(contains(p, "down")) << p;
  EXPECT_EQ(std::count(p.begin(), p.end(), '\n'), 4);  // header + 3 ports
  ok("clear ports");
  EXPECT_TRUE(dp.cleared);
}

TEST_F(ControlPlaneTest, CountersInStableOrderAndClear) {
  send_broadcast({2, 0, 0, 0, 0, 0xaa}, 1);
  const std::string c = ok("counters");
  EXPECT_TRUE(contains(c, "\nfwd_flooded 1\n")) << c;
  EXPECT_TRUE(contains(c, "agq_packets 0\n")) << c;
  // Program counters first, then the dataplane's, each "name value".
  EXPECT_LT(c.find("agq_packets"), c.find("dp_tx_dropped 42\n"));
  EXPECT_LT(c.find("dp_tx_dropped"), c.find("dp_idle_sleeps 7\n"));
  EXPECT_EQ(c, ok("counters"));
  EXPECT_EQ(c, cp.format_counters());
  for (size_t pos = 0; pos < c.size();) {
    const size_t nl = c.find('\n', pos);
    const std::string line = c.substr(pos, nl - pos);
    EXPECT_EQ(std::count(line.begin(), line.end(), ' '), 1) << line;
    pos = nl + 1;
  }
  ok("clear counters");
  EXPECT_TRUE(contains(ok("counters"), "\nfwd_flooded 0\n"));
  EXPECT_TRUE(contains(err("clear everything"), "usage: clear counters"));
  EXPECT_TRUE(contains(err("clear"), "missing arguments"));
}

TEST_F(ControlPlaneTest, DumpAndClearState) {
  const uint16_t hash_id = 8 * 5 + 3;  // aggregator 5, slot 3
  send_contribution(hash_id);
  std::string d = ok("dump 5");
  EXPECT_TRUE(contains(d, "aggregator 5\n")) << d;
  EXPECT_TRUE(contains(d, "reg0")) << d;
  EXPECT_TRUE(contains(d, "job_and_seq_reg[43]  0x00000102")) << d;

  ok("clear state");
  d = ok("dump 5");
  EXPECT_TRUE(contains(d, "job_and_seq_reg[43]  0x00000000")) << d;

  d = ok("dump 4 2");
  EXPECT_TRUE(contains(d, "aggregator 4\n") && contains(d, "aggregator 5\n") && !contains(d, "aggregator 6"));
  // A range that runs past the last aggregator is cut there.
  const uint32_t n = prog.aggregator_count();
  d = ok("dump " + std::to_string(n - 1) + " 10");
  EXPECT_TRUE(contains(d, "aggregator " + std::to_string(n - 1) + "\n"));
  EXPECT_FALSE(contains(d, "aggregator " + std::to_string(n) + "\n"));

  EXPECT_TRUE(contains(err("dump " + std::to_string(n)), "out of range (8192 aggregators: 0..8191)"));
  EXPECT_TRUE(contains(err("dump x"), "usage: dump <aggregator> [count]"));
  EXPECT_TRUE(contains(err("dump -1"), "not an aggregator index"));
  EXPECT_TRUE(contains(err("dump 0 0"), "count must be"));
  EXPECT_TRUE(contains(err("dump 0 100000"), "count must be"));
  EXPECT_TRUE(contains(err("dump"), "missing arguments"));
}

TEST_F(ControlPlaneTest, Routes) {
  ok("route add 10.2.2.9 2");
  ok("route add 10.2.2.1 1");
  EXPECT_EQ(ok("route list"), "ip        port\n10.2.2.1  1\n10.2.2.9  2\n");
  EXPECT_TRUE(contains(err("route add 10.2.2.1 2"), "exists (port 1)"));
  EXPECT_TRUE(contains(err("route add 10.2.2.3 3"), "port 3 does not exist (3 ports: 0..2)"));
  EXPECT_TRUE(contains(err("route add 10.2.2.3 x"), "not a port number"));
  EXPECT_TRUE(contains(err("route add 10.2.2 1"), "not an IPv4 address"));
  EXPECT_TRUE(contains(err("route add 10.2.2.3"), "usage: route add <ip> <port>"));
  EXPECT_TRUE(contains(err("route list x"), "too many"));
  EXPECT_TRUE(contains(err("route flip 1.2.3.4"), "unknown route subcommand"));
  ok("route del 10.2.2.9");
  EXPECT_TRUE(contains(err("route del 10.2.2.9"), "no route for 10.2.2.9"));
  EXPECT_EQ(ok("route list"), "ip        port\n10.2.2.1  1\n");
}

TEST_F(ControlPlaneTest, Macs) {
  ok("mac add 02:00:00:00:00:01 1");
  send_broadcast({2, 0, 0, 0, 0, 0xaa}, 2, /*age_s=*/5);
  const std::string l = ok("mac list");
  EXPECT_TRUE(contains(l, "mac                port  type     age_s\n")) << l;
  EXPECT_TRUE(contains(l, "02:00:00:00:00:01  1     static   -\n")) << l;
  EXPECT_TRUE(contains(l, "02:00:00:00:00:aa  2     learned  5\n")) << l;
  // A static entry replaces a learned one; a second static one is refused.
  ok("mac add 02:00:00:00:00:AA 0");
  EXPECT_TRUE(contains(ok("mac list"), "02:00:00:00:00:aa  0     static"));
  EXPECT_TRUE(contains(err("mac add 02:00:00:00:00:aa 1"), "exists (port 0)"));
  EXPECT_TRUE(contains(err("mac add 01:00:5e:00:00:01 1"), "multicast"));
  EXPECT_TRUE(contains(err("mac add 02:00:00:00:00 1"), "not a MAC address"));
  EXPECT_TRUE(contains(err("mac add 02:00:00:00:00:02 9"), "does not exist"));
  EXPECT_TRUE(contains(err("mac add"), "usage: mac add <mac> <port>"));
  ok("mac del 02:00:00:00:00:aa");
  EXPECT_TRUE(contains(err("mac del 02:00:00:00:00:aa"), "no entry"));
  EXPECT_FALSE(contains(ok("mac list"), ":aa"));
}

TEST_F(ControlPlaneTest, ArpProxy) {
  ok("arp add 10.2.2.1 02:00:00:00:00:01");
  EXPECT_EQ(ok("arp list"), "ip        mac\n10.2.2.1  02:00:00:00:00:01\n");
  EXPECT_TRUE(contains(err("arp add 10.2.2.1 02:00:00:00:00:02"), "exists (02:00:00:00:00:01)"));
  EXPECT_TRUE(contains(err("arp add 10.2.2.2 ff:ff:ff:ff:ff:ff"), "multicast"));
  EXPECT_TRUE(contains(err("arp add 10.2.2.2"), "usage: arp add <ip> <mac>"));
  EXPECT_TRUE(contains(err("arp add 10.2.2.300 02:00:00:00:00:02"), "not an IPv4"));
  ok("arp del 10.2.2.1");
  EXPECT_TRUE(contains(err("arp del 10.2.2.1"), "no ARP proxy entry"));
  EXPECT_EQ(ok("arp list"), "ip  mac\n");
}

TEST_F(ControlPlaneTest, RunAgesLearnedMacs) {
  prog.forwarding().set_ageing_ns(1'000'000'000);
  send_broadcast({2, 0, 0, 0, 0, 0xbb}, 1, /*age_s=*/10);
  ok("mac add 02:00:00:00:00:01 1");  // static: never aged
  ASSERT_TRUE(contains(ok("mac list"), ":bb"));
  std::atomic<bool> stop{false};
  std::thread t([&] { cp.run(stop); });  // no socket: run() only ages
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  stop = true;
  t.join();
  const std::string l = ok("mac list");
  EXPECT_FALSE(contains(l, ":bb")) << l;
  EXPECT_TRUE(contains(l, "02:00:00:00:00:01")) << l;
}

// --- the socket ---

class ControlSocketTest : public ControlPlaneTest {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/agq-ctl-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir = tmpl;
    path = (dir / "run" / "ctl.sock").string();  // "run" does not exist yet
  }
  void TearDown() override { fs::remove_all(dir); }

  // Runs `server` on its own thread for the duration of `body`.
  template <typename Fn>
  void serving(ControlPlane& server, Fn&& body) {
    std::atomic<bool> stop{false};
    std::thread t([&] { server.run(stop); });
    body();
    stop = true;
    t.join();
  }

  fs::path dir;
  std::string path;
};

TEST_F(ControlSocketTest, RoundTripAndPermissions) {
  ControlPlane server(prog, dp, path);
  server.start();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir / "run").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_FALSE(fs::exists(path + ".new"));

  serving(server, [&] {
    CtlReply r = ctl_request(path, "route add 10.2.2.1 1");
    EXPECT_TRUE(r.ok) << r.raw;
    r = ctl_request(path, "route list");
    EXPECT_TRUE(r.ok);
    EXPECT_EQ(r.body, "ip        port\n10.2.2.1  1\n");
    r = ctl_request(path, "route add 10.2.2.1 7\n");
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.message, "port 7 does not exist (3 ports: 0..2)");
    EXPECT_TRUE(contains(r.raw, "usage: route add")) << r.raw;
    // A big response arrives whole.
    r = ctl_request(path, "dump 0 1024");
    EXPECT_TRUE(r.ok);
    EXPECT_TRUE(contains(r.body, "aggregator 1023\n"));
    // A second switch on the same socket is refused while this one lives.
    ControlPlane other(prog, dp, path);
    try {
      other.start();
      ADD_FAILURE() << "second start succeeded";
    } catch (const std::runtime_error& e) {
      EXPECT_TRUE(contains(e.what(), "already listening")) << e.what();
    }
    EXPECT_TRUE(ctl_request(path, "help").ok);  // the first one still answers
  });
  server.stop_and_unlink();
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(ControlSocketTest, StaleSocketIsReplaced) {
  fs::create_directories(dir / "run");
  // A socket file nobody listens on: what a crashed switch leaves behind.
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strcpy(a.sun_path, path.c_str());
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ::close(s);
  ASSERT_TRUE(fs::exists(path));

  ControlPlane server(prog, dp, path);
  server.start();
  serving(server, [&] { EXPECT_TRUE(ctl_request(path, "ports").ok); });
}

TEST_F(ControlSocketTest, RefusesToReplaceAFile) {
  fs::create_directories(dir / "run");
  std::ofstream(path) << "important";
  ControlPlane server(prog, dp, path);
  try {
    server.start();
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "not a socket")) << e.what();
  }
  std::ifstream in(path);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "important");
}

TEST_F(ControlSocketTest, PathTooLong) {
  ControlPlane server(prog, dp, (dir / std::string(120, 'x')).string());
  try {
    server.start();
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "path too long")) << e.what();
  }
}

TEST_F(ControlSocketTest, ClientCannotConnect) {
  try {
    ctl_request(path, "help");
    FAIL();
  } catch (const CtlTransportError& e) {
    EXPECT_TRUE(e.connect_failed);
    EXPECT_EQ(std::string(e.what()), "cannot connect to " + path + ": No such file or directory");
  }
}

TEST_F(ControlSocketTest, ParseReply) {
  CtlReply r = parse_reply("ok\nbody\n");
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.body, "body\n");
  r = parse_reply("error: nope\nusage: x\n");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.message, "nope");
  r = parse_reply("garbage");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.message, "garbage");
}

}  // namespace
}  // namespace agq::control
