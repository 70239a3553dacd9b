// The read-only job endpoint (control/job_listener.hpp): what each request
// line gets, the address syntax of --job-listen / [switch] job_listen, and
// one exchange over a real loopback socket driven the way the control
// thread drives it (poll over add_fds, then on_poll).
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <string>
#include <vector>

#include "control/config.hpp"
#include "control/ctl_protocol.hpp"
#include "control/job_listener.hpp"

namespace agq::control {
namespace {

std::string job_get(uint16_t id) { return id == 1 ? "ok\n{\"id\": 1}\n" : "error: no job " + std::to_string(id) + "\n"; }

TEST(JobListener, AnswersOnlyJobGetJson) {
  JobListener ep("127.0.0.1:0", job_get);
  bool served = false;
  EXPECT_EQ(ep.answer("job get 1 --json", served), "ok\n{\"id\": 1}\n");
  EXPECT_TRUE(served);
  EXPECT_EQ(ep.answer("  job   get 7 --json ", served), "error: no job 7\n");
  EXPECT_TRUE(served);
  for (const char* line : {"job add 2 workers=1 slots=4 rows=1", "job del 1", "route add 10.0.0.1 1", "drop 0 rx 1",
                           "counters", "job get 1", "job get 1 --json extra", "help"}) {
    const std::string r = ep.answer(line, served);
    EXPECT_FALSE(served) << line;
    EXPECT_NE(r.find("refused: this endpoint is read-only and answers only 'job get ID --json'"), std::string::npos)
        << line << " -> " << r;
    EXPECT_EQ(r.back(), '\n');
    EXPECT_EQ(r.find('\n'), r.size() - 1) << "one line: " << r;
  }
  EXPECT_EQ(ep.answer("job add 2", served).rfind("error: 'job add' refused", 0), 0u);
  EXPECT_EQ(ep.answer(std::string("job\x01get"), served).rfind("error: not a request", 0), 0u);
  EXPECT_EQ(ep.answer("", served).rfind("error: empty request", 0), 0u);
  EXPECT_EQ(ep.answer("job get 0 --json", served), "error: id: '0' is not a job id (1..65535)\n");
  EXPECT_EQ(ep.answer("job get 65536 --json", served), "error: id: '65536' is not a job id (1..65535)\n");
  EXPECT_EQ(ep.answer("job get x --json", served), "error: id: 'x' is not a job id (1..65535)\n");
  EXPECT_FALSE(served);
  // A long first word is cut in the message, never echoed whole.
  EXPECT_LT(ep.answer(std::string(200, 'a'), served).size(), 200u);
}

TEST(JobListener, ListenAddress) {
  std::string err;
  auto a = parse_listen_address("10.1.2.3:7600", err);
  ASSERT_TRUE(a);
  EXPECT_EQ(ntohl(a->sin_addr.s_addr), 0x0A010203u);
  EXPECT_EQ(ntohs(a->sin_port), 7600);
  EXPECT_TRUE(parse_listen_address("127.0.0.1:0", err));
  for (const char* bad : {"10.1.2.3", "10.1.2:80", "host:80", "10.1.2.3:65536", "10.1.2.3:x", ":80", ""}) {
    EXPECT_FALSE(parse_listen_address(bad, err)) << bad;
    EXPECT_FALSE(err.empty());
  }
}

TEST(JobListener, ConfigKeyNamesFileLineField) {
  char tmpl[] = "/tmp/agq-job-listen-test-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::filesystem::path dir = tmpl;
  const std::string path = (dir / "c.toml").string();
  const std::string head = "[switch]\npipeline = \"classic\"\n";
  const std::string rest = "[classic]\nps_port = 0\nworker_ports = [1]\n";
  std::ofstream(path) << head << "job_listen = \"10.0.0.1:7600\"\n" << rest;
  EXPECT_EQ(load_config(path).job_listen, "10.0.0.1:7600");
  std::ofstream(path) << head << rest;
  EXPECT_EQ(load_config(path).job_listen, "");
  std::ofstream(path) << head << "job_listen = \"10.0.0.1\"\n" << rest;
  try {
    load_config(path);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(path + ":3: switch.job_listen: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("HOST:PORT"), std::string::npos) << msg;
  }
  std::filesystem::remove_all(dir);
}

// The control thread's loop, for `ms` milliseconds or until `done`.
template <class Done>
void serve(JobListener& ep, int ms, Done done) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  std::vector<pollfd> fds;
  while (std::chrono::steady_clock::now() < end && !done()) {
    fds.clear();
    ep.add_fds(fds);
    ::poll(fds.data(), fds.size(), 5);
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::steady_clock::now().time_since_epoch()).count();
    ep.on_poll(fds.data(), fds.size(), uint64_t(now));
  }
}

int connect_to(const std::string& bound) {
  std::string err;
  const auto a = parse_listen_address(bound, err);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  ::connect(fd, reinterpret_cast<const sockaddr*>(&*a), sizeof *a);  // loopback: completes in the backlog
  return fd;
}

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) out.append(buf, size_t(n));
    else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return out + (n == 0 ? "" : "<error>");
    else return out + "<more>";
  }
}

