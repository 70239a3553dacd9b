// The control plane's read-only network endpoint (docs/PROTOCOL.md §12):
// hosts that cannot reach the switch's Unix control socket (another machine,
// another network namespace) ask it for their job over TCP, on a management
// address the operator chooses (agq-switch --job-listen HOST:PORT, or
// [switch] job_listen). Off by default.
//
// Same exchange as the control socket (ctl_protocol.hpp): one request line
// per connection, one response ("ok\n..." or "error: ...\n"), then close.
// It answers `job get ID --json` and nothing else: every other line —
// state-changing commands, other reads, garbage — gets one error line and
// changes nothing. Bounded: a request line of at most kMaxLine bytes, read
// within kDeadlineMs of the accept; at most kMaxConns connections open; a
// token bucket per client address and one for all clients.
//
// It never blocks: the control thread's loop polls its sockets beside the
// control socket's (ControlPlane::run), every socket is non-blocking, and a
// response that does not fit the socket buffer waits for POLLOUT within the
// same deadline. A `job get` reads the job on lcore 0 between two bursts
// (Pipes::on), like the control socket's; the rate bounds how often.
#pragma once

#include <netinet/in.h>
#include <poll.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace agq::control {

// "a.b.c.d:port" (port 0: any free port, see JobListener::bound()); an IPv4
// literal, so the operator sees exactly which interface listens. nullopt
// with `err` saying what is wrong.
std::optional<sockaddr_in> parse_listen_address(const std::string& s, std::string& err);

class JobListener {
 public:
  static constexpr std::size_t kMaxLine = 256;   // bytes of a request line, '\n' included
  static constexpr int kDeadlineMs = 2000;       // accept .. response written
  static constexpr std::size_t kMaxConns = 16;   // open at once; more are refused
  // Token buckets (requests per second, burst).
  static constexpr double kGlobalRate = 50, kGlobalBurst = 50;
  static constexpr double kClientRate = 10, kClientBurst = 20;
  static constexpr std::size_t kMaxClients = 256;  // addresses with a bucket

  // `job_get(id)` answers one request the way the control socket would
  // ("ok\n<json>\n" or "error: no job 7\n").
  using JobGet = std::function<std::string(uint16_t id)>;
  JobListener(std::string address, JobGet job_get);
  ~JobListener();
  JobListener(const JobListener&) = delete;
  JobListener& operator=(const JobListener&) = delete;

  // Binds and listens; throws std::runtime_error naming the address.
  void start();
  // "a.b.c.d:port" actually bound (the port the kernel chose for port 0).
  std::string bound() const;

  // The control loop: append the sockets to poll, then hand back poll's
  // results (the same entries, from `first` on) with the current time.
  void add_fds(std::vector<pollfd>& fds) const;
  void on_poll(const pollfd* fds, std::size_t n, uint64_t now_ms);

  // What a request line gets (exposed for unit tests): the response text,
  // and whether it was served (a `job get`) rather than refused.
  std::string answer(const std::string& line, bool& served);

  struct Counters {
    uint64_t served = 0, refused = 0, oversized = 0, timed_out = 0, rate_limited = 0, too_many = 0;
  };
  const Counters& counters() const { return c_; }

 private:
  struct Conn {
    int fd = -1;
    uint32_t peer = 0;  // IPv4, host order
    uint64_t deadline_ms = 0;
    std::string in, out;
    std::size_t sent = 0;
    // Reading the line, writing the response, then draining what the client
    // still sends until its EOF (closing with unread bytes would reset the
    // connection and could destroy the response before it is read).
    enum class Phase : uint8_t { Reading, Writing, Draining } phase = Phase::Reading;
  };
  struct Bucket {
    double tokens = 0;
    uint64_t last_ms = 0;
  };
  bool take(Bucket& b, double rate, double burst, uint64_t now_ms);
  void accept_all(uint64_t now_ms);
  void on_readable(Conn& c, uint64_t now_ms);
  void reply(Conn& c, std::string text);
  void flush(Conn& c);
  void drain(Conn& c);
  void close_conn(Conn& c);

  std::string address_;
  JobGet job_get_;
  int listen_fd_ = -1;
  sockaddr_in bound_{};
  std::vector<Conn> conns_;
  uint64_t now_ms_ = 0;  // of the current on_poll
  Bucket global_;
  std::map<uint32_t, Bucket> clients_;
  Counters c_;
};

}  // namespace agq::control