TEST(JobListener, LoopbackExchangesNeverBlock) {
  JobListener ep("127.0.0.1:0", job_get);
  ep.start();
  const std::string at = ep.bound();
  ASSERT_EQ(at.rfind("127.0.0.1:", 0), 0u);
  ASSERT_NE(at, "127.0.0.1:0");

  // A good request, a state-changing one, one split across two sends, and a
  // silent client, all open at once: each is answered on its own.
  const int good = connect_to(at), bad = connect_to(at), split = connect_to(at), silent = connect_to(at);
  ::send(good, "job get 1 --json\n", 17, MSG_NOSIGNAL);
  ::send(bad, "route add 10.0.0.9 1\n", 21, MSG_NOSIGNAL);
  ::send(split, "job get ", 8, MSG_NOSIGNAL);
  serve(ep, 200, [] { return false; });
  ::send(split, "7 --json\n", 9, MSG_NOSIGNAL);
  serve(ep, 200, [] { return false; });
  EXPECT_EQ(read_all(good), "ok\n{\"id\": 1}\n");
  EXPECT_EQ(read_all(bad).rfind("error: 'route add' refused", 0), 0u);
  EXPECT_EQ(read_all(split), "error: no job 7\n");
  EXPECT_EQ(read_all(silent), "<more>");  // still within its 2 s
  serve(ep, JobListener::kDeadlineMs + 300, [&] { return ep.counters().timed_out > 0; });
  serve(ep, 100, [] { return false; });
  EXPECT_EQ(read_all(silent), "error: no complete request line within 2000 ms\n");
  EXPECT_EQ(ep.counters().served, 2u);
  EXPECT_EQ(ep.counters().refused, 1u);
  EXPECT_EQ(ep.counters().timed_out, 1u);
  for (int fd : {good, bad, split, silent}) ::close(fd);

  // ctl_request's tcp: transport against it.
  CtlReply r;
  std::thread t([&] { r = ctl_request("tcp:" + at, "job get 1 --json", 2000); });
  serve(ep, 2000, [&] { return ep.counters().served == 3; });
  t.join();
  EXPECT_TRUE(r.ok) << r.raw;
  EXPECT_EQ(r.body, "{\"id\": 1}\n");
}

TEST(JobListener, RatePerClient) {
  JobListener ep("127.0.0.1:0", job_get);
  ep.start();
  std::vector<int> fds;
  for (int i = 0; i < 30; ++i) {
    fds.push_back(connect_to(ep.bound()));
    ::send(fds.back(), "job get 1 --json\n", 17, MSG_NOSIGNAL);
    serve(ep, 20, [] { return false; });  // within a second: at most the burst + a few refills
  }
  serve(ep, 200, [] { return false; });
  int ok = 0, limited = 0, busy = 0;
  for (int fd : fds) {
    const std::string r = read_all(fd);
    ok += r.rfind("ok\n", 0) == 0;
    limited += r.rfind("error: rate limit: at most 10 requests per second per client", 0) == 0;
    busy += r.rfind("error: busy", 0) == 0;  // this client never closes: its answered connections linger 250 ms
    ::close(fd);
  }
  EXPECT_EQ(ok + limited + busy, 30);
  EXPECT_GE(ok, int(JobListener::kClientBurst));
  EXPECT_LE(ok, int(JobListener::kClientBurst) + 10);
  EXPECT_GT(limited, 0);
}

TEST(JobListener, RateInTotal) {
  // Eight client addresses (all of 127/8 is loopback), 15 requests each:
  // within every client's burst, beyond the global one (50 + 50/s).
  JobListener ep("127.0.0.1:0", job_get);
  ep.start();
  std::string err;
  const auto to = parse_listen_address(ep.bound(), err);
  int ok = 0, total = 0;
  constexpr int kRequests = 120;
  for (int i = 0; i < kRequests; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = htonl(0x7F000002u + uint32_t(i % 8));
    ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&from), sizeof from), 0);
    ::connect(fd, reinterpret_cast<const sockaddr*>(&*to), sizeof *to);
    ::send(fd, "job get 1 --json\n", 17, MSG_NOSIGNAL);
    const uint64_t before = ep.counters().served + ep.counters().rate_limited;
    serve(ep, 1000, [&] { return ep.counters().served + ep.counters().rate_limited > before; });
    const std::string r = read_all(fd);
    ok += r.rfind("ok\n", 0) == 0;
    total += r.rfind("error: rate limit: at most 50 requests per second in total", 0) == 0;
    ::close(fd);
  }
  EXPECT_EQ(ok + total, kRequests);
  EXPECT_GE(ok, int(JobListener::kGlobalBurst));
  EXPECT_GT(total, 0);
  EXPECT_EQ(ep.counters().rate_limited, uint64_t(total));
}

TEST(JobListener, BindErrorNamesTheAddress) {
  JobListener a("127.0.0.1:0", job_get);
  a.start();
  JobListener b(a.bound(), job_get);
  try {
    b.start();
    ADD_FAILURE() << "bound twice";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(a.bound()), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace agq::control
